//! The endpoints of the schema: plain async functions that take their dependencies, a file per
//! kind of update: [`messages`] (text and everything else a user sends; [`files`] decides on
//! recordings and documents), [`commands`] and [`presses`] (button presses), [`reactions`]
//! (emoji on the bot's answers); [`turns`] is the one path by which a message or a press
//! starts a turn. What they share lives here: [`Deps`], where a message or a press belongs,
//! and whether a message is meant for the bot.
//!
//! Handlers return quickly: a text message is queued as a turn in its chat's lane and the
//! handler returns, so `/cancel` and button presses are never stuck behind a running turn.
//! Nor do they wait for a paced send: command replies, notices, refusals and button edits are
//! posted to [`replies`], because teloxide runs a chat's handlers one at a time and its
//! dispatcher waits once a chat's queue is full, so a handler awaiting its chat's pacing would
//! hold every chat's next update. Commands have a rate per user, as turns do.
//! The schema computed the sender's role once; admin-only commands and actions are checked
//! against it here and in [`crate::turn::actions`], on the server, for commands and buttons
//! alike. Every callback query is answered at once, before anything slow.
//!
//! [`replies`]: super::transport::replies

pub(crate) mod commands;
mod files;
pub(crate) mod messages;
pub(crate) mod presses;
pub(crate) mod reactions;
mod turns;

use std::sync::Arc;

use teloxide::prelude::*;
use teloxide::types::Me;

use super::transport::outbox::Outbox;
use crate::app::App;
use crate::conversation::Conversation;

pub(crate) type HandlerResult = anyhow::Result<()>;

/// What every handler works with: the bot's services and the one way to send. One value in
/// the dispatcher's dependencies, so an endpoint takes it as one argument. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Deps {
    pub app: Arc<App>,
    pub tg: Arc<Outbox>,
}

/// Whether a message is meant for the bot. Private chats: always. Groups: commands (without
/// another bot's `@suffix`), messages that mention the bot, and replies to its messages.
pub(crate) fn addressed(msg: &Message, me: &Me) -> bool {
    if msg.chat.is_private() {
        return true;
    }
    let username = me.username().to_ascii_lowercase();
    let text = msg.text().or_else(|| msg.caption()).unwrap_or_default();
    if let Some(command) = text.strip_prefix('/') {
        let word = command.split_whitespace().next().unwrap_or_default();
        return match word.split_once('@') {
            Some((_, target)) => target.eq_ignore_ascii_case(&username),
            None => true,
        };
    }
    let replied_to_bot = msg
        .reply_to_message()
        .and_then(|reply| reply.from.as_ref())
        .is_some_and(|from| from.id == me.id);
    replied_to_bot || mentions(text, &username)
}

/// The conversation a message belongs to: its forum topic, or the chat outside topics (a
/// private chat, a plain group, a forum's General topic; a reply thread in a plain group is no
/// topic).
pub(crate) fn conversation_of(msg: &Message) -> Conversation {
    let topic = msg.thread_id.filter(|_| msg.is_topic_message);
    Conversation::new(
        crate::ids::ChatId::from(msg.chat.id),
        topic.map(crate::ids::TopicId::from),
    )
}

/// The user who sent a message (0, no user, for a channel's post, which has no sender).
pub(super) fn sender_of(msg: &Message) -> crate::ids::UserId {
    crate::ids::UserId(msg.from.as_ref().map_or(0, |u| u.id.0))
}

/// The conversation a button was pressed in: its message's (none for inline messages).
pub(crate) fn pressed_in(query: &CallbackQuery) -> Option<Conversation> {
    let message = query.message.as_ref()?;
    Some(match message.regular_message() {
        Some(msg) => conversation_of(msg),
        None => Conversation::new(crate::ids::ChatId::from(message.chat().id), None),
    })
}

/// The message an answer in `chat` replies to: the one that started it, in groups (negative
/// ids), so answers stay threaded in a busy group; none in private chats.
pub(super) fn reply_in_groups(chat: crate::ids::ChatId, message: i32) -> Option<i32> {
    (chat.0 < 0).then_some(message)
}

/// Whether `text` contains `@username` as a whole word, case-insensitively.
fn mentions(text: &str, username: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let needle = format!("@{username}");
    lower.match_indices(&needle).any(|(at, _)| {
        lower[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// The text the model sees: a group message without the bot's @mention.
pub(super) fn without_mention(text: &str, me: &Me) -> String {
    let needle = format!("@{}", me.username());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.to_ascii_lowercase().find(&needle.to_ascii_lowercase()) {
        out.push_str(&rest[..at]);
        rest = &rest[at + needle.len()..];
    }
    out.push_str(rest);
    let trimmed = out.trim();
    if trimmed.is_empty() {
        text.trim()
    } else {
        trimmed
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    #[test]
    fn only_a_forum_topic_makes_its_own_conversation() {
        struct Case {
            name: &'static str,
            chat: serde_json::Value,
            extra: serde_json::Value,
            conversation: Conversation,
        }
        let group = serde_json::json!({"id": -5, "type": "supergroup", "title": "g"});
        let forum =
            serde_json::json!({"id": -5, "type": "supergroup", "title": "f", "is_forum": true});
        let cases = [
            Case {
                name: "a private chat",
                chat: serde_json::json!({"id": 7, "type": "private", "first_name": "a"}),
                extra: serde_json::json!({}),
                conversation: Conversation::new(ChatId(7), None),
            },
            Case {
                name: "a reply thread in a plain group is no topic",
                chat: group,
                extra: serde_json::json!({"message_thread_id": 3}),
                conversation: Conversation::new(ChatId(-5), None),
            },
            Case {
                name: "a forum's General topic",
                chat: forum.clone(),
                extra: serde_json::json!({}),
                conversation: Conversation::new(ChatId(-5), None),
            },
            Case {
                name: "a forum topic",
                chat: forum,
                extra: serde_json::json!({"message_thread_id": 3, "is_topic_message": true}),
                conversation: Conversation::new(
                    crate::ids::ChatId(-5),
                    Some(crate::ids::TopicId(3)),
                ),
            },
        ];
        for case in cases {
            let mut json = serde_json::json!({
                "message_id": 9, "date": 0, "chat": case.chat, "text": "hi",
                "from": {"id": 7, "is_bot": false, "first_name": "a"},
            });
            for (key, value) in case.extra.as_object().unwrap() {
                json[key] = value.clone();
            }
            let msg: Message = serde_json::from_value(json).unwrap();
            assert_eq!(
                conversation_of(&msg),
                case.conversation,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("hey @heurist_bot, hi", "heurist_bot"));
        assert!(mentions("@HEURIST_BOT", "heurist_bot"));
        assert!(!mentions("@heurist_bot2 hi", "heurist_bot"));
        assert!(!mentions("mail me", "heurist_bot"));
    }
}
