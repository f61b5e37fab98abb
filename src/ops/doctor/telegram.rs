//! The doctor's Telegram checks: the token (getMe) and how updates arrive (getWebhookInfo),
//! through the bot's own client, so `TELOXIDE_API_URL` is honoured as the bot honours it.

use std::sync::atomic::Ordering;

use teloxide::ApiError;
use teloxide::RequestError;
use teloxide::prelude::Requester;

use super::context::{Checked, Context};
use super::report::Line;
use crate::texts::ops as texts;

/// getMe: the token is valid and Telegram (or the configured Bot API server) answers.
pub(super) fn token<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let bot = match crate::telegram::bot(context.config) {
            Ok(bot) => bot,
            Err(e) => {
                let found = texts::telegram_unreachable(&format!("{e:#}"));
                return vec![Line::fail(
                    texts::TOKEN,
                    found,
                    texts::TELEGRAM_UNREACHABLE_FIX,
                )];
            }
        };
        let line = match bot.get_me().await {
            Ok(me) => {
                context.telegram_up.store(true, Ordering::Relaxed);
                let username = me.username.clone().unwrap_or_default();
                Line::ok(texts::TOKEN, texts::token_ok(&username, me.id.0))
            }
            Err(RequestError::Api(ApiError::InvalidToken)) => Line::fail(
                texts::TOKEN,
                texts::token_refused(&ApiError::InvalidToken.to_string()),
                texts::TOKEN_REFUSED_FIX,
            ),
            Err(e) => Line::fail(
                texts::TOKEN,
                texts::telegram_unreachable(&crate::error_chain(&e)),
                texts::TELEGRAM_UNREACHABLE_FIX,
            ),
        };
        vec![line]
    })
}

/// getWebhookInfo against the configured mode: polling with a webhook set, or a webhook
/// registered elsewhere or failing, is said with its fix.
pub(super) fn updates<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        if !context.telegram_up() {
            return vec![Line::skipped(texts::WEBHOOK, texts::SKIPPED_NO_TELEGRAM)];
        }
        let info = match crate::telegram::bot(context.config) {
            Ok(bot) => bot
                .get_webhook_info()
                .await
                .map_err(|e| crate::error_chain(&e)),
            Err(e) => Err(format!("{e:#}")),
        };
        let info = match info {
            Ok(info) => info,
            Err(e) => {
                let found = texts::webhook_info_failed(&e);
                return vec![Line::fail(
                    texts::WEBHOOK,
                    found,
                    texts::TELEGRAM_UNREACHABLE_FIX,
                )];
            }
        };
        let line = updates_line(
            info.url.as_ref(),
            &context.config.telegram.webhook_url,
            info.last_error_message.as_deref(),
            info.pending_update_count,
        );
        vec![line]
    })
}

/// What getWebhookInfo's `registered` URL (with Telegram's `last_error` and `pending` count)
/// means for a bot configured with `configured` (empty: polling).
fn updates_line(
    registered: Option<&reqwest::Url>,
    configured: &str,
    last_error: Option<&str>,
    pending: u32,
) -> Line {
    let same =
        registered.is_some_and(|url| reqwest::Url::parse(configured).ok().as_ref() == Some(url));
    match (registered, configured.is_empty()) {
        (None, true) => Line::ok(texts::WEBHOOK, texts::POLLING_OK),
        (Some(url), true) => Line::warn(
            texts::WEBHOOK,
            texts::webhook_set_while_polling(url.as_str()),
            texts::WEBHOOK_SET_WHILE_POLLING_FIX,
        ),
        (Some(url), false) if same => match last_error {
            Some(error) => Line::warn(
                texts::WEBHOOK,
                texts::webhook_failing(url.as_str(), error),
                texts::WEBHOOK_FAILING_FIX,
            ),
            None => Line::ok(texts::WEBHOOK, texts::webhook_ok(url.as_str(), pending)),
        },
        (registered, false) => Line::warn(
            texts::WEBHOOK,
            texts::webhook_elsewhere(registered.map_or("", reqwest::Url::as_str), configured),
            texts::WEBHOOK_ELSEWHERE_FIX,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::doctor::Status;

    /// One state of getWebhookInfo against one configuration.
    struct Case {
        name: &'static str,
        registered: Option<&'static str>,
        configured: &'static str,
        last_error: Option<&'static str>,
        status: Status,
        found: &'static str,
    }

    #[test]
    fn webhook_state_against_the_configured_mode() {
        let cases = [
            Case {
                name: "polling, none set",
                registered: None,
                configured: "",
                last_error: None,
                status: Status::Ok,
                found: "long polling",
            },
            Case {
                name: "polling, one set",
                registered: Some("https://old.example/hook"),
                configured: "",
                last_error: None,
                status: Status::Warn,
                found: "a webhook is set (https://old.example/hook)",
            },
            Case {
                name: "webhook, the same (trailing slash aside)",
                registered: Some("https://bot.example.com/"),
                configured: "https://bot.example.com",
                last_error: None,
                status: Status::Ok,
                found: "webhook https://bot.example.com/, 2 updates waiting",
            },
            Case {
                name: "webhook, failing",
                registered: Some("https://bot.example.com/"),
                configured: "https://bot.example.com/",
                last_error: Some("Connection refused"),
                status: Status::Warn,
                found: "last delivery failed: Connection refused",
            },
            Case {
                name: "webhook, another",
                registered: Some("https://old.example/hook"),
                configured: "https://bot.example.com/",
                last_error: None,
                status: Status::Warn,
                found: "Telegram posts updates to \"https://old.example/hook\"",
            },
            Case {
                name: "webhook, none yet",
                registered: None,
                configured: "https://bot.example.com/",
                last_error: None,
                status: Status::Warn,
                found: "Telegram posts updates to \"\"",
            },
        ];
        for case in cases {
            let registered = case.registered.map(|u| reqwest::Url::parse(u).unwrap());
            let line = updates_line(registered.as_ref(), case.configured, case.last_error, 2);
            assert_eq!(line.status, case.status, "{}", case.name);
            assert!(
                line.found.contains(case.found),
                "{}: {}",
                case.name,
                line.found
            );
            assert_eq!(
                line.fix.is_some(),
                case.status == Status::Warn,
                "{}",
                case.name
            );
        }
    }
}
