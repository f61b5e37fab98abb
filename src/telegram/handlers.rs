//! The endpoints of the schema: plain async functions that take their dependencies.
//!
//! Handlers return quickly: a text message is queued as a turn in its chat's lane and the
//! handler returns, so commands and callback presses are never stuck behind a running turn.

use std::sync::Arc;

use teloxide::prelude::*;
use teloxide::utils::command::BotCommands;

use super::callback_data::{decode_action, decode_callback};
use super::keyboards;
use super::send::notify;
use crate::app::App;
use crate::config::Role;
use crate::{options, turn};

type HandlerResult = anyhow::Result<()>;

/// The commands every allowed user may use.
#[derive(BotCommands, Clone, Debug, PartialEq)]
#[command(rename_rule = "lowercase", description = "Commands:")]
pub enum Command {
    #[command(description = "what this bot is")]
    Start,
    #[command(description = "what this bot can do")]
    Help,
    #[command(description = "forget this chat's conversation")]
    Clear,
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
    if msg.chat.is_private() {
        let text = format!(
            "Sorry, this bot is private. Your Telegram user id is {}. \
             To let you in, the owner adds it to HEURIST_ALLOWED_USERS and restarts the bot.",
            user.id.0
        );
        notify(&bot, app.send_policy, msg.chat.id, &text).await;
    }
    Ok(())
}

pub async fn command(bot: Bot, app: Arc<App>, msg: Message, cmd: Command) -> HandlerResult {
    let chat = msg.chat.id;
    let text = match cmd {
        Command::Start | Command::Help => help_text(),
        Command::Clear => match app.store.clear_history(chat.0) {
            Ok(()) => "Done: I forgot this chat's conversation.".to_string(),
            Err(e) => {
                tracing::error!(chat = chat.0, error = %e, "cannot clear history");
                "Sorry, I could not clear the history. Please try again.".to_string()
            }
        },
    };
    notify(&bot, app.send_policy, chat, &text).await;
    Ok(())
}

fn help_text() -> String {
    format!(
        "I am Heurist, an AI assistant. Write to me and I answer, using tools when they help \
         (the current time, reading public web pages).\n\n{}",
        Command::descriptions()
    )
}

/// A text message from an allowed user: queued as a turn behind the chat's earlier ones.
pub async fn text(bot: Bot, app: Arc<App>, msg: Message, text: String) -> HandlerResult {
    let chat = msg.chat.id;
    if text.starts_with('/') {
        let reply = "I do not know that command. /help lists what I can do.";
        notify(&bot, app.send_policy, chat, reply).await;
        return Ok(());
    }
    app.queues
        .enqueue(chat.0, turn::run(app.clone(), bot, chat, text));
    Ok(())
}

/// Photos, stickers, voice notes and the like: a polite answer, no LLM call.
pub async fn non_text(bot: Bot, app: Arc<App>, msg: Message) -> HandlerResult {
    let reply = "I can only read text messages for now. Please send your request as text.";
    notify(&bot, app.send_policy, msg.chat.id, reply).await;
    Ok(())
}

/// Every button press. Callback data can be forged, so the presser's role and the data are
/// checked here on the server; every query is answered at once.
pub async fn callback(bot: Bot, app: Arc<App>, query: CallbackQuery) -> HandlerResult {
    let data = query.data.clone().unwrap_or_default();
    if app.config.role_of(query.from.id.0) == Role::Stranger {
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
        return options::press(app, bot, query, ticket, label).await;
    }
    let toast = match decode_action(&data) {
        Some((action, _)) if action == keyboards::CHOSEN_ACTION => "Already chosen",
        _ => {
            tracing::info!(user = query.from.id.0, %data, "unknown callback data");
            "This option has expired"
        }
    };
    bot.answer_callback_query(query.id).text(toast).await?;
    Ok(())
}
