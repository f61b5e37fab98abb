//! Running a completion's tool calls: each call's progress line, its arguments rewritten to
//! the forms its tool taught, the call itself (or a refusal past the turn's limit, or the
//! recorded result of a repeated failing call), lasting effects through the provenance gate,
//! and the result capped, with the lessons about its tool when it failed.

use crate::llm::{ChatMessage, ToolCall};
use crate::provenance::{Decision, Effect, decide};
use crate::texts::agent as texts;

use super::progress::TurnProgress;
use super::{Agent, AgentEvent, Events, ToolContext};
use super::{evidence, proposing, scheduling, search, tools};

/// The progress line shown while `call` runs.
pub(crate) fn progress_line(call: &ToolCall) -> String {
    match call.function.name.as_str() {
        "current_time" => "🕒 checking the time…".to_string(),
        "fetch_url" => {
            let host = serde_json::from_str::<serde_json::Value>(&call.function.arguments)
                .ok()
                .and_then(|args| {
                    args["url"]
                        .as_str()
                        .and_then(|u| reqwest::Url::parse(u).ok())
                })
                .and_then(|url| url.host_str().map(str::to_string))
                .unwrap_or_else(|| "a page".to_string());
            texts::fetching(&host)
        }
        search::NAME => texts::SEARCHING.to_string(),
        crate::memory::REMEMBER_TOOL => texts::REMEMBERING.to_string(),
        other => texts::running(other),
    }
}

impl Agent {
    /// Runs a completion's tool calls in order, appending each result to the conversation.
    /// A failed result carries the context's lessons about its tool, the first time in the turn.
    pub(super) async fn run_tools(
        &self,
        turn: &mut TurnProgress,
        calls: &[ToolCall],
        context: &ToolContext,
        events: Option<&Events>,
    ) {
        for call in calls {
            tracing::debug!(tool = %call.function.name, "tool call");
            if let Some(events) = events {
                let _ = events.send(AgentEvent::Progress(progress_line(call)));
            }
            let (call, changes) = turn.rewrite(call, events);
            let call = &call;
            turn.result.tools_used.push(call.function.name.clone());
            let mut output = self.tool_output(turn, call, context).await;
            // Every result of an admin-only tool (a repeat quoting its error, too) is kept
            // from other users' turns.
            if self.tools.admin_only(&call.function.name) {
                turn.result.admin_only_calls.push(call.id.clone());
            }
            turn.calls
                .record(&call.function.name, &call.function.arguments, &output);
            let worked = !output.starts_with(tools::ERROR_PREFIX);
            turn.result.note_call(&call.function.name, worked);
            turn.learn_form(call, &output, worked, &changes);
            if !worked {
                turn.result.tool_errors += 1;
                if let Some(lessons) = context.lessons.get(&call.function.name)
                    && turn.shown_lessons.insert(call.function.name.clone())
                {
                    output.push_str(&lessons_note(lessons));
                    turn.result.on_trial.push((
                        call.function.name.clone(),
                        lessons.iter().map(|(id, _)| *id).collect(),
                    ));
                }
            }
            turn.conversation
                .push(ChatMessage::tool_result(&call.id, output));
        }
    }

    /// What `call` returns: a refusal past the turn's limit of tool calls, the recorded
    /// result of the same call that failed before in the turn (not run again), or the tool's
    /// output, capped.
    async fn tool_output(
        &self,
        turn: &mut TurnProgress,
        call: &ToolCall,
        context: &ToolContext,
    ) -> String {
        if turn.result.tools_used.len() > self.config.max_tool_calls {
            format!(
                "{}this turn reached its limit of {} tool calls; answer with what you have",
                tools::ERROR_PREFIX,
                self.config.max_tool_calls
            )
        } else if let Some(repeat) = turn
            .calls
            .repeat_of(&call.function.name, &call.function.arguments)
        {
            tracing::info!(tool = %call.function.name, "not running a repeated failing call");
            repeat
        } else {
            let output = match call.function.name.as_str() {
                crate::memory::REMEMBER_TOOL | scheduling::NAME => {
                    lasting_output(turn, context, call)
                }
                _ => self.tools.call(call, context.caller).await,
            };
            turn.result.read_external |= output.external;
            if output.external {
                turn.forms.read_from(&call.function.name);
            }
            cap_output(output.text, self.config.max_tool_output_chars)
        }
    }
}

/// What a call of a tool with a lasting effect (`remember`, `schedule_task`) returns in a turn
/// of `context`, through the provenance gate: made at once, or proposed for the user's ✅ (kept in
/// the turn's result, for the turn to show), or refused where the tool is not available.
fn lasting_output(
    turn: &mut TurnProgress,
    context: &ToolContext,
    call: &ToolCall,
) -> tools::ToolOutput {
    let (name, arguments) = (call.function.name.as_str(), call.function.arguments.trim());
    let provenance = context.provenance.after_reading(turn.result.read_external);
    let effect = if name == crate::memory::REMEMBER_TOOL {
        Effect::SaveFact
    } else {
        Effect::ScheduleTask
    };
    let confirm = decide(effect, &provenance) != Decision::Allow;
    let lasting = match (effect, &context.memory, &context.tasks) {
        (Effect::SaveFact, Some(memory), _) => memory.call(arguments, confirm),
        (Effect::ScheduleTask, _, Some(scheduler)) => {
            scheduler.call(arguments, chrono::Utc::now().timestamp(), confirm)
        }
        _ => proposing::Lasting::done(Err(format!(
            "{name} is not available in this turn (personal memory is off); nothing was saved"
        ))),
    };
    turn.result.proposed.extend(lasting.proposed);
    lasting.output
}

/// What a tool's failed result gets when lessons about the tool were learned: just when the
/// model needs them, in the turn's new tail (the prompt's prefix stays byte-stable).
fn lessons_note(lessons: &[(u64, String)]) -> String {
    let mut note = format!("\n{}", evidence::LESSONS_NOTE);
    for (_, lesson) in lessons {
        note.push_str("\n- ");
        note.push_str(lesson);
    }
    note
}

/// Tool output cut to `max` characters, saying so, so one huge result cannot crowd out the
/// conversation.
fn cap_output(mut output: String, max: usize) -> String {
    if let Some((cut, _)) = output.char_indices().nth(max) {
        output.truncate(cut);
        output.push_str(&format!("\n[output cut at {max} characters]"));
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_output_is_capped_on_a_char_boundary() {
        assert_eq!(cap_output("short".into(), 10), "short");
        let capped = cap_output("é".repeat(20), 5);
        assert!(capped.starts_with("ééééé\n[output cut at 5 characters]"));
    }
}
