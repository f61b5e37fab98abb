//! Whether a turn may run, decided when it runs rather than when its message arrived: a turn
//! waits in its chat's queue, or in the inbox across a restart, and meanwhile its user may have
//! been taken off the allow-list (a restart with a new config). Every turn passes here: a typed
//! message, an option or 🔁 Retry press, and a turn recovered after a restart.
//!
//! A turn that may not run makes no LLM call and its update is finished, so recovery never
//! tries it again. A user who is no longer allowed is told nothing: the operator revoked their
//! access, the bot no longer speaks for them, and their next message gets the stranger's
//! refusal (once a day per chat) like anyone else's.

use crate::app::App;
use crate::config::Role;
use crate::conversation::Conversation;
use crate::store::InboxState;

/// Checks `user`'s turn in `chat` (of inbox update `update`) now: their role, or `None` when
/// the turn is dropped (its update finished).
pub(super) async fn admit(
    app: &App,
    user: u64,
    chat: Conversation,
    update: Option<u32>,
) -> Option<Role> {
    let role = app.config().role_of(user);
    if role == Role::Stranger {
        tracing::info!(user, %chat, update, "dropping a turn of a user no longer allowed");
        finish(app, update).await;
        return None;
    }
    Some(role)
}

/// A dropped turn's update is done (flushed): never resumed, never answered.
async fn finish(app: &App, update: Option<u32>) {
    let Some(update) = update else {
        return;
    };
    let written = app.store().set_update_state(update, InboxState::Answered);
    if let Err(e) = written.and(app.store().flush_async().await) {
        tracing::warn!(update, error = %e, "cannot record a dropped turn");
    }
}
