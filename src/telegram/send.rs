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
use teloxide::prelude::*;
use teloxide::types::{ChatAction, InlineKeyboardMarkup, MessageId, ParseMode};

use std::sync::Arc;

use super::limiter::Limiter;
use super::render::html_to_plain;
use crate::config::TelegramConfig;

/// How Telegram requests are paced and retried; from `[telegram]` in the config. Cheap to
/// clone; clones share the limiter.
#[derive(Clone)]
pub struct SendPolicy {
    pub max_retries: u32,
    pub max_retry_after: Duration,
    pub limiter: Arc<Limiter>,
}

impl SendPolicy {
    pub fn new(config: &TelegramConfig) -> Self {
        Self {
            max_retries: config.max_send_retries,
            max_retry_after: Duration::from_secs(config.max_retry_after_secs),
            limiter: Arc::new(Limiter::new(
                Duration::from_millis(config.chat_interval_ms),
                config.global_per_second,
            )),
        }
    }
}

/// Runs a Telegram request to `chat` in its paced slot, waiting out 429s (and pushing the
/// chat's next slot back) and retrying connection failures.
pub async fn with_retry<T, F, Fut>(
    policy: &SendPolicy,
    chat: ChatId,
    what: &str,
    mut request: F,
) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let mut attempt = 0;
    loop {
        policy.limiter.acquire(chat.0).await;
        let error = match request().await {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        attempt += 1;
        let wait = match &error {
            RequestError::RetryAfter(seconds) => {
                policy.limiter.penalize(chat.0, seconds.duration());
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
    }
}

/// Sends one HTML part; if Telegram cannot parse it, sends its plain text instead.
pub async fn send_html(
    bot: &Bot,
    policy: &SendPolicy,
    chat: ChatId,
    html: &str,
    markup: Option<InlineKeyboardMarkup>,
) -> Result<Message, RequestError> {
    let sent = with_retry(policy, chat, "sendMessage", || {
        let mut request = bot.send_message(chat, html).parse_mode(ParseMode::Html);
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
                let mut request = bot.send_message(chat, plain.as_str());
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
/// the plain-text fallback. "Not modified" counts as done; a message that is gone is sent anew.
/// Returns the id of the message that now shows the part.
pub async fn edit_html(
    bot: &Bot,
    policy: &SendPolicy,
    chat: ChatId,
    id: MessageId,
    html: &str,
    markup: Option<InlineKeyboardMarkup>,
) -> Result<MessageId, RequestError> {
    let markup = markup.unwrap_or_default();
    let edit = |text: String, parse: bool| {
        let markup = markup.clone();
        async move {
            with_retry(policy, chat, "editMessageText", || {
                let mut request = bot.edit_message_text(chat, id, text.clone());
                if parse {
                    request = request.parse_mode(ParseMode::Html);
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
            Ok(send_html(bot, policy, chat, html, Some(markup)).await?.id)
        }
        Err(e) => Err(e),
    }
}

/// Replaces the keyboard of message `id`; failures are logged with `what`.
pub async fn edit_keyboard(
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
pub async fn notify(bot: &Bot, policy: &SendPolicy, chat: ChatId, text: &str) {
    let sent = with_retry(policy, chat, "sendMessage", || {
        bot.send_message(chat, text).send()
    })
    .await;
    if let Err(e) = sent {
        tracing::warn!(chat = chat.0, error = %e, "could not send a notice");
    }
}

/// An answer ready sooner than this needs no "typing…" (which would cost a Telegram request
/// on every turn, on the path of fast answers).
const TYPING_DELAY: Duration = Duration::from_millis(300);

/// Shows "typing…" in `chat` for as long as it runs (Telegram clears the action after about
/// five seconds, so it is repeated `every` so often).
pub async fn typing(bot: Bot, chat: ChatId, every: Duration) {
    tokio::time::sleep(TYPING_DELAY).await;
    loop {
        if let Err(e) = bot.send_chat_action(chat, ChatAction::Typing).await {
            tracing::debug!(chat = chat.0, error = %e, "typing action failed");
        }
        tokio::time::sleep(every).await;
    }
}
