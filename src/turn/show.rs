//! Stage four, show: the answer goes on screen (finishing the live display's messages, or
//! the messages of an answer a crash interrupted) with its buttons, after the history write,
//! and the inbox records it visible and then answered, so recovery never sends it twice. An
//! answer to a voice or video note is then spoken too, in the background (see [`speak`]).

use super::follow_up::{FollowUps, Quick};
use super::messenger::{Keyboard, Options};
use super::speak;
use super::state::Turn;
use super::think::Thought;
use super::visibility::{record_visible, set_state};
use super::working::record_answer;
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
    let on_visible = turn.clock.first_text(on_visible);
    let (at, reply_to) = (turn.at(), turn.input.request.reply_to);
    // Owed (on disk) before the text is shown, so a crash after it still speaks it once.
    let spoken = speak::owe(turn, &result.status, &result.answer).await;
    let shown = turn
        .out
        .answer(at, reply_to, live, &result.answer, keyboard, on_visible)
        .await;
    match spoken {
        // Never a voice without its text: a text Telegram would not take is not spoken.
        Some(update) if shown.is_empty() => speak::settle(&turn.app, update),
        Some(update) => speak::start(&turn.app, &turn.out, update),
        None => {}
    }
    turn.control.apply(Event::Show);
    turn.clock.shown();
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
    record_answer(turn, follow_ups.feedback.as_deref(), &shown);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Attached;
    use crate::turn::messenger::Live;
    use crate::turn::testing::{
        NO_LLM, Recorder, SENT, Shown, UPDATE, accept, app, input, state, thought, turn,
    };

    /// The buttons under an answer, by how its turn ended and what is ready.
    #[test]
    fn the_keyboard_fits_how_the_turn_ended() {
        let fb = || Some("fb".to_string());
        let attached = || {
            Quick::Attached(Attached {
                ticket: "t".into(),
                labels: vec!["a".into()],
            })
        };
        let overflow = TurnStatus::LlmFailed(LlmError::ContextOverflow {
            message: "too long".into(),
        });
        let offered = Keyboard::Answer {
            options: Options::Offered {
                ticket: "t".into(),
                labels: vec!["a".into()],
            },
            feedback: fb(),
            vote: None,
        };
        let cases = [
            (
                "no options",
                TurnStatus::Answered,
                Quick::Nothing,
                None,
                Keyboard::answer(fb()),
            ),
            (
                "options later",
                TurnStatus::Answered,
                Quick::Later,
                None,
                Keyboard::answer(fb()),
            ),
            (
                "options ready",
                TurnStatus::Answered,
                attached(),
                None,
                offered,
            ),
            ("too long", overflow, Quick::Nothing, None, Keyboard::Clear),
            (
                "no answer",
                TurnStatus::NoAnswer,
                Quick::Nothing,
                Some("r".into()),
                Keyboard::Retry("r".into()),
            ),
        ];
        for (name, status, quick, retry, want) in cases {
            assert_eq!(keyboard(&status, &quick, fb(), retry), want, "{name}");
        }
    }

    /// The answer is shown, then its update is answered; a resumed answer that cannot be shown
    /// says the bot was restarted.
    #[tokio::test]
    async fn the_answer_is_shown_and_its_update_answered() {
        let cases = [("shown", None, false), ("resumed, refused", Some(42), true)];
        for (name, showing, refusing) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let out = Recorder::new();
            out.refusing
                .store(refusing, std::sync::atomic::Ordering::SeqCst);
            let input = input("question");
            accept(&app, &input);
            if let Some(message) = showing {
                let visible = InboxState::Visible {
                    message: Some(message),
                };
                app.store().inbox().set_state(UPDATE, visible).unwrap();
            }
            let turn = turn(&app, &out, input).await;
            let thought = thought(TurnStatus::Answered, "question", "answer");
            let follow_ups = FollowUps::none(Some("fb".into()));
            let shown = show(&turn, thought, &follow_ups, &Quick::Nothing).await;
            let want = if refusing {
                assert!(shown.is_empty(), "{name}");
                Shown::Notice(turn.at(), RESTART_NOTICE.to_string())
            } else {
                assert_eq!(shown, vec![SENT], "{name}");
                Shown::Answer {
                    live: Live::default(),
                    text: "answer".into(),
                    keyboard: Keyboard::answer(Some("fb".into())),
                }
            };
            assert_eq!(out.shown(), vec![want], "{name}");
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while state(&app, UPDATE).is_some() {
                assert!(std::time::Instant::now() < until, "{name}: never answered");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
