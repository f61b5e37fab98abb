//! The `chats` tree: per-chat state (history window, clear epoch, chosen model), changed only
//! by compare-and-swap so concurrent changes never overwrite one another. A forum topic's
//! state is the same record in the `topic_chats` tree, keyed by chat and topic.
//!
//! Not by sled transactions: sled 0.34 writes the log to disk twice for every transaction
//! (it rolls its IO buffer before and after the batch marker), which was most of the disk
//! writes and about a third of the bot's CPU per turn.
//!
//! A state that is there but cannot be decoded is an error ([`Error::Unreadable`]), never
//! a default: a default would number the chat's next turn from 0, over the turns it has, and
//! bring cleared turns back into the window. So nothing is written over it, and the chat's
//! turns stop with an error until it is repaired.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::{Error, Result};
use super::records::decode_json;
use super::tree::Tree;
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
    pub offered: Option<OfferedOptions>,
    /// Bumped whenever the live options are retired (a new turn, a clear), so options that an
    /// earlier turn extracted too late are not attached after it.
    #[serde(default)]
    pub option_round: u64,
    /// Some turn stored since the last clear held text a third party wrote (or read a
    /// window that did): what the conversation's later turns teach waits for review, even
    /// once that turn left the history window (its words may live on in later answers, in an
    /// option label, in a retried message). Only `/clear` ends it. A state from before this
    /// was kept cannot tell, so it counts as marked.
    #[serde(default = "marked_if_unknown")]
    pub external: bool,
}

/// A state recorded before the mark was kept may have read anything.
fn marked_if_unknown() -> bool {
    true
}

/// An answer with live option buttons: its ticket, its message and its 👍/👎 ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferedOptions {
    pub ticket: String,
    pub message: i32,
    pub feedback: Option<String>,
}

/// The chat id, big-endian, then a topic's id, big-endian: the key of the conversation's
/// state and the prefix of its turns (in the topic trees when there is a topic).
pub(super) fn chat_key(chat: Conversation) -> Vec<u8> {
    let mut key = chat.chat.0.to_be_bytes().to_vec();
    if let Some(topic) = chat.topic {
        key.extend_from_slice(&topic.0.to_be_bytes());
    }
    key
}

/// Decodes a chat's stored state: a missing one is the default (a new chat), an unreadable
/// one [`Error::Unreadable`] naming the conversation.
fn decode_state(chat: Conversation, bytes: Option<&[u8]>) -> Result<ChatState> {
    let tree = match chat.topic {
        Some(_) => db::TOPIC_CHATS,
        None => TREE,
    };
    match bytes {
        None => Ok(ChatState::default()),
        Some(bytes) => decode_json(tree, &chat_key(chat), bytes).ok_or(Error::Unreadable {
            tree,
            key: chat.to_string(),
        }),
    }
}

/// The chats' and forum topics' state (trees `chats` and `topic_chats`):
/// [`Store::chats`], a borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Chats<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// The chats' and topics' state.
    pub fn chats(&self) -> Chats<'_> {
        Chats { store: self }
    }
}

impl Chats<'_> {
    /// The tree that holds the state of `chat`: its own, or the forum topics' one.
    pub(super) fn tree(&self, chat: Conversation) -> &Tree {
        match chat.topic {
            Some(_) => &self.store.topic_chats,
            None => &self.store.chats,
        }
    }

    /// The chat's state: the default for a chat never seen, an error for one that cannot be
    /// read (see the module doc).
    pub(crate) fn state(&self, chat: Conversation) -> Result<ChatState> {
        let bytes = self.tree(chat).get(chat_key(chat))?;
        decode_state(chat, bytes.as_deref())
    }

    /// The model id a chat chose, if any (none when its state cannot be read: the default
    /// model answers, or rather the error does, since such a chat's turns stop).
    pub(crate) fn model(&self, chat: Conversation) -> Option<String> {
        self.state(chat).ok()?.model
    }

    /// Retires the chat's live options: returns the answer that showed them (its keyboard is
    /// to lose them) and the new option round, which only options of a later turn may join.
    pub fn retire_offered(&self, chat: Conversation) -> Result<(u64, Option<OfferedOptions>)> {
        self.update_state(chat, |state| {
            state.option_round += 1;
            (state.option_round, state.offered.take())
        })
    }

    /// Makes `offered` the chat's live options if no turn or clear retired round `round`
    /// since; `false` means they came too late and must not be shown.
    pub fn offer(&self, chat: Conversation, round: u64, offered: &OfferedOptions) -> Result<bool> {
        self.update_state(chat, |state| {
            let current = state.option_round == round;
            if current {
                state.offered = Some(offered.clone());
            }
            current
        })
    }

    pub(crate) fn set_model(&self, chat: Conversation, model: &str) -> Result<()> {
        self.update_state(chat, |state| state.model = Some(model.to_string()))
    }

    /// Applies `change` to the chat's state by compare-and-swap (rerun on the newer state when
    /// another change came first, so `change` must only edit the state it is given) and
    /// returns what `change` returned on the run that was stored.
    pub(super) fn update_state<R>(
        &self,
        chat: Conversation,
        change: impl Fn(&mut ChatState) -> R,
    ) -> Result<R> {
        self.try_update_state(chat, |state| Some(change(state)))
            .map(|result| result.expect("the change always writes"))
    }

    /// Like [`Self::update_state`], but `change` may decline (`None`): then nothing is
    /// written and `None` returned.
    pub(super) fn try_update_state<R>(
        &self,
        chat: Conversation,
        change: impl Fn(&mut ChatState) -> Option<R>,
    ) -> Result<Option<R>> {
        let tree = self.tree(chat);
        let key = chat_key(chat);
        loop {
            let current = tree.get(&key)?;
            let mut state = decode_state(chat, current.as_deref())?;
            let Some(result) = change(&mut state) else {
                return Ok(None);
            };
            let bytes = serde_json::to_vec(&state)?;
            if tree.compare_and_swap(&key, current, Some(bytes))?.is_ok() {
                return Ok(Some(result));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::conversation;

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
                            store.chats().set_model(conversation(1), "m").unwrap();
                        } else {
                            store
                                .chats()
                                .update_state(conversation(1), |s| s.epoch += 1)
                                .unwrap();
                        }
                    }
                });
            }
        });
        let state = store.chats().state(conversation(1)).unwrap();
        assert_eq!(state.epoch, 150, "no epoch bump was lost");
        assert_eq!(state.model.as_deref(), Some("m"));
    }

    #[test]
    fn the_third_party_mark_is_off_for_a_new_chat_and_on_for_a_state_that_predates_it() {
        assert!(
            !ChatState::default().external,
            "a new chat has read nothing"
        );
        let old: ChatState =
            serde_json::from_str(r#"{"window_start":3,"next_seq":9,"epoch":1,"model":null}"#)
                .unwrap();
        assert!(old.external, "an old state cannot say what its chat read");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let marked = crate::store::TurnProvenance {
            external: true,
            admin_only: Vec::new(),
        };
        let turn = [crate::llm::ChatMessage::user("q")];
        store
            .history()
            .append(conversation(4), 0, None, &turn, &Default::default())
            .unwrap();
        assert!(!store.chats().state(conversation(4)).unwrap().external);
        store
            .history()
            .append(conversation(4), 0, None, &turn, &marked)
            .unwrap();
        store
            .history()
            .append(conversation(4), 0, None, &turn, &Default::default())
            .unwrap();
        assert!(
            store.chats().state(conversation(4)).unwrap().external,
            "only a clear ends it"
        );
        assert!(store.history().window(conversation(4), 1).unwrap().external);
        store.history().clear(conversation(4)).unwrap();
        assert!(!store.chats().state(conversation(4)).unwrap().external);
    }
}

#[cfg(test)]
mod unreadable {
    //! An unreadable state is never read as a new chat's: nothing is written over it.

    use super::*;
    use crate::llm::ChatMessage;
    use crate::store::fixtures::conversation;

    #[test]
    fn an_unreadable_state_fails_every_change_and_is_kept_with_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..3 {
            let turn = [
                ChatMessage::user(format!("q{i}")),
                ChatMessage::assistant("a"),
            ];
            assert!(
                store
                    .history()
                    .append(conversation(1), 0, None, &turn, &Default::default())
                    .unwrap()
            );
        }
        let garbage = br#"{"window_start":0,"next_seq":"#;
        store
            .chats
            .insert(chat_key(conversation(1)), &garbage[..])
            .unwrap();
        let turns = || store.history.scan_prefix(chat_key(conversation(1))).count();

        assert!(
            store.chats().state(conversation(1)).is_err(),
            "not read as a new chat"
        );
        assert!(store.history().window(conversation(1), 1000).is_err());
        assert_eq!(store.chats().model(conversation(1)), None);
        let turn = [ChatMessage::user("new")];
        assert!(
            store
                .history()
                .append(conversation(1), 0, None, &turn, &Default::default())
                .is_err()
        );
        assert!(store.chats().set_model(conversation(1), "m").is_err());
        assert!(store.history().clear(conversation(1)).is_err());
        assert!(store.history().skip(conversation(1), 1).is_err());
        assert!(store.chats().retire_offered(conversation(1)).is_err());

        assert_eq!(turns(), 3, "no turn written or removed");
        assert_eq!(
            store
                .chats
                .get(chat_key(conversation(1)))
                .unwrap()
                .as_deref(),
            Some(&garbage[..]),
            "the state is left as it was"
        );
        // Another chat goes on.
        assert!(
            store
                .history()
                .append(conversation(2), 0, None, &turn, &Default::default())
                .unwrap()
        );
        assert_eq!(store.chats().state(conversation(2)).unwrap().next_seq, 1);
    }
}
