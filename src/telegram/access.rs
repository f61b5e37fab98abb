//! Strangers: people not on the allow-list.
//!
//! A stranger who writes to the bot (in a group: who addresses it) is told once a day per chat
//! that the bot is private, with their id in `<code>` so they can copy it; further messages that
//! day get no answer, and the day is kept in sled, so a restart does not repeat it. With
//! `access.request_button` the refusal has a "Request access" button: its first press tells
//! the admins the stranger's name and id, every press edits the refusal to say the request was
//! sent. The button carries the stranger's id and only that user may use it.
//!
//! Strangers refused in one conversation within a minute of each other (a group flooded by
//! people who mention the bot) share one refusal: it is sent for the first, then edited to list
//! every id (see [`crate::burst`]; the list has no button, whose id would be one stranger's).
//! Its edits wait for the group's other messages, so a member's answer is never queued behind
//! them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use teloxide::prelude::*;
use teloxide::types::{InlineKeyboardMarkup, User};

use super::callback_data::Action;
use super::handlers::{self, Deps, HandlerResult};
use super::keyboards;
use super::render::escape_html;
use super::transport::replies;
use crate::burst::Bursts;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::role::Role;
use crate::texts::telegram as texts;

/// How long after a stranger's refusal the next stranger refused in the conversation is added
/// to the same message.
const BURST: Duration = Duration::from_secs(60);

/// The most ids one refusal lists; more are counted.
const LISTED: usize = 100;

/// The strangers refused lately in each conversation, shown as one message per burst.
#[derive(Default)]
pub(crate) struct Strangers(Bursts<Conversation, RefusedStrangers>);

/// The strangers a burst refused: the first [`LISTED`] ids, and how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RefusedStrangers {
    ids: Vec<UserId>,
    more: usize,
}

impl RefusedStrangers {
    fn add(&mut self, user: UserId) {
        if self.ids.len() < LISTED {
            self.ids.push(user);
        } else {
            self.more += 1;
        }
    }
}

/// The refusal of a burst of strangers (see [`texts::refusals_html`]).
fn refusals_html(refused: &RefusedStrangers) -> String {
    texts::refusals_html(&refused.ids, refused.more)
}

/// What the admins are told of `who`'s request.
fn admin_notice_html(who: &User) -> String {
    let username = who.username.as_deref().map(escape_html);
    texts::admin_notice_html(
        UserId::from(who.id),
        &escape_html(&who.full_name()),
        username.as_deref(),
    )
}

/// A message from a stranger: the refusal, at most once a day in this chat, posted (see
/// [`replies`]) as the burst's one message; no LLM call.
pub(crate) async fn refuse_stranger(
    deps: Deps,
    strangers: Arc<Strangers>,
    msg: Message,
) -> HandlerResult {
    let Deps { app, tg } = &deps;
    let Some(user) = msg.from.as_ref() else {
        return Ok(());
    };
    let (id, chat) = (UserId::from(user.id), msg.chat.id);
    let today = chrono::Utc::now().date_naive();
    // Handled: if sled cannot say, the stranger is told: a repeated refusal beats a silent bot.
    let first = app
        .store()
        .people()
        .first_refusal_on(id, crate::ids::ChatId::from(chat), today)
        .unwrap_or_else(|e| {
            tracing::warn!(user = %id, error = %e, "cannot record a stranger's refusal");
            true
        });
    if !first {
        tracing::debug!(
            user = %id,
            chat = chat.0,
            "stranger already refused today; silent"
        );
        return Ok(());
    }
    tracing::info!(
        user = %id,
        chat = chat.0,
        "refused a user who is not allowed"
    );
    let to = handlers::conversation_of(&msg);
    if !strangers
        .0
        .add(to, BURST, Instant::now(), |refused| refused.add(id))
    {
        return Ok(());
    }
    let access = &app.config().access;
    let button = access.request_button && !access.admins.is_empty();
    let poster = tg.clone();
    app.reply(to, async move {
        let render = |refused: &RefusedStrangers| match refused.ids.as_slice() {
            [id] => {
                let markup = button
                    .then(|| {
                        keyboards::button(texts::REQUEST_ACCESS_BUTTON, &Action::RequestAccess(*id))
                    })
                    .flatten()
                    .map(|b| InlineKeyboardMarkup::new([[b]]));
                (texts::refusal_html(*id, markup.is_some()), markup)
            }
            _ => (refusals_html(refused), None),
        };
        replies::post_burst(&poster, to, &strangers.0, &to, render).await;
    });
    Ok(())
}

/// "Request access": checked on the server (setting on, the presser is the stranger the
/// button names), then the admins are told once, and the refusal says the request was sent.
pub(crate) async fn request_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    named: UserId,
) -> HandlerResult {
    let Deps { app, tg } = &deps;
    let presser = &query.from;
    // The toast, whether the request is (now) with the admins, and whether this press made it.
    let (toast, sent, first) = if !app.config().access.request_button || named.0 != presser.id.0 {
        tracing::info!(user = presser.id.0, %named, data = ?query.data, "refused an access request button");
        (texts::ACCESS_BUTTON_INVALID, false, false)
    } else if role != Role::Stranger {
        (texts::ACCESS_ALREADY, false, false)
    } else {
        let now = chrono::Utc::now().timestamp();
        match app.store().people().claim_access_request(named, now) {
            Ok(true) => (texts::ACCESS_REQUEST_SENT, true, true),
            Ok(false) => (texts::ACCESS_REQUEST_ALREADY_SENT, true, false),
            Err(e) => {
                tracing::warn!(user = %named, error = %e, "cannot record an access request");
                (texts::ACCESS_REQUEST_FAILED, false, false)
            }
        }
    };
    tg.answer_press(&query, toast).await?;
    if first {
        notify_admins(&deps, presser);
    }
    // Only the refusal that carries this very button is edited, not any message a forged
    // press names.
    let refusal = query.message.as_ref().filter(|message| {
        let data = query.data.as_deref().unwrap_or_default();
        message
            .regular_message()
            .and_then(|m| m.reply_markup())
            .is_some_and(|markup| keyboards::carries(markup, data))
    });
    if let (true, Some(message)) = (sent, refusal) {
        let at = Conversation::new(crate::ids::ChatId::from(message.chat().id), None);
        let html = texts::request_sent_html(named);
        let what = "mark an access request as sent";
        replies::edit(&deps, at, message.id(), html, None, what);
    }
    Ok(())
}

/// Tells every admin (in their private chat) who asks for access. Telegram refuses a private
/// chat the admin never opened; the log keeps the request.
fn notify_admins(deps: &Deps, who: &User) {
    tracing::info!(user = who.id.0, "a stranger asks for access");
    let html = admin_notice_html(who);
    for admin in &deps.app.config().access.admins {
        let Some(chat) = admin.private_chat() else {
            continue;
        };
        replies::html(deps, Conversation::new(chat, None), html.clone(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_strangers_lists_every_id_up_to_a_cap() {
        let mut refused = RefusedStrangers::default();
        for id in 0..LISTED as u64 + 2 {
            refused.add(UserId(1000 + id));
        }
        let html = refusals_html(&refused);
        assert!(
            html.contains("<code>1000</code>, <code>1001</code>"),
            "{html}"
        );
        assert!(html.ends_with(&format!("<code>{}</code> and 2 more.", 999 + LISTED)));
        assert!(html.contains("ask the bot's owner to add your Telegram user id"));
        assert!(
            !html.contains("Request access"),
            "no button to mention: {html}"
        );
    }

    #[test]
    fn admins_get_the_name_escaped_and_the_id_to_copy() {
        let user = |json: serde_json::Value| -> User { serde_json::from_value(json).unwrap() };
        let cases = [
            (
                "with a username",
                user(
                    serde_json::json!({"id": 666, "is_bot": false, "first_name": "Eve <3",
                    "username": "eve_x"}),
                ),
                "Eve &lt;3 (@eve_x) asks",
            ),
            (
                "without",
                user(serde_json::json!({"id": 666, "is_bot": false, "first_name": "Mallory"})),
                "Mallory asks",
            ),
        ];
        for (name, who, says) in cases {
            let html = admin_notice_html(&who);
            assert!(html.contains(says), "{name}: {html}");
            assert!(html.contains("<code>666</code>"), "{name}: {html}");
        }
    }
}
