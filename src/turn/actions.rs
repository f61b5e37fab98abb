//! The chat-level decisions that commands and buttons share: clear, model switch, stop,
//! feedback on an answer, forgetting a lesson.
//!
//! Each is checked and applied here (fast sled writes only, no chat I/O), so the adapter can
//! answer a button press at once and then show the returned [`Outcome`]. Roles are checked by
//! the caller, once, where the route is chosen; what an action may do for a role is decided
//! here.

use std::sync::Arc;

use super::Keyboard;
use crate::app::App;
use crate::cancel::{Found, StopOutcome, TurnId};
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::role::Role;
use crate::store::{ReflectionJob, Vote};
use crate::texts::turn::{
    ALREADY_COMPLETE, ALREADY_GONE, ALREADY_RATED, APPROVED, CHANGED_DOWN, CHANGED_DOWN_COUNTED,
    CHANGED_UP, CLEAR_FAILED, CLEARED, FORGOTTEN, MODEL_NOT_CONFIGURED, NOT_PENDING,
    NOTHING_RUNNING, STOPPED, STOPPED_TOAST, THANKS, THANKS_LEARNING, TOO_LATE_TO_STOP,
    approve_failed, forget_failed, model_set, unknown_model, vote_failed,
};

// Taken from here by the adapter's imports; their wording lives in `texts::turn`.
use crate::texts::turn::{ADMINS_ONLY, EXPIRED};

/// What a press did: the toast to show, and the keyboard to put in place of the pressed one.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub toast: String,
    pub keyboard: Option<Keyboard>,
    /// Nothing changed (the caller logs it).
    pub refused: bool,
}

impl Outcome {
    pub(crate) fn refuse(toast: impl Into<String>) -> Self {
        Self {
            toast: toast.into(),
            keyboard: None,
            refused: true,
        }
    }

    pub(crate) fn done(toast: impl Into<String>, keyboard: Option<Keyboard>) -> Self {
        Self {
            toast: toast.into(),
            keyboard,
            refused: false,
        }
    }
}

/// What a stop request came to, for the command's reply or the button's toast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
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
    pub(crate) fn reply(self) -> &'static str {
        match self {
            Self::Stopped => STOPPED,
            Self::Kept => TOO_LATE_TO_STOP,
            Self::Over | Self::Nothing => NOTHING_RUNNING,
        }
    }

    /// The toast of a ⏹ press.
    pub(crate) fn toast(self) -> &'static str {
        match self {
            Self::Stopped => STOPPED_TOAST,
            Self::Kept => TOO_LATE_TO_STOP,
            Self::Over | Self::Nothing => ALREADY_COMPLETE,
        }
    }
}

/// Stops the turn running in `chat`: whichever runs (`/cancel`), or only turn `only` (its ⏹,
/// so an old ⏹ stops nothing). The phase decides, atomically: a turn that has not begun its
/// history write stops at its next safe point (it then marks its update done, so recovery
/// never resumes it); a later stop leaves the answer as it is and says so.
pub(crate) fn cancel(app: &App, chat: Conversation, only: Option<TurnId>) -> Stop {
    let stop = match app.turns().stop(chat, only) {
        Found::Turn(StopOutcome::Stopped) => Stop::Stopped,
        // Stopped already and ending: its ⏹ pressed twice says so again; a second /cancel
        // finds nothing left to stop.
        Found::Turn(StopOutcome::AlreadyStopped) if only.is_some() => Stop::Stopped,
        Found::Turn(StopOutcome::AlreadyStopped) => Stop::Nothing,
        Found::Turn(StopOutcome::Kept) => Stop::Kept,
        // The answer is on screen and only bookkeeping is left: for `/cancel`, nothing runs.
        Found::Turn(_) if only.is_none() => Stop::Nothing,
        Found::Turn(_) | Found::Other => Stop::Over,
        Found::Nothing if only.is_some() => Stop::Over,
        Found::Nothing => Stop::Nothing,
    };
    tracing::info!(%chat, turn = ?only, ?stop, "stop requested");
    stop
}

/// Clears `chat`'s history (lessons stay) and expires its option buttons.
pub(crate) fn clear(app: &App, chat: Conversation) -> &'static str {
    match app.store().history().clear(chat) {
        Ok(()) => CLEARED,
        Err(e) => {
            tracing::error!(%chat, error = %e, "cannot clear history");
            CLEAR_FAILED
        }
    }
}

/// Sets `chat`'s model to the configured model `id`; says which, or why not.
pub(crate) fn set_model(app: &App, chat: Conversation, id: &str) -> anyhow::Result<String> {
    let Some(model) = app.config().model(id) else {
        let known: Vec<&str> = app.config().models.iter().map(|m| m.id.as_str()).collect();
        tracing::warn!(
            %chat,
            model = id,
            "refused to switch to a model that is not configured"
        );
        anyhow::bail!("{}", unknown_model(id, &known.join(", ")));
    };
    app.store().chats().set_model(chat, &model.id)?;
    tracing::info!(%chat, model = %model.id, "model switched");
    Ok(model.id.clone())
}

/// The model keyboard with `current` marked.
pub(crate) fn models_keyboard(app: &App, current: &str) -> Keyboard {
    Keyboard::Models {
        models: app.config().models.iter().map(|m| m.id.clone()).collect(),
        current: current.to_string(),
    }
}

/// A model button pressed: switch `chat` to `id` (admins only).
pub(crate) fn choose_model(app: &App, role: Role, chat: Conversation, id: Option<&str>) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    let Some(id) = id else {
        return Outcome::refuse(MODEL_NOT_CONFIGURED);
    };
    match set_model(app, chat, id) {
        Ok(id) => Outcome::done(model_set(&id), Some(models_keyboard(app, &id))),
        Err(e) => Outcome::refuse(e.to_string()),
    }
}

/// How often a vote on an answer may be changed.
const VOTE_CHANGES: u8 = 1;

/// Who cast a vote on an answer: in a group anyone may vote, but only some votes may spend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Voter {
    pub(crate) user: UserId,
    pub(crate) role: Role,
}

impl Voter {
    /// Whether this voter's 👎 on the answer to `asker`'s message may start a reflection,
    /// which costs tokens: the asker's own (or anyone's on an answer whose ticket does not
    /// name its asker, made before tickets did), or an admin's. Another group member's 👎 is
    /// counted as a vote only: it must not spend the asker's budget.
    fn may_reflect(self, asker: Option<UserId>) -> bool {
        self.role >= Role::Admin || asker.is_none_or(|asker| asker == self.user)
    }
}

/// 👍 or 👎 on an answer, only in its own chat; a vote can be changed once. It scores the
/// lessons the answer's prompt carried; a 👎 by the asker or an admin also starts a
/// reflection on the rated answer with outcome "failure", so the bot learns what went wrong,
/// charged to that voter (see [`Voter::may_reflect`]).
pub(crate) fn feedback(
    app: &Arc<App>,
    at: Conversation,
    ticket: &str,
    up: bool,
    voter: Voter,
) -> Outcome {
    let ticket = match app
        .store()
        .tickets()
        .vote(ticket, at.chat, up, VOTE_CHANGES)
    {
        Ok(Vote::Recorded(ticket)) => ticket,
        Ok(Vote::AlreadyVoted) => return Outcome::refuse(ALREADY_RATED),
        Ok(Vote::Unknown) => return Outcome::refuse(EXPIRED),
        Err(e) => return Outcome::refuse(vote_failed(&e.to_string())),
    };
    let first = ticket.vote.is_none();
    let scored = if first {
        app.learning().feedback(&ticket.lessons, up)
    } else {
        app.learning().change_vote(&ticket.lessons, up)
    };
    // Dropped (logged): the vote is on its ticket and a 👎 still reflects; only the lessons'
    // counts miss it.
    if let Err(e) = scored {
        tracing::error!(error = %e, "cannot apply feedback");
    }
    let reflects = !up && voter.may_reflect(ticket.job.user);
    if reflects {
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
            user: Some(voter.user),
            ..ticket.job
        };
        if let Some(id) = app.learning().plan_reflection(&job) {
            let prefix = super::reflect::bare_prefix(app, &job);
            super::reflect::queue_reflection(app, id, job, prefix);
        }
    } else if !up {
        tracing::info!(voter = %voter.user, "a 👎 by someone other than the asker: counted, no reflection");
    }
    let toast = match (first, up, reflects) {
        (true, true, _) => THANKS,
        (true, false, true) => THANKS_LEARNING,
        (true, false, false) => THANKS,
        (false, true, _) => CHANGED_UP,
        (false, false, true) => CHANGED_DOWN,
        (false, false, false) => CHANGED_DOWN_COUNTED,
    };
    Outcome::done(toast, None)
}

/// An Approve button pressed: approve pending lesson `id` (admins only).
pub(crate) fn approve(app: &App, role: Role, id: u64) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    match app.learning().approve(id) {
        Ok(true) => Outcome::done(APPROVED, None),
        Ok(false) => Outcome::refuse(NOT_PENDING),
        Err(e) => Outcome::refuse(approve_failed(&e.to_string())),
    }
}

/// A forget button pressed: forget lesson `id` (admins only).
pub(crate) fn forget(app: &App, role: Role, id: u64) -> Outcome {
    if role < Role::Admin {
        return Outcome::refuse(ADMINS_ONLY);
    }
    match app.learning().forget(id) {
        Ok(true) => Outcome::done(FORGOTTEN, None),
        Ok(false) => Outcome::refuse(ALREADY_GONE),
        Err(e) => Outcome::refuse(forget_failed(&e.to_string())),
    }
}
