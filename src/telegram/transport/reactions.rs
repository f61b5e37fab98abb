//! Telegram's reactions: setting the bot's own (the working reaction, through the one limiter
//! every call takes) and reading what a user changed on a message (`message_reaction`).

use std::future::Future;

use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::{MessageId, MessageReactionUpdated, ReactionType, True};

use super::limiter::Scope;
use super::send::SendPolicy;

/// The most the bot's global pace may be backed up for a working reaction to be put on: past
/// it the slots are the answers' (a reaction is only a sign of life).
const SPARE: std::time::Duration = std::time::Duration::from_millis(200);

/// Puts `emoji` on message `id` of `chat` as the bot's reaction, or (`None`) takes the bot's
/// reaction off, paced and retried (see [`paced`]); whether a reaction may be on. None is
/// while the bot's calls are backed up more than [`SPARE`]. A refusal (a chat without
/// reactions, an emoji Telegram does not offer there) is logged: it never matters to the answer.
pub(crate) async fn set(
    bot: Bot,
    policy: SendPolicy,
    chat: ChatId,
    id: MessageId,
    emoji: Option<String>,
) -> bool {
    let putting = emoji.is_some();
    if putting && policy.limiter.global_backlog() > SPARE {
        return false;
    }
    let reaction: Vec<ReactionType> = emoji
        .into_iter()
        .map(|emoji| ReactionType::Emoji { emoji })
        .collect();
    let set = paced(&policy, chat, || {
        bot.set_message_reaction(chat, id)
            .reaction(reaction.clone())
            .send()
    })
    .await;
    if let Err(e) = &set {
        tracing::info!(chat = chat.0, error = %e, "cannot set the working reaction");
    }
    // Only a refusal is sure to have left nothing on: a call that timed out or lost its answer
    // may have put the reaction on, and then it must be taken off.
    putting && !matches!(set, Err(RequestError::Api(_)))
}

/// Runs a reaction call in a slot of the bot's global pace, but not in its chat's line: a
/// reaction is no message (Telegram's one-a-second per chat is about messages, and its chat
/// actions and press answers are not paced per chat either), and in that line the 👀 would hold
/// a quick answer back by a whole chat interval (three seconds in a group). A 429 is honoured
/// as for any call to the chat: the chat's next slot moves back, and the call waits it out.
async fn paced<F, Fut>(
    policy: &SendPolicy,
    chat: ChatId,
    mut request: F,
) -> Result<True, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<True, RequestError>>,
{
    let mut attempt = 0;
    let mut turn = policy.limiter.acquire(Scope::Bot).await;
    loop {
        let (wait, error) = match request().await {
            Ok(done) => return Ok(done),
            Err(RequestError::RetryAfter(seconds)) => (seconds.duration(), seconds),
            Err(e) => return Err(e),
        };
        attempt += 1;
        if attempt > policy.max_retries || wait > policy.max_retry_after {
            return Err(RequestError::RetryAfter(error));
        }
        policy
            .limiter
            .penalize(Scope::Chat(crate::ids::ChatId::from(chat)), wait);
        tokio::time::sleep(wait).await;
        turn.next_slot().await;
    }
}

/// The emoji a reaction update added: in its new reactions and not in its old ones (custom
/// and paid reactions are no emoji, and count as none).
pub(crate) fn added(update: &MessageReactionUpdated) -> Vec<&str> {
    let old: Vec<&str> = emoji(&update.old_reaction).collect();
    emoji(&update.new_reaction)
        .filter(|e| !old.contains(e))
        .collect()
}

fn emoji(reactions: &[ReactionType]) -> impl Iterator<Item = &str> {
    reactions
        .iter()
        .filter_map(|r| r.emoji().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_emoji_added_count() {
        struct Case {
            name: &'static str,
            old: serde_json::Value,
            new: serde_json::Value,
            added: &'static [&'static str],
        }
        let emoji = |e: &str| serde_json::json!({"type": "emoji", "emoji": e});
        let custom = serde_json::json!({"type": "custom_emoji", "custom_emoji_id": "5"});
        let cases = [
            Case {
                name: "a first reaction",
                old: serde_json::json!([]),
                new: serde_json::json!([emoji("👎")]),
                added: &["👎"],
            },
            Case {
                name: "a reaction replaced",
                old: serde_json::json!([emoji("👎")]),
                new: serde_json::json!([emoji("👍")]),
                added: &["👍"],
            },
            Case {
                name: "one added beside another",
                old: serde_json::json!([emoji("👍")]),
                new: serde_json::json!([emoji("👍"), emoji("🔥")]),
                added: &["🔥"],
            },
            Case {
                name: "a reaction taken off",
                old: serde_json::json!([emoji("👍")]),
                new: serde_json::json!([]),
                added: &[],
            },
            Case {
                name: "a custom emoji",
                old: serde_json::json!([]),
                new: serde_json::json!([custom]),
                added: &[],
            },
        ];
        for case in cases {
            let update: MessageReactionUpdated = serde_json::from_value(serde_json::json!({
                "chat": {"id": 7, "type": "private", "first_name": "a"},
                "message_id": 9,
                "user": {"id": 7, "is_bot": false, "first_name": "a"},
                "date": 0,
                "old_reaction": case.old,
                "new_reaction": case.new,
            }))
            .unwrap();
            assert_eq!(added(&update), case.added, "{}", case.name);
        }
    }
}
