//! The client's stop control on a draft (see [`super::drafts`]): pressing it sends the bot a
//! `stopped_message_generation` update (`MessageGenerationStopped` in the Bot API docs: the chat, the
//! topic, the draft id), which cancels the turn whose draft it was exactly as ⏹ and `/cancel`
//! do, and is confirmed like `/cancel`.
//!
//! teloxide 0.17 knows neither the update nor its name in `allowed_updates`: its dispatcher drops
//! an update it cannot parse, so the polling listener takes stops out of each batch before
//! the dispatcher sees it ([`draft_stop`]), and asks Telegram for them by name once, with a raw
//! `getUpdates` that names every kind the bot routes ([`ask_for_stops`]; Telegram keeps the
//! last `allowed_updates` it was given). Only once Telegram agreed do drafts offer the stop
//! control ([`super::drafts::Drafts::stops_reach_bot`]). In webhook mode the bot registers the
//! webhook by hand with the same names ([`register_webhook`]), and the webhook's middleware
//! takes a stop out before the route, its secret token checked.

use serde_json::{Value, json};
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, UpdateKind};

use super::replies;
use crate::ids::{ChatId, UserId};
use crate::role::Role;
use crate::telegram::handlers::Deps;
use crate::turn::actions;

/// The update's name in `allowed_updates` and in the update itself.
const STOP_UPDATE: &str = "stopped_message_generation";

/// A user's press of a draft's stop control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DraftStop {
    pub(crate) chat: ChatId,
    pub(crate) draft_id: u32,
}

/// The draft stop `update` carries, if it is one (teloxide hands it over unparsed, as JSON).
pub(crate) fn draft_stop(update: &Update) -> Option<DraftStop> {
    let UpdateKind::Error(value) = &update.kind else {
        return None;
    };
    stop_in(value)
}

/// The draft stop an update's JSON carries, if it is one.
pub(crate) fn stop_in(update: &Value) -> Option<DraftStop> {
    let stop = update.get(STOP_UPDATE)?;
    Some(DraftStop {
        chat: ChatId(stop["chat"]["id"].as_i64()?),
        draft_id: u32::try_from(stop["draft_id"].as_u64()?).ok()?,
    })
}

/// Tells Telegram to send the kinds in `allowed` and draft stops, without confirming any
/// update (no `offset`, no wait); `false` if it was not told (the caller then names `allowed`
/// in every `getUpdates`, without stops).
pub(crate) async fn ask_for_stops(bot: &Bot, allowed: &[AllowedUpdate]) -> bool {
    let body = json!({"timeout": 0, "limit": 1, "allowed_updates": with_stops(allowed)});
    raw_call(bot, "getUpdates", &body).await
}

/// Registers the webhook at `url` for the kinds in `allowed` and draft stops, as teloxide's
/// typed `setWebhook` cannot name them; `false` if Telegram did not agree (the caller then
/// registers it without stops). A stop then comes as the webhook's POST, which
/// [`super::listener::answer_when_handled`] hands to [`stopped`].
pub(crate) async fn register_webhook(
    bot: &Bot,
    url: &reqwest::Url,
    secret: &str,
    allowed: &[AllowedUpdate],
) -> bool {
    let body = json!({
        "url": url.as_str(),
        "secret_token": secret,
        "drop_pending_updates": false,
        "allowed_updates": with_stops(allowed),
    });
    raw_call(bot, "setWebhook", &body).await
}

/// The names of the kinds in `allowed`, and of draft stops.
fn with_stops(allowed: &[AllowedUpdate]) -> Value {
    let mut names = serde_json::to_value(allowed).unwrap_or_else(|_| json!([]));
    if let Some(names) = names.as_array_mut() {
        names.push(json!(STOP_UPDATE));
    }
    names
}

/// Calls `method` with `body` as JSON, by hand; whether Telegram answered `ok` (a failure is
/// one line in the log, without the URL, which holds the token).
async fn raw_call(bot: &Bot, method: &str, body: &Value) -> bool {
    let mut url = bot.api_url();
    let Ok(mut path) = url.path_segments_mut() else {
        return false;
    };
    path.push(&format!("bot{}", bot.token())).push(method);
    drop(path);
    let answer = match bot.client().post(url).json(body).send().await {
        Ok(response) => response.json::<Value>().await.ok(),
        Err(e) => {
            tracing::warn!(method, error = %e.without_url(), "cannot ask Telegram for draft stops");
            None
        }
    };
    let Some(answer) = answer else {
        return false;
    };
    if answer["ok"] != json!(true) {
        let refused = answer["description"].as_str().unwrap_or("no description");
        tracing::warn!(method, refused, "Telegram refused draft stops");
        return false;
    }
    true
}

/// Cancels the turn whose draft was stopped, if it is still being written in that chat, and
/// confirms it there as `/cancel` does. A stop of a draft that is over, of another chat, or
/// from someone not allowed, is ignored.
pub(crate) fn stopped(deps: &Deps, stop: DraftStop) {
    let Some((at, turn)) = deps.tg.drafts().stopped(stop.chat, stop.draft_id) else {
        tracing::debug!(
            chat = stop.chat.0,
            draft = stop.draft_id,
            "a stop of no live draft"
        );
        return;
    };
    // Drafts are private chats only, whose id is the user's.
    let user = u64::try_from(at.chat.0).map(UserId);
    if user.map_or(true, |user| {
        deps.app.config().role_of(user) == Role::Stranger
    }) {
        return;
    }
    let outcome = actions::cancel(&deps.app, at, Some(turn));
    replies::notice(deps, at, outcome.reply());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_read_from_the_update_teloxide_could_not_parse() {
        let update = |body: &str| -> Update {
            serde_json::from_str(&format!(r#"{{"update_id": 5, {body}}}"#)).unwrap()
        };
        let with_value = |body: &str| -> Update {
            let mut parsed = update(body);
            let value: Value = serde_json::from_str(&format!("{{{body}}}")).unwrap();
            parsed.kind = UpdateKind::Error(value);
            parsed
        };
        let cases = [
            (
                "a stop",
                with_value(
                    r#""stopped_message_generation": {"chat": {"id": 7, "type": "private"},
                    "draft_id": 12}"#,
                ),
                Some(DraftStop {
                    chat: ChatId(7),
                    draft_id: 12,
                }),
            ),
            (
                "a stop without a draft id",
                with_value(r#""stopped_message_generation": {"chat": {"id": 7}}"#),
                None,
            ),
            (
                "another unknown kind",
                with_value(r#""something_new": {"chat": {"id": 7}, "draft_id": 1}"#),
                None,
            ),
            (
                "a message",
                update(
                    r#""message": {"message_id": 1, "date": 0, "text": "hi",
                    "chat": {"id": 7, "type": "private", "first_name": "A"}}"#,
                ),
                None,
            ),
        ];
        for (name, update, want) in cases {
            assert_eq!(draft_stop(&update), want, "{name}");
        }
    }
}
