//! Stage four, show: the answer goes on screen (finishing the live display's messages, or
//! the messages of an answer a crash interrupted) with its buttons, after the history write,
//! and the inbox records it visible and then answered, so recovery never sends it twice.

use super::follow_up::{FollowUps, Quick};
use super::messenger::{Keyboard, Options};
use super::state::Turn;
use super::think::Thought;
use super::visibility::{record_visible, set_state};
use crate::agent::TurnStatus;
use crate::cancel::Event;
use crate::llm::LlmError;
use crate::store::InboxState;
use crate::texts::turn::RESTART_NOTICE;

/// Shows the turn's answer with its keyboard; returns the ids of the messages that show it
/// (empty when Telegram refused them all).
pub(super) async fn show(
    turn: &Turn,
    thought: Thought,
    follow_ups: &FollowUps,
    quick: &Quick,
) -> Vec<i32> {
    let Thought {
        result,
        live,
        retry,
    } = thought;
    let feedback = follow_ups.feedback.clone();
    let keyboard = keyboard(&result.status, quick, feedback, retry);
    // An answer sent whole is marked answered right after its send; one that finishes a live
    // display records the parts it adds, as the display recorded its own.
    let on_visible = record_visible(&turn.app, turn.input.update, !live.messages.is_empty());
    let (at, reply_to) = (turn.at(), turn.input.reply_to);
    let shown = turn
        .out
        .answer(at, reply_to, live, &result.answer, keyboard, on_visible)
        .await;
    turn.control.apply(Event::Show);
    if turn.resumed.is_some() && shown.is_empty() {
        turn.out.notice(at, RESTART_NOTICE).await;
    }
    // Shown, or given up on after Telegram's retries: either way, not to be redone. Recorded
    // (and flushed) in the background, so the chat's next message does not wait for an fsync.
    if let Some(update) = turn.input.update {
        let app = turn.app.clone();
        turn.app
            .spawn(async move { set_state(&app, update, InboxState::Answered).await });
    }
    shown
}

/// The buttons under an answer: 🔁 Retry under a passing failure, 🧹 Clear under a
/// conversation too long for the model, else the options ready in time (if any) beside the
/// 👍/👎 of feedback ticket `feedback`.
fn keyboard(
    status: &TurnStatus,
    quick: &Quick,
    feedback: Option<String>,
    retry: Option<String>,
) -> Keyboard {
    let keyboard = match quick {
        _ if matches!(
            status,
            TurnStatus::LlmFailed(LlmError::ContextOverflow { .. })
        ) =>
        {
            Keyboard::Clear
        }
        Quick::Attached(attached) => Keyboard::Answer {
            options: Options::Offered {
                ticket: attached.ticket.clone(),
                labels: attached.labels.clone(),
            },
            feedback,
            vote: None,
        },
        Quick::Nothing | Quick::Later => Keyboard::answer(feedback),
    };
    retry.map_or(keyboard, Keyboard::Retry)
}
