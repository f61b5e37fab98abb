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
        let registered = info.url.as_ref().map(ToString::to_string);
        let configured = &context.config.telegram.webhook_url;
        let line = match (registered, configured.is_empty()) {
            (None, true) => Line::ok(texts::WEBHOOK, texts::POLLING_OK),
            (Some(url), true) => Line::warn(
                texts::WEBHOOK,
                texts::webhook_set_while_polling(&url),
                texts::WEBHOOK_SET_WHILE_POLLING_FIX,
            ),
            (Some(url), false) if url == *configured => match info.last_error_message {
                Some(error) => Line::warn(
                    texts::WEBHOOK,
                    texts::webhook_failing(&url, &error),
                    texts::WEBHOOK_FAILING_FIX,
                ),
                None => Line::ok(
                    texts::WEBHOOK,
                    texts::webhook_ok(&url, info.pending_update_count),
                ),
            },
            (registered, false) => Line::warn(
                texts::WEBHOOK,
                texts::webhook_elsewhere(&registered.unwrap_or_default(), configured),
                texts::WEBHOOK_ELSEWHERE_FIX,
            ),
        };
        vec![line]
    })
}
