//! The request that starts a turn: who asked what, where. One shape for the three records that
//! hold it: the inbox's [`InboxEntry`](super::InboxEntry) (recorded before the turn starts),
//! a 🔁 Retry's [`RetryTicket`](super::RetryTicket) (kept to run it again) and the turn's own
//! input (`turn::TurnInput`, this plus the update that carries it).
//!
//! The records embed it with `#[serde(flatten)]`, so its fields sit at the record's top level
//! as they did before the request had a type of its own: a record stored before reads the
//! same. `reply_to`, `forwarded` and `attachment` are written only when set; they read as
//! unset when absent, here and in the records of earlier versions, so either version reads the
//! other's records.

use serde::{Deserialize, Serialize};

use super::attachment::Attachment;
use crate::conversation::Conversation;
use crate::ids::{ChatId, TopicId, UserId};

/// Who asked what, where: what a turn answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    pub chat: ChatId,
    /// The user whose message it is; their role and budget are checked when the turn runs.
    pub user: UserId,
    /// The user's text, or a pressed option's full label.
    pub text: String,
    /// A photo's Telegram `file_id` (downloaded in the turn, so a resumed turn can fetch it).
    #[serde(default)]
    pub image: Option<String>,
    /// The forum topic the message came from: the turn's history, queue and answer are that
    /// topic's (records from before topics were told apart read as none).
    #[serde(default)]
    pub topic: Option<TopicId>,
    /// The message the answer replies to (the one that started the turn, in groups), so a
    /// resumed answer still does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<i32>,
    /// The message was forwarded, or its text holds a document read into it: someone else
    /// wrote (some of) its text, so it counts as third-party
    /// text (what its turn teaches waits for review).
    #[serde(default, skip_serializing_if = "is_false")]
    pub forwarded: bool,
    /// The user spoke the request (a voice or video note, now transcribed): its answer is
    /// also spoken where spoken replies are on. Written only when set.
    #[serde(default, skip_serializing_if = "is_false")]
    pub spoken: bool,
    /// A voice note, audio file or document the turn reads first (see [`Attachment`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
    /// The user's own message that asked, which carries the working reaction while the turn
    /// runs; none for a turn a button started (an option, a 🔁 Retry). Written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<i32>,
    /// A scheduled reminder: `text` is shown as it is, with no model call (written only
    /// when set).
    #[serde(default, skip_serializing_if = "is_false")]
    pub reminder: bool,
    /// The run of a scheduled task: not the user's live message, so it may change nothing
    /// lasting without their ✅ (see [`crate::provenance`]); a 🔁 Retry of it keeps this.
    /// Written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run: Option<TaskRun>,
}

/// Which task a scheduled run is of, and that task's provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRun {
    pub task: u64,
    /// The task was made from tainted context, on its owner's ✅.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tainted: bool,
}

/// `serde`'s test for leaving `forwarded` out.
fn is_false(value: &bool) -> bool {
    !*value
}

impl TurnRequest {
    /// `text` from `user` in `chat` (outside topics, replying to nothing, their own words).
    pub fn new(chat: ChatId, user: UserId, text: impl Into<String>) -> Self {
        Self {
            chat,
            user,
            text: text.into(),
            image: None,
            topic: None,
            reply_to: None,
            forwarded: false,
            spoken: false,
            attachment: None,
            message: None,
            reminder: false,
            task_run: None,
        }
    }

    /// Where the request's text came from, for the provenance gate: a scheduled run, someone
    /// else's words (forwarded, a document, an audio file), or the user's own.
    pub(crate) fn origin(&self) -> crate::provenance::Message {
        use crate::provenance::Message;
        match self.task_run {
            Some(run) => Message::Scheduled {
                tainted: run.tainted,
            },
            None if self.forwarded => Message::ThirdParty,
            None => Message::Own,
        }
    }

    /// The conversation the turn belongs to: its chat and, in a forum, its topic.
    pub(crate) fn conversation(&self) -> Conversation {
        Conversation::new(self.chat, self.topic)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::ids::UpdateId;
    use crate::store::{InboxEntry, InboxState, RetryTicket};

    /// Records as the store wrote them before the request had a type of its own (serialized
    /// from the structs of then, every field at the top level), and what they read as now.
    #[test]
    fn records_stored_before_read_the_same_and_are_written_alike() {
        struct Case {
            name: &'static str,
            stored: &'static str,
            /// Re-serialized, the record says the same: the stored fields, less the ones
            /// now left out when unset (`reply_to: null`, `forwarded: false`).
            rewritten: Value,
        }
        let forum = TurnRequest {
            image: Some("photo".into()),
            topic: Some(TopicId(3)),
            reply_to: Some(5),
            forwarded: true,
            ..TurnRequest::new(ChatId(-1_001_234_567_890), UserId(42), "hi")
        };
        let inbox = |stored: &str| serde_json::from_str::<InboxEntry>(stored).unwrap();
        let cases = [
            Case {
                name: "an inbox entry in a forum topic, visible in two messages",
                stored: r#"{"chat":-1001234567890,"user":42,"text":"hi","image":"photo","state":{"Visible":{"message":9}},"received":1700000000,"topic":3,"reply_to":5,"parts":[10],"first_seq":4,"forwarded":true}"#,
                rewritten: json!({"chat":-1001234567890_i64,"user":42,"text":"hi","image":"photo","state":{"Visible":{"message":9}},"received":1700000000,"topic":3,"reply_to":5,"parts":[10],"first_seq":4,"forwarded":true}),
            },
            Case {
                name: "a plain inbox entry",
                stored: r#"{"chat":42,"user":42,"text":"hi","image":null,"state":"Pending","received":1700000000,"topic":null,"reply_to":null,"first_seq":0,"forwarded":false}"#,
                rewritten: json!({"chat":42,"user":42,"text":"hi","image":null,"state":"Pending","received":1700000000,"topic":null,"first_seq":0}),
            },
            Case {
                name: "an inbox entry recovery started again twice",
                stored: r#"{"chat":42,"user":42,"text":"hi","image":null,"state":"Pending","received":1700000000,"topic":null,"first_seq":0,"restarts":2}"#,
                rewritten: json!({"chat":42,"user":42,"text":"hi","image":null,"state":"Pending","received":1700000000,"topic":null,"first_seq":0,"restarts":2}),
            },
            Case {
                name: "an inbox entry from before topics, replies and forwards",
                stored: r#"{"chat":42,"user":42,"text":"hi","state":"Answered","received":1700000000}"#,
                rewritten: json!({"chat":42,"user":42,"text":"hi","image":null,"state":"Answered","received":1700000000,"topic":null,"first_seq":0}),
            },
        ];
        for case in cases {
            let entry = inbox(case.stored);
            let rewritten = serde_json::to_value(&entry).unwrap();
            assert_eq!(rewritten, case.rewritten, "case {}: written", case.name);
            assert_eq!(
                serde_json::from_value::<InboxEntry>(rewritten).unwrap(),
                entry,
                "case {}: read back",
                case.name
            );
        }
        let entry = inbox(
            r#"{"chat":-1001234567890,"user":42,"text":"hi","image":"photo","state":{"Visible":{"message":9}},"received":1700000000,"topic":3,"reply_to":5,"parts":[10],"first_seq":4,"forwarded":true}"#,
        );
        assert_eq!(
            entry,
            InboxEntry {
                request: forum,
                state: InboxState::Visible { message: Some(9) },
                received: 1_700_000_000,
                parts: vec![10],
                first_seq: 4,
                restarts: 0,
            }
        );
    }

    /// A retry ticket as stored before reads the same, and is written as it was stored.
    #[test]
    fn a_retry_ticket_stored_before_reads_and_writes_the_same() {
        let stored = r#"{"chat":-100,"user":42,"text":"again","image":null,"topic":7,"used":true,"claimed_by":77,"created":1700000000}"#;
        let ticket: RetryTicket = serde_json::from_str(stored).unwrap();
        assert_eq!(
            ticket,
            RetryTicket {
                request: TurnRequest {
                    topic: Some(TopicId(7)),
                    ..TurnRequest::new(ChatId(-100), UserId(42), "again")
                },
                used: true,
                claimed_by: Some(UpdateId(77)),
                created: 1_700_000_000,
            }
        );
        assert_eq!(
            serde_json::to_value(&ticket).unwrap(),
            serde_json::from_str::<Value>(stored).unwrap()
        );
    }
}
