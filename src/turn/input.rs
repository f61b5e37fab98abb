//! What starts a turn: a typed message, a pressed option, a 🔁 Retry, or a turn recovered after
//! a restart, in one shape: the [`TurnRequest`] (who asked what, where; the shape the inbox and
//! a retry ticket store too) and the update that carries it.

use crate::conversation::Conversation;
use crate::ids::UpdateId;
use crate::store::{InboxEntry, TurnRequest};

/// What starts a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    /// Who asked what, where.
    pub request: TurnRequest,
    /// The update recorded in the inbox for this turn (`None` for turns without one).
    pub update: Option<UpdateId>,
}

impl TurnInput {
    /// `request`, arriving in update `update` (a message or a press, to be recorded in the
    /// inbox by `turn::accept`).
    pub fn new(request: TurnRequest, update: UpdateId) -> Self {
        Self {
            request,
            update: Some(update),
        }
    }

    /// The turn of inbox record `entry` (of update `update`) that a crash interrupted, run
    /// again as it was received.
    pub(crate) fn resumed(update: UpdateId, entry: InboxEntry) -> Self {
        Self::new(entry.request, update)
    }

    /// The conversation the turn belongs to.
    pub(crate) fn conversation(&self) -> Conversation {
        self.request.conversation()
    }
}
