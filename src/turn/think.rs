//! Stage two, think: the agent runs (LLM ↔ tools until an answer), shown live while it
//! streams, and a failure is explained: the admins are alerted of a broken setup, and a
//! passing failure keeps the user's message for one 🔁 Retry.
//!
//! The agent's run is the turn's safe point: a stop before it is done drops its LLM or tool
//! call at once and the turn stores nothing (its update is finished, so recovery never
//! resumes it); once it is done, the turn is `Storing` and a stop keeps it.

use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::alerts::alert_admins;
use super::messenger::Live;
use super::prepare::Prompt;
use super::retry;
use super::state::Turn;
use super::visibility::{record_visible, set_state};
use crate::agent::rewriting::Forms;
use crate::agent::{AgentEvent, ToolContext, TurnResult, TurnStatus, is_configuration_error};
use crate::provenance::Provenance;
use crate::store::InboxState;
use crate::texts::turn::SETUP_BROKEN;

/// What the agent produced, and where it is on screen so far.
pub(super) struct Thought {
    pub(super) result: TurnResult,
    /// The messages the live display left (or a resumed answer's), which the answer finishes.
    pub(super) live: Live,
    /// The retry ticket a passing failure keeps the message in, for 🔁 Retry.
    pub(super) retry: Option<String>,
}

/// Runs the agent on `prompt`; `None` when the turn was stopped before its answer was kept.
pub(super) async fn think(turn: &Turn, prompt: Prompt) -> Option<Thought> {
    let display = Display::start(turn);
    let offered: Vec<String> = prompt
        .specs
        .iter()
        .map(|spec| spec.function.name.to_string())
        .collect();
    let forms = forms(turn, &offered);
    let lessons = turn.app.learning().tool_lessons(&offered);
    let needed = needed(turn, &prompt, &lessons, &forms);
    let seat = ToolContext {
        forms,
        needed,
        caller: prompt.caller,
        lessons,
        memory: super::memory::keeper(turn),
        tasks: Some(super::task_scheduler::for_turn(turn)),
        provenance: Provenance {
            message: turn.input.request.origin(),
            read_external: false,
            // In a group, the window holds other members' words: a fact or task the model
            // proposes there may be theirs, so it waits for the asker's ✅.
            history_external: prompt.history_external || !turn.input.request.chat.is_private(),
        },
    };
    let agent = turn.app.agent().run(
        &prompt.model,
        prompt.messages,
        prompt.user_message,
        display.events.as_ref(),
        &seat,
        &turn.payer,
    );
    let Some(mut result) = turn.control.until_store(agent).await else {
        stopped(turn, display).await;
        return None;
    };
    turn.clock.thought(&result.status);
    // A model whose setup is broken is worth an admin's look even when a fallback answered.
    for fallback in &result.fallbacks {
        if is_configuration_error(&fallback.error) {
            alert_admins(&turn.app, &turn.out, &fallback.from, &fallback.error).await;
        }
    }
    let last_model = result.answered_by().unwrap_or(&prompt.model.id).to_string();
    if let TurnStatus::LlmFailed(error) = &result.status
        && is_configuration_error(error)
        && !alert_admins(&turn.app, &turn.out, &last_model, error).await
    {
        result.answer = SETUP_BROKEN.to_string();
    }
    let live = display.finish(turn.resumed.as_deref()).await;
    let retry = retry::offer(&turn.app, &mut result, &turn.input.request);
    Some(Thought {
        result,
        live,
        retry,
    })
}

/// The tools of the turn whose arguments it may rewrite (their servers allow it), with the
/// forms they taught (none while the bot does not learn).
fn forms(turn: &Turn, offered: &[String]) -> Forms {
    let tools = turn.app.agent().tools();
    let rewritable: Vec<String> = offered
        .iter()
        .filter(|tool| tools.rewrites_arguments(tool))
        .cloned()
        .collect();
    let mut forms = Forms::default();
    for (tool, arguments) in turn.app.learning().forms(&rewritable) {
        forms.allow(&tool, arguments);
    }
    forms
}

/// The offered tools that earlier tasks showed this kind of message needs: likely for the
/// message (a word of the tool's name, or two of its description: `learning::likely_tools`)
/// and taught the bot something (an approved lesson about it, or a form of its arguments).
fn needed(
    turn: &Turn,
    prompt: &Prompt,
    lessons: &std::collections::HashMap<String, Vec<(u64, String)>>,
    forms: &Forms,
) -> Vec<String> {
    crate::learning::likely_tools(&turn.input.request.text, &prompt.specs)
        .into_iter()
        .filter(|tool| lessons.contains_key(tool) || forms.taught(tool))
        .collect()
}

/// The live display of a streamed turn: the agent's events go to it, and it resolves to what
/// it left on screen. Empty when streaming is off, or for a resumed turn (whose answer goes
/// into the messages already showing it).
struct Display {
    events: Option<UnboundedSender<AgentEvent>>,
    task: Option<JoinHandle<Option<Live>>>,
}

impl Display {
    fn start(turn: &Turn) -> Self {
        if !turn.app.config().telegram.streaming || turn.resumed.is_some() {
            return Self {
                events: None,
                task: None,
            };
        }
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        let on_visible = turn
            .clock
            .first_text(record_visible(&turn.app, turn.input.update, true));
        let (at, reply_to) = (turn.at(), turn.input.request.reply_to);
        let display = turn
            .out
            .live(at, reply_to, turn.control.id(), receiver, on_visible);
        Self {
            events: Some(events),
            task: Some(tokio::spawn(display)),
        }
    }

    /// Tells the display the answer is kept and waits for what it left on screen (`resumed`'s
    /// messages when there was no display).
    async fn finish(self, resumed: Option<&[i32]>) -> Live {
        if let Some(events) = self.events {
            let _ = events.send(AgentEvent::Finished);
        }
        match self.task {
            Some(task) => task.await.ok().flatten().unwrap_or_default(),
            None => Live {
                messages: resumed.map(<[i32]>::to_vec).unwrap_or_default(),
            },
        }
    }
}

/// Ends a turn stopped before its history write: its live display, left without `Finished`,
/// marks the message stopped (awaited, so the chat's next turn comes after it), and its update
/// is done (flushed before the next turn), so recovery never resumes it.
async fn stopped(turn: &Turn, display: Display) {
    drop(display.events);
    if let Some(task) = display.task {
        let _ = task.await;
    }
    // Awaited (flushed) before the chat's next turn: a crash right after a stop must not
    // resume the stopped turn into its "Stopped" message.
    let update = turn.input.update;
    if let Some(update) = update {
        set_state(&turn.app, update, InboxState::Answered).await;
    }
    tracing::info!(
        update = update.map(|u| u.0),
        "a turn was stopped before its history write"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmError;
    use crate::texts::turn::RETRY_KEPT;
    use crate::turn::prepare::prepare;
    use crate::turn::testing::{Recorder, UPDATE, accept, app, fake_llm, input, state, turn};

    /// The agent's answer is kept; a passing failure keeps the message for one 🔁 Retry.
    #[tokio::test]
    async fn the_agent_answers_or_its_failure_is_explained() {
        let cases = [
            ("answered", 200, "the answer", false),
            ("unreachable", 503, "", true),
        ];
        for (name, status, answer, retried) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), &fake_llm(status, answer).await);
            let input = input("question");
            accept(&app, &input);
            let turn = turn(&app, &Recorder::new(), input).await;
            let (prompt, _) = prepare(&turn).await.unwrap();
            let thought = think(&turn, prompt).await.expect("not stopped");
            let (result, live) = (&thought.result, &thought.live);
            assert_eq!(live, &Live::default(), "{name}: nothing streamed");
            assert_eq!(thought.retry.is_some(), retried, "{name}: retry");
            if retried {
                let status = &result.status;
                let failed = matches!(status, TurnStatus::LlmFailed(LlmError::Unavailable { .. }));
                assert!(failed, "{name}: {status:?}");
                assert!(
                    result.answer.ends_with(RETRY_KEPT),
                    "{name}: {}",
                    result.answer
                );
            } else {
                assert!(matches!(result.status, TurnStatus::Answered), "{name}");
                assert_eq!(result.answer, answer, "{name}");
            }
        }
    }

    /// A turn stopped before the agent is done keeps nothing and its update is done.
    #[tokio::test]
    async fn a_stopped_turn_thinks_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path(), &fake_llm(200, "the answer").await);
        let input = input("question");
        accept(&app, &input);
        let turn = turn(&app, &Recorder::new(), input).await;
        let (prompt, _) = prepare(&turn).await.unwrap();
        crate::turn::actions::cancel(&app, turn.at(), None);
        assert!(think(&turn, prompt).await.is_none());
        assert_eq!(state(&app, UPDATE), None);
    }
}
