//! The `proposals` tree: lasting changes a tainted turn asked for (see [`crate::provenance`]),
//! waiting for their user's ✅. Key a random 13-character base-36 id (what the ✅ / ✖ buttons
//! carry, as option tickets do, so a forged press cannot reach another user's proposal), value
//! a JSON [`Proposal`]: exactly what would be saved or scheduled, for whom, where. A press by
//! its user takes it out in one atomic step, so two presses at once apply it once; anyone
//! else's press changes nothing. Nothing is made until then: a proposal never confirmed is
//! pruned with the other buttons' records.

use serde::{Deserialize, Serialize};

use super::db::Store;
use super::error::Result;
use super::records::{decode_json, prune_json};
use super::tasks::Task;
use super::tickets::insert_new;
use super::tree::Tree;
use crate::ids::{ChatId, TopicId, UserId};

const TREE: &str = "proposals";

/// A change waiting for its user's ✅.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Whose ✅ makes it: the asker of the turn that proposed it.
    pub user: UserId,
    pub chat: ChatId,
    #[serde(default)]
    pub topic: Option<TopicId>,
    pub change: ProposedChange,
    /// Unix seconds; an older proposal than the press allows is expired.
    pub created: i64,
}

/// What a proposal would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ProposedChange {
    /// Save this fact (already cleaned) in the user's personal memory.
    Fact(String),
    /// Schedule this task (its id is given when it is made).
    Task(Task),
}

/// What a press on a proposal found.
#[derive(Debug, Clone, PartialEq)]
pub enum ProposalClaim {
    /// The user's own press: the proposal, now taken out (apply it, or drop it for ✖).
    Taken(Proposal),
    /// Someone else pressed: nothing changed.
    NotYours,
    /// No such proposal, in another chat, or older than allowed: nothing changed.
    Expired,
}

/// The proposals waiting for a ✅ (tree `proposals`): [`Store::proposals`]. A borrowed view.
#[derive(Clone, Copy)]
pub struct Proposals<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Lasting changes waiting for their user's ✅.
    pub fn proposals(&self) -> Proposals<'_> {
        Proposals { store: self }
    }
}

impl Proposals<'_> {
    /// The tree, opened on first use (sled keeps it open after).
    fn tree(&self) -> Result<Tree> {
        self.store.tree(TREE)
    }

    /// Stores `proposal` under a new random id and returns the id.
    pub fn create(&self, proposal: &Proposal) -> Result<String> {
        insert_new(&self.tree()?, &serde_json::to_vec(proposal)?)
    }

    /// `user`'s press in `chat` on proposal `id`, if it was made at or after `oldest` (unix
    /// seconds): their own takes it out (one atomic step); any other finds it untouched.
    pub fn claim(
        &self,
        id: &str,
        chat: ChatId,
        user: UserId,
        oldest: i64,
    ) -> Result<ProposalClaim> {
        let tree = self.tree()?;
        loop {
            let Some(bytes) = tree.get(id.as_bytes())? else {
                return Ok(ProposalClaim::Expired);
            };
            let Some(proposal) = decode_json::<Proposal>(TREE, id.as_bytes(), &bytes) else {
                return Ok(ProposalClaim::Expired);
            };
            if proposal.chat != chat || proposal.created < oldest {
                return Ok(ProposalClaim::Expired);
            }
            if proposal.user != user {
                return Ok(ProposalClaim::NotYours);
            }
            let taken = tree.compare_and_swap(id.as_bytes(), Some(bytes), None as Option<&[u8]>)?;
            if taken.is_ok() {
                return Ok(ProposalClaim::Taken(proposal));
            }
        }
    }

    /// Removes proposals made before `older_than_unix`; how many.
    pub(crate) fn prune(&self, older_than_unix: i64) -> Result<usize> {
        prune_json(&self.tree()?, TREE, |p: &Proposal| {
            p.created < older_than_unix
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(user: u64, created: i64) -> Proposal {
        Proposal {
            user: UserId(user),
            chat: ChatId(-5),
            topic: None,
            change: ProposedChange::Fact("likes tea".into()),
            created,
        }
    }

    #[test]
    fn only_its_user_takes_a_proposal_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let proposals = store.proposals();
        let id = proposals.create(&fact(7, 100)).unwrap();
        let cases = [
            ("another member", ChatId(-5), 8, 0, ProposalClaim::NotYours),
            ("another chat", ChatId(-6), 7, 0, ProposalClaim::Expired),
            ("too old", ChatId(-5), 7, 101, ProposalClaim::Expired),
            (
                "its user",
                ChatId(-5),
                7,
                0,
                ProposalClaim::Taken(fact(7, 100)),
            ),
            ("again", ChatId(-5), 7, 0, ProposalClaim::Expired),
            ("a forged id", ChatId(-5), 7, 0, ProposalClaim::Expired),
        ];
        for (name, chat, user, oldest, want) in cases {
            let id = if name == "a forged id" { "zzzz" } else { &id };
            let got = proposals.claim(id, chat, UserId(user), oldest).unwrap();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn old_proposals_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let old = store.proposals().create(&fact(7, 10)).unwrap();
        let new = store.proposals().create(&fact(7, 1000)).unwrap();
        assert_eq!(store.proposals().prune(500).unwrap(), 1);
        let claim = |id: &str| {
            store
                .proposals()
                .claim(id, ChatId(-5), UserId(7), 0)
                .unwrap()
        };
        assert_eq!(claim(&old), ProposalClaim::Expired);
        assert!(matches!(claim(&new), ProposalClaim::Taken(_)));
    }
}
