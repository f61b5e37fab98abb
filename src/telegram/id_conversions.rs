//! Our ids from Telegram's and back: `From` for each pair, so the adapter writes
//! `msg.chat.id.into()` instead of taking the number out and putting it into the other type.
//!
//! They live in the adapter, not in [`crate::ids`], so the layers below it stay free of
//! teloxide's types. A topic is a forum thread, whose id is that of its first message.

use teloxide::types::{self as tg, MessageId, ThreadId};

use crate::ids::{ChatId, TopicId, UpdateId, UserId};

impl From<tg::ChatId> for ChatId {
    fn from(chat: tg::ChatId) -> Self {
        Self(chat.0)
    }
}

impl From<ChatId> for tg::ChatId {
    fn from(chat: ChatId) -> Self {
        Self(chat.0)
    }
}

impl From<tg::UserId> for UserId {
    fn from(user: tg::UserId) -> Self {
        Self(user.0)
    }
}

impl From<tg::UpdateId> for UpdateId {
    fn from(update: tg::UpdateId) -> Self {
        Self(update.0)
    }
}

impl From<ThreadId> for TopicId {
    fn from(thread: ThreadId) -> Self {
        Self(thread.0.0)
    }
}

impl From<TopicId> for ThreadId {
    fn from(topic: TopicId) -> Self {
        Self(MessageId(topic.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each id keeps its number both ways, the negative chat ids of groups included.
    #[test]
    fn ids_keep_their_numbers_both_ways() {
        for chat in [-1_001_234_567_890, -5, 0, 42, i64::MAX] {
            let ours = ChatId::from(tg::ChatId(chat));
            assert_eq!(ours, ChatId(chat));
            assert_eq!(tg::ChatId::from(ours), tg::ChatId(chat));
        }
        assert_eq!(UserId::from(tg::UserId(u64::MAX)), UserId(u64::MAX));
        assert_eq!(UpdateId::from(tg::UpdateId(7)), UpdateId(7));
        let topic = TopicId::from(ThreadId(MessageId(3)));
        assert_eq!(topic, TopicId(3));
        assert_eq!(ThreadId::from(topic), ThreadId(MessageId(3)));
    }
}
