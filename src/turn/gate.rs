//! Whether a turn may run, decided when it runs rather than when its message arrived: a turn
//! waits in its chat's queue, or in the inbox across a restart, and meanwhile its user may have
//! been taken off the allow-list (a restart with a new config) or their daily budget spent by
//! the turns before it. Every turn passes here: a typed message, an option or 🔁 Retry press,
//! and a turn recovered after a restart.
//!
//! A turn that may not run makes no LLM call and its update is finished, so recovery never
//! tries it again. A user who is no longer allowed is told nothing: the operator revoked their
//! access, the bot no longer speaks for them, and their next message gets the stranger's
//! refusal (once a day per chat) like anyone else's. A spent budget is told once a day per
//! conversation (see [`crate::budget`]), so a user with five queued turns reads one message.

use super::messenger::Messenger;
use crate::app::App;
use crate::budget::Payer;
use crate::conversation::Conversation;
use crate::ids::{UpdateId, UserId};
use crate::metrics::TurnOutcome;
use crate::role::Role;
use crate::store::InboxState;
use crate::texts::agent::budget_spent;

/// A turn that may run: its user's role now, and who pays for its calls.
pub(super) struct Admitted {
    pub(super) role: Role,
    pub(super) payer: Payer,
}

/// Checks `user`'s turn in `chat` (of inbox update `update`) now; `None` when the turn is
/// dropped (its update finished, and a spent budget told through `out`).
pub(super) async fn admit(
    app: &App,
    out: &dyn Messenger,
    user: UserId,
    chat: Conversation,
    update: Option<UpdateId>,
) -> Option<Admitted> {
    let role = app.config().role_of(user);
    if role == Role::Stranger {
        tracing::info!(%user, %chat, update = update.map(|u| u.0), "dropping a turn of a user no longer allowed");
        finish(app, update).await;
        return None;
    }
    let payer = app.ledger().payer(Some(user), Some(chat));
    if let Some(spent) = payer.spent() {
        tracing::info!(%user, %chat, update = update.map(|u| u.0), "dropping a turn: the user's budget is spent");
        if payer.first_refusal(chat) {
            out.notice(chat, &budget_spent(spent.0)).await;
        }
        finish(app, update).await;
        return None;
    }
    Some(Admitted { role, payer })
}

/// A dropped turn's update is done (flushed): never resumed, never answered.
async fn finish(app: &App, update: Option<UpdateId>) {
    app.metrics().turn(TurnOutcome::Refused);
    let Some(update) = update else {
        return;
    };
    let written = app.store().inbox().set_state(update, InboxState::Answered);
    // Dropped (logged): the update stays Pending, so the next start runs it again through this
    // gate, which decides anew (a user still not allowed, or still spent, is dropped again).
    if let Err(e) = written.and(app.store().db().flush_async().await) {
        tracing::warn!(%update, error = %e, "cannot record a dropped turn");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::testing::{ADMIN, ALICE, NO_LLM, Recorder, UPDATE, accept, app, from, state};

    /// Only a user allowed now runs a turn; a stranger's is dropped silently, its update done.
    #[tokio::test]
    async fn only_users_allowed_now_are_admitted() {
        let cases = [
            ("an allowed user", ALICE, true),
            ("an admin", ADMIN, true),
            ("a user no longer allowed", 666, false),
        ];
        for (name, user, admitted) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let out = Recorder::new();
            let input = from(user, "hi");
            accept(&app, &input);
            let at = input.conversation();
            let got = admit(&app, out.as_ref(), input.request.user, at, input.update).await;
            assert_eq!(got.is_some(), admitted, "{name}");
            assert_eq!(state(&app, UPDATE).is_some(), admitted, "{name}: update");
            assert!(out.shown().is_empty(), "{name}: nothing is said");
        }
    }
}
