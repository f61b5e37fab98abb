//! The visibility protocol: what the inbox records as a turn's answer becomes visible, so
//! recovery after a crash never sends an answer twice. An update goes `Pending` → (stored) →
//! `Visible { message: None }` just before the first send → `Visible { message: Some(id) }`
//! once the first message exists (later parts of a long answer beside it) → `Answered`.
//! `Visible` and `Answered` are flushed, with the turn's history written before them.

use std::sync::Arc;

use super::messenger::OnVisible;
use crate::app::App;
use crate::store::InboxState;

/// Records (flushed) that the answer of `update` may be visible, before its first send, and
/// (`with_id`) the ids of the messages that show it, after each send (the first in the state,
/// later parts of a long answer beside it): what recovery needs to never send an answer twice.
/// An answer sent whole is marked `Answered` right after its send, which says more than its
/// id, so it skips that second fsync.
pub(super) fn record_visible(app: &Arc<App>, update: Option<u32>, with_id: bool) -> OnVisible {
    let app = app.clone();
    Arc::new(move |message| {
        let app = app.clone();
        Box::pin(async move {
            let Some(update) = update else {
                return;
            };
            match message {
                None => set_state(&app, update, InboxState::Visible { message }).await,
                Some(_) if !with_id => {}
                // A later part of an answer already recorded by its first message.
                Some(id) if app.store().visible_message(update).is_some_and(|f| f != id) => {
                    let added = app.store().add_visible_part(update, id);
                    if let Err(e) = added.and(app.store().flush_async().await) {
                        tracing::warn!(update, error = %e, "cannot record an answer's part");
                    }
                }
                Some(_) => set_state(&app, update, InboxState::Visible { message }).await,
            }
        })
    })
}

/// Marks an update's progress; `Answered` and `Visible` are flushed to disk (with the turn's
/// history written before them), so a crash right after does not send the answer again.
/// Failures are logged: recovery then redoes a little.
pub(super) async fn set_state(app: &App, update: u32, state: InboxState) {
    let written = app.store().set_update_state(update, state);
    let flushed = match written {
        Ok(()) if matches!(state, InboxState::Answered | InboxState::Visible { .. }) => {
            app.store().flush_async().await
        }
        other => other,
    };
    if let Err(e) = flushed {
        tracing::warn!(update, error = %e, "cannot record an update's progress");
    }
}
