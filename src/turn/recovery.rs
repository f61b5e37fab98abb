//! At start-up, what a crash or shutdown interrupted is finished, never done twice: a turn
//! that was not stored runs again; a stored turn whose answer may not have reached the user
//! has its answer sent (or finished in the message already showing it); unfinished
//! reflections resume. What the inbox records for this is kept by [`super::visibility`].

use std::sync::Arc;

use super::accept::enqueue;
use super::input::TurnInput;
use super::messenger::{Keyboard, Live, Out, unrecorded};
use super::reflect::{bare_prefix, queue_reflection};
use super::visibility::{record_visible, set_state};
use crate::app::App;
use crate::ids::UpdateId;
use crate::store::inbox_state::{self, Resume};
use crate::store::{InboxEntry, InboxState};
use crate::texts::turn::RESTART_NOTICE;

/// At start-up: finishes what a crash or shutdown interrupted. A turn that was not stored runs
/// again; a stored turn whose answer may not have reached the user has its answer sent;
/// unfinished reflections resume. The prune and compaction schedule is started apart, beside
/// this (see [`crate::maintenance`]).
pub async fn recover(app: &Arc<App>, out: &Out) {
    for (id, job) in app.learning().pending_reflections() {
        tracing::info!(id, chat = %job.chat, "resuming an unfinished reflection");
        let prefix = bare_prefix(app, &job);
        queue_reflection(app, id, job, prefix);
    }
    for (update, entry) in app.store().inbox().unfinished() {
        resume(app, out, update, entry).await;
    }
}

/// Finishes unfinished inbox update `update`, by what its state and the stored answer say.
async fn resume(app: &Arc<App>, out: &Out, update: UpdateId, entry: InboxEntry) {
    let chat = entry.request.conversation();
    let answer = app.store().history().stored_answer(chat, update);
    match (inbox_state::resume(entry.state, answer.is_some()), answer) {
        // The answer may be on screen, in a message we cannot name: never a second one.
        (Resume::Notice, _) => {
            tracing::info!(%update, %chat, "a crash came as an answer was being sent");
            out.notice(chat, RESTART_NOTICE).await;
            set_state(app, update, InboxState::Answered).await;
        }
        (Resume::Finish, Some(answer)) => {
            tracing::info!(%update, %chat, "finishing an answer a crash interrupted");
            let live = Live {
                messages: app.store().inbox().visible_messages(update),
            };
            let shown = out
                .answer(chat, None, live, &answer, Keyboard::None, unrecorded())
                .await;
            if shown.is_empty() {
                out.notice(chat, RESTART_NOTICE).await;
            }
            set_state(app, update, InboxState::Answered).await;
        }
        (Resume::Send, Some(answer)) => {
            tracing::info!(%update, %chat, "sending an answer a crash held back");
            let on_visible = record_visible(app, Some(update), false);
            let live = Live::default();
            out.answer(
                chat,
                entry.request.reply_to,
                live,
                &answer,
                Keyboard::None,
                on_visible,
            )
            .await;
            set_state(app, update, InboxState::Answered).await;
        }
        // Not stored yet: run again (into the message already showing it, if any).
        (Resume::Rerun, _) => {
            tracing::info!(%update, %chat, "resuming a turn a crash interrupted");
            let input = TurnInput::resumed(update, entry);
            enqueue(app, out, input);
        }
        // Stored, but the chat was cleared since: nothing left to send.
        (Resume::Close | Resume::Finish | Resume::Send, _) => {
            set_state(app, update, InboxState::Answered).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use crate::store::Provenance;
    use crate::turn::testing::{NO_LLM, Recorder, Shown, UPDATE, accept, app, input, state};

    /// What a crash left is finished once, never sent twice.
    #[tokio::test]
    async fn what_a_crash_interrupted_is_finished_once() {
        let answer = || Shown::Answer {
            live: Live::default(),
            text: "kept".into(),
            keyboard: Keyboard::None,
        };
        let restarted = Shown::Notice(input("").conversation(), RESTART_NOTICE.to_string());
        let unknown = Some(InboxState::Visible { message: None });
        let shown = Some(InboxState::Visible { message: Some(42) });
        let finished = Shown::Answer {
            live: Live { messages: vec![42] },
            text: "kept".into(),
            keyboard: Keyboard::None,
        };
        let cases = [
            ("stored, not shown", true, None, vec![answer()]),
            (
                "shown in a message never named",
                true,
                unknown,
                vec![restarted],
            ),
            ("shown in a known message", true, shown, vec![finished]),
            ("cleared since", false, None, vec![]),
        ];
        for (name, stored, visible, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let input = input("question");
            accept(&app, &input);
            if stored {
                let turn = [
                    ChatMessage::user("question"),
                    ChatMessage::assistant("kept"),
                ];
                let at = input.conversation();
                let provenance = Provenance::default();
                let appended =
                    app.store()
                        .history()
                        .append(at, 0, Some(UPDATE), &turn, &provenance);
                assert!(appended.unwrap(), "{name}");
            }
            app.store().inbox().mark_stored(UPDATE).unwrap();
            if let Some(visible) = visible {
                app.store().inbox().set_state(UPDATE, visible).unwrap();
            }
            let out = Recorder::new();
            let out_: Out = out.clone();
            recover(&app, &out_).await;
            assert_eq!(out.shown(), want, "{name}");
            assert_eq!(state(&app, UPDATE), None, "{name}: done");
        }
    }
}
