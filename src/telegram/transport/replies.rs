//! Replies that are not turns (command replies, notices, refusals, button edits), sent off the
//! dispatcher.
//!
//! Every send or edit is paced (one a second in a private chat, one every three seconds in a
//! group, see [`super::limiter`]), so a handler that awaited its reply would hold its chat's
//! worker, and once that worker's queue is full teloxide's dispatcher waits for it: every
//! chat's next update would wait behind one chat's flood. So handlers only post a reply here
//! and return; [`crate::app::App::reply`] sends a conversation's replies in the order they were
//! posted. A burst of refusals in one place is one message, edited by one poster that yields
//! to the chat's other messages ([`post_burst`]).

use std::time::Duration;

use teloxide::types::{InlineKeyboardMarkup, MessageId};

use super::outbox::Outbox;
use crate::burst::Bursts;
use crate::conversation::Conversation;
use crate::telegram::handlers::Deps;
use crate::telegram::render::escape_html;
use crate::turn::{Keyboard, Messenger};

/// Posts an HTML message to `to`.
pub(crate) fn html(
    deps: &Deps,
    to: Conversation,
    html: String,
    markup: Option<InlineKeyboardMarkup>,
) {
    let tg = deps.tg.clone();
    deps.app.reply(to, async move {
        if let Err(e) = tg.send_html(to, &html, markup).await {
            tracing::warn!(%to, error = %e, "cannot send a reply");
        }
    });
}

/// Posts a short plain notice to `to`.
pub(crate) fn notice(deps: &Deps, to: Conversation, text: impl Into<String>) {
    let (tg, text) = (deps.tg.clone(), text.into());
    deps.app
        .reply(to, async move { tg.notice(to, &text).await });
}

/// Posts an edit of message `id` in `to` into `html` with `markup`; `what` names it in the log.
pub(crate) fn edit(
    deps: &Deps,
    to: Conversation,
    id: MessageId,
    html: String,
    markup: Option<InlineKeyboardMarkup>,
    what: &'static str,
) {
    let tg = deps.tg.clone();
    deps.app.reply(to, async move {
        if let Err(e) = tg.edit_html(to, id, &html, markup).await {
            tracing::warn!(%to, error = %e, "cannot {what}");
        }
    });
}

/// Posts `keyboard` in place of message `message`'s in `chat`.
pub(crate) fn keyboard(deps: &Deps, chat: crate::ids::ChatId, message: i32, keyboard: Keyboard) {
    let tg = deps.tg.clone();
    deps.app.reply(Conversation::new(chat, None), async move {
        tg.set_keyboard(chat, message, keyboard).await;
    });
}

/// Posts `markup` in place of message `message`'s keyboard in `chat`; `what` names it in the log.
pub(crate) fn markup(
    deps: &Deps,
    chat: crate::ids::ChatId,
    message: MessageId,
    markup: InlineKeyboardMarkup,
    what: &'static str,
) {
    let tg = deps.tg.clone();
    deps.app.reply(Conversation::new(chat, None), async move {
        let chat = teloxide::types::ChatId::from(chat);
        tg.edit_keyboard(chat, message, markup, what).await;
    });
}

/// A message `user` sent to `chat` over their rate (turns or commands), with `wait` until the
/// window frees: counted into the burst's one refusal (see [`crate::budget::limits`]).
pub(crate) fn refuse_too_fast(
    deps: &Deps,
    chat: Conversation,
    user: crate::ids::UserId,
    wait: Duration,
) {
    let Deps { app, tg } = deps;
    if !app.limits().refusal(chat, user, wait) {
        return;
    }
    let (poster, tg) = (app.clone(), tg.clone());
    app.reply(chat, async move {
        let render =
            |refused: &crate::budget::limits::Refused| (escape_html(&refused.text()), None);
        post_burst(&tg, chat, poster.limits().bursts(), &(chat, user), render).await;
    });
}

/// The poster of `key`'s burst in `to`: sends the burst's message, then edits it until it
/// shows the burst's latest state. An edit waits until nothing else of the chat waits for its
/// slot, so a burst never delays the chat's other messages (an answer to a member of a group
/// that strangers flood goes first).
pub(crate) async fn post_burst<K, S>(
    tg: &Outbox,
    to: Conversation,
    bursts: &Bursts<K, S>,
    key: &K,
    render: impl Fn(&S) -> (String, Option<InlineKeyboardMarkup>),
) where
    K: std::hash::Hash + Eq + Clone,
    S: Clone + Default,
{
    while let Some(post) = bursts.next(key) {
        let (html, markup) = render(&post.state);
        let shown = match post.message {
            None => tg.send_html(to, &html, markup).await.map(|m| m.id),
            Some(message) => {
                tg.quiet(to.chat).await;
                tg.edit_html(to, MessageId(message), &html, markup).await
            }
        };
        match shown {
            Ok(id) => bursts.shown(key, post.revision, Some(id.0)),
            Err(e) => {
                tracing::warn!(%to, error = %e, "could not show a refusal");
                bursts.shown(key, post.revision, None);
            }
        }
    }
}
