//! A turn's side of personal memory (see [`crate::memory`]): the asker's facts go in front of
//! the new user message (the asker's only, and in groups only if they turned that on), and come off it
//! again before the turn is stored, so the shared history never holds them; the agent gets the
//! asker's memory for `remember` to write.

use super::state::Turn;
use crate::agent::remember::MemoryWriter;
use crate::llm::ChatMessage;
use crate::memory::{block, without_memory};

/// The memory `remember` writes in this turn: the asker's; none when memory is off. Someone
/// else's words (a forwarded message, a document) only propose a fact, for the asker's ✅
/// (see [`crate::provenance`]).
pub(super) fn keeper(turn: &Turn) -> Option<MemoryWriter> {
    let config = turn.app.config().memory;
    let user = turn.input.request.user;
    config
        .enabled()
        .then(|| MemoryWriter::new(turn.app.store().clone(), user, turn.at(), config))
}

/// `content` with the asker's facts in front of it (as it is, when they have none or memory is
/// off). The facts count as used now, which keeps them from being the first dropped.
pub(super) fn with_facts(turn: &Turn, content: String) -> String {
    if !turn.app.config().memory.enabled() {
        return content;
    }
    let (memories, user) = (turn.app.store().memories(), turn.input.request.user);
    let facts = memories.facts(user);
    // A group's answers are read by every member: the facts go there only if the user said so.
    let here = turn.input.request.chat.is_private() || facts.in_groups();
    if facts.list().is_empty() || !here {
        return content;
    }
    let now = chrono::Utc::now().timestamp();
    // Dropped (logged): the facts are still carried; only their last use is not recorded.
    if let Err(e) = memories.change(user, |facts| facts.touch(now)) {
        tracing::warn!(%user, error = %e, "cannot record that facts were used");
    }
    format!("{}{content}", block(facts.list()))
}

/// `messages` (already without their photos, as the history keeps them) as the history
/// stores them: every user message without the facts' block.
pub(super) fn without_facts(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    messages
        .into_iter()
        .map(|message| match &message {
            ChatMessage::User { .. } => {
                let text = without_memory(message.content());
                if text.len() == message.content().len() {
                    message
                } else {
                    ChatMessage::user(text)
                }
            }
            _ => message,
        })
        .collect()
}
