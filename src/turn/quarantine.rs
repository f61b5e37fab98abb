//! Poison updates are quarantined: a turn that crashes the process (a stack overflow, an abort,
//! running out of memory: nothing a `catch_unwind` sees) cannot crash it again at every start.
//!
//! Every start of an update's turn is on disk before it runs, and counted:
//! - its **first** start is its inbox record, written at accept and flushed before the turn
//!   runs ([`Start::Accepted`]: the queued turn waits for that flush; a scheduled run is
//!   recorded and flushed before it is queued). No write of its own: a turn's hot path pays
//!   nothing for the count.
//! - each start **recovery** makes adds one to the record's `restarts` and flushes it just
//!   before it runs: a rerun when it is dequeued ([`Start::Resumed`]), not when it is queued,
//!   so a message waiting behind a poison one in the same chat is not charged for a start it
//!   never had; a stored answer (or a notice) before it is sent ([`count_start`]).
//!
//! At start-up, an update that has started `max_turn_attempts` times (2 by default) without
//! being done is not started again ([`Resume::Quarantine`](crate::store::inbox_state::Resume)):
//! it is marked answered (flushed), then its sender gets one apology, in reply to their message
//! where there is one. Answered first, so not even the apology can loop: a crash between the two
//! loses the apology, never repeats it. This holds whatever the cause, for every kind of update
//! (a message, a document, a voice note, an option or 🔁 Retry press, a scheduled run): they all
//! start from the inbox, through this module.
//!
//! # What it costs an innocent turn
//! The bot cannot tell which turn crashed it, so every turn in flight at a crash is charged:
//! - A turn of another chat that was **running during both crashes** (started before the first,
//!   and running again after the restart when the poison crashed the bot the second time) has
//!   started twice too, and is given up with the same apology, although it was innocent. Its
//!   user is told to send it again, and the next one runs. Recovery reruns every interrupted
//!   turn at once, so an innocent one is caught when its rerun takes longer than the poison
//!   takes to crash again; a higher `max_turn_attempts` gives it more chances (and the poison
//!   more crashes).
//! - A turn **accepted but still waiting** in its chat's queue at a crash counts the start its
//!   record stands for, although it never ran: with the default 2 it still runs once after the
//!   restart; with 1 it is given up without having run.
//! - A turn waiting behind a poison one in the same chat after a restart is not counted until
//!   it is dequeued, so it runs once the poison one is given up.
//!
//! Debug builds also hold the test-only crash trigger ([`abort_if_asked`]).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::input::TurnInput;
use super::messenger::{Keyboard, Live, SharedMessenger, unrecorded};
use super::pipeline::run;
use super::visibility::set_state;
use crate::app::App;
use crate::ids::UpdateId;
use crate::store::{InboxState, TurnRequest};
use crate::texts::turn::{TASK_CANCELLED, gave_up};

/// What must be on disk before a queued turn starts, so that no start goes uncounted.
pub(super) enum Start {
    /// A new update, whose record (its first start) accept is flushing: the turn starts once
    /// the flush is over (sent, or dropped if accept was).
    Accepted(oneshot::Receiver<()>),
    /// An update recovery runs again: the start is counted (flushed) when it is dequeued.
    Resumed,
    /// On disk already (a scheduled run is recorded and flushed before it is queued), or
    /// without a record to count (its id's record is another update's, or the store failed).
    Durable,
}

/// The queued job of `input`'s turn: its start made durable as `start` says, then the turn
/// (not at all if that start may not be made).
pub(super) async fn counted(app: Arc<App>, out: SharedMessenger, input: TurnInput, start: Start) {
    let durable = match start {
        Start::Accepted(flushed) => {
            // An error is a dropped sender: accept is gone, its flush over or never to come.
            let _ = flushed.await;
            true
        }
        Start::Resumed => match input.update {
            Some(update) => count_start(&app, update).await,
            None => true,
        },
        Start::Durable => true,
    };
    if !durable {
        return;
    }
    #[cfg(debug_assertions)]
    abort_if_asked(&input.request.text);
    run(app, out, input).await;
}

/// Counts a start recovery makes of `update` and flushes it, before the start runs; whether
/// it may run. Not when the update is done since, nor when the count cannot be written: a
/// start that is not on disk is not made (logged), and the update waits for the next start.
pub(super) async fn count_start(app: &App, update: UpdateId) -> bool {
    let counted = app.store().inbox().count_start(update);
    let flushed = match counted {
        Ok(true) => app.store().db().flush_async().await.map(|()| true),
        other => other,
    };
    match flushed {
        Ok(true) => true,
        Ok(false) => {
            tracing::info!(%update, "an update is done or gone: not started again");
            false
        }
        Err(e) => {
            tracing::error!(%update, error = %e, "cannot count a restart on disk: not starting it");
            false
        }
    }
}

/// Gives up update `update` of `request`, which started `starts` times and never finished:
/// answered (flushed) first, then one apology to its sender, replying to their message.
pub(super) async fn quarantine(
    app: &App,
    out: &SharedMessenger,
    update: UpdateId,
    request: &TurnRequest,
    starts: u32,
) {
    let chat = request.conversation();
    tracing::warn!(
        %update,
        %chat,
        starts,
        "an update's turn started this many times without finishing (the bot stopped each \
         time): giving it up, never to run again"
    );
    set_state(app, update, InboxState::Answered).await;
    // A task whose run takes the bot down would do it at every run: it goes too.
    if let Some(run) = request.task_run {
        match app.store().tasks().remove(run.task) {
            Ok(removed) => tracing::warn!(
                task = run.task,
                removed,
                "a task whose run stopped the bot was cancelled"
            ),
            Err(e) => {
                tracing::error!(task = run.task, error = %e, "cannot cancel a task whose run stopped the bot")
            }
        }
        // Dropped (logged): the next start would only find it again and run it once more.
        if let Err(e) = app.store().db().flush_async().await {
            tracing::error!(error = %e, "cannot flush a cancelled task");
        }
    }
    let reply_to = request.message.or(request.reply_to);
    let apology = match request.task_run {
        Some(_) => format!("{}\n\n{}", gave_up(starts), TASK_CANCELLED),
        None => gave_up(starts),
    };
    let live = Live::default();
    out.answer(chat, reply_to, live, &apology, Keyboard::None, unrecorded())
        .await;
}

/// The test-only crash trigger of debug builds (release builds have none): a turn whose text
/// holds `HEURIST_TEST_ABORT_ON` (when set and not empty) aborts the process as it starts, as
/// a poison message would, so the end-to-end tests can show there is no crash loop.
#[cfg(debug_assertions)]
fn abort_if_asked(text: &str) {
    if let Ok(marker) = std::env::var("HEURIST_TEST_ABORT_ON")
        && !marker.is_empty()
        && text.contains(&marker)
    {
        tracing::error!("HEURIST_TEST_ABORT_ON: aborting as this turn starts");
        std::process::abort();
    }
}
