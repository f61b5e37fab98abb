//! The option buttons of a chat's answers: the newest answer's are live, an earlier answer's
//! are taken off when a new turn or a clear comes, and the vote given on an answer stays
//! shown through every keyboard edit.

use std::sync::Arc;

use super::messenger::{Keyboard, Options, SharedMessenger};
use crate::app::App;
use crate::conversation::Conversation;
use crate::options;
use crate::store::OfferedOptions;

/// Takes the chat's live option buttons off the answer that shows them (its 👍/👎 stay, with
/// the vote given), in the background: a new turn or a clear makes them an earlier answer's.
/// An answer whose option was chosen keeps its mark. Returns the new option round for this turn's own options (`None`
/// if the chat's state cannot be read: no options are offered then).
pub(crate) fn retire_options(
    app: &Arc<App>,
    out: &SharedMessenger,
    chat: Conversation,
) -> Option<u64> {
    // Handled: without a round this turn offers no options (see the doc above); the earlier
    // answer's buttons stay until a later turn retires them.
    let (round, offered) = app
        .store()
        .chats()
        .retire_offered(chat)
        .inspect_err(|e| tracing::warn!(%chat, error = %e, "cannot retire the chat's options"))
        .ok()?;
    if let Some(offered) = offered
        && app
            .store()
            .tickets()
            .get(&offered.ticket)
            .is_none_or(|ticket| ticket.chosen.is_none())
    {
        let out = out.clone();
        let vote = vote_on(app, offered.feedback.as_deref());
        app.spawn(async move {
            let keyboard = Keyboard::Answer {
                options: Options::None,
                feedback: offered.feedback,
                vote,
            };
            out.set_keyboard(chat.chat, offered.message, keyboard).await;
        });
    }
    Some(round)
}

/// The vote given so far on feedback ticket `feedback`, for a keyboard edit to keep showing.
pub(crate) fn vote_on(app: &App, feedback: Option<&str>) -> Option<bool> {
    app.store().tickets().feedback_vote(feedback?)
}

/// Records that `message` shows `attached` as the chat's live options; `false` when a newer
/// turn or a clear came first (the options then belong to an earlier answer).
pub(super) fn offer(
    app: &App,
    chat: Conversation,
    round: u64,
    attached: &options::Attached,
    message: i32,
    feedback: Option<String>,
) -> bool {
    let offered = OfferedOptions {
        ticket: attached.ticket.clone(),
        message,
        feedback,
    };
    let recorded = app
        .store()
        .tickets()
        .set_message(&attached.ticket, message)
        .and_then(|()| {
            // A reaction on the answer rebuilds its keyboard with these options.
            app.store()
                .answers()
                .set_options(chat.chat, message, &attached.ticket)
        })
        .and_then(|()| app.store().chats().offer(chat, round, &offered));
    match recorded {
        Ok(current) => current,
        Err(e) => {
            tracing::warn!(%chat, error = %e, "cannot record the answer's options");
            false
        }
    }
}
