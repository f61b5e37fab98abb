//! The `inbox` tree: every update that starts a turn, recorded before the turn starts, and how
//! far it got, so a crash loses no message and a re-delivered update is not answered twice.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::records::{decode_json, prune_json, update_json};

const TREE: &str = db::INBOX;

/// Where an accepted update is on its way to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InboxState {
    /// Accepted; its turn has not been stored yet.
    Pending,
    /// Its turn is in the history; the answer may not have been sent.
    Stored,
    /// Answered (or cancelled, or refused): nothing left to do.
    Answered,
    /// Its turn panicked and the user was told: never replayed, so a message that crashes
    /// its turn cannot do so again at every start.
    Failed,
}

impl InboxState {
    /// Nothing is left to do for the update: it is not resumed, and may be pruned.
    pub fn is_done(self) -> bool {
        matches!(self, Self::Answered | Self::Failed)
    }
}

/// An update that starts a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxEntry {
    pub chat: i64,
    pub user: u64,
    /// What the turn answers (a message's text, or a pressed option's full label).
    pub text: String,
    /// A photo's Telegram `file_id`, for vision-capable models.
    #[serde(default)]
    pub image: Option<String>,
    pub state: InboxState,
    /// Unix seconds.
    pub received: i64,
    /// The forum topic the message came from, which its answer goes to (entries from before
    /// topics were told apart read as none).
    #[serde(default)]
    pub topic: Option<i32>,
    /// The message its answer replies to (in groups), so a resumed answer still does.
    #[serde(default)]
    pub reply_to: Option<i32>,
}

impl Store {
    /// Records an update before its turn starts; `false` if it was seen before (Telegram
    /// re-delivers updates after a crash), in which case it must not be processed again.
    pub fn accept_update(&self, update: u32, entry: &InboxEntry) -> anyhow::Result<bool> {
        let swapped = self.inbox.compare_and_swap(
            update.to_be_bytes(),
            None as Option<&[u8]>,
            Some(serde_json::to_vec(entry)?),
        )?;
        Ok(swapped.is_ok())
    }

    pub fn set_update_state(&self, update: u32, state: InboxState) -> anyhow::Result<()> {
        update_json(
            &self.inbox,
            TREE,
            &update.to_be_bytes(),
            |e: &mut InboxEntry| {
                e.state = state;
                true
            },
        )?;
        Ok(())
    }

    /// Accepted updates whose answer was not (known to be) sent: what a crash interrupted.
    pub fn unfinished_updates(&self) -> Vec<(u32, InboxEntry)> {
        self.inbox
            .iter()
            .filter_map(|entry| {
                let (key, value) = entry.ok()?;
                let update = u32::from_be_bytes(key.as_ref().try_into().ok()?);
                decode_json::<InboxEntry>(TREE, &key, &value)
                    .filter(|e| !e.state.is_done())
                    .map(|e| (update, e))
            })
            .collect()
    }

    /// Forgets finished (answered or failed) updates received before `before` (unix
    /// seconds), and unreadable ones.
    pub fn prune_inbox(&self, before: i64) -> anyhow::Result<usize> {
        prune_json(&self.inbox, TREE, |e: &InboxEntry| {
            e.state.is_done() && e.received < before
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(state: InboxState, received: i64) -> InboxEntry {
        InboxEntry {
            chat: 1,
            user: 2,
            text: "hi".into(),
            image: None,
            state,
            received,
            topic: None,
            reply_to: None,
        }
    }

    #[test]
    fn an_update_is_accepted_once_and_tracked_to_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let pending = entry(InboxState::Pending, 5);
        assert!(store.accept_update(1, &pending).unwrap());
        assert!(!store.accept_update(1, &pending).unwrap(), "re-delivered");
        assert_eq!(store.unfinished_updates(), vec![(1, pending.clone())]);
        store.set_update_state(1, InboxState::Answered).unwrap();
        assert!(store.unfinished_updates().is_empty());
        assert!(store.accept_update(2, &pending).unwrap());
        store.set_update_state(2, InboxState::Failed).unwrap();
        assert!(
            store.unfinished_updates().is_empty(),
            "a failed turn is not resumed"
        );
    }

    #[test]
    fn pruning_drops_only_old_finished_entries() {
        struct Case {
            name: &'static str,
            state: InboxState,
            received: i64,
            pruned: bool,
        }
        let cases = [
            Case {
                name: "old answered",
                state: InboxState::Answered,
                received: 10,
                pruned: true,
            },
            Case {
                name: "recent answered",
                state: InboxState::Answered,
                received: 100,
                pruned: false,
            },
            Case {
                name: "old failed",
                state: InboxState::Failed,
                received: 10,
                pruned: true,
            },
            Case {
                name: "old pending",
                state: InboxState::Pending,
                received: 10,
                pruned: false,
            },
            Case {
                name: "old stored",
                state: InboxState::Stored,
                received: 10,
                pruned: false,
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store
                .accept_update(1, &entry(case.state, case.received))
                .unwrap();
            assert_eq!(
                store.prune_inbox(50).unwrap(),
                usize::from(case.pruned),
                "case {}",
                case.name
            );
            assert_eq!(
                store.inbox.contains_key(1u32.to_be_bytes()).unwrap(),
                !case.pruned,
                "case {}",
                case.name
            );
        }
    }
}
