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
use super::keyboards;
use super::outbox::Outbox;
use super::render::escape_html;
use super::replies;
use crate::app::App;
use crate::burst::Bursts;
use crate::config::Role;
use crate::conversation::Conversation;

/// How long after a stranger's refusal the next stranger refused in the conversation is added
/// to the same message.
const BURST: Duration = Duration::from_secs(60);

/// The most ids one refusal lists; more are counted.
const LISTED: usize = 100;

/// The strangers refused lately in each conversation, shown as one message per burst.
#[derive(Default)]
pub struct Strangers(Bursts<Conversation, Refused>);

/// The strangers a burst refused: the first [`LISTED`] ids, and how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused {
    ids: Vec<u64>,
    more: usize,
}

impl Refused {
    fn add(&mut self, user: u64) {
        if self.ids.len() < LISTED {
            self.ids.push(user);
        } else {
            self.more += 1;
        }
    }
}

type HandlerResult = anyhow::Result<()>;

/// The refusal a stranger gets, with their id; `button` adds the line about the button.
pub(crate) fn refusal_html(user: u64, button: bool) -> String {
    let mut html = format!(
        "Sorry, this bot is private. Your Telegram user id is <code>{user}</code>: to get in, \
         ask the bot's owner to add your id."
    );
    if button {
        html.push_str("\nOr tap <b>Request access</b> to send the owner your name and id.");
    }
    html
}

/// The refusal of several strangers at once (a burst in a group): every id, no button.
pub(crate) fn refusals_html(refused: &Refused) -> String {
    let ids: Vec<String> = refused
        .ids
        .iter()
        .map(|id| format!("<code>{id}</code>"))
        .collect();
    let mut html = format!(
        "Sorry, this bot is private. To get in, ask the bot's owner to add your Telegram user \
         id: {}",
        ids.join(", ")
    );
    if refused.more > 0 {
        html.push_str(&format!(" and {} more", refused.more));
    }
    html.push('.');
    html
}

/// The refusal once its request went to the admins.
pub(crate) fn request_sent_html(user: u64) -> String {
    format!(
        "Sorry, this bot is private. Your Telegram user id is <code>{user}</code>.\n\
         ✅ Request sent: the bot's owner has your name and id."
    )
}

/// What the admins are told of a request: who, with the id to copy, and what to do.
pub(crate) fn admin_notice_html(user: u64, name: &str, username: Option<&str>) -> String {
    let handle = username.map_or_else(String::new, |u| format!(" (@{})", escape_html(u)));
    format!(
        "🔑 <b>Access request</b>\n{}{handle} asks to use the bot. Their id: <code>{user}</code>\n\
         To let them in, add the id to <code>access.allowed_users</code> (or \
         <code>HEURIST_ALLOWED_USERS</code>) and restart the bot.",
        escape_html(name)
    )
}

/// A message from a stranger: the refusal, at most once a day in this chat, posted (see
/// [`replies`]) as the burst's one message; no LLM call.
pub async fn refuse_stranger(
    app: Arc<App>,
    tg: Arc<Outbox>,
    strangers: Arc<Strangers>,
    msg: Message,
) -> HandlerResult {
    let Some(user) = msg.from.as_ref() else {
        return Ok(());
    };
    let (id, chat) = (user.id.0, msg.chat.id);
    let today = chrono::Utc::now().date_naive();
    // If sled cannot say, the stranger is told: a repeated refusal beats a silent bot.
    let first = app
        .store()
        .people()
        .first_refusal_on(id, chat.0, today)
        .unwrap_or_else(|e| {
            tracing::warn!(user = id, error = %e, "cannot record a stranger's refusal");
            true
        });
    if !first {
        tracing::debug!(
            user = id,
            chat = chat.0,
            "stranger already refused today; silent"
        );
        return Ok(());
    }
    tracing::info!(
        user = id,
        chat = chat.0,
        "refused a user who is not allowed"
    );
    let to = super::handlers::conversation_of(&msg);
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
        let render = |refused: &Refused| match refused.ids.as_slice() {
            [id] => {
                let markup = button
                    .then(|| keyboards::button("🔑 Request access", &Action::RequestAccess(*id)))
                    .flatten()
                    .map(|b| InlineKeyboardMarkup::new([[b]]));
                (refusal_html(*id, markup.is_some()), markup)
            }
            _ => (refusals_html(refused), None),
        };
        replies::post_burst(&poster, to, &strangers.0, &to, render).await;
    });
    Ok(())
}

/// "Request access": checked on the server (setting on, the presser is the stranger the
/// button names), then the admins are told once, and the refusal says the request was sent.
pub async fn request_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    role: Role,
    named: u64,
) -> HandlerResult {
    let presser = &query.from;
    // The toast, whether the request is (now) with the admins, and whether this press made it.
    let (toast, sent, first) = if !app.config().access.request_button || named != presser.id.0 {
        tracing::info!(user = presser.id.0, named, data = ?query.data, "refused an access request button");
        ("That button is not valid", false, false)
    } else if role != Role::Stranger {
        ("You can use the bot already", false, false)
    } else {
        let now = chrono::Utc::now().timestamp();
        match app.store().people().claim_access_request(named, now) {
            Ok(true) => ("Request sent", true, true),
            Ok(false) => ("Request already sent", true, false),
            Err(e) => {
                tracing::warn!(user = named, error = %e, "cannot record an access request");
                (
                    "Cannot send the request now; please try again later",
                    false,
                    false,
                )
            }
        }
    };
    tg.bot()
        .answer_callback_query(query.id.clone())
        .text(toast)
        .await?;
    if first {
        notify_admins(&app, &tg, presser);
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
        let at = Conversation::from(message.chat().id.0);
        let html = request_sent_html(named);
        let what = "mark an access request as sent";
        replies::edit(&app, &tg, at, message.id(), html, None, what);
    }
    Ok(())
}

/// Tells every admin (in their private chat) who asks for access. Telegram refuses a private
/// chat the admin never opened; the log keeps the request.
fn notify_admins(app: &App, tg: &Arc<Outbox>, who: &User) {
    tracing::info!(user = who.id.0, "a stranger asks for access");
    let html = admin_notice_html(who.id.0, &who.full_name(), who.username.as_deref());
    for &admin in &app.config().access.admins {
        replies::html(
            app,
            tg,
            Conversation::from(admin as i64),
            html.clone(),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_texts_carry_the_id_and_no_jargon() {
        let cases = [
            (
                "refusal",
                refusal_html(666, false),
                "ask the bot's owner to add your id.",
                false,
            ),
            (
                "refusal with the button",
                refusal_html(666, true),
                "tap <b>Request access</b>",
                true,
            ),
            (
                "request sent",
                request_sent_html(666),
                "✅ Request sent",
                false,
            ),
        ];
        for (name, html, says, mentions_button) in cases {
            assert!(html.contains("<code>666</code>"), "{name}: {html}");
            assert!(html.contains(says), "{name}: {html}");
            assert_eq!(
                html.contains("Request access"),
                mentions_button,
                "{name}: {html}"
            );
            assert!(!html.contains("HEURIST_"), "{name}: {html}");
        }
    }

    #[test]
    fn a_burst_of_strangers_lists_every_id_up_to_a_cap() {
        let mut refused = Refused::default();
        for id in 0..LISTED as u64 + 2 {
            refused.add(1000 + id);
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
        let cases = [
            (
                "with a username",
                "Eve <3",
                Some("eve_x"),
                "Eve &lt;3 (@eve_x) asks",
            ),
            ("without", "Mallory", None, "Mallory asks"),
        ];
        for (name, full_name, username, says) in cases {
            let html = admin_notice_html(666, full_name, username);
            assert!(html.contains(says), "{name}: {html}");
            assert!(html.contains("<code>666</code>"), "{name}: {html}");
        }
    }
}
