//! What starts a turn: a typed message, a pressed option, a 🔁 Retry, or a turn recovered after
//! a restart, in one shape.

use crate::conversation::Conversation;

/// What starts a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub chat: i64,
    /// The user whose message it is; their role and budget are checked when the turn runs.
    pub user: u64,
    /// The update recorded in the inbox for this turn (`None` for turns without one).
    pub update: Option<u32>,
    /// The user's text, or a pressed option's full label.
    pub text: String,
    /// A photo's file id (downloaded in the turn, so a resumed turn can fetch it).
    pub image: Option<String>,
    /// The forum topic the message came from: the turn's history, queue and answer are that
    /// topic's.
    pub topic: Option<i32>,
    /// The message the answer replies to (the one that started the turn, in groups).
    pub reply_to: Option<i32>,
    /// The message was forwarded: someone else wrote its text, so the turn is marked as
    /// holding third-party text.
    pub forwarded: bool,
}

impl TurnInput {
    /// The conversation the turn belongs to.
    pub fn conversation(&self) -> Conversation {
        Conversation::new(self.chat, self.topic)
    }
}
