//! A turn's way in: its update recorded in the inbox (so a crash loses nothing Telegram
//! forgot), then the turn queued behind the chat's earlier ones, started once its start is on
//! disk (see `quarantine`), with what happens if it panics.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::input::TurnInput;
use super::messenger::SharedMessenger;
use super::quarantine::{Start, counted};
use crate::app::App;
use crate::conversation::Conversation;
use crate::ids::UpdateId;
use crate::store::{Arrival, InboxEntry, InboxState};
use crate::texts::turn::PANIC_NOTICE;

/// Records the update in the inbox (on disk) and queues its turn; `false` if the update was
/// seen before (Telegram re-delivers after a crash) and must not be answered again.
///
/// The turn is queued first and the inbox flushed while it waits for a slot; it starts once
/// the flush is over, so its record, which counts its first start, is on disk before it runs
/// (a turn that crashes the process at once is still counted). This returns only after the
/// flush, and Telegram is told the update arrived only after its handler returned (see
/// `telegram::transport::listener`), so a crash at any point before loses nothing Telegram forgot.
pub async fn accept(app: &Arc<App>, out: &SharedMessenger, mut input: TurnInput) -> bool {
    let mut recorded = false;
    if let Some(update) = input.update {
        let received = chrono::Utc::now().timestamp();
        let entry = InboxEntry::pending(input.request.clone(), received);
        match app.store().inbox().accept(update, &entry) {
            Ok(Arrival::New | Arrival::Reused) => recorded = true,
            Ok(Arrival::Redelivered) => {
                tracing::info!(%update, "ignoring an update that was already accepted");
                return false;
            }
            // Its id's record is another update's: the turn must not change that record.
            Ok(Arrival::Unrecorded) => input.update = None,
            // Dropped (logged): the message is still answered; only a crash before its answer
            // loses it, as Telegram is told it arrived and no record is left for recovery.
            Err(e) => {
                tracing::error!(%update, error = %e, "cannot record the update; answering anyway")
            }
        }
    }
    let (flushed, on_disk) = oneshot::channel();
    let start = if recorded {
        Start::Accepted(on_disk)
    } else {
        Start::Durable
    };
    enqueue(app, out, input, start);
    // Dropped (logged): the record is written, and sled's own periodic flush puts it on disk;
    // only a crash before that loses the message. The turn starts all the same.
    if let Err(e) = app.store().db().flush_async().await {
        tracing::error!(error = %e, "cannot flush the inbox");
    }
    // Dropped: the turn was aborted (a shutdown) before it waited.
    let _ = flushed.send(());
    true
}

/// Queues `input`'s turn behind its conversation's earlier ones, to start once `start` is on
/// disk; a panic in it is [`failed`].
pub(super) fn enqueue(app: &Arc<App>, out: &SharedMessenger, input: TurnInput, start: Start) {
    let (chat, update) = (input.conversation(), input.update);
    let on_panic = failed(app.clone(), out.clone(), chat, update);
    let job = counted(app.clone(), out.clone(), input, start);
    app.queues().enqueue(chat, update, job, on_panic);
}

/// After a turn panicked: its update is marked failed (flushed, so it is never replayed, not
/// even after a restart), and the user is told once that the message could not be handled.
async fn failed(app: Arc<App>, out: SharedMessenger, chat: Conversation, update: Option<UpdateId>) {
    if let Some(update) = update {
        tracing::error!(
            %update,
            %chat,
            "a turn panicked; its message is marked failed"
        );
        let written = app.store().inbox().set_state(update, InboxState::Failed);
        // Dropped (logged): the user is told; the update stays unfinished, so the next start
        // resumes it (runs it once more) instead of leaving it failed.
        if let Err(e) = written.and(app.store().db().flush_async().await) {
            tracing::warn!(%update, error = %e, "cannot record a failed turn");
        }
    }
    out.notice(chat, PANIC_NOTICE).await;
}
