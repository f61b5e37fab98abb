//! The visibility protocol: what the inbox records as a turn's answer becomes visible, so
//! recovery after a crash never sends an answer twice. An update goes `Pending` → (stored) →
//! `Visible { message: None }` just before the first send → `Visible { message: Some(id) }`
//! once the first message exists (later parts of a long answer beside it) → `Answered`.
//! `Visible` and `Answered` are flushed, with the turn's history written before them.

use std::sync::Arc;

use super::messenger::OnVisible;
use crate::app::App;
use crate::ids::UpdateId;
use crate::store::InboxState;

/// Records (flushed) that the answer of `update` may be visible, before its first send, and
/// (`with_id`) the ids of the messages that show it, after each send (the first in the state,
/// later parts of a long answer beside it): what recovery needs to never send an answer twice.
/// An answer sent whole is marked `Answered` right after its send, which says more than its
/// id, so it skips that second fsync.
pub(super) fn record_visible(app: &Arc<App>, update: Option<UpdateId>, with_id: bool) -> OnVisible {
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
                Some(id)
                    if app
                        .store()
                        .inbox()
                        .visible_message(update)
                        .is_some_and(|f| f != id) =>
                {
                    let added = app.store().inbox().add_visible_part(update, id);
                    // Dropped (logged): the answer is shown; only after a crash, recovery edits
                    // the messages it knows and sends this part anew, so it may show twice.
                    if let Err(e) = added.and(app.store().db().flush_async().await) {
                        tracing::warn!(%update, error = %e, "cannot record an answer's part");
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
pub(super) async fn set_state(app: &App, update: UpdateId, state: InboxState) {
    let written = app.store().inbox().set_state(update, state);
    let flushed = match written {
        Ok(()) if matches!(state, InboxState::Answered | InboxState::Visible { .. }) => {
            app.store().db().flush_async().await
        }
        other => other,
    };
    // Dropped (logged): the turn goes on; only a crash before the next record makes recovery
    // redo a step (a notice, an edit again, or at worst a second answer or a rerun).
    if let Err(e) = flushed {
        tracing::warn!(%update, error = %e, "cannot record an update's progress");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::testing::{NO_LLM, UPDATE, accept, app, input, state};

    /// Before the first send the answer may be visible; then its first message is recorded,
    /// and a long answer's later parts beside it (unless the send records no ids).
    #[tokio::test]
    async fn an_answer_is_recorded_visible_then_in_its_messages() {
        let cases = [
            ("with ids", true, Some(5), vec![5, 6]),
            ("sent whole", false, None, vec![]),
        ];
        for (name, with_id, first, messages) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            accept(&app, &input("hi"));
            let on_visible = record_visible(&app, Some(UPDATE), with_id);
            on_visible(None).await;
            let visible = InboxState::Visible { message: None };
            assert_eq!(
                state(&app, UPDATE),
                Some(visible),
                "{name}: before the send"
            );
            on_visible(Some(5)).await;
            on_visible(Some(6)).await;
            let visible = InboxState::Visible { message: first };
            assert_eq!(
                state(&app, UPDATE),
                Some(visible),
                "{name}: after the sends"
            );
            assert_eq!(
                app.store().inbox().visible_messages(UPDATE),
                messages,
                "{name}"
            );
            set_state(&app, UPDATE, InboxState::Answered).await;
            assert_eq!(state(&app, UPDATE), None, "{name}: answered");
        }
    }
}
