//! What a finished turn produced ([`TurnResult`]) and how it ended ([`TurnStatus`]): the
//! answer, the messages for the history, usage, the tools called and how their first calls
//! went, and what the learning step and the turn's follow-ups read of it; and what the user
//! reads when the LLM failed (short words that say what to do).

use crate::llm::{ChatMessage, ChatRequest, LlmError, Usage};
use crate::texts::agent as texts;

use super::{proposing, rewriting};

/// How a turn ended; the learning step and the user-facing text depend on it.
#[derive(Debug)]
pub(crate) enum TurnStatus {
    /// The model gave a final answer.
    Answered,
    /// The iteration cap stopped the loop before a final answer.
    IterationCap,
    /// The LLM could not be reached or refused the request.
    LlmFailed(LlmError),
    /// The model's final answer was empty, also when asked once more: the user gets an
    /// honest note (and 🔁 Retry), never an empty-answer placeholder.
    NoAnswer,
}

/// Everything a finished turn produced.
#[derive(Debug)]
pub(crate) struct TurnResult {
    pub status: TurnStatus,
    /// Markdown to show the user.
    pub answer: String,
    /// The turn's messages, user message first, to append to the history.
    pub messages: Vec<ChatMessage>,
    /// Summed provider usage of the turn's LLM calls.
    pub usage: Usage,
    /// LLM calls made (successful ones).
    pub calls: u32,
    /// Names of the tools called, in order.
    pub tools_used: Vec<String>,
    /// Tool calls whose result was an error.
    pub tool_errors: usize,
    /// The turn's last successful request, whose prefix follow-up calls (extraction) reuse.
    pub last_request: Option<ChatRequest>,
    /// Oldest history turns dropped after a context overflow (the store's window follows).
    pub dropped_turns: usize,
    /// The final answer reached the completion cap and was cut off.
    pub cut_off: bool,
    /// A tool returned content a third party wrote (a web page, search results, an MCP
    /// server's answer); see [`TurnResult::external_content`].
    pub read_external: bool,
    /// The ids of the tool calls whose results only admins' turns may see (an admin-only MCP
    /// server's), stored with the turn.
    pub admin_only_calls: Vec<String>,
    /// The tool that failed last in this turn and its error, if one did.
    pub last_tool_error: Option<(String, String)>,
    /// The models that failed and handed the turn on, in order.
    pub fallbacks: Vec<Fallback>,
    /// The facts and tasks the provenance gate held for the user's ✅ (see
    /// [`crate::provenance`]), for the turn to show.
    pub proposed: Vec<proposing::Proposed>,
    /// Per tool called, whether its first call in the turn worked: what the lessons about it
    /// that the prompt carried are scored by.
    pub first_calls: Vec<(String, bool)>,
    /// Lessons shown beside a tool's failed result, waiting for the next call to that tool
    /// (tool, lesson ids); see `learning::probation`.
    pub on_trial: Vec<(String, Vec<u64>)>,
    /// What those next calls did to the lessons in view: (lesson id, it worked).
    pub trials: Vec<(u64, bool)>,
    /// The argument forms the turn's tools taught (see [`rewriting`]), to keep.
    pub taught: Vec<rewriting::Taught>,
    /// The arguments the bot rewrote: (tool, argument, the call worked).
    pub rewritten: Vec<(String, String, bool)>,
}

/// A model that failed in a turn and the model that took the turn over.
#[derive(Debug)]
pub(crate) struct Fallback {
    pub from: String,
    pub to: String,
    /// Why `from` failed (after its retries).
    pub error: LlmError,
}

impl TurnResult {
    /// A turn's result before anything happened: no answer, no messages, no calls, no usage.
    pub(crate) fn nothing_yet() -> Self {
        Self {
            status: TurnStatus::Answered,
            answer: String::new(),
            messages: Vec::new(),
            usage: Usage::default(),
            calls: 0,
            tools_used: Vec::new(),
            tool_errors: 0,
            last_request: None,
            dropped_turns: 0,
            cut_off: false,
            read_external: false,
            admin_only_calls: Vec::new(),
            last_tool_error: None,
            fallbacks: Vec::new(),
            proposed: Vec::new(),
            first_calls: Vec::new(),
            on_trial: Vec::new(),
            taught: Vec::new(),
            rewritten: Vec::new(),
            trials: Vec::new(),
        }
    }

    /// How the task went, in the words the reflection prompt gets.
    pub(crate) fn outcome(&self) -> String {
        match &self.status {
            TurnStatus::Answered if self.cut_off => {
                "failure: the answer was cut off at the length limit".to_string()
            }
            TurnStatus::Answered if self.tool_errors == 0 => "success".to_string(),
            TurnStatus::Answered => format!(
                "failure: {} tool call(s) failed, though an answer was given",
                self.tool_errors
            ),
            TurnStatus::IterationCap => {
                "failure: stopped at the step limit without a final answer".to_string()
            }
            TurnStatus::NoAnswer => match &self.last_tool_error {
                Some((tool, error)) => format!(
                    "failure: no answer was given after the tool {tool} failed with: {error}"
                ),
                None => "failure: the model gave no answer".to_string(),
            },
            TurnStatus::LlmFailed(e) => format!("failure: the language model failed ({e})"),
        }
    }

    /// Whether the turn's context took in text a third party wrote (web pages, search
    /// results, MCP tool output), as the tools that returned it flagged it: a refused fetch or
    /// a timed-out call brought nothing in.
    pub(crate) fn external_content(&self) -> bool {
        self.read_external
    }

    /// Notes a call to `tool` that `worked` or not: its first call's outcome, and the trial of
    /// the lessons a failed call to it showed (this is the next call, made with them in view).
    pub(super) fn note_call(&mut self, tool: &str, worked: bool) {
        if !self.first_calls.iter().any(|(t, _)| t == tool) {
            self.first_calls.push((tool.to_string(), worked));
        }
        if let Some(at) = self.on_trial.iter().position(|(t, _)| t == tool) {
            let (_, ids) = self.on_trial.remove(at);
            self.trials.extend(ids.into_iter().map(|id| (id, worked)));
        }
    }

    /// Whether the turn's first call to `tool` worked; `None` if it made none.
    pub(crate) fn first_call(&self, tool: &str) -> Option<bool> {
        self.first_calls
            .iter()
            .find(|(t, _)| t == tool)
            .map(|(_, worked)| *worked)
    }

    /// The fallback model that took the turn over, if the turn's own model failed.
    pub(crate) fn answered_by(&self) -> Option<&str> {
        self.fallbacks.last().map(|f| f.to.as_str())
    }

    /// The turn's final messages as a prefix for follow-up calls: its last request, and that
    /// request's messages followed by the answer.
    pub(crate) fn prefix(&self) -> Option<(ChatRequest, Vec<ChatMessage>)> {
        let request = self.last_request.clone()?;
        let mut messages = request.messages.clone();
        messages.push(self.messages.last()?.clone());
        Some((request, messages))
    }
}

/// Whether an LLM failure is the bot's setup (the key, its permissions, the model's name):
/// trying again cannot help, only an admin can, so the admins are told.
pub(crate) fn is_configuration_error(e: &LlmError) -> bool {
    match e {
        LlmError::Rejected { status, message } => {
            matches!(status, 401 | 403 | 404) || message.contains("model_not_found")
        }
        _ => false,
    }
}

/// What the user reads when the LLM failed: short, honest, and actionable. Status codes and
/// the provider's own words stay in the log (and, for a setup error, go to the admins).
pub(super) fn llm_failure_text(e: &LlmError) -> String {
    if matches!(e, LlmError::Rejected { status: 403, .. }) {
        return texts::LLM_FORBIDDEN.to_string();
    }
    if is_configuration_error(e) {
        return texts::LLM_MISCONFIGURED.to_string();
    }
    match e {
        LlmError::Unavailable { .. } => texts::LLM_UNREACHABLE.to_string(),
        LlmError::Rejected { .. } => texts::LLM_REJECTED.to_string(),
        LlmError::ContextOverflow { .. } => texts::LLM_CONTEXT_OVERFLOW.to_string(),
        LlmError::Malformed(_) => texts::LLM_MALFORMED.to_string(),
        LlmError::OverBudget { budget } => texts::budget_spent(*budget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_texts_name_no_status_and_no_provider_words() {
        struct Case {
            name: &'static str,
            error: LlmError,
            setup: bool,
        }
        let rejected = |status, message: &str| LlmError::Rejected {
            status,
            message: message.to_string(),
        };
        let cases = [
            Case {
                name: "bad key",
                error: rejected(401, "invalid api key PROVIDER"),
                setup: true,
            },
            Case {
                name: "forbidden: a moderation refusal or a key without access",
                error: rejected(403, "PROVIDER flagged it"),
                setup: true,
            },
            Case {
                name: "unknown model by status",
                error: rejected(404, "PROVIDER"),
                setup: true,
            },
            Case {
                name: "unknown model by code",
                error: rejected(400, "model_not_found PROVIDER"),
                setup: true,
            },
            Case {
                name: "refused content",
                error: rejected(422, "PROVIDER policy"),
                setup: false,
            },
            Case {
                name: "unreachable",
                error: LlmError::Unavailable {
                    attempts: 3,
                    last: "PROVIDER 503".to_string(),
                },
                setup: false,
            },
        ];
        for case in cases {
            let text = llm_failure_text(&case.error);
            assert_eq!(
                is_configuration_error(&case.error),
                case.setup,
                "{}",
                case.name
            );
            assert!(
                !text.contains("PROVIDER") && !text.contains("HTTP") && !text.contains("40"),
                "{}: {text}",
                case.name
            );
            assert_eq!(text.contains("admins"), case.setup, "{}", case.name);
        }
    }
}
