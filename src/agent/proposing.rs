//! The tools with lasting effects (`remember`, `schedule_task`) through the provenance gate
//! (see [`crate::provenance`]): where the gate asks for the user's ✅, the change is stored as
//! a [`Proposal`] instead of being made, and the model is told that it waits; the turn then
//! shows it to the user with ✅ / ✖ (`turn::confirm`), and only their press makes it.

use super::output::{ERROR_PREFIX, ToolOutput};
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::store::{Proposal, ProposedChange, Store};
use crate::texts::confirm as texts;

/// A change proposed for the user's ✅: the proposal's id and the change as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proposed {
    pub id: String,
    pub what: String,
}

/// What a call of a tool with a lasting effect gave: the model's result, and the proposal
/// made instead of the change where the gate asked for a ✅.
#[derive(Debug)]
pub(crate) struct Lasting {
    pub output: ToolOutput,
    pub proposed: Option<Proposed>,
}

impl Lasting {
    /// A change made (or refused) at once: only the model's result.
    pub(crate) fn done(result: Result<String, String>) -> Self {
        Self {
            output: ToolOutput::own(result.unwrap_or_else(|e| format!("{ERROR_PREFIX}{e}"))),
            proposed: None,
        }
    }
}

/// Stores `change` (`what`: as the user reads it) for `user`'s ✅ in `at`; the model's result
/// says it waits. A store that fails is an error result: nothing is made either way.
pub(crate) fn propose(
    store: &Store,
    user: UserId,
    at: Conversation,
    change: ProposedChange,
    what: String,
) -> Lasting {
    let proposal = Proposal {
        user,
        chat: at.chat,
        topic: at.topic,
        change,
        created: chrono::Utc::now().timestamp(),
    };
    match store.proposals().create(&proposal) {
        Ok(id) => Lasting {
            output: ToolOutput::own(texts::waiting(&what)),
            proposed: Some(Proposed { id, what }),
        },
        Err(e) => {
            tracing::warn!(%user, error = %e, "cannot store a proposal");
            Lasting::done(Err(
                "it could not be saved just now; tell the user nothing was saved".to_string(),
            ))
        }
    }
}
