//! Stage five, follow up: what comes after an answer, in the background on the turn's own
//! request prefix. Its 👍/👎 ticket, its option buttons (extracted, then attached to the
//! answer's send when ready within `options.attach_wait_ms`, else by one keyboard edit), and
//! its reflection (after the options, one after the other, so a local server's shared context
//! is not asked for two long prompts at once, and the second reuses the first's cached prefix),
//! queued only once the answer is on screen, so its work never competes with the answer's.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::messenger::{Keyboard, Options};
use super::offers::{offer, vote_on};
use super::prepare::Basis;
use super::reflect::{forget_reflection, queue_reflection, without_images};
use super::state::Turn;
use super::think::Thought;
use crate::agent::evidence::{evidence_section, grounds, proven_lessons, turn_calls};
use crate::agent::{TurnResult, TurnStatus};
use crate::app::App;
use crate::background::Lane;
use crate::learning::reflection;
use crate::llm::extraction::Prefix;
use crate::options;
use crate::provenance::{Decision, Effect, Provenance, decide};
use crate::store::{FeedbackTicket, ReflectionJob};

/// The follow-ups started for a turn: its 👍/👎 ticket and its options on their way.
pub(super) struct FollowUps {
    pub(super) feedback: Option<String>,
    options: oneshot::Receiver<Option<options::Attached>>,
    /// Dropped once the turn is done with its answer (shown, or the turn ended without it):
    /// the reflection waits for that.
    _answered: oneshot::Sender<()>,
}

/// The answer's options as its send finds them.
#[derive(Debug)]
pub(super) enum Quick {
    /// Ready: they go under the answer in the same call as its 👍/👎.
    Attached(options::Attached),
    /// There are none (none wanted, none found, or they were dropped).
    Nothing,
    /// Not ready yet: they follow by one keyboard edit.
    Later,
}

/// Starts the turn's follow-ups: its 👍/👎 ticket now, its options and reflection in the
/// background. `provenance`: where the turn's text came from, which decides how far what it
/// teaches is trusted (see [`crate::provenance`]).
pub(super) fn start(
    turn: &Turn,
    basis: &Basis,
    thought: &Thought,
    provenance: &Provenance,
) -> FollowUps {
    let (app, input, result) = (&turn.app, &turn.input, &thought.result);
    let answered = matches!(result.status, TurnStatus::Answered);
    let job = reflection_job(turn, basis, result, provenance);
    let feedback = (answered && app.config().learning.feedback_buttons)
        .then(|| feedback_ticket(app, &job, basis, result))
        .flatten();
    let extraction = (app.config().options.enabled && answered).then(|| options::Answer {
        chat: input.request.chat,
        topic: input.request.topic,
        user: input.request.user,
        epoch: basis.epoch,
        feedback: feedback.clone(),
    });
    let (answered, on_answered) = oneshot::channel();
    let options = follow_ups(app, result, job, extraction, on_answered);
    FollowUps {
        feedback,
        options,
        _answered: answered,
    }
}

impl FollowUps {
    /// Follow-ups with feedback ticket `feedback` and no options coming.
    #[cfg(test)]
    pub(super) fn none(feedback: Option<String>) -> Self {
        Self {
            feedback,
            options: oneshot::channel().1,
            _answered: oneshot::channel().0,
        }
    }

    /// Waits at most `wait` for the options, so quick ones come in the answer's own send.
    pub(super) async fn quick(&mut self, wait: Duration) -> Quick {
        match tokio::time::timeout(wait, &mut self.options).await {
            Err(_) => Quick::Later,
            Ok(Ok(Some(attached))) => Quick::Attached(attached),
            Ok(Ok(None) | Err(_)) => Quick::Nothing,
        }
    }
}

/// Records the options shown under the answer's last message (`shown`), or attaches them by
/// one keyboard edit when they come later; nothing when the answer is not on screen or the
/// chat's option round is unknown.
pub(super) fn attach(turn: &Turn, follow_ups: FollowUps, quick: Quick, shown: &[i32]) {
    let (Some(&message), Some(round)) = (shown.last(), turn.round) else {
        return;
    };
    let (app, at, feedback) = (&turn.app, turn.at(), follow_ups.feedback);
    match quick {
        Quick::Attached(attached) => {
            offer(app, at, round, &attached, message, feedback);
        }
        Quick::Nothing => {}
        Quick::Later => {
            let (app2, out, chat) = (app.clone(), turn.out.clone(), turn.input.request.chat);
            let options = follow_ups.options;
            app.spawn(async move {
                let Ok(Some(attached)) = options.await else {
                    return;
                };
                if offer(&app2, at, round, &attached, message, feedback.clone()) {
                    let keyboard = Keyboard::Answer {
                        options: Options::Offered {
                            ticket: attached.ticket,
                            labels: attached.labels,
                        },
                        vote: vote_on(&app2, feedback.as_deref()),
                        feedback,
                    };
                    out.set_keyboard(chat, message, keyboard).await;
                }
            });
        }
    }
}

/// What the turn's reflection (or a 👎's) is about: the task, the tools and how it went, the
/// evidence its calls and a correction give.
fn reflection_job(
    turn: &Turn,
    basis: &Basis,
    result: &TurnResult,
    provenance: &Provenance,
) -> ReflectionJob {
    let calls = turn_calls(&result.messages);
    let trust = decide(Effect::TeachLesson, provenance);
    ReflectionJob {
        chat: turn.input.request.chat,
        user: Some(turn.input.request.user),
        model: basis.model.clone(),
        request: reflection::task_summary(&turn.input.request.text),
        tools: result.tools_used.clone(),
        outcome: result.outcome(),
        external: trust != Decision::Allow,
        untrusted: trust == Decision::Untrusted,
        answer: None,
        skills: basis.context.skills.clone(),
        evidence: evidence_section(&calls, basis.corrected.as_ref()),
        proven: proven_lessons(&calls),
        grounds: Some(grounds(
            &calls,
            basis.corrected.as_ref(),
            &turn.input.request.text,
        )),
    }
}

/// Stores the answer's 👍/👎 ticket (with the rated answer, for a 👎's reflection); its id, or
/// `None` when it cannot be stored (the answer then has no 👍/👎).
fn feedback_ticket(
    app: &App,
    job: &ReflectionJob,
    basis: &Basis,
    result: &TurnResult,
) -> Option<String> {
    let rated: String = result
        .answer
        .chars()
        .take(reflection::RATED_ANSWER_CHARS)
        .collect();
    let ticket = FeedbackTicket {
        chat: job.chat,
        lessons: basis.context.lessons.clone(),
        job: ReflectionJob {
            answer: Some(rated),
            ..job.clone()
        },
        vote: None,
        changes: 0,
        created: chrono::Utc::now().timestamp(),
    };
    // Handled: without a ticket the answer gets no 👍/👎 buttons (a press could find nothing).
    app.store()
        .tickets()
        .create_feedback(&ticket)
        .inspect_err(|e| tracing::warn!(error = %e, "cannot store a feedback ticket"))
        .ok()
}

/// Starts the turn's follow-ups in the background, on its own request prefix: option buttons
/// (for `extraction`), then the reflection (one after the other, so a local server's shared
/// context is not asked for two long prompts at once, and the second reuses the first's cached
/// prefix), queued once `answered` says the turn is done with its answer. The returned receiver
/// gets the options, or nothing when there are none to wait for.
fn follow_ups(
    app: &Arc<App>,
    result: &TurnResult,
    job: ReflectionJob,
    extraction: Option<options::Answer>,
    answered: oneshot::Receiver<()>,
) -> tokio::sync::oneshot::Receiver<Option<options::Attached>> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let Some(prefix) = result.prefix() else {
        return receiver;
    };
    // A turn whose LLM failed is not reflected on: the endpoint that just failed would only
    // be asked again, and there is nothing to learn from an error.
    let failed = matches!(result.status, TurnStatus::LlmFailed(_));
    let reflection = (!failed)
        .then(|| app.learning().plan_reflection(&job))
        .flatten();
    let Some(answer) = extraction else {
        if let Some(id) = reflection {
            reflect_when_answered(app, answered, id, job, &prefix);
        }
        return receiver;
    };
    let app2 = app.clone();
    let (store, planned) = (app.store().clone(), reflection);
    let extract = async move {
        let attached = extract_options(&app2, answer, &prefix).await;
        // The turn may have stopped waiting; the options are then simply not shown.
        let _ = sender.send(attached);
        if let Some(id) = reflection {
            reflect_when_answered(&app2, answered, id, job, &prefix);
        }
    };
    // Dropped, the options are not shown (the turn's receiver sees the sender go) and the
    // reflection that was to follow them is forgotten with them.
    let dropped = move || {
        if let Some(id) = planned {
            forget_reflection(&store, id);
        }
    };
    app.follow_up(Lane::Options, extract, dropped);
    receiver
}

/// Queues planned reflection `id` once `answered` says the turn is done with its answer (at
/// once if it already is), so building and sending the reflection's long prompt never
/// competes with the answer's way to the screen. The wait holds no queue's place; the job is
/// saved, so a stop before it is queued resumes it at the next start.
fn reflect_when_answered(
    app: &Arc<App>,
    answered: oneshot::Receiver<()>,
    id: u64,
    job: ReflectionJob,
    prefix: &Prefix,
) {
    // Without its photos from here on: the reflection may wait in the queue.
    let prefix = without_images(prefix);
    let app2 = app.clone();
    app.spawn(async move {
        let _ = answered.await;
        queue_reflection(&app2, id, job, prefix);
    });
}

/// Extracts the answer's options and stores them as a ticket.
async fn extract_options(
    app: &App,
    answer: options::Answer,
    prefix: &Prefix,
) -> Option<options::Attached> {
    let config = app.config();
    let llm = app.agent().llm();
    // Charged call by call, so an extraction that times out still counts.
    let payer = app.ledger().payer(Some(answer.user), None);
    options::extract(
        llm,
        &payer,
        app.store(),
        &config.options,
        &config.llm,
        answer,
        prefix,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::llm::LlmError;

    use crate::turn::testing::{NO_LLM, Recorder, Shown, accept, app, basis, input, thought, turn};

    /// An answer gets its 👍/👎 ticket (a failed one none), and with options off, nothing is
    /// waited for or attached; the reflection's job tells the task and its provenance.
    #[tokio::test]
    async fn an_answer_gets_its_feedback_ticket_and_its_reflection_job() {
        let failed = TurnStatus::LlmFailed(LlmError::Malformed("eof".into()));
        let cases = [
            ("answered", TurnStatus::Answered, true),
            ("failed", failed, false),
        ];
        for (name, status, rated) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let out = Recorder::new();
            let input = input("what is the time?");
            accept(&app, &input);
            let turn = turn(&app, &out, input).await;
            let basis = basis(false);
            let thought = thought(status, "what is the time?", "noon");
            let read_a_page = Provenance {
                message: crate::provenance::Message::Own,
                read_external: true,
                history_external: false,
            };
            let job = reflection_job(&turn, &basis, &thought.result, &read_a_page);
            assert_eq!(
                (job.chat, job.model.as_str()),
                (turn.input.request.chat, "m"),
                "{name}"
            );
            assert!(
                job.external && job.request.contains("time"),
                "{name}: {job:?}"
            );
            assert!(
                !job.untrusted,
                "{name}: a live turn's lesson may be approved"
            );
            let run = Provenance {
                message: crate::provenance::Message::Scheduled { tainted: false },
                ..read_a_page
            };
            let job = reflection_job(&turn, &basis, &thought.result, &run);
            assert!(
                job.untrusted,
                "{name}: a task's run never teaches a trusted lesson"
            );
            let mut follow_ups = start(&turn, &basis, &thought, &read_a_page);
            assert_eq!(follow_ups.feedback.is_some(), rated, "{name}: feedback");
            let quick = follow_ups.quick(Duration::from_millis(50)).await;
            assert!(matches!(quick, Quick::Nothing), "{name}: {quick:?}");
            attach(&turn, follow_ups, quick, &[500]);
            let keyboards = out.shown().into_iter();
            let edits = keyboards
                .filter(|s| matches!(s, Shown::Keyboard(..)))
                .count();
            assert_eq!(edits, 0, "{name}: no keyboard edit");
        }
    }
}
