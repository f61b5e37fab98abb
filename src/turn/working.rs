//! The working reaction: while a turn runs, the message that asked carries
//! `telegram.working_reaction` (👀 by default), set once the turn has run for
//! `telegram.working_reaction_after_ms` and taken off once it ends however it ends (answered,
//! failed, stopped), one paced call each, in the background so the answer never waits for them
//! (nor for their pace: see `telegram::transport::reactions`). An answer that comes before the delay needs
//! no 👀 and costs no call, and so does one while the bot's Telegram calls are backed up: the
//! two calls would take the answers' share of Telegram's 30 calls a second (measured: 100 chats
//! answered 2.6× slower at production pacing). A turn a button started (an option, a 🔁 Retry) has no
//! message of the user's, and shows none. A crash ends a turn before it can take its reaction
//! off: recovery does, once for each update it resumes or finishes ([`clear_left`]). Also here:
//! the record of a shown answer's messages, through which a reaction on the answer votes (see
//! `reactions`).

use std::time::Duration;

use tokio::sync::oneshot;

use super::messenger::SharedMessenger;
use super::state::Turn;
use crate::app::App;
use crate::ids::ChatId;
use crate::store::{AnswerRecord, TurnRequest};

/// The working reaction of a running turn, until [`Working::end`] takes it off.
pub(super) struct Working {
    out: SharedMessenger,
    chat: ChatId,
    message: i32,
    /// Dropped or sent when the turn ends: the reaction is no longer to be set.
    ended: oneshot::Sender<()>,
    /// Whether the reaction was set, once its call is over (so taking it off comes after).
    set: oneshot::Receiver<bool>,
}

impl Working {
    /// Puts the working reaction on the message that asked for `request` once the turn has
    /// run for the configured delay, if it has such a message and a reaction is configured.
    pub(super) fn begin(app: &App, out: &SharedMessenger, request: &TurnRequest) -> Option<Self> {
        let telegram = &app.config().telegram;
        let emoji = telegram.working_reaction.clone();
        let message = request.message.filter(|_| !emoji.is_empty())?;
        let after = Duration::from_millis(telegram.working_reaction_after_ms);
        let (ended, ended_rx) = oneshot::channel();
        let (done, set) = oneshot::channel();
        let (shower, chat) = (out.clone(), request.chat);
        app.spawn(async move {
            let shown = tokio::select! {
                biased;
                _ = ended_rx => false,
                () = tokio::time::sleep(after) => shower.react(chat, message, Some(emoji)).await,
            };
            let _ = done.send(shown);
        });
        Some(Self {
            out: out.clone(),
            chat: request.chat,
            message,
            ended,
            set,
        })
    }

    /// Takes the working reaction off, after its own call, if it was set (in the background).
    pub(super) fn end(self, app: &App) {
        let Self {
            out,
            chat,
            message,
            ended,
            set,
        } = self;
        let _ = ended.send(());
        app.spawn(async move {
            if set.await == Ok(true) {
                out.react(chat, message, None).await;
            }
        });
    }
}

/// Takes the working reaction a crash may have left off the message that asked for `request`
/// (in the background), if it has one and a reaction is configured: recovery calls it once
/// for each update it resumes or finishes. A resumed turn puts its own on again if it runs
/// long, and takes that off as usual.
pub(super) fn clear_left(app: &App, out: &SharedMessenger, request: &TurnRequest) {
    let configured = !app.config().telegram.working_reaction.is_empty();
    let Some(message) = request.message.filter(|_| configured) else {
        return;
    };
    let (out, chat) = (out.clone(), request.chat);
    app.spawn(async move {
        out.react(chat, message, None).await;
    });
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
