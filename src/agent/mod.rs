//! The agent loop: prompt → LLM ↔ tools until a final answer, or an honest stop.
//!
//! A turn starts from the chat's prompt (system message and past turns, byte-identical to the
//! previous turn's request so providers' prompt caches hit), appends the user's message, and
//! alternates LLM calls and tool calls. It always ends with an answer for the user and the
//! messages to append to the history, whatever failed on the way: tool errors go back to the
//! model as results, and an unreachable LLM ends the turn with a short apology that keeps the
//! user's message (and role alternation) in the history.
//!
//! A model whose endpoint fails (see [`crate::llm::fallback`]) hands the turn to its next
//! fallback model, which goes on from the same conversation; the answer then says once which
//! model gave it.
//!
//! The loop's rooms: `run` (the loop and how it fails), `request` (the requests and the LLM
//! call), `judge` (what a completion calls for next), `dispatch` (running the tool calls),
//! `progress` (a turn in progress and how it ends), `result` (what a finished turn produced).
//! The tools themselves are the other modules here.

pub mod audio;
pub mod calls;
pub mod correction;
mod dispatch;
pub mod document;
pub mod evidence;
pub(crate) mod host_addrs;
pub mod html_text;
pub mod jail;
mod judge;
mod markup;
pub(crate) mod mcp;
pub mod mp4;
pub mod net_guard;
pub(crate) mod output;
pub mod parrot;
mod progress;
pub(crate) mod proposing;
pub(crate) mod remember;
mod request;
mod result;
pub mod rewriting;
mod run;
pub(crate) mod scheduling;
pub(crate) mod search;
pub mod spoken;
pub mod tools;

use crate::config::{AgentConfig, Config, MaxTokensField, ModelConfig};
use crate::llm::{ChatMessage, LlmClient};
use crate::provenance::Provenance;
use crate::role::Caller;
pub use calls::{ANSWER_FROM_RESULT_PROMPT, ANSWER_NOW_PROMPT, is_answer_now};
pub(crate) use result::{Fallback, TurnResult, TurnStatus, is_configuration_error};
use tools::Tools;

/// What the agent reports while it works, for a live display.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A new LLM call starts: text shown so far belonged to the previous one.
    CallStarted,
    /// A piece of answer text, as it streams in.
    Text(String),
    /// A tool starts running: a short line for the user ("🔎 fetching example.com…").
    Progress(String),
    /// The turn is over (sent by the turn, not the agent; a live display that never sees it
    /// knows the turn was stopped).
    Finished,
}

/// Where a turn's [`AgentEvent`]s go.
pub(crate) type Events = tokio::sync::mpsc::UnboundedSender<AgentEvent>;

/// The loop's dependencies; one per bot, shared by all chats.
pub(crate) struct Agent {
    llm: LlmClient,
    /// The configured models, for their fallback lists.
    models: Vec<ModelConfig>,
    tools: Tools,
    config: AgentConfig,
    temperature: f32,
    max_tokens_answer: u32,
    max_tokens_field: MaxTokensField,
}

impl Agent {
    pub(crate) fn new(llm: LlmClient, tools: Tools, config: &Config) -> Self {
        Self {
            llm,
            models: config.models.clone(),
            tools: tools.with_output_limit(config.agent.max_tool_output_chars),
            config: config.agent.clone(),
            temperature: config.llm.temperature,
            max_tokens_answer: config.llm.max_tokens_answer,
            max_tokens_field: config.llm.max_tokens_field,
        }
    }

    pub(crate) fn llm(&self) -> &LlmClient {
        &self.llm
    }

    pub(crate) fn tools(&self) -> &Tools {
        &self.tools
    }

    /// The system message every chat's prompt starts with. Constant: nothing volatile.
    pub(crate) fn system_message(&self) -> ChatMessage {
        ChatMessage::system(self.config.system_prompt.trim())
    }

    /// The answer cap of `model`.
    pub(crate) fn answer_cap(&self, model: &ModelConfig) -> u32 {
        model.max_tokens.unwrap_or(self.max_tokens_answer)
    }
}

/// Whose turn the tools serve, and what was learned about them.
#[derive(Debug, Clone)]
pub(crate) struct ToolContext {
    pub caller: Caller,
    /// Per offered tool, the approved lessons about it (id and text), best first.
    pub lessons: std::collections::HashMap<String, Vec<(u64, String)>>,
    /// Whose tasks `schedule_task` makes, where (`None`: the tool is not available).
    pub tasks: Option<scheduling::TaskScheduler>,
    /// The asker's personal memory, which `remember` writes; `None` when memory is off.
    pub memory: Option<remember::MemoryWriter>,
    /// Where the turn's message came from and whether its history window holds third-party
    /// text: with what the turn reads, what the provenance gate decides on.
    pub provenance: Provenance,
    /// The tools whose arguments the turn may rewrite, with the forms they taught.
    pub forms: rewriting::Forms,
    /// The offered tools earlier tasks showed this kind of message needs (see
    /// `turn::think`): an answer made without calling any tool is asked once to call them.
    pub needed: Vec<String>,
}
