//! `__act__` button actions: model switch, clear, and the mark of a chosen option.
//!
//! [`decide`] checks the presser's role and the payload on the server and applies the change
//! (fast sled writes only), so the handler can answer the callback query at once; a keyboard
//! update, if any, follows.

use teloxide::prelude::*;
use teloxide::types::{InlineKeyboardMarkup, MessageId};

use super::keyboards;
use super::send::with_retry;
use crate::app::App;
use crate::config::Role;

/// Toast for data that names nothing live.
pub const EXPIRED: &str = "This option has expired";

/// Action names, as they appear in callback data.
pub const SET_MODEL: &str = "set_model";
pub const CLEAR: &str = "clear";

/// What a press did: the toast to show, and the keyboard to put in place of the pressed one.
pub struct Outcome {
    pub toast: String,
    pub keyboard: Option<InlineKeyboardMarkup>,
    /// Nothing changed (logged by the caller).
    pub refused: bool,
}

impl Outcome {
    pub fn refuse(toast: &str) -> Self {
        Self {
            toast: toast.to_string(),
            keyboard: None,
            refused: true,
        }
    }

    fn done(toast: String, keyboard: Option<InlineKeyboardMarkup>) -> Self {
        Self {
            toast,
            keyboard,
            refused: false,
        }
    }
}

/// Checks and applies action `action` with `payload`, pressed by a user of `role` in `chat`.
pub fn decide(app: &App, role: Role, chat: ChatId, action: &str, payload: &str) -> Outcome {
    match action {
        SET_MODEL if role < Role::Admin => {
            Outcome::refuse("Sorry, only the bot's admins can do that.")
        }
        SET_MODEL => match app
            .config
            .models
            .iter()
            .find(|m| keyboards::model_key(&m.id) == payload)
        {
            None => Outcome::refuse("That model is not configured"),
            Some(model) => match set_model(app, chat, &model.id) {
                Ok(id) => Outcome::done(
                    format!("Model: {id}"),
                    Some(keyboards::models(&app.config.models, &id)),
                ),
                Err(e) => Outcome::refuse(&e.to_string()),
            },
        },
        CLEAR => Outcome::done(
            clear(app, chat).to_string(),
            Some(InlineKeyboardMarkup::default()),
        ),
        keyboards::CHOSEN_ACTION => Outcome::done("Already chosen".to_string(), None),
        _ => Outcome::refuse(EXPIRED),
    }
}

/// Sets `chat`'s model to the configured model `id`; says which, or why not.
pub fn set_model(app: &App, chat: ChatId, id: &str) -> anyhow::Result<String> {
    let Some(model) = app.config.model(id) else {
        let known: Vec<&str> = app.config.models.iter().map(|m| m.id.as_str()).collect();
        tracing::warn!(
            chat = chat.0,
            model = id,
            "refused to switch to a model that is not configured"
        );
        anyhow::bail!("Unknown model {id:?}. Configured: {}", known.join(", "));
    };
    app.store.set_chat_model(chat.0, &model.id)?;
    tracing::info!(chat = chat.0, model = %model.id, "model switched");
    Ok(model.id.clone())
}

/// Clears `chat`'s history (heuristics stay) and expires its option buttons.
pub fn clear(app: &App, chat: ChatId) -> &'static str {
    match app.store.clear_history(chat.0) {
        Ok(()) => "Done: I forgot this chat's conversation.",
        Err(e) => {
            tracing::error!(chat = chat.0, error = %e, "cannot clear history");
            "Sorry, I could not clear the history. Please try again."
        }
    }
}

/// Replaces the keyboard of the pressed message; failures are logged.
pub async fn update_keyboard(
    app: &App,
    bot: &Bot,
    chat: ChatId,
    message: MessageId,
    markup: InlineKeyboardMarkup,
) {
    let edited = with_retry(app.send_policy, "editMessageReplyMarkup", || {
        bot.edit_message_reply_markup(chat, message)
            .reply_markup(markup.clone())
            .send()
    })
    .await;
    if let Err(e) = edited {
        tracing::debug!(chat = chat.0, error = %e, "cannot update the keyboard");
    }
}
