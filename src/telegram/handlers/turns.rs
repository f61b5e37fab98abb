//! The one way a message or a press starts a turn.
//!
//! A text, a photo, an option press and a 🔁 Retry all go the same path: the asker's limits
//! are checked before anything is used up (a refusal records nothing, so the update is
//! released and the asker told: a message by a notice, a press by its toast); then the request
//! is claimed (an option chosen, a retry spent), which names the turn or refuses it; a claimed
//! press is answered and its keyboard replaced in the background; the turn goes into its
//! chat's inbox, and only then is the update released (see [`Handling`]).

use teloxide::prelude::*;

use super::{Deps, HandlerResult, conversation_of};
use crate::budget::limits::Verdict;
use crate::metrics::TurnOutcome;
use crate::role::Role;
use crate::telegram::transport::listener::Handling;
use crate::telegram::transport::replies;
use crate::turn::{self, Keyboard, Messenger, SharedMessenger, TurnInput};

/// Who asks for a turn, which decides how a refusal is told.
#[derive(Clone, Copy)]
pub(super) enum Asker<'a> {
    /// A message: a refusal is a notice in its conversation (a burst of them, one message).
    Message(&'a Message),
    /// A button press: a refusal is the press's toast.
    Press(&'a CallbackQuery),
}

impl Asker<'_> {
    /// The user asking.
    fn user(self) -> crate::ids::UserId {
        match self {
            Self::Message(msg) => super::sender_of(msg),
            Self::Press(query) => crate::ids::UserId::from(query.from.id),
        }
    }
}

/// A request claimed: the turn it starts and, for a press, how the press shows it was used.
pub(super) struct Claimed {
    pub input: TurnInput,
    /// The press's toast (empty: none).
    pub toast: &'static str,
    /// The keyboard that replaces the pressed one: its chat, its message and the new keyboard.
    pub mark: Option<(crate::ids::ChatId, i32, Keyboard)>,
}

impl Claimed {
    /// A claimed message: nothing to answer, nothing to mark.
    pub(crate) fn message(input: TurnInput) -> Self {
        Self {
            input,
            toast: "",
            mark: None,
        }
    }
}

/// What claiming a request gives: the turn, or the refusal the asker is told; `Err` only
/// when the store cannot say.
pub(super) type ClaimOutcome = anyhow::Result<Result<Claimed, &'static str>>;

/// Starts the turn `claim` names, for `asker` of `role`, on the path the module doc tells.
pub(super) async fn start(
    deps: &Deps,
    asker: Asker<'_>,
    role: Role,
    handling: &Handling,
    claim: impl FnOnce() -> ClaimOutcome,
) -> HandlerResult {
    let app = &deps.app;
    let verdict = app.limits().check(asker.user(), role, app.store());
    if verdict != Verdict::Allowed {
        app.metrics().turn(TurnOutcome::Refused);
        handling.done();
        return refuse_over_limits(deps, asker, verdict).await;
    }
    let claimed = match claim()? {
        Ok(claimed) => claimed,
        Err(refusal) => {
            handling.done();
            return refuse(deps, asker, refusal).await;
        }
    };
    if let Asker::Press(query) = asker {
        show_used(deps, query, &claimed).await;
    }
    let out: SharedMessenger = deps.tg.clone();
    turn::accept(app, &out, claimed.input).await;
    handling.done();
    Ok(())
}

/// Tells `asker` it is over its limits: a message too fast counts into its burst's one
/// refusal, any other refusal is a notice or the press's toast.
async fn refuse_over_limits(deps: &Deps, asker: Asker<'_>, verdict: Verdict) -> HandlerResult {
    match (asker, verdict) {
        (Asker::Message(msg), Verdict::TooFast(wait)) => {
            replies::refuse_too_fast(deps, conversation_of(msg), asker.user(), wait);
            Ok(())
        }
        (Asker::Message(msg), refused) => {
            let text = refused.message().unwrap_or_default();
            replies::notice(deps, conversation_of(msg), text);
            Ok(())
        }
        (Asker::Press(query), refused) => {
            let text = refused.message().unwrap_or_default();
            deps.tg.answer_press(query, &text).await?;
            Ok(())
        }
    }
}

/// Tells `asker` its request could not be claimed (an option expired, a retry spent).
async fn refuse(deps: &Deps, asker: Asker<'_>, refusal: &'static str) -> HandlerResult {
    match asker {
        Asker::Message(msg) => {
            replies::notice(deps, conversation_of(msg), refusal);
            Ok(())
        }
        Asker::Press(query) => {
            tracing::info!(user = query.from.id.0, data = ?query.data, toast = %refusal, "button press refused");
            deps.tg.answer_press(query, refusal).await?;
            Ok(())
        }
    }
}

/// Answers a claimed press and replaces its keyboard. The press is used up now: the turn must
/// start whatever Telegram says to the answer (a press re-delivered after a crash has a query
/// too old to answer). The keyboard's edit runs in the background: a paced edit must not hold
/// the press's intake (every chat's next update waits for it), and it takes the chat's slot
/// before the turn's first message.
async fn show_used(deps: &Deps, query: &CallbackQuery, claimed: &Claimed) {
    if let Err(e) = deps.tg.answer_press(query, claimed.toast).await {
        let chat = claimed.input.request.chat;
        tracing::warn!(%chat, error = %e, "cannot answer a press that starts a turn");
    }
    if let Some((chat, message, keyboard)) = claimed.mark.clone() {
        let tg = deps.tg.clone();
        deps.app.spawn(async move {
            tg.set_keyboard(chat, message, keyboard).await;
        });
    }
}
