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
    /// Its answer may be on screen: recorded (and flushed) before the turn's first send, and
    /// again with the id of the message that shows it once that is known. After a crash the
    /// answer goes into that message, never into a second one.
    Visible { message: Option<i32> },
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
    /// The later messages of a visible answer too long for one (the first is in
    /// [`InboxState::Visible`]), so a resumed answer is edited into all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<i32>,
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

    /// Marks an update's turn stored, unless its answer is already visible (which says more).
    pub fn mark_stored(&self, update: u32) -> anyhow::Result<()> {
        update_json(
            &self.inbox,
            TREE,
            &update.to_be_bytes(),
            |e: &mut InboxEntry| {
                let pending = e.state == InboxState::Pending;
                if pending {
                    e.state = InboxState::Stored;
                }
                pending
            },
        )?;
        Ok(())
    }

    /// The message that shows an update's answer, if it was recorded as visible in one.
    pub fn visible_message(&self, update: u32) -> Option<i32> {
        self.visible_messages(update).first().copied()
    }

    /// Every message that shows an update's answer, first to last, as recorded; empty if none.
    pub fn visible_messages(&self, update: u32) -> Vec<i32> {
        let Some(entry) = self
            .inbox
            .get(update.to_be_bytes())
            .ok()
            .flatten()
            .and_then(|value| decode_json::<InboxEntry>(TREE, &update.to_be_bytes(), &value))
        else {
            return Vec::new();
        };
        match entry.state {
            InboxState::Visible {
                message: Some(first),
            } => std::iter::once(first).chain(entry.parts).collect(),
            _ => Vec::new(),
        }
    }

    /// Records `message` as a later message of update `update`'s visible answer.
    pub fn add_visible_part(&self, update: u32, message: i32) -> anyhow::Result<()> {
        update_json(
            &self.inbox,
            TREE,
            &update.to_be_bytes(),
            |e: &mut InboxEntry| {
                let first =
                    matches!(e.state, InboxState::Visible { message: Some(m) } if m == message);
                if first || e.parts.contains(&message) {
                    return false;
                }
                e.parts.push(message);
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
    /// seconds); unreadable ones are kept.
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
            parts: Vec::new(),
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
    fn a_visible_answer_is_not_downgraded_to_stored() {
        struct Case {
            name: &'static str,
            before: InboxState,
            after: InboxState,
        }
        let visible = InboxState::Visible { message: Some(42) };
        let cases = [
            Case {
                name: "pending becomes stored",
                before: InboxState::Pending,
                after: InboxState::Stored,
            },
            Case {
                name: "visible stays visible",
                before: visible,
                after: visible,
            },
            Case {
                name: "answered stays answered",
                before: InboxState::Answered,
                after: InboxState::Answered,
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store.accept_update(1, &entry(case.before, 5)).unwrap();
            store.mark_stored(1).unwrap();
            let state = store
                .unfinished_updates()
                .first()
                .map_or(InboxState::Answered, |(_, e)| e.state);
            assert_eq!(state, case.after, "case {}", case.name);
        }
    }

    #[test]
    fn the_visible_message_is_read_back_and_old_records_still_decode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .accept_update(1, &entry(InboxState::Visible { message: Some(7) }, 5))
            .unwrap();
        store
            .accept_update(2, &entry(InboxState::Visible { message: None }, 5))
            .unwrap();
        assert_eq!(store.visible_message(1), Some(7));
        assert_eq!(store.visible_message(2), None);
        assert_eq!(store.visible_message(3), None, "no such update");
        // A long answer's later parts, each once, after its first message.
        for part in [8, 9, 8, 7] {
            store.add_visible_part(1, part).unwrap();
        }
        assert_eq!(store.visible_messages(1), [7, 8, 9]);
        assert_eq!(
            store.visible_messages(2),
            Vec::<i32>::new(),
            "no first message"
        );
        // A record written before `Visible` existed.
        let old = br#"{"chat":1,"user":2,"text":"hi","state":"Stored","received":5}"#;
        store.inbox.insert(4u32.to_be_bytes(), &old[..]).unwrap();
        assert_eq!(store.visible_message(4), None);
        assert!(
            store
                .unfinished_updates()
                .iter()
                .any(|(id, e)| *id == 4 && e.state == InboxState::Stored)
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
