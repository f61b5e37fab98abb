//! The working reaction: while a turn runs, the message that asked carries
//! `telegram.working_reaction` (👀 by default), set as the turn begins and taken off once it
//! ends however it ends (answered, failed, stopped), one paced call each, in the background so
//! the answer never waits for them (nor for their pace: see `telegram::reactions`). A turn a button started (an option, a 🔁 Retry) has no
//! message of the user's, and shows none. Also here: the record of a shown answer's messages,
//! through which a reaction on the answer votes (see `reactions`).

use tokio::sync::oneshot;

use super::messenger::Out;
use super::state::Turn;
use crate::app::App;
use crate::ids::ChatId;
use crate::store::{AnswerRecord, TurnRequest};

/// The working reaction of a running turn, until [`Working::end`] takes it off.
pub(super) struct Working {
    out: Out,
    chat: ChatId,
    message: i32,
    /// Resolves once the reaction's own call is over, so taking it off comes after.
    set: oneshot::Receiver<()>,
}

impl Working {
    /// Puts the working reaction on the message that asked for `request`, if it has one and
    /// one is configured.
    pub(super) fn begin(app: &App, out: &Out, request: &TurnRequest) -> Option<Self> {
        let emoji = &app.config().telegram.working_reaction;
        let message = request.message.filter(|_| !emoji.is_empty())?;
        let (done, set) = oneshot::channel();
        let shown = out.react(request.chat, message, Some(emoji.clone()));
        app.spawn(async move {
            shown.await;
            let _ = done.send(());
        });
        Some(Self {
            out: out.clone(),
            chat: request.chat,
            message,
            set,
        })
    }

    /// Takes the working reaction off, after its own call (in the background).
    pub(super) fn end(self, app: &App) {
        let Self {
            out,
            chat,
            message,
            set,
        } = self;
        app.spawn(async move {
            let _ = set.await;
            out.react(chat, message, None).await;
        });
    }
}

/// Records every message of a shown answer with 👍/👎 (`shown`, the keyboard under the last),
/// so a reaction on any of them votes.
pub(super) fn record_answer(turn: &Turn, feedback: Option<&str>, shown: &[i32]) {
    let (Some(feedback), Some(&keyboard)) = (feedback, shown.last()) else {
        return;
    };
    let record = AnswerRecord {
        feedback: feedback.to_string(),
        topic: turn.input.request.topic,
        keyboard,
        options: None,
        created: chrono::Utc::now().timestamp(),
    };
    let chat = turn.input.request.chat;
    if let Err(e) = turn.app.store().answers().record(chat, shown, &record) {
        // Handled: the buttons still vote; only a reaction on this answer is ignored.
        tracing::warn!(chat = %chat, error = %e, "cannot record the answer's messages");
    }
}
