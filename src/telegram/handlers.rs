//! The endpoints of the schema: plain async functions that take their dependencies.
//!
//! Handlers return quickly: a text message is queued as a turn in its chat's lane and the
//! handler returns, so `/cancel` and button presses are never stuck behind a running turn.
//! Nor do they wait for a paced send: command replies, notices, refusals and button edits are
//! posted to [`replies`], because teloxide runs a chat's handlers one at a time and its
//! dispatcher waits once a chat's queue is full, so a handler awaiting its chat's pacing would
//! hold every chat's next update. Commands have a rate per user, as turns do.
//! The schema computed the sender's role once; admin-only commands and actions are checked
//! against it here and in [`actions`], on the server, for commands and buttons alike. Every
//! callback query is answered at once, before anything slow.

use std::sync::Arc;

use teloxide::prelude::*;
use teloxide::types::Me;

use super::callback_data::{List, OptionPress};
use super::commands::Command;
use super::keyboards::model_key;
use super::listener::Handling;
use super::outbox::Outbox;
use super::{keyboards, media, replies, stats, tool_list, views};
use crate::app::App;
use crate::cancel::TurnId;
use crate::config::Role;
use crate::conversation::Conversation;
use crate::limits::Verdict;
use crate::options::{self, Press};
use crate::turn::actions::{self, ADMINS_ONLY, EXPIRED, Outcome, Stop, UNKNOWN_COMMAND};
use crate::turn::{self, Keyboard, Options, Out, TurnInput};

type HandlerResult = anyhow::Result<()>;

/// Whether a message is meant for the bot. Private chats: always. Groups: commands (without
/// another bot's `@suffix`), messages that mention the bot, and replies to its messages.
pub fn addressed(msg: &Message, me: &Me) -> bool {
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
pub fn conversation_of(msg: &Message) -> Conversation {
    let topic = msg.thread_id.filter(|_| msg.is_topic_message);
    Conversation::new(msg.chat.id.0, topic.map(|thread| thread.0.0))
}

/// The conversation a button was pressed in: its message's (none for inline messages).
pub fn pressed_in(query: &CallbackQuery) -> Option<Conversation> {
    let message = query.message.as_ref()?;
    Some(match message.regular_message() {
        Some(msg) => conversation_of(msg),
        None => Conversation::from(message.chat().id.0),
    })
}

/// The message an answer in `chat` replies to: the one that started it, in groups (negative
/// ids), so answers stay threaded in a busy group; none in private chats.
fn reply_in_groups(chat: i64, message: i32) -> Option<i32> {
    (chat < 0).then_some(message)
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
fn without_mention(text: &str, me: &Me) -> String {
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

/// A command: within the sender's command rate, its action now and its reply posted (see
/// [`replies`]), so the handler returns without waiting for a paced send.
pub async fn command(
    app: Arc<App>,
    tg: Arc<Outbox>,
    msg: Message,
    role: Role,
    cmd: Command,
) -> HandlerResult {
    let chat = conversation_of(&msg);
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    if let Verdict::TooFast(wait) = app.limits().check_command(user, role) {
        replies::refuse_too_fast(&app, &tg, chat, user, wait);
        return Ok(());
    }
    if cmd.min_role() > role {
        tracing::info!(user, command = ?cmd, "refused a command for admins");
        replies::notice(&app, &tg, chat, ADMINS_ONLY);
        return Ok(());
    }
    match cmd {
        Command::Start => replies::html(&app, &tg, chat, views::start_html(role), None),
        Command::Help => replies::html(&app, &tg, chat, views::help_html(&app, role), None),
        Command::Clear => {
            let out: Out = tg.clone();
            turn::retire_options(&app, &out, chat);
            replies::notice(&app, &tg, chat, actions::clear(&app, chat));
        }
        Command::Cancel => {
            // Asked before the stop: a live message on screen confirms it itself.
            let live = tg.shows_live(chat);
            match actions::cancel(&app, chat, None) {
                Stop::Stopped if live => {}
                stop => replies::notice(&app, &tg, chat, stop.reply()),
            }
        }
        Command::Stats => {
            let html = stats::stats_html(&stats::gather(&app, chat.chat, user, role).await?);
            replies::html(&app, &tg, chat, html, None);
        }
        Command::Model(id) => model_command(&app, &tg, chat, id.trim()),
        Command::Heuristics(which) => {
            let pending = which.trim().eq_ignore_ascii_case("pending");
            let page = views::heuristics_page(&app, pending, 0);
            replies::html(&app, &tg, chat, page.html, Some(page.keyboard));
        }
        Command::Skills => {
            let page = views::skills_page(&app, 0);
            replies::html(&app, &tg, chat, page.html, Some(page.keyboard));
        }
        Command::Tools => {
            let catalog = app.agent().tools().catalog();
            for part in tool_list::render(&catalog, chrono::Utc::now()) {
                replies::notice(&app, &tg, chat, part);
            }
        }
    }
    Ok(())
}

/// `/model`: the model keyboard; `/model <id>`: switch directly.
fn model_command(app: &App, tg: &Arc<Outbox>, chat: Conversation, id: &str) {
    if id.is_empty() {
        let current = app.model_for(chat).id;
        let markup = keyboards::markup(&actions::models_keyboard(app, &current));
        let text = views::model_header_html(&current);
        replies::html(app, tg, chat, text, Some(markup));
        return;
    }
    let text = match actions::set_model(app, chat, id) {
        Ok(model) => format!("Model for this chat: {model}"),
        Err(e) => e.to_string(),
    };
    replies::notice(app, tg, chat, text);
}

/// A text message from an allowed user: queued as a turn behind the chat's earlier ones.
// An endpoint takes each dependency the schema gives it as a parameter.
#[allow(clippy::too_many_arguments)]
pub async fn text(
    app: Arc<App>,
    tg: Arc<Outbox>,
    update: Update,
    msg: Message,
    me: Me,
    role: Role,
    text: String,
    handling: Handling,
) -> HandlerResult {
    if text.starts_with('/') {
        handling.done();
        let (chat, user) = (
            conversation_of(&msg),
            msg.from.as_ref().map_or(0, |u| u.id.0),
        );
        match app.limits().check_command(user, role) {
            Verdict::TooFast(wait) => replies::refuse_too_fast(&app, &tg, chat, user, wait),
            _ => replies::notice(&app, &tg, chat, UNKNOWN_COMMAND),
        }
        return Ok(());
    }
    let text = without_mention(&text, &me);
    start_turn(&app, &tg, &update, &msg, role, text, None, &handling).await;
    Ok(())
}

/// Photos go to a vision-capable model as a turn (the caption is the request). For other
/// models a photo's caption is answered as text, after a note that the image was not seen
/// (without a caption, only the note). Stickers, voice notes and the like get a polite answer
/// and no LLM call.
pub async fn non_text(
    app: Arc<App>,
    tg: Arc<Outbox>,
    update: Update,
    msg: Message,
    me: Me,
    role: Role,
    handling: Handling,
) -> HandlerResult {
    let chat = conversation_of(&msg);
    let max_bytes = app.config().telegram.max_image_bytes;
    let photo = msg
        .photo()
        .and_then(|sizes| media::pick_photo(sizes, max_bytes));
    let reply = match photo {
        Some(photo) if app.model_for(chat).vision => {
            let caption = msg.caption().map(|c| without_mention(c, &me));
            let text = caption.unwrap_or_else(|| "What is in this image?".to_string());
            let image = Some(photo.file.id.0.clone());
            start_turn(&app, &tg, &update, &msg, role, text, image, &handling).await;
            return Ok(());
        }
        Some(_) => {
            let caption = msg
                .caption()
                .map(|c| without_mention(c, &me))
                .filter(|c| !c.is_empty());
            let vision: Vec<&str> = app
                .config()
                .models
                .iter()
                .filter(|m| m.vision)
                .map(|m| m.id.as_str())
                .collect();
            let current = app.model_for(chat).id;
            let note = media::unseen_image_note(&current, &vision, caption.is_some());
            if caption.is_some() {
                replies::notice(&app, &tg, chat, note);
            } else {
                rated_notice(&app, &tg, &msg, role, note);
            }
            if let Some(caption) = caption {
                let text = format!("{caption}\n\n{}", media::UNSEEN_PHOTO);
                start_turn(&app, &tg, &update, &msg, role, text, None, &handling).await;
            }
            return Ok(());
        }
        None => "I can only read text messages and photos. Please send your request as text.",
    };
    handling.done();
    rated_notice(&app, &tg, &msg, role, reply.to_string());
    Ok(())
}

/// A notice for a message that starts no turn (a sticker, a photo the model cannot see),
/// within the sender's command rate: a flood of stickers gets one refusal that is edited,
/// not a paced notice each.
fn rated_notice(app: &Arc<App>, tg: &Arc<Outbox>, msg: &Message, role: Role, text: String) {
    let (chat, user) = (
        conversation_of(msg),
        msg.from.as_ref().map_or(0, |u| u.id.0),
    );
    match app.limits().check_command(user, role) {
        Verdict::TooFast(wait) => replies::refuse_too_fast(app, tg, chat, user, wait),
        _ => replies::notice(app, tg, chat, text),
    }
}

/// Starts a turn for `msg` (within the user's limits, else a friendly refusal). Intake is
/// released once the turn is in the inbox, or before a refusal (which records nothing).
#[allow(clippy::too_many_arguments)]
async fn start_turn(
    app: &Arc<App>,
    tg: &Arc<Outbox>,
    update: &Update,
    msg: &Message,
    role: Role,
    text: String,
    image: Option<String>,
    handling: &Handling,
) {
    let chat = conversation_of(msg);
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    match app.limits().check(user, role, app.store()) {
        Verdict::Allowed => {}
        Verdict::TooFast(wait) => {
            handling.done();
            replies::refuse_too_fast(app, tg, chat, user, wait);
            return;
        }
        refused => {
            handling.done();
            replies::notice(app, tg, chat, refused.message().unwrap_or_default());
            return;
        }
    }
    // So `/stats` can name its top users.
    if let Some(from) = msg.from.as_ref()
        && let Err(e) = app.store().people().remember_name(user, &from.full_name())
    {
        tracing::debug!(user, error = %e, "cannot remember a user's name");
    }
    let input = TurnInput {
        chat: chat.chat,
        user,
        update: Some(update.id.0),
        text,
        image,
        topic: chat.topic,
        reply_to: reply_in_groups(chat.chat, msg.id.0),
        forwarded: msg.forward_origin().is_some(),
    };
    let out: Out = tg.clone();
    turn::accept(app, &out, input).await;
    handling.done();
}

/// A button press from a user who is not on the allow-list.
pub async fn refuse_press(bot: Bot, query: CallbackQuery) -> HandlerResult {
    tracing::info!(
        user = query.from.id.0,
        "refused a button press from a user who is not allowed"
    );
    bot.answer_callback_query(query.id)
        .text("Sorry, this bot is private.")
        .await?;
    Ok(())
}

/// A press whose data names nothing live: expired, forged or unknown.
pub async fn expired_press(app: Arc<App>, tg: Arc<Outbox>, query: CallbackQuery) -> HandlerResult {
    answer_press(&app, &tg, &query, Outcome::refuse(EXPIRED)).await
}

/// An option button: checked on the server, then the conversation continues exactly as if
/// the user had typed the option's full label.
// An endpoint takes each dependency the schema gives it as a parameter.
#[allow(clippy::too_many_arguments)]
pub async fn option_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    update: Update,
    query: CallbackQuery,
    role: Role,
    chat: ChatId,
    press: OptionPress,
    handling: Handling,
) -> HandlerResult {
    // A press starts a turn: the same limits as a typed message, checked before the option is
    // used up.
    if refused_press(&app, &tg, &query, role).await? {
        return Ok(());
    }
    let (bot, user) = (tg.bot(), query.from.id.0);
    let decided = options::decide(
        app.store(),
        chat.0,
        &press.ticket,
        press.index,
        &press.label,
        Some(update.id.0),
    )?;
    let (ticket, index) = match decided {
        Press::Continue(ticket, index) => (ticket, index),
        Press::Expired => return answer_press(&app, &tg, &query, Outcome::refuse(EXPIRED)).await,
        Press::Earlier => {
            let refused = Outcome::refuse("That choice belongs to an earlier answer");
            return answer_press(&app, &tg, &query, refused).await;
        }
        Press::AlreadyChosen => {
            let refused = Outcome::refuse("You already chose an option here");
            return answer_press(&app, &tg, &query, refused).await;
        }
    };
    // The option is chosen now: the turn must start whatever Telegram says to the answer (a
    // press re-delivered after a crash has a query too old to answer).
    if let Err(e) = bot.answer_callback_query(query.id).await {
        tracing::warn!(chat = chat.0, error = %e, "cannot answer an option press");
    }
    let label = ticket.labels[index].clone();
    let chosen = Keyboard::Answer {
        options: Options::Chosen(label.clone()),
        vote: turn::vote_on(&app, ticket.feedback.as_deref()),
        feedback: ticket.feedback.clone(),
    };
    let out: Out = tg.clone();
    // In the background: its paced edit must not hold the press's intake (every chat's next
    // update waits for it), and it takes the chat's slot before the turn's first message.
    let marked = out.clone();
    let (mark_chat, mark_message) = (ticket.chat, ticket.message_id);
    app.spawn(async move {
        marked.set_keyboard(mark_chat, mark_message, chosen).await;
    });
    let input = TurnInput {
        chat: ticket.chat,
        user,
        update: Some(update.id.0),
        text: label,
        image: None,
        topic: ticket.topic,
        // In a group, the answer to a press replies to the answer that offered the option.
        reply_to: reply_in_groups(ticket.chat, ticket.message_id),
        // The label's origin is in its conversation's mark (see `ChatState::external`).
        forwarded: false,
    };
    turn::accept(&app, &out, input).await;
    handling.done();
    Ok(())
}

/// A model button (admins): switch the chat to the model whose key the button carries.
pub async fn set_model_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    role: Role,
    chat: Conversation,
    key: String,
) -> HandlerResult {
    let models = &app.config().models;
    let id = models
        .iter()
        .find(|m| model_key(&m.id) == key)
        .map(|m| &m.id);
    let mut outcome = actions::choose_model(&app, role, chat, id.map(String::as_str));
    // The header names the model too: one edit puts the new text and the moved ✓ in place.
    let switched = outcome.keyboard.take().filter(|_| !outcome.refused);
    answer_press(&app, &tg, &query, outcome).await?;
    if let (Some(keyboard), Some(message)) = (switched, query.message.as_ref()) {
        let html = views::model_header_html(&app.model_for(chat).id);
        let markup = Some(keyboards::markup(&keyboard));
        let what = "update the /model message";
        replies::edit(&app, &tg, chat, message.id(), html, markup, what);
    }
    Ok(())
}

/// 🧹 Clear history.
pub async fn clear_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    chat: Conversation,
) -> HandlerResult {
    let out: Out = tg.clone();
    turn::retire_options(&app, &out, chat);
    let outcome = Outcome::done(actions::clear(&app, chat), Some(Keyboard::None));
    answer_press(&app, &tg, &query, outcome).await
}

/// 👍 or 👎 under an answer.
pub async fn feedback_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    at: Conversation,
    (ticket, up): (String, bool),
) -> HandlerResult {
    let outcome = actions::feedback(&app, at, &ticket, up);
    let refused = outcome.refused;
    answer_press(&app, &tg, &query, outcome).await?;
    // The vote shows in the keyboard (the rest of it, options included, stays as it is).
    let message = query.message.as_ref().and_then(|m| m.regular_message());
    if let (false, Some(message)) = (refused, message)
        && let Some(markup) = message.reply_markup()
    {
        let marked = keyboards::with_vote(markup, &ticket, up);
        replies::markup(&app, &tg, at.chat, message.id, marked, "show the vote");
    }
    Ok(())
}

/// ◀ ▶ under an admin list.
pub async fn page_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    role: Role,
    (list, page): (List, u32),
) -> HandlerResult {
    let outcome = if role < Role::Admin {
        Outcome::refuse(ADMINS_ONLY)
    } else {
        Outcome::done("", None)
    };
    review_press(&app, &tg, &query, outcome, list, page).await
}

/// ✅ Approve under `/heuristics` (admins).
pub async fn approve_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    role: Role,
    (id, list, page): (u64, List, u32),
) -> HandlerResult {
    let outcome = actions::approve(&app, role, id);
    review_press(&app, &tg, &query, outcome, list, page).await
}

/// 🗑 Forget under `/heuristics` (admins).
pub async fn forget_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    role: Role,
    (id, list, page): (u64, List, u32),
) -> HandlerResult {
    let outcome = actions::forget(&app, role, id);
    review_press(&app, &tg, &query, outcome, list, page).await
}

/// Answers a press on an admin list, then (unless it was refused) edits the list's message
/// into page `page` as it is now, so the message always shows the current state.
async fn review_press(
    app: &App,
    tg: &Arc<Outbox>,
    query: &CallbackQuery,
    outcome: Outcome,
    list: List,
    page: u32,
) -> HandlerResult {
    let refused = outcome.refused;
    answer_press(app, tg, query, outcome).await?;
    if refused {
        return Ok(());
    }
    if let Some(message) = query.message.as_ref() {
        let page = views::list_page(app, list, page as usize);
        let at = pressed_in(query).unwrap_or(Conversation::from(message.chat().id.0));
        let markup = Some(page.keyboard);
        replies::edit(
            app,
            tg,
            at,
            message.id(),
            page.html,
            markup,
            "update an admin list",
        );
    }
    Ok(())
}

/// ⏹ Stop under a streaming answer: stops its own turn only, and only before that turn's
/// answer is kept. A ⏹ still on screen after its turn is over (a final edit that failed, a
/// crash) is taken away.
pub async fn stop_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    query: CallbackQuery,
    chat: Conversation,
    turn: Option<TurnId>,
) -> HandlerResult {
    // A ⏹ without an id was left by a version before turns had ids: its turn is over.
    let stop = match turn {
        Some(turn) => actions::cancel(&app, chat, Some(turn)),
        None => Stop::Over,
    };
    let dead = stop == Stop::Over
        && query
            .message
            .as_ref()
            .and_then(|m| m.regular_message())
            .and_then(|m| m.reply_markup())
            .is_some_and(keyboards::only_stop);
    let outcome = match stop {
        Stop::Stopped => Outcome::done(stop.toast(), None),
        _ => Outcome {
            keyboard: dead.then_some(Keyboard::None),
            ..Outcome::refuse(stop.toast())
        },
    };
    answer_press(&app, &tg, &query, outcome).await
}

/// 🔁 Retry under a failed answer: within the presser's limits (checked before the retry is
/// used up), the failed message runs again as a new turn, once; the button goes.
// An endpoint takes each dependency the schema gives it as a parameter.
#[allow(clippy::too_many_arguments)]
pub async fn retry_pressed(
    app: Arc<App>,
    tg: Arc<Outbox>,
    update: Update,
    query: CallbackQuery,
    role: Role,
    chat: Conversation,
    ticket: String,
    handling: Handling,
) -> HandlerResult {
    if refused_press(&app, &tg, &query, role).await? {
        return Ok(());
    }
    let user = query.from.id.0;
    let retried = match turn::retry::claim(&app, chat.chat, user, &ticket, update.id.0) {
        Ok(retried) => retried,
        Err(toast) => return answer_press(&app, &tg, &query, Outcome::refuse(toast)).await,
    };
    // Claimed: the message runs whatever becomes of the toast, and is in the inbox before the
    // paced edit that takes the button away (which then holds no chat's intake).
    let input = TurnInput {
        chat: retried.chat,
        user,
        update: Some(update.id.0),
        text: retried.text,
        image: retried.image,
        // Pressed under the failed answer, in its topic: the retry answers there, replying to it.
        topic: retried.topic.or(chat.topic),
        reply_to: query
            .message
            .as_ref()
            .and_then(|m| reply_in_groups(retried.chat, m.id().0)),
        // A forwarded message's failed turn marked its conversation (see `ChatState::external`).
        forwarded: false,
    };
    let out: Out = tg.clone();
    turn::accept(&app, &out, input).await;
    handling.done();
    let outcome = Outcome::done("Retrying…", Some(Keyboard::None));
    if let Err(e) = answer_press(&app, &tg, &query, outcome).await {
        tracing::warn!(%chat, error = %e, "cannot answer a retry press");
    }
    Ok(())
}

/// A press that would start a turn, checked against the presser's limits (before anything is
/// used up); `true` if refused, with the refusal as the press's toast.
async fn refused_press(
    app: &App,
    tg: &Outbox,
    query: &CallbackQuery,
    role: Role,
) -> anyhow::Result<bool> {
    let limited = app.limits().check(query.from.id.0, role, app.store());
    let Some(refusal) = limited.message() else {
        return Ok(false);
    };
    tg.bot()
        .answer_callback_query(query.id.clone())
        .text(refusal)
        .await?;
    Ok(true)
}

/// The mark of an option already chosen.
pub async fn chosen_pressed(app: Arc<App>, tg: Arc<Outbox>, query: CallbackQuery) -> HandlerResult {
    answer_press(&app, &tg, &query, Outcome::done("Already chosen", None)).await
}

/// Answers the callback query with the outcome's toast, then posts its keyboard in place of
/// the pressed one.
async fn answer_press(
    app: &App,
    tg: &Arc<Outbox>,
    query: &CallbackQuery,
    outcome: Outcome,
) -> HandlerResult {
    if outcome.refused {
        tracing::info!(user = query.from.id.0, data = ?query.data, toast = %outcome.toast, "button press refused");
    }
    let answer = tg.bot().answer_callback_query(query.id.clone());
    if outcome.toast.is_empty() {
        answer.await?;
    } else {
        answer.text(outcome.toast).await?;
    }
    if let (Some(keyboard), Some(message)) = (outcome.keyboard, query.message.as_ref()) {
        replies::keyboard(app, tg, message.chat().id.0, message.id().0, keyboard);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
                conversation: Conversation::from(7),
            },
            Case {
                name: "a reply thread in a plain group is no topic",
                chat: group,
                extra: serde_json::json!({"message_thread_id": 3}),
                conversation: Conversation::from(-5),
            },
            Case {
                name: "a forum's General topic",
                chat: forum.clone(),
                extra: serde_json::json!({}),
                conversation: Conversation::from(-5),
            },
            Case {
                name: "a forum topic",
                chat: forum,
                extra: serde_json::json!({"message_thread_id": 3, "is_topic_message": true}),
                conversation: Conversation::new(-5, Some(3)),
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
