//! `__act__` button actions: model switch, clear, and the mark of a chosen option.
//!
//! [`decide`] checks the presser's role and the payload on the server and applies the change
//! (fast sled writes only), so the handler can answer the callback query at once; a keyboard
//! update, if any, follows.

use teloxide::prelude::*;
use teloxide::types::InlineKeyboardMarkup;

use std::sync::Arc;

use super::keyboards;
use crate::app::App;
use crate::config::Role;
use crate::learning::reflection;
use crate::store::{ReflectionJob, Vote};

/// Toast for data that names nothing live.
pub const EXPIRED: &str = "This option has expired";

/// Action names, as they appear in callback data.
pub const SET_MODEL: &str = "set_model";
pub const CLEAR: &str = "clear";
pub const FEEDBACK: &str = "fb";
pub const FORGET: &str = "forget";
pub const STOP: &str = "stop";

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
pub fn decide(app: &Arc<App>, role: Role, chat: ChatId, action: &str, payload: &str) -> Outcome {
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
        FEEDBACK => feedback(app, chat, payload),
        FORGET if role < Role::Admin => {
            Outcome::refuse("Sorry, only the bot's admins can do that.")
        }
        FORGET => match payload.parse::<u64>().map(|id| app.learning.forget(id)) {
            Ok(Ok(true)) => Outcome::done("Forgotten".to_string(), Some(forget_keyboard(app))),
            Ok(Ok(false)) | Err(_) => Outcome::refuse("That heuristic is gone already"),
            Ok(Err(e)) => Outcome::refuse(&format!("Cannot forget it: {e}")),
        },
        STOP if crate::turn::cancel(app, chat) => Outcome::done("Stopped".to_string(), None),
        STOP => Outcome::refuse("Nothing is running"),
        keyboards::CHOSEN_ACTION => Outcome::done("Already chosen".to_string(), None),
        _ => Outcome::refuse(EXPIRED),
    }
}

/// 👍 or 👎 on an answer: once per answer, only in its own chat. 👎 also starts a reflection on
/// the task with outcome "failure", so the bot learns what went wrong.
fn feedback(app: &Arc<App>, chat: ChatId, payload: &str) -> Outcome {
    let Some((id, up)) = payload.rsplit_once('.').and_then(|(id, vote)| {
        Some((
            id,
            match vote {
                "u" => true,
                "d" => false,
                _ => return None,
            },
        ))
    }) else {
        return Outcome::refuse(EXPIRED);
    };
    // A vote is final: no change of mind allowed.
    match app.store.vote(id, chat.0, up, 0) {
        Ok(Vote::Unknown) => Outcome::refuse(EXPIRED),
        Ok(Vote::AlreadyVoted) => Outcome::refuse("You already rated this answer"),
        Ok(Vote::Recorded(ticket)) => {
            if let Err(e) = app.learning.feedback(&ticket.heuristics, up) {
                tracing::error!(error = %e, "cannot apply feedback");
            }
            if !up {
                let job = ReflectionJob {
                    outcome: "failure (the user rated the answer 👎)".to_string(),
                    ..ticket.job
                };
                reflection::spawn(app, job, None);
            }
            Outcome::done(
                if up {
                    "Thanks!"
                } else {
                    "Thanks, I will learn from it."
                }
                .to_string(),
                None,
            )
        }
        Err(e) => Outcome::refuse(&format!("Cannot record that: {e}")),
    }
}

/// The forget buttons of every stored heuristic, as `/heuristics` shows them.
pub fn forget_keyboard(app: &App) -> InlineKeyboardMarkup {
    let listed: Vec<(u64, String)> = app
        .store
        .heuristics()
        .into_iter()
        .take(MAX_LISTED)
        .map(|h| (h.id, h.text))
        .collect();
    keyboards::forget(&listed)
}

/// At most this many heuristics are listed (one message, one keyboard).
pub const MAX_LISTED: usize = 20;

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
