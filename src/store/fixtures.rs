//! Records the store's tests build on: a reflection job and an approved heuristic, written
//! once so each test states only what it changes.

use super::{Heuristic, Origin, ReflectionJob, ReviewState};
use crate::conversation::Conversation;
use crate::ids::ChatId;

/// A successful reflection job of `chat` about `task`.
pub(super) fn job(chat: ChatId, task: &str) -> ReflectionJob {
    ReflectionJob {
        chat,
        user: None,
        model: "m".into(),
        task: task.into(),
        tools: vec![],
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        answer: None,
        skills: Vec::new(),
        evidence: String::new(),
        proven: Vec::new(),
    }
}

/// An approved heuristic `id` with `text`, never injected yet.
pub(super) fn heuristic(id: u64, text: &str) -> Heuristic {
    Heuristic::learned(
        id,
        None,
        text.into(),
        ReviewState::Approved,
        Origin::default(),
        1,
    )
}

/// Chat `chat` outside topics: the conversation most tests write to.
pub(super) fn conversation(chat: i64) -> Conversation {
    Conversation::new(ChatId(chat), None)
}
