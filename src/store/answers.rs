//! The `answers` tree: which feedback ticket each message of a rated answer belongs to, so a
//! reaction on any part of an answer (which names only its chat and message) reaches the same
//! 👍/👎 as the answer's buttons. Key `chat_id ‖ message_id` (big-endian), value a JSON
//! [`AnswerRecord`]; pruned with the tickets it points to.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::Result;
use super::records::{prune_json, read_json, update_json};
use crate::ids::{ChatId, TopicId};

const TREE: &str = db::ANSWERS;

/// What a message of an answer with 👍/👎 leads to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The answer's feedback ticket.
    pub feedback: String,
    /// The forum topic of the answer (a vote reads its conversation's mark).
    #[serde(default)]
    pub topic: Option<TopicId>,
    /// The message that carries the answer's keyboard (its last part).
    pub keyboard: i32,
    /// The answer's option ticket, once options were offered under it.
    #[serde(default)]
    pub options: Option<String>,
    /// Unix seconds, as in the tickets.
    pub created: i64,
}

/// The key of message `message` in `chat`.
fn key(chat: ChatId, message: i32) -> [u8; 12] {
    let mut key = [0; 12];
    key[..8].copy_from_slice(&chat.0.to_be_bytes());
    key[8..].copy_from_slice(&message.to_be_bytes());
    key
}

/// The answers' messages (tree `answers`): [`Store::answers`], a borrowed view.
#[derive(Clone, Copy)]
pub struct Answers<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// The messages of answers with 👍/👎, by chat and message id.
    pub fn answers(&self) -> Answers<'_> {
        Answers { store: self }
    }
}

impl Answers<'_> {
    /// Records that `messages` of `chat` show the answer `record` describes.
    pub fn record(&self, chat: ChatId, messages: &[i32], record: &AnswerRecord) -> Result<()> {
        let value = serde_json::to_vec(record)?;
        for &message in messages {
            self.store
                .answers
                .insert(key(chat, message), value.as_slice())?;
        }
        Ok(())
    }

    /// The answer message `message` of `chat` belongs to (`None`: no answer with 👍/👎).
    pub fn get(&self, chat: ChatId, message: i32) -> Option<AnswerRecord> {
        read_json(&self.store.answers, TREE, &key(chat, message))
    }

    /// Records option ticket `ticket` under the answer whose keyboard is `message`.
    pub(crate) fn set_options(&self, chat: ChatId, message: i32, ticket: &str) -> Result<()> {
        update_json(
            &self.store.answers,
            TREE,
            &key(chat, message),
            |record: &mut AnswerRecord| {
                record.options = Some(ticket.to_string());
                true
            },
        )?;
        Ok(())
    }

    /// Removes the records created before `before` (unix seconds); returns how many went.
    pub(super) fn prune(&self, before: i64) -> Result<usize> {
        prune_json(&self.store.answers, TREE, |r: &AnswerRecord| {
            r.created < before
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_of_an_answer_leads_to_its_ticket_in_its_own_chat_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let record = AnswerRecord {
            feedback: "fb".into(),
            topic: None,
            keyboard: 11,
            options: None,
            created: 100,
        };
        store
            .answers()
            .record(ChatId(-5), &[10, 11], &record)
            .unwrap();
        store.answers().set_options(ChatId(-5), 11, "opt").unwrap();
        struct Case {
            name: &'static str,
            chat: ChatId,
            message: i32,
            options: Option<Option<&'static str>>,
        }
        let cases = [
            Case {
                name: "the first part",
                chat: ChatId(-5),
                message: 10,
                options: Some(None),
            },
            Case {
                name: "the part with the keyboard, options recorded",
                chat: ChatId(-5),
                message: 11,
                options: Some(Some("opt")),
            },
            Case {
                name: "the same message id in another chat",
                chat: ChatId(5),
                message: 10,
                options: None,
            },
            Case {
                name: "a message of no answer",
                chat: ChatId(-5),
                message: 12,
                options: None,
            },
        ];
        for case in cases {
            let found = store.answers().get(case.chat, case.message);
            let options = found.as_ref().map(|r| r.options.as_deref());
            assert_eq!(options, case.options, "{}", case.name);
            if let Some(found) = found {
                assert_eq!((found.feedback.as_str(), found.keyboard), ("fb", 11));
            }
        }
        assert_eq!(store.answers().prune(100).unwrap(), 0, "not older");
        assert_eq!(store.answers().prune(101).unwrap(), 2);
        assert_eq!(store.answers().get(ChatId(-5), 10), None);
    }
}
