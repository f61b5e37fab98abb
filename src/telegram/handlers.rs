//! The endpoints of the schema: plain async functions that take their dependencies.
//!
//! Handlers return quickly: a text message is queued as a turn in its chat's lane and the
//! handler returns, so `/cancel` and callback presses are never stuck behind a running turn.
//! Every permission is checked here, on the server, for commands and callbacks alike.

use std::sync::Arc;

use teloxide::prelude::*;
use teloxide::types::Me;
use teloxide::utils::command::BotCommands;

use super::callback_data::{decode_action, decode_callback};
use super::render::escape_html;
use super::send::{edit_keyboard, notify, send_html};
use super::{actions, keyboards, media, tool_list};
use crate::app::App;
use crate::config::Role;
use crate::store::UsageTotals;
use crate::{options, turn};

type HandlerResult = anyhow::Result<()>;

/// Every command. Who may use which is decided by [`Command::allowed`], not by the client.
#[derive(BotCommands, Clone, Debug, PartialEq)]
#[command(rename_rule = "lowercase")]
pub enum Command {
    #[command(description = "what this bot is")]
    Start,
    #[command(description = "what this bot can do")]
    Help,
    #[command(description = "forget this chat's conversation")]
    Clear,
    #[command(description = "stop the answer being worked on")]
    Cancel,
    #[command(description = "token usage")]
    Stats,
    #[command(description = "choose the model for this chat (admins)")]
    Model(String),
    #[command(description = "learned heuristics, with forget buttons (admins)")]
    Heuristics,
    #[command(description = "loaded skills and how often each matched (admins)")]
    Skills,
    #[command(description = "tools, their sources and MCP servers' status (admins)")]
    Tools,
}

impl Command {
    /// The least role that may use the command.
    fn min_role(&self) -> Role {
        match self {
            Self::Model(_) | Self::Heuristics | Self::Skills | Self::Tools => Role::Admin,
            _ => Role::User,
        }
    }

    /// The command list a user of `role` sees (in /help and in Telegram's menu).
    pub fn visible_to(role: Role) -> Vec<teloxide::types::BotCommand> {
        Self::bot_commands()
            .into_iter()
            .filter(|c| Self::parse(&c.command, "").is_ok_and(|cmd| cmd.min_role() <= role))
            .collect()
    }
}

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

/// A user who is not on the allow-list: one short reply with their id, and no LLM call.
pub async fn refuse_stranger(bot: Bot, app: Arc<App>, msg: Message) -> HandlerResult {
    let Some(user) = msg.from.as_ref() else {
        return Ok(());
    };
    tracing::info!(
        user = user.id.0,
        chat = msg.chat.id.0,
        "refused a user who is not allowed"
    );
    let text = format!(
        "Sorry, this bot is private. Your Telegram user id is {}. \
         To let you in, the owner adds it to HEURIST_ALLOWED_USERS and restarts the bot.",
        user.id.0
    );
    notify(&bot, &app.send_policy, msg.chat.id, &text).await;
    Ok(())
}

pub async fn command(
    bot: Bot,
    app: Arc<App>,
    msg: Message,
    role: Role,
    cmd: Command,
) -> HandlerResult {
    let chat = msg.chat.id;
    if cmd.min_role() > role {
        tracing::info!(user = ?msg.from.as_ref().map(|u| u.id.0), command = ?cmd, "refused a command for admins");
        notify(
            &bot,
            &app.send_policy,
            chat,
            "Sorry, only the bot's admins can do that.",
        )
        .await;
        return Ok(());
    }
    match cmd {
        Command::Start | Command::Help => {
            notify(&bot, &app.send_policy, chat, &help_text(role)).await;
        }
        Command::Clear => {
            let text = actions::clear(&app, chat);
            notify(&bot, &app.send_policy, chat, text).await;
        }
        Command::Cancel => {
            let text = if turn::cancel(&app, chat) {
                "Stopped. Nothing of that request was kept."
            } else {
                "Nothing is running."
            };
            notify(&bot, &app.send_policy, chat, text).await;
        }
        Command::Stats => {
            notify(&bot, &app.send_policy, chat, &stats_text(&app, chat, role)).await;
        }
        Command::Model(id) => model_command(&bot, &app, chat, id.trim()).await?,
        Command::Heuristics => {
            let markup = actions::forget_keyboard(&app);
            send_html(
                &bot,
                &app.send_policy,
                chat,
                &heuristics_html(&app),
                Some(markup),
            )
            .await?;
        }
        Command::Skills => {
            notify(&bot, &app.send_policy, chat, &skills_text(&app)).await;
        }
        Command::Tools => {
            let catalog = app.agent.tools().catalog();
            for part in tool_list::render(&catalog, chrono::Utc::now()) {
                notify(&bot, &app.send_policy, chat, &part).await;
            }
        }
    }
    Ok(())
}

/// `/model`: the model keyboard; `/model <id>`: switch directly.
async fn model_command(bot: &Bot, app: &App, chat: ChatId, id: &str) -> HandlerResult {
    if id.is_empty() {
        let current = app.model_for(chat.0).id;
        let markup = keyboards::models(&app.config.models, &current);
        let text = format!(
            "Model for this chat: <b>{}</b>. Choose another:",
            escape_html(&current)
        );
        send_html(bot, &app.send_policy, chat, &text, Some(markup)).await?;
        return Ok(());
    }
    let text = match actions::set_model(app, chat, id) {
        Ok(model) => format!("Model for this chat: {model}"),
        Err(e) => e.to_string(),
    };
    notify(bot, &app.send_policy, chat, &text).await;
    Ok(())
}

/// Characters of each heuristic `/heuristics` shows: with at most [`actions::MAX_LISTED`]
/// entries, the list always fits one Telegram message.
const LISTED_TEXT_CHARS: usize = 150;

/// `/heuristics`: per skill (general first), ranked as injected, with confidence and uses.
fn heuristics_html(app: &App) -> String {
    let mut all = app.store.heuristics();
    all.truncate(actions::MAX_LISTED);
    if all.is_empty() {
        return "No heuristics learned yet.".to_string();
    }
    crate::learning::heuristics::rank(&mut all);
    all.sort_by(|a, b| a.skill.cmp(&b.skill));
    let mut html = String::from("<b>Learned heuristics</b> (confidence, uses)\n");
    let mut current: Option<Option<String>> = None;
    for h in &all {
        if current.as_ref() != Some(&h.skill) {
            let title = h.skill.as_deref().unwrap_or("general");
            html.push_str(&format!("\n<b>{}</b>\n", escape_html(title)));
            current = Some(h.skill.clone());
        }
        html.push_str(&format!(
            "#{} [{:.2}, {}×] {}\n",
            h.id,
            h.confidence,
            h.uses,
            escape_html(&keyboards::shorten(&h.text, LISTED_TEXT_CHARS))
        ));
    }
    html
}

/// `/skills`: what is loaded and how often each skill matched a message.
fn skills_text(app: &App) -> String {
    let skills = app.learning.skills();
    if skills.is_empty() {
        return format!(
            "No skills loaded (folder: {}).",
            app.config.learning.skills_dir.display()
        );
    }
    let mut text = String::from("Skills (times matched):\n");
    for skill in skills {
        text.push_str(&format!(
            "• {} ({}): {}\n",
            skill.name,
            app.store.skill_matches(&skill.name),
            skill.description
        ));
    }
    text
}

fn help_text(role: Role) -> String {
    let commands: String = Command::visible_to(role)
        .iter()
        .map(|c| format!("{} — {}\n", c.command, c.description))
        .collect();
    format!(
        "I am Heurist, an AI assistant. Write to me and I answer, using tools when they help \
         (the current time, reading public web pages). Tap a suggested option under an answer \
         instead of typing. In groups, mention me or reply to my messages.\n\n{commands}"
    )
}

fn stats_text(app: &App, chat: ChatId, role: Role) -> String {
    fn lines(rows: Vec<(String, UsageTotals)>) -> String {
        if rows.is_empty() {
            return "  nothing yet\n".to_string();
        }
        rows.iter()
            .map(|(model, t)| {
                format!(
                    "  {model}: {} turns, {} calls; tokens {} prompt ({} cached), {} completion\n",
                    t.turns, t.calls, t.prompt_tokens, t.cached_tokens, t.completion_tokens
                )
            })
            .collect()
    }
    let mut text = format!("This chat:\n{}", lines(app.store.usage(Some(chat.0))));
    if role == Role::Admin {
        text.push_str(&format!("\nWhole bot:\n{}", lines(app.store.usage(None))));
    }
    text
}

/// A text message from an allowed user: queued as a turn behind the chat's earlier ones.
pub async fn text(
    bot: Bot,
    app: Arc<App>,
    update: Update,
    msg: Message,
    me: Me,
    role: Role,
    text: String,
) -> HandlerResult {
    let chat = msg.chat.id;
    if text.starts_with('/') {
        let reply = "I do not know that command. /help lists what I can do.";
        notify(&bot, &app.send_policy, chat, reply).await;
        return Ok(());
    }
    start_turn(
        &app,
        bot,
        &update,
        &msg,
        role,
        without_mention(&text, &me),
        None,
    )
    .await;
    Ok(())
}

/// Starts a turn for `msg` (within the user's limits, else a friendly refusal).
async fn start_turn(
    app: &Arc<App>,
    bot: Bot,
    update: &Update,
    msg: &Message,
    role: Role,
    text: String,
    image: Option<String>,
) {
    let chat = msg.chat.id;
    let user = msg.from.as_ref().map_or(0, |u| u.id.0);
    if let Some(refusal) = app.limits.check(user, role, &app.store).message() {
        notify(&bot, &app.send_policy, chat, &refusal).await;
        return;
    }
    let input = turn::TurnInput {
        chat,
        user,
        update: Some(update.id.0),
        text,
        image,
    };
    turn::accept(app, bot, input).await;
}

/// Photos go to a vision-capable model as a turn (the caption is the request). Photos for
/// other models, stickers, voice notes and the like get a polite answer and no LLM call.
pub async fn non_text(
    bot: Bot,
    app: Arc<App>,
    update: Update,
    msg: Message,
    me: Me,
    role: Role,
) -> HandlerResult {
    let chat = msg.chat.id;
    let max_bytes = app.config.telegram.max_image_bytes;
    let photo = msg
        .photo()
        .and_then(|sizes| media::pick_photo(sizes, max_bytes));
    let reply = match photo {
        Some(photo) if app.model_for(chat.0).vision => {
            let caption = msg.caption().map(|c| without_mention(c, &me));
            let text = caption.unwrap_or_else(|| "What is in this image?".to_string());
            let image = Some(photo.file.id.0.clone());
            start_turn(&app, bot, &update, &msg, role, text, image).await;
            return Ok(());
        }
        Some(_) => {
            "This chat's model cannot see images. Please describe the picture in text, or ask an \
             admin to switch to a model that can."
        }
        None => "I can only read text messages and photos. Please send your request as text.",
    };
    notify(&bot, &app.send_policy, chat, reply).await;
    Ok(())
}

/// Every button press. Callback data can be forged, so the presser's role and the data are
/// checked here on the server; every query is answered at once.
pub async fn callback(
    bot: Bot,
    app: Arc<App>,
    update: Update,
    query: CallbackQuery,
) -> HandlerResult {
    let data = query.data.clone().unwrap_or_default();
    let role = app.config.role_of(query.from.id.0);
    if role == Role::Stranger {
        tracing::info!(
            user = query.from.id.0,
            "refused a button press from a user who is not allowed"
        );
        bot.answer_callback_query(query.id)
            .text("Sorry, this bot is private.")
            .await?;
        return Ok(());
    }
    if let Some((ticket, label)) = decode_callback(&data) {
        return options::press(app, bot, query, role, update.id.0, ticket, label).await;
    }
    let chat = query.message.as_ref().map(|m| m.chat().id);
    let outcome = match (decode_action(&data), chat) {
        (Some((action, payload)), Some(chat)) => {
            actions::decide(&app, role, chat, &action, &payload)
        }
        _ => actions::Outcome::refuse(actions::EXPIRED),
    };
    if outcome.refused {
        tracing::info!(user = query.from.id.0, %data, toast = %outcome.toast, "button press refused");
    }
    bot.answer_callback_query(query.id)
        .text(outcome.toast)
        .await?;
    if let (Some(markup), Some(message)) = (outcome.keyboard, query.message.as_ref()) {
        let (chat, id) = (message.chat().id, message.id());
        edit_keyboard(
            &bot,
            &app.send_policy,
            chat,
            id,
            markup,
            "update the keyboard",
        )
        .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_only_what_the_role_may_use() {
        let names = |role| {
            Command::visible_to(role)
                .into_iter()
                .map(|c| c.command)
                .collect::<Vec<_>>()
        };
        assert!(!names(Role::User).iter().any(|c| c.contains("model")));
        assert!(names(Role::Admin).iter().any(|c| c.contains("model")));
        assert!(names(Role::User).iter().any(|c| c.contains("cancel")));
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("hey @heurist_bot, hi", "heurist_bot"));
        assert!(mentions("@HEURIST_BOT", "heurist_bot"));
        assert!(!mentions("@heurist_bot2 hi", "heurist_bot"));
        assert!(!mentions("mail me", "heurist_bot"));
    }
}
