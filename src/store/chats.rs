//! The `chats` tree: per-chat state (history window, clear epoch, chosen model), changed only
//! in sled transactions so concurrent changes never overwrite one another. A forum topic's
//! state is the same record in the `topic_chats` tree, keyed by chat and topic.

use serde::{Deserialize, Serialize};
use sled::transaction::{
    ConflictableTransactionError, TransactionalTree, UnabortableTransactionError,
};

use super::db::{self, Store};
use super::records::{decode_json, read_json};
use crate::conversation::Conversation;

const TREE: &str = db::CHATS;

/// Per-chat state.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ChatState {
    /// First turn the LLM still sees.
    pub window_start: u64,
    /// Sequence number of the next turn.
    pub next_seq: u64,
    /// Bumped by every clear; a turn that started before a clear is not written after it.
    pub epoch: u64,
    /// The chat's chosen model, if not the default.
    pub model: Option<String>,
    /// The answer whose option buttons are live: the only one a press may continue.
    #[serde(default)]
    pub offered: Option<Offered>,
    /// Bumped whenever the live options are retired (a new turn, a clear), so options that an
    /// earlier turn extracted too late are not attached after it.
    #[serde(default)]
    pub option_round: u64,
}

/// An answer with live option buttons: its ticket, its message and its 👍/👎 ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    pub ticket: String,
    pub message: i32,
    pub feedback: Option<String>,
}

/// The chat id, big-endian, then a topic's id, big-endian: the key of the conversation's
/// state and the prefix of its turns (in the topic trees when there is a topic).
pub(super) fn chat_key(chat: impl Into<Conversation>) -> Vec<u8> {
    let chat = chat.into();
    let mut key = chat.chat.to_be_bytes().to_vec();
    if let Some(topic) = chat.topic {
        key.extend_from_slice(&topic.to_be_bytes());
    }
    key
}

/// A chat's state as a transaction reads it; a missing or unreadable one is the default.
pub(super) fn read_in(
    tree: &TransactionalTree,
    chat: Conversation,
) -> Result<ChatState, UnabortableTransactionError> {
    let key = chat_key(chat);
    Ok(tree
        .get(&key)?
        .and_then(|bytes| decode_json(TREE, &key, &bytes))
        .unwrap_or_default())
}

impl Store {
    /// The tree that holds the state of `chat`: its own, or the forum topics' one.
    pub(super) fn chats_of(&self, chat: Conversation) -> &sled::Tree {
        match chat.topic {
            Some(_) => &self.topic_chats,
            None => &self.chats,
        }
    }

    pub fn chat_state(&self, chat: impl Into<Conversation>) -> ChatState {
        let chat = chat.into();
        read_json(self.chats_of(chat), TREE, &chat_key(chat)).unwrap_or_default()
    }

    /// The model id a chat chose, if any.
    pub fn chat_model(&self, chat: impl Into<Conversation>) -> Option<String> {
        self.chat_state(chat).model
    }

    /// Retires the chat's live options: returns the answer that showed them (its keyboard is
    /// to lose them) and the new option round, which only options of a later turn may join.
    pub fn retire_offered(
        &self,
        chat: impl Into<Conversation>,
    ) -> anyhow::Result<(u64, Option<Offered>)> {
        self.update_chat_state(chat, |state| {
            state.option_round += 1;
            (state.option_round, state.offered.take())
        })
    }

    /// Makes `offered` the chat's live options if no turn or clear retired round `round`
    /// since; `false` means they came too late and must not be shown.
    pub fn offer(
        &self,
        chat: impl Into<Conversation>,
        round: u64,
        offered: &Offered,
    ) -> anyhow::Result<bool> {
        self.update_chat_state(chat, |state| {
            let current = state.option_round == round;
            if current {
                state.offered = Some(offered.clone());
            }
            current
        })
    }

    pub fn set_chat_model(&self, chat: impl Into<Conversation>, model: &str) -> anyhow::Result<()> {
        self.update_chat_state(chat, |state| state.model = Some(model.to_string()))
    }

    /// Applies `change` to the chat's state in one sled transaction (sled reruns it on
    /// conflict, so `change` must only edit the state it is given) and returns what `change`
    /// returned on the run that was committed.
    pub(super) fn update_chat_state<R>(
        &self,
        chat: impl Into<Conversation>,
        change: impl Fn(&mut ChatState) -> R,
    ) -> anyhow::Result<R> {
        let chat = chat.into();
        let result = self.chats_of(chat).transaction(|tree| {
            let mut state = read_in(tree, chat)?;
            let result = change(&mut state);
            let bytes = serde_json::to_vec(&state).map_err(ConflictableTransactionError::Abort)?;
            tree.insert(chat_key(chat), bytes)?;
            Ok(result)
        })?;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_model_switches_and_state_changes_keep_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let store = &store;
                s.spawn(move || {
                    for _ in 0..50 {
                        if t == 0 {
                            store.set_chat_model(1, "m").unwrap();
                        } else {
                            store.update_chat_state(1, |s| s.epoch += 1).unwrap();
                        }
                    }
                });
            }
        });
        let state = store.chat_state(1);
        assert_eq!(state.epoch, 150, "no epoch bump was lost");
        assert_eq!(state.model.as_deref(), Some("m"));
    }
}
