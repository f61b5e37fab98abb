//! The chat-level decisions that commands and buttons share: clear, model switch, stop,
//! feedback on an answer, forgetting a heuristic.
//!
//! Each is checked and applied here (fast sled writes only, no chat I/O), so the adapter can
//! answer a button press at once and then show the returned [`Outcome`]. Roles are checked by
//! the caller, once, where the route is chosen; what an action may do for a role is decided
//! here.

use std::sync::Arc;

use super::Keyboard;
use crate::app::App;
use crate::cancel::{Found, TurnId, Verdict};
use crate::config::Role;
use crate::conversation::Conversation;
use crate::store::{ReflectionJob, Vote};

/// The toast of a press whose data names nothing live (an expired, forged or unknown button).
pub const EXPIRED: &str = "This option has expired";

/// What the user is told when an admin-only action is refused.
pub const ADMINS_ONLY: &str = "Sorry, only the bot's admins can do that.";

/// What a command the bot does not know gets.
pub const UNKNOWN_COMMAND: &str = "I do not know that command. /help lists what I can do.";

/// What a press did: the toast to show, and the keyboard to put in place of the pressed one.
#[derive(Debug)]
pub struct Outcome {
    pub toast: String,
    pub keyboard: Option<Keyboard>,
    /// Nothing changed (the caller logs it).
    pub refused: bool,
}

impl Outcome {
    pub fn refuse(toast: impl Into<String>) -> Self {
        Self {
            toast: toast.into(),
            keyboard: None,
            refused: true,
        }
    }

    pub fn done(toast: impl Into<String>, keyboard: Option<Keyboard>) -> Self {
        Self {
            toast: toast.into(),
            keyboard,
            refused: false,
        }
    }
}

/// What a stop request came to, for the command's reply or the button's toast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The turn stops before its history write: nothing of it is kept.
    Stopped,
    /// Too late: the turn's answer is stored (or being stored) and is shown.
    Kept,
    /// The turn's answer is already on screen, or the ⏹ belongs to a turn that is over.
    Over,
    /// `/cancel` with no turn running in the chat.
    Nothing,
}

impl Stop {
    /// The reply to `/cancel` (when no live message confirms a stop itself).
    pub fn reply(self) -> &'static str {
        match self {
            Self::Stopped => "Stopped. Nothing of that request was kept.",
            Self::Kept => KEPT,
            Self::Over | Self::Nothing => "Nothing is running.",
        }
    }

    /// The toast of a ⏹ press.
    pub fn toast(self) -> &'static str {
        match self {
            Self::Stopped => "Stopped",
            Self::Kept => KEPT,
            Self::Over | Self::Nothing => "That answer is already complete",
        }
    }
}

/// What a stop that came too late says: the answer was stored before it, and stays.
const KEPT: &str = "Too late to stop: the answer was already saved, so it is kept.";

/// Stops the turn running in `chat`: whichever runs (`/cancel`), or only turn `only` (its ⏹,
/// so an old ⏹ stops nothing). The phase decides, atomically: a turn that has not begun its
/// history write stops at its next safe point (it then marks its update done, so recovery
/// never resumes it); a later stop leaves the answer as it is and says so.
pub fn cancel(app: &App, chat: Conversation, only: Option<TurnId>) -> Stop {
    let stop = match app.turns().stop(chat, only) {
        Found::Turn(Verdict::Stopped) => Stop::Stopped,
        // Stopped already and ending: its ⏹ pressed twice says so again; a second /cancel
        // finds nothing left to stop.
        Found::Turn(Verdict::AlreadyStopped) if only.is_some() => Stop::Stopped,
        Found::Turn(Verdict::AlreadyStopped) => Stop::Nothing,
        Found::Turn(Verdict::Kept) => Stop::Kept,
        // The answer is on screen and only bookkeeping is left: for `/cancel`, nothing runs.
        Found::Turn(_) if only.is_none() => Stop::Nothing,
        Found::Turn(_) | Found::Other => Stop::Over,
        Found::Nothing if only.is_some() => Stop::Over,
        Found::Nothing => Stop::Nothing,
    };
    tracing::info!(%chat, turn = ?only, ?stop, "stop requested");
    stop
}

/// Clears `chat`'s history (heuristics stay) and expires its option buttons.
pub fn clear(app: &App, chat: Conversation) -> &'static str {
    match app.store().history().clear(chat) {
        Ok(()) => "Done: I forgot this chat's conversation.",
        Err(e) => {
            tracing::error!(%chat, error = %e, "cannot clear history");
            "Sorry, I could not clear the history. Please try again."
        }
    }
}

/// Sets `chat`'s model to the configured model `id`; says which, or why not.
pub fn set_model(app: &App, chat: Conversation, id: &str) -> anyhow::Result<String> {
    let Some(model) = app.config().model(id) else {
        let known: Vec<&str> = app.config().models.iter().map(|m| m.id.as_str()).collect();
        tracing::warn!(
            %chat,
            model = id,
            "refused to switch to a model that is not configured"
        );
        anyhow::bail!("Unknown model {id:?}. Configured: {}", known.join(", "));
    };
    app.store().chats().set_model(chat, &model.id)?;
    tracing::info!(%chat, model = %model.id, "model switched");
    Ok(model.id.clone())
}

/// The model keyboard with `current` marked.
pub fn models_keyboard(app: &App, current: &str) -> Keyboard {
    Keyboard::Models {
        models: app.config().models.iter().map(|m| m.id.clone()).collect(),
        current: current.to_string(),
    }
}

/// A model button pressed: switch `chat` to `id` (admins only).
pub fn choose_model(app: &App, role: Role, chat: Conversation, id: Option<&str>) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    let Some(id) = id else {
        return Outcome::refuse("That model is not configured");
    };
    match set_model(app, chat, id) {
        Ok(id) => Outcome::done(format!("Model: {id}"), Some(models_keyboard(app, &id))),
        Err(e) => Outcome::refuse(e.to_string()),
    }
}

/// How often a vote on an answer may be changed.
const VOTE_CHANGES: u8 = 1;

/// 👍 or 👎 on an answer, only in its own chat; a vote can be changed once. It scores the
/// heuristics the answer's prompt carried; a 👎 also starts a reflection on the rated answer
/// with outcome "failure", so the bot learns what went wrong.
pub fn feedback(app: &Arc<App>, at: Conversation, ticket: &str, up: bool) -> Outcome {
    let ticket = match app
        .store()
        .tickets()
        .vote(ticket, at.chat, up, VOTE_CHANGES)
    {
        Ok(Vote::Recorded(ticket)) => ticket,
        Ok(Vote::AlreadyVoted) => return Outcome::refuse("You already rated this answer"),
        Ok(Vote::Unknown) => return Outcome::refuse(EXPIRED),
        Err(e) => return Outcome::refuse(format!("Cannot record that: {e}")),
    };
    let first = ticket.vote.is_none();
    let scored = if first {
        app.learning().feedback(&ticket.heuristics, up)
    } else {
        app.learning().change_vote(&ticket.heuristics, up)
    };
    if let Err(e) = scored {
        tracing::error!(error = %e, "cannot apply feedback");
    }
    if !up {
        // The rated answer's conversation may have read third-party text since its ticket
        // was made (or before tickets said so): its mark decides too.
        let marked = app
            .store()
            .chats()
            .state(at)
            .map_or(true, |state| state.external);
        let job = ReflectionJob {
            outcome: "failure (the user rated the answer 👎)".to_string(),
            external: ticket.job.external || marked,
            ..ticket.job
        };
        if let Some(id) = app.learning().plan_reflection(&job) {
            let prefix = super::bare_prefix(app, &job);
            super::queue_reflection(app, id, job, prefix);
        }
    }
    let toast = match (first, up) {
        (true, true) => "Thanks!",
        (true, false) => "Thanks, I will learn from it.",
        (false, true) => "Changed to 👍",
        (false, false) => "Changed to 👎: I will learn from it.",
    };
    Outcome::done(toast, None)
}

/// An Approve button pressed: approve pending heuristic `id` (admins only).
pub fn approve(app: &App, role: Role, id: u64) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    match app.learning().approve(id) {
        Ok(true) => Outcome::done("Approved: it can be used from now on", None),
        Ok(false) => Outcome::refuse("That heuristic is not waiting for approval"),
        Err(e) => Outcome::refuse(format!("Cannot approve it: {e}")),
    }
}

/// A forget button pressed: forget heuristic `id` (admins only).
pub fn forget(app: &App, role: Role, id: u64) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    match app.learning().forget(id) {
        Ok(true) => Outcome::done("Forgotten", None),
        Ok(false) => Outcome::refuse("That heuristic is gone already"),
        Err(e) => Outcome::refuse(format!("Cannot forget it: {e}")),
    }
}
