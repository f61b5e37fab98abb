//! A conversation: one chat, or one forum topic of a chat.
//!
//! A forum supergroup holds many conversations at once, one per topic, each with its own
//! history, queue, `/clear`, model and option round. Everything that is kept or run per
//! conversation is keyed by a [`Conversation`]; pacing stays per chat, because Telegram's
//! flood control counts a chat's messages whatever their topic. A message outside any topic
//! (a private chat, a plain group, a forum's General topic) has no topic, so the chat id
//! alone keys it, as it did before topics were told apart.

use std::fmt;

use crate::ids::{ChatId, TopicId};

/// Where a turn's history and queue live: a chat and, in a forum, the topic in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Conversation {
    pub chat: ChatId,
    /// The forum topic (`message_thread_id`), `None` outside topics.
    pub topic: Option<TopicId>,
}

impl Conversation {
    /// The conversation of a message: its chat and, in a forum, its topic. There is no way to
    /// make one from a chat alone, which would quietly drop the topic a message came from.
    pub const fn new(chat: ChatId, topic: Option<TopicId>) -> Self {
        Self { chat, topic }
    }
}

/// `chat`, or `chat/topic` in a forum topic: how logs name it.
impl fmt::Display for Conversation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.topic {
            Some(topic) => write!(f, "{}/{topic}", self.chat),
            None => write!(f, "{}", self.chat),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_name_the_topic_only_when_there_is_one() {
        struct Case {
            name: &'static str,
            conversation: Conversation,
            shown: &'static str,
        }
        let cases = [
            Case {
                name: "a private chat",
                conversation: Conversation::new(ChatId(42), None),
                shown: "42",
            },
            Case {
                name: "a group outside topics",
                conversation: Conversation::new(ChatId(-100), None),
                shown: "-100",
            },
            Case {
                name: "a forum topic",
                conversation: Conversation::new(ChatId(-100), Some(TopicId(7))),
                shown: "-100/7",
            },
        ];
        for case in cases {
            assert_eq!(
                case.conversation.to_string(),
                case.shown,
                "case {}",
                case.name
            );
        }
    }
}
