//! Everything Heurist sends to Telegram goes through here.
//!
//! Telegram's flood control answers 429 with `retry_after`: the request was not executed, so
//! waiting that long and sending again delivers the message exactly once. Other failures are
//! not retried blindly: a timeout after the request left may have delivered it, and resending
//! would duplicate a message; only connection failures (nothing was sent) are retried.
//! When Telegram cannot parse a part's HTML, the part is sent again as plain text, so the user
//! always gets the words.

use std::future::Future;
use std::time::Duration;

use teloxide::ApiError;
use teloxide::RequestError;
use teloxide::payloads::SendMessageSetters;
use teloxide::prelude::*;
use teloxide::types::{
    ChatAction, InlineKeyboardMarkup, LinkPreviewOptions, MessageId, ParseMode, ReplyParameters,
    ThreadId,
};

use std::sync::Arc;

use super::limiter::{Limiter, Pacing, Scope};
use crate::config::TelegramConfig;
use crate::conversation::Conversation;
use crate::metrics::Metrics;
use crate::telegram::render::html_to_plain;

/// How Telegram requests are paced and retried; from `[telegram]` in the config. Cheap to
/// clone; clones share the limiter.
#[derive(Clone)]
pub(crate) struct SendPolicy {
    pub max_retries: u32,
    pub max_retry_after: Duration,
    pub limiter: Arc<Limiter>,
    /// `telegram.link_previews`: whether sent and edited texts may show link preview cards.
    pub link_previews: bool,
    /// Where each request and each 429 is counted.
    pub metrics: Metrics,
}

impl SendPolicy {
    pub(crate) fn new(config: &TelegramConfig, metrics: Metrics) -> Self {
        Self {
            max_retries: config.max_send_retries,
            max_retry_after: Duration::from_secs(config.max_retry_after_secs),
            limiter: Arc::new(Limiter::new(Pacing {
                private: Duration::from_millis(config.chat_interval_ms),
                group: Duration::from_millis(config.group_interval_ms),
                global_per_second: config.global_per_second,
            })),
            link_previews: config.link_previews,
            metrics,
        }
    }
}

/// Where a new message goes: a chat, the forum topic in it, and the message it replies to.
/// Edits need only the chat (a message stays in its topic), and pacing counts the chat.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Destination {
    pub chat: ChatId,
    pub thread: Option<ThreadId>,
    pub reply_to: Option<MessageId>,
}

impl Destination {
    /// A conversation's chat and topic, the new message a reply to `reply_to` if given.
    pub(crate) fn new(at: Conversation, reply_to: Option<i32>) -> Self {
        Self {
            chat: ChatId::from(at.chat),
            thread: at.topic.map(ThreadId::from),
            reply_to: reply_to.map(MessageId),
        }
    }

    /// The same chat and topic, not as a reply (an answer's parts after its first).
    pub(crate) fn without_reply(self) -> Self {
        Self {
            reply_to: None,
            ..self
        }
    }

    /// The conversation a message sent here belongs to.
    pub(crate) fn conversation(&self) -> Conversation {
        Conversation::new(
            crate::ids::ChatId::from(self.chat),
            self.thread.map(crate::ids::TopicId::from),
        )
    }
}

/// A chat outside any topic, replying to nothing.
impl From<ChatId> for Destination {
    fn from(chat: ChatId) -> Self {
        Self::new(
            Conversation::new(crate::ids::ChatId::from(chat), None),
            None,
        )
    }
}

impl From<Conversation> for Destination {
    fn from(at: Conversation) -> Self {
        Self::new(at, None)
    }
}

/// `request` sent to `to`'s topic, as a reply to its message if it names one. The reply is
/// sent even if that message is gone: the answer matters more than the thread.
fn placed<R: SendMessageSetters>(mut request: R, to: Destination) -> R {
    if let Some(thread) = to.thread {
        request = request.message_thread_id(thread);
    }
    if let Some(message) = to.reply_to {
        request =
            request.reply_parameters(ReplyParameters::new(message).allow_sending_without_reply());
    }
    request
}

/// Sends `audio` (Ogg Opus) to `to` as a voice note, in the chat's paced slot.
pub(crate) async fn send_voice(
    bot: &Bot,
    policy: &SendPolicy,
    to: Destination,
    audio: Vec<u8>,
) -> Result<Message, RequestError> {
    with_retry(policy, to.chat, "sendVoice", || {
        let file = teloxide::types::InputFile::memory(audio.clone()).file_name("answer.ogg");
        let mut request = bot.send_voice(to.chat, file);
        if let Some(thread) = to.thread {
            request = request.message_thread_id(thread);
        }
        if let Some(message) = to.reply_to {
            request = request
                .reply_parameters(ReplyParameters::new(message).allow_sending_without_reply());
        }
        request.send()
    })
    .await
}

/// Runs a Telegram request to `chat` in its paced slot, waiting out 429s (and pushing the
/// chat's next slot back) and retrying connection failures.
pub(crate) async fn with_retry<T, F, Fut>(
    policy: &SendPolicy,
    chat: ChatId,
    what: &'static str,
    request: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    paced(
        policy,
        Scope::Chat(crate::ids::ChatId::from(chat)),
        what,
        request,
    )
    .await
}

/// [`with_retry`] for a request that names no chat (`getFile`): a 429 on it pauses every call.
pub(crate) async fn with_retry_bot<T, F, Fut>(
    policy: &SendPolicy,
    what: &'static str,
    request: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    paced(policy, Scope::Bot, what, request).await
}

/// Telegram's `retry_after` carries no chat: a 429 is charged to the scope of the request it
/// answered. A retried request keeps its place in its chat's line.
async fn paced<T, F, Fut>(
    policy: &SendPolicy,
    scope: Scope,
    what: &'static str,
    mut request: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let mut attempt = 0;
    let mut turn = policy.limiter.acquire(scope).await;
    loop {
        policy.metrics.telegram_call(what);
        let error = match request().await {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        attempt += 1;
        let wait = match &error {
            RequestError::RetryAfter(seconds) => {
                policy.metrics.telegram_rate_limited(what);
                policy.limiter.penalize(scope, seconds.duration());
                seconds.duration()
            }
            RequestError::Network(e) if e.is_connect() => {
                Duration::from_millis(500 * u64::from(attempt))
            }
            _ => return Err(error),
        };
        if attempt > policy.max_retries || wait > policy.max_retry_after {
            tracing::warn!(%what, attempt, error = %error, "giving up on a Telegram request");
            return Err(error);
        }
        tracing::info!(%what, wait_ms = wait.as_millis() as u64, "Telegram asked us to wait; retrying");
        tokio::time::sleep(wait).await;
        turn.next_slot().await;
    }
}

/// The `link_preview_options` a send or edit carries: previews disabled unless
/// `telegram.link_previews` allows them (then Telegram's default, so nothing is sent).
fn no_previews(policy: &SendPolicy) -> Option<LinkPreviewOptions> {
    (!policy.link_previews).then_some(LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    })
}

/// Sends one HTML part; if Telegram cannot parse it, sends its plain text instead.
pub(crate) async fn send_html(
    bot: &Bot,
    policy: &SendPolicy,
    to: impl Into<Destination>,
    html: &str,
    markup: Option<InlineKeyboardMarkup>,
) -> Result<Message, RequestError> {
    let to = to.into();
    let chat = to.chat;
    let sent = with_retry(policy, chat, "sendMessage", || {
        let mut request = placed(bot.send_message(chat, html), to).parse_mode(ParseMode::Html);
        if let Some(previews) = no_previews(policy) {
            request = request.link_preview_options(previews);
        }
        if let Some(markup) = markup.clone() {
            request = request.reply_markup(markup);
        }
        request.send()
    })
    .await;
    match sent {
        Err(RequestError::Api(ApiError::CantParseEntities(reason))) => {
            tracing::warn!(%reason, "Telegram refused our HTML; sending plain text");
            let plain = html_to_plain(html);
            with_retry(policy, chat, "sendMessage", || {
                let mut request = placed(bot.send_message(chat, plain.as_str()), to);
                if let Some(previews) = no_previews(policy) {
                    request = request.link_preview_options(previews);
                }
                if let Some(markup) = markup.clone() {
                    request = request.reply_markup(markup);
                }
                request.send()
            })
            .await
        }
        other => other,
    }
}

/// Replaces message `id`'s text with an HTML part and its keyboard (`None` removes it: an
/// explicit empty keyboard, so a Stop button goes even when the text is unchanged), with
/// the plain-text fallback. "Not modified" counts as done; a message that is gone is sent anew
/// (to `to`'s topic). Returns the id of the message that now shows the part.
pub(crate) async fn edit_html(
    bot: &Bot,
    policy: &SendPolicy,
    to: impl Into<Destination>,
    id: MessageId,
    html: &str,
    markup: Option<InlineKeyboardMarkup>,
) -> Result<MessageId, RequestError> {
    let to = to.into();
    let chat = to.chat;
    let markup = markup.unwrap_or_default();
    let edit = |text: String, parse: bool| {
        let markup = markup.clone();
        async move {
            with_retry(policy, chat, "editMessageText", || {
                let mut request = bot.edit_message_text(chat, id, text.clone());
                if parse {
                    request = request.parse_mode(ParseMode::Html);
                }
                if let Some(previews) = no_previews(policy) {
                    request = request.link_preview_options(previews);
                }
                request.reply_markup(markup.clone()).send()
            })
            .await
        }
    };
    let mut outcome = edit(html.to_string(), true).await;
    if let Err(RequestError::Api(ApiError::CantParseEntities(reason))) = &outcome {
        tracing::warn!(%reason, "Telegram refused our HTML in an edit; using plain text");
        outcome = edit(html_to_plain(html), false).await;
    }
    match outcome {
        Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(id),
        Err(RequestError::Api(ApiError::MessageToEditNotFound)) => {
            Ok(send_html(bot, policy, to, html, Some(markup)).await?.id)
        }
        Err(e) => Err(e),
    }
}

/// Replaces the keyboard of message `id`; failures are logged with `what`.
pub(crate) async fn edit_keyboard(
    bot: &Bot,
    policy: &SendPolicy,
    chat: ChatId,
    id: MessageId,
    markup: InlineKeyboardMarkup,
    what: &str,
) {
    let edited = with_retry(policy, chat, "editMessageReplyMarkup", || {
        bot.edit_message_reply_markup(chat, id)
            .reply_markup(markup.clone())
            .send()
    })
    .await;
    if let Err(e) = edited {
        tracing::warn!(chat = chat.0, error = %e, "cannot {what}");
    }
}

/// Sends a short plain notice (errors, refusals); failures are logged, not propagated.
pub(crate) async fn notify(bot: &Bot, policy: &SendPolicy, to: impl Into<Destination>, text: &str) {
    let to = to.into();
    let chat = to.chat;
    let sent = with_retry(policy, chat, "sendMessage", || {
        let mut request = placed(bot.send_message(chat, text), to);
        if let Some(previews) = no_previews(policy) {
            request = request.link_preview_options(previews);
        }
        request.send()
    })
    .await;
    if let Err(e) = sent {
        tracing::warn!(chat = chat.0, error = %e, "could not send a notice");
    }
}

/// An answer ready sooner than this needs no "typing…" (which would cost a Telegram request
/// on every turn, on the path of fast answers).
const TYPING_DELAY: Duration = Duration::from_millis(300);

/// Shows "typing…" in `to`'s chat and topic for as long as it runs (Telegram clears the
/// action after about five seconds, so it is repeated `every` so often).
pub(crate) async fn typing(bot: Bot, to: Destination, every: Duration) {
    let chat = to.chat;
    tokio::time::sleep(TYPING_DELAY).await;
    loop {
        let mut request = bot.send_chat_action(chat, ChatAction::Typing);
        if let Some(thread) = to.thread {
            request = request.message_thread_id(thread);
        }
        if let Err(e) = request.await {
            tracing::debug!(chat = chat.0, error = %e, "typing action failed");
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    #[test]
    fn a_target_keeps_the_topic_and_drops_only_the_reply() {
        struct Case {
            name: &'static str,
            at: Conversation,
            reply_to: Option<i32>,
            thread: Option<i32>,
        }
        let cases = [
            Case {
                name: "a private chat",
                at: Conversation::new(ChatId(7), None),
                reply_to: None,
                thread: None,
            },
            Case {
                name: "a group, replying",
                at: Conversation::new(ChatId(-5), None),
                reply_to: Some(40),
                thread: None,
            },
            Case {
                name: "a forum topic, replying",
                at: Conversation::new(crate::ids::ChatId(-5), Some(crate::ids::TopicId(3))),
                reply_to: Some(41),
                thread: Some(3),
            },
        ];
        for case in cases {
            let to = Destination::new(case.at, case.reply_to);
            assert_eq!(to.chat.0, case.at.chat.0, "case {}", case.name);
            assert_eq!(to.thread.map(|t| t.0.0), case.thread, "case {}", case.name);
            assert_eq!(
                to.reply_to,
                case.reply_to.map(MessageId),
                "case {}",
                case.name
            );
            let rest = to.without_reply();
            assert_eq!(rest.reply_to, None, "case {}", case.name);
            assert_eq!(rest.conversation(), case.at, "case {}", case.name);
        }
    }
}
