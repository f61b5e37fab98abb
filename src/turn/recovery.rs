//! At start-up, what a crash or shutdown interrupted is finished, never done twice: a turn
//! that was not stored runs again; a stored turn whose answer may not have reached the user
//! has its answer sent (or finished in the message already showing it); unfinished
//! reflections resume. What the inbox records for this is kept by [`super::visibility`].
//! Each of these starts is counted on disk before it runs, and an update started
//! `max_turn_attempts` times is given up with an apology instead (see [`super::quarantine`]).
//! The working reaction a crash left on the user's message is taken off. Spoken replies owed
//! for answers that are done are sent (see [`super::speak`]); one whose text was not shown
//! (given up, the chat cleared, the resend refused) is forgotten: never a voice without its
//! text.

use std::sync::Arc;

use super::accept::enqueue;
use super::input::TurnInput;
use super::messenger::{Keyboard, Live, SharedMessenger, unrecorded};
use super::quarantine::{Start, count_start, quarantine};
use super::reflect::{bare_prefix, queue_reflection};
use super::speak;
use super::visibility::{record_visible, set_state};
use super::working::clear_left;
use crate::app::App;
use crate::ids::UpdateId;
use crate::store::inbox_state::{self, Resume};
use crate::store::{InboxEntry, InboxState};
use crate::texts::turn::RESTART_NOTICE;

/// At start-up: finishes what a crash or shutdown interrupted. A turn that was not stored runs
/// again; a stored turn whose answer may not have reached the user has its answer sent;
/// unfinished reflections resume. The prune and compaction schedule is started apart, beside
/// this (see [`crate::maintenance`]).
pub async fn recover(app: &Arc<App>, out: &SharedMessenger) {
    for (id, job) in app.learning().pending_reflections() {
        tracing::info!(id, chat = %job.chat, "resuming an unfinished reflection");
        let prefix = bare_prefix(app, &job);
        queue_reflection(app, id, job, prefix);
    }
    for (update, entry) in app.store().inbox().unfinished() {
        resume(app, out, update, entry).await;
    }
    // After the answers: a spoken reply is sent once its text is shown.
    speak::resume(app, out);
}

/// Finishes unfinished inbox update `update`, by what its state, its starts so far and the
/// stored answer say. Every start made here is counted first (a rerun's when it is dequeued).
async fn resume(app: &Arc<App>, out: &SharedMessenger, update: UpdateId, entry: InboxEntry) {
    let chat = entry.request.conversation();
    let answer = app.store().history().stored_answer(chat, update);
    let progress = entry.progress();
    let max_starts = app.config().max_turn_attempts;
    let resume = inbox_state::resume(&progress, answer.is_some(), max_starts);
    clear_left(app, out, &entry.request);
    let sends = matches!(resume, Resume::Notice | Resume::Finish | Resume::Send);
    if sends && !count_start(app, update).await {
        return;
    }
    match (resume, answer) {
        (Resume::Quarantine, _) => {
            speak::settle(app, update);
            quarantine(app, out, update, &entry.request, progress.starts()).await;
        }
        // The answer may be on screen, in a message we cannot name: never a second one.
        (Resume::Notice, _) => {
            tracing::info!(%update, %chat, "a crash came as an answer was being sent");
            // Its text may not be on screen: never a voice without it.
            speak::settle(app, update);
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
                speak::settle(app, update);
                out.notice(chat, RESTART_NOTICE).await;
            }
            set_state(app, update, InboxState::Answered).await;
        }
        (Resume::Send, Some(answer)) => {
            tracing::info!(%update, %chat, "sending an answer a crash held back");
            let on_visible = record_visible(app, Some(update), false);
            let live = Live::default();
            let shown = out
                .answer(
                    chat,
                    entry.request.reply_to,
                    live,
                    &answer,
                    Keyboard::None,
                    on_visible,
                )
                .await;
            if shown.is_empty() {
                speak::settle(app, update);
            }
            set_state(app, update, InboxState::Answered).await;
        }
        // Not stored yet: run again (into the message already showing it, if any).
        (Resume::Rerun, _) => {
            tracing::info!(%update, %chat, "resuming a turn a crash interrupted");
            let input = TurnInput::resumed(update, entry);
            enqueue(app, out, input, Start::Resumed);
        }
        // Stored, but the chat was cleared since: nothing left to send.
        (Resume::Close | Resume::Finish | Resume::Send, _) => {
            speak::settle(app, update);
            set_state(app, update, InboxState::Answered).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UserId};
    use crate::llm::ChatMessage;
    use crate::store::TurnProvenance;
    use crate::store::{Attachment, AttachmentKind, TurnRequest};
    use crate::texts::turn::gave_up;
    use crate::turn::testing::{
        ALICE, NO_LLM, Recorder, Shown, UPDATE, accept, app, input, silent_llm, state,
    };

    /// The message Alice's requests name as hers (the one that carries the working reaction).
    const HERS: i32 = 11;

    /// A request of each kind of update that starts a turn, as its handler records it.
    fn every_kind() -> Vec<(&'static str, TurnRequest)> {
        let alice = || TurnRequest::new(ChatId(ALICE), UserId(ALICE.unsigned_abs()), "hi");
        let file = |kind, name: &str| Attachment {
            kind,
            file_id: "f".into(),
            name: name.into(),
            mime: String::new(),
            seconds: 3,
            voice: false,
        };
        vec![
            (
                "a message",
                TurnRequest {
                    message: Some(HERS),
                    ..alice()
                },
            ),
            (
                "a document",
                TurnRequest {
                    message: Some(HERS),
                    attachment: Some(file(AttachmentKind::Document, "a.txt")),
                    ..alice()
                },
            ),
            (
                "a voice note",
                TurnRequest {
                    message: Some(HERS),
                    attachment: Some(file(AttachmentKind::Audio, "")),
                    ..alice()
                },
            ),
            // An option press and a 🔁 Retry press carry no message of the user's.
            ("an option or retry press", alice()),
            (
                "a scheduled task's run",
                TurnRequest {
                    text: crate::texts::tasks::task_turn("water the plants", None),
                    ..alice()
                },
            ),
            (
                "a scheduled reminder",
                TurnRequest {
                    reminder: true,
                    ..alice()
                },
            ),
        ]
    }

    /// Records `request` as update [`UPDATE`], `restarts` times started again by recovery,
    /// and (`stored`) its answer "kept" in the history, in `state`.
    fn crashed(app: &App, request: &TurnRequest, restarts: u32, stored: bool, state: InboxState) {
        let mut entry = InboxEntry::pending(request.clone(), chrono::Utc::now().timestamp());
        entry.restarts = restarts;
        app.store().inbox().accept(UPDATE, &entry).unwrap();
        if stored {
            let turn = [ChatMessage::user("hi"), ChatMessage::assistant("kept")];
            let at = request.conversation();
            let provenance = TurnProvenance::default();
            let appended = app
                .store()
                .history()
                .append(at, 0, Some(UPDATE), &turn, &provenance);
            assert!(appended.unwrap());
        }
        if state != InboxState::Pending {
            app.store().inbox().set_state(UPDATE, state).unwrap();
        }
    }

    /// Waits (at most 5 s) until `done` holds.
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// An update that started as often as `max_turn_attempts` allows is given up, whatever its
    /// kind and however far it got: answered, never run or sent again, one apology replying to
    /// the user's message, and the working reaction taken off it.
    #[tokio::test]
    async fn every_kind_of_update_started_too_often_is_given_up_with_one_apology() {
        let mut cases: Vec<(String, TurnRequest, bool, InboxState)> = every_kind()
            .into_iter()
            .map(|(kind, request)| (kind.to_string(), request, false, InboxState::Pending))
            .collect();
        let message = every_kind().remove(0).1;
        for (name, stored, state) in [
            ("its stored answer never sent", true, InboxState::Stored),
            (
                "its answer shown in a known message",
                true,
                InboxState::Visible { message: Some(42) },
            ),
            (
                "its answer maybe shown",
                true,
                InboxState::Visible { message: None },
            ),
            (
                "its rerun shown, not stored",
                false,
                InboxState::Visible { message: Some(42) },
            ),
        ] {
            cases.push((name.to_string(), message.clone(), stored, state));
        }
        for (name, request, stored, at) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            crashed(&app, &request, 1, stored, at);
            let out = Recorder::new();
            let out_: SharedMessenger = out.clone();
            recover(&app, &out_).await;
            assert_eq!(state(&app, UPDATE), None, "{name}: done");
            let apology = Shown::Answer {
                live: Live::default(),
                text: gave_up(2),
                keyboard: Keyboard::None,
            };
            if request.message.is_some() {
                let off = (ChatId(ALICE), HERS, None);
                until(name.as_str(), || out.reactions() == [off.clone()]).await;
            }
            assert!(app.queues().drain(std::time::Duration::from_secs(5)).await);
            assert_eq!(out.shown(), [apology], "{name}: one apology, nothing run");
            assert_eq!(
                out.reactions().len(),
                usize::from(request.message.is_some())
            );
            // Never started again.
            recover(&app, &out_).await;
            assert!(app.queues().drain(std::time::Duration::from_secs(5)).await);
            assert_eq!(out.shown().len(), 1, "{name}: given up once");
        }
    }

    /// A crash leaves the working reaction on the user's message: recovery takes it off once,
    /// however it finishes the update (and a turn a button started has no message to clear).
    #[tokio::test]
    async fn the_working_reaction_a_crash_left_is_taken_off_once() {
        let cases = [
            ("run again", false, InboxState::Pending),
            ("its stored answer sent", true, InboxState::Stored),
            (
                "finished in its message",
                true,
                InboxState::Visible { message: Some(42) },
            ),
            ("a notice", true, InboxState::Visible { message: None }),
            ("cleared since", false, InboxState::Stored),
        ];
        let mut request = every_kind().remove(0).1;
        for (name, stored, at) in cases {
            for mine in [Some(HERS), None] {
                request.message = mine;
                let dir = tempfile::tempdir().unwrap();
                let app = app(dir.path(), NO_LLM);
                crashed(&app, &request, 0, stored, at);
                let out = Recorder::new();
                let out_: SharedMessenger = out.clone();
                recover(&app, &out_).await;
                assert!(app.queues().drain(std::time::Duration::from_secs(5)).await);
                if mine.is_some() {
                    let off = (ChatId(ALICE), HERS, None);
                    until(name, || !out.reactions().is_empty()).await;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    assert_eq!(out.reactions(), [off], "{name}: taken off once");
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    assert_eq!(out.reactions(), [], "{name}: no message of the user's");
                }
            }
        }
    }

    /// Below the limit every kind is started again, and each start recovery makes is counted
    /// on disk: a rerun's once it is dequeued (not while it waits behind the chat's earlier
    /// turn), a stored answer's before it is sent.
    #[tokio::test]
    async fn every_start_recovery_makes_is_counted_when_it_starts() {
        let llm = silent_llm().await;
        for (kind, request) in every_kind() {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), &llm);
            crashed(&app, &request, 0, false, InboxState::Pending);
            // The chat's lane is busy with an earlier turn until `release`.
            let (release, hold) = tokio::sync::oneshot::channel::<()>();
            let at = request.conversation();
            app.queues()
                .enqueue(at, None, async { drop(hold.await) }, async {});
            let out = Recorder::new();
            let out_: SharedMessenger = out.clone();
            recover(&app, &out_).await;
            let restarts = || app.store().inbox().entry(UPDATE).unwrap().restarts;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(restarts(), 0, "{kind}: queued, not started: not counted");
            release.send(()).unwrap();
            until(kind, || restarts() == 1).await;
            app.queues().abort_all();
        }
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path(), NO_LLM);
        crashed(&app, &every_kind()[0].1, 0, true, InboxState::Stored);
        let out = Recorder::new();
        let out_: SharedMessenger = out.clone();
        recover(&app, &out_).await;
        assert_eq!(out.shown().len(), 1, "the stored answer is sent");
        let entry = app.store().inbox().entry(UPDATE).unwrap();
        assert_eq!(
            (entry.state, entry.restarts),
            (InboxState::Answered, 1),
            "and its start counted"
        );
    }

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
                let provenance = TurnProvenance::default();
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
            let out_: SharedMessenger = out.clone();
            recover(&app, &out_).await;
            assert_eq!(out.shown(), want, "{name}");
            assert_eq!(state(&app, UPDATE), None, "{name}: done");
        }
    }
}
