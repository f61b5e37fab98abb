//! The agent loop: prompt → LLM ↔ tools until a final answer, or an honest stop.
//!
//! A turn starts from the chat's prompt (system message and past turns, byte-identical to the
//! previous turn's request so providers' prompt caches hit), appends the user's message, and
//! alternates LLM calls and tool calls. It always ends with an answer for the user and the
//! messages to append to the history, whatever failed on the way: tool errors go back to the
//! model as results, and an unreachable LLM ends the turn with a short apology that keeps the
//! user's message (and role alternation) in the history.

pub mod html_text;
pub mod net_guard;
pub mod tools;

use crate::config::{AgentConfig, ModelConfig};
use crate::llm::{ChatMessage, ChatRequest, LlmClient, LlmError, ProviderRouting, Usage};
use tools::Tools;

/// How a turn ended; the learning step and the user-facing text depend on it.
#[derive(Debug)]
pub enum TurnStatus {
    /// The model gave a final answer.
    Answered,
    /// The iteration cap stopped the loop before a final answer.
    IterationCap,
    /// The LLM could not be reached or refused the request.
    LlmFailed(LlmError),
}

/// Everything a finished turn produced.
#[derive(Debug)]
pub struct TurnResult {
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
    /// The turn's last successful request, whose prefix follow-up calls (extraction) reuse.
    pub last_request: Option<ChatRequest>,
}

/// The loop's dependencies; one per bot, shared by all chats.
pub struct Agent {
    llm: LlmClient,
    tools: Tools,
    config: AgentConfig,
    temperature: f32,
}

impl Agent {
    pub fn new(llm: LlmClient, tools: Tools, config: AgentConfig, temperature: f32) -> Self {
        Self {
            llm,
            tools,
            config,
            temperature,
        }
    }

    pub fn llm(&self) -> &LlmClient {
        &self.llm
    }

    /// The system message every chat's prompt starts with. Constant: nothing volatile.
    pub fn system_message(&self) -> ChatMessage {
        ChatMessage::system(self.config.system_prompt.trim())
    }

    /// The request for `messages` with this model. Agent and extraction calls both go through
    /// here so model, temperature, reasoning, routing and tools are byte-identical.
    pub fn request(&self, model: &ModelConfig, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.id.clone(),
            messages,
            tools: self.tools.specs().to_vec(),
            temperature: self.temperature,
            reasoning_effort: model.reasoning_effort.clone(),
            provider: (!model.provider_order.is_empty()).then(|| ProviderRouting {
                order: model.provider_order.clone(),
                allow_fallbacks: model.allow_fallbacks,
            }),
            stream: false,
        }
    }

    /// Runs one turn: `prompt` (system + history) followed by the user's `text`.
    pub async fn run(
        &self,
        model: &ModelConfig,
        prompt: Vec<ChatMessage>,
        text: &str,
    ) -> TurnResult {
        let user = ChatMessage::user(text);
        let mut conversation = prompt;
        let turn_start = conversation.len();
        conversation.push(user.clone());
        let mut usage = Usage::default();
        let mut calls = 0;
        let mut tools_used = Vec::new();
        let mut last_request = None;

        for _ in 0..self.config.max_iterations {
            let request = self.request(model, conversation.clone());
            let completion = match self.llm.complete(&request).await {
                Ok(completion) => completion,
                Err(e) => {
                    tracing::warn!(model = %model.id, error = %e, "turn failed: LLM error");
                    let answer = llm_failure_text(&e);
                    return TurnResult {
                        messages: vec![user, ChatMessage::assistant(format!("({answer})"))],
                        answer,
                        status: TurnStatus::LlmFailed(e),
                        usage,
                        calls,
                        tools_used,
                        last_request,
                    };
                }
            };
            calls += 1;
            usage += completion.usage;
            conversation.push(completion.message());
            last_request = Some(request);
            if completion.tool_calls.is_empty() {
                let answer = if completion.content.trim().is_empty() {
                    "_(The model returned an empty answer.)_".to_string()
                } else {
                    completion.content
                };
                return TurnResult {
                    status: TurnStatus::Answered,
                    answer,
                    messages: conversation.split_off(turn_start),
                    usage,
                    calls,
                    tools_used,
                    last_request,
                };
            }
            for call in &completion.tool_calls {
                tracing::debug!(tool = %call.function.name, "tool call");
                tools_used.push(call.function.name.clone());
                let output = self.tools.call(call).await;
                conversation.push(ChatMessage::tool_result(&call.id, output));
            }
        }

        let answer = format!(
            "I stopped after {} steps without reaching a final answer. \
             Try a narrower question, or ask me to continue.",
            self.config.max_iterations
        );
        conversation.push(ChatMessage::assistant(answer.clone()));
        TurnResult {
            status: TurnStatus::IterationCap,
            answer,
            messages: conversation.split_off(turn_start),
            usage,
            calls,
            tools_used,
            last_request,
        }
    }
}

/// What the user reads when the LLM failed: short, honest, and actionable.
fn llm_failure_text(e: &LlmError) -> String {
    match e {
        LlmError::Unavailable { .. } => {
            "Sorry, the language model is not reachable right now. Your message is saved; \
             please try again in a minute."
                .to_string()
        }
        LlmError::Rejected { status, message } => {
            format!("Sorry, the language model refused the request (HTTP {status}: {message}).")
        }
        LlmError::Malformed(_) => {
            "Sorry, the language model sent an answer I could not read. Please try again."
                .to_string()
        }
    }
}
