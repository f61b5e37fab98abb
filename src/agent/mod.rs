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

pub mod audio;
pub mod calls;
pub mod correction;
pub mod document;
pub mod evidence;
pub(crate) mod host_addrs;
pub mod html_text;
pub mod jail;
pub(crate) mod mcp;
pub mod mp4;
pub mod net_guard;
pub(crate) mod output;
pub mod parrot;
pub(crate) mod proposing;
pub(crate) mod remember;
pub mod rewriting;
pub(crate) mod scheduling;
pub(crate) mod search;
pub mod spoken;
pub mod tools;

use std::collections::HashSet;
use std::ops::Range;

use crate::budget::{self, Payer};
use crate::config::{AgentConfig, Config, MaxTokensField, ModelConfig};
use crate::llm::fallback::{self, should_fall_back};
use crate::llm::text_calls::{HeldText, parse_text_tool_calls};
use crate::llm::{
    ChatMessage, ChatRequest, Completion, LlmClient, LlmError, Priority, ProviderRouting, ToolCall,
    Usage, estimate_tokens, new_call_id,
};
use crate::metrics::CallKind;
use crate::provenance::{Decision, Effect, Provenance, decide};
use crate::role::Caller;
use crate::texts::agent as texts;
use calls::CallLog;
pub use calls::{ANSWER_FROM_RESULT_PROMPT, ANSWER_NOW_PROMPT, is_answer_now};
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
    fn note_call(&mut self, tool: &str, worked: bool) {
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

    /// The request for `messages` with this model, offering the tools of a turn of `caller`.
    /// Agent and extraction calls both start from here so model, temperature, reasoning,
    /// routing and tools are byte-identical.
    pub(crate) fn request(
        &self,
        model: &ModelConfig,
        messages: Vec<ChatMessage>,
        caller: Caller,
    ) -> ChatRequest {
        let mut request = ChatRequest {
            model: model.id.clone(),
            messages,
            tools: self.tools.specs(caller),
            temperature: self.temperature,
            reasoning_effort: model.reasoning_effort.clone(),
            provider: (!model.provider_order.is_empty()).then(|| ProviderRouting {
                order: model.provider_order.clone(),
                allow_fallbacks: model.allow_fallbacks,
            }),
            max_tokens: None,
            max_completion_tokens: None,
            stream: false,
            stream_options: None,
            context_tokens: model.context_tokens,
        };
        request.set_completion_cap(self.answer_cap(model), self.max_tokens_field);
        request
    }

    /// Runs one turn: `prompt` (system + history) followed by the user's `text`.
    ///
    /// A context overflow is not a dead end: the oldest whole turns of the history are dropped
    /// (see [`oldest_turns_to_drop`]) and the call is retried once.
    /// With `events`, answers are streamed and progress is reported as it happens. The
    /// `seat`'s caller (the user's role, and whether this is their private chat) decides which
    /// MCP servers' tools are offered and may be called; its lessons are added to a tool's
    /// first failed result in the turn. Each call is charged to `payer` as it completes (so
    /// a stopped turn's finished calls count), and a spent budget ends the turn without the call.
    /// A model whose endpoint fails hands the turn to its next fallback (see
    /// [`crate::llm::fallback`]), and the answer then says which model gave it.
    pub(crate) async fn run(
        &self,
        model: &ModelConfig,
        prompt: Vec<ChatMessage>,
        user: ChatMessage,
        events: Option<&Events>,
        seat: &Seat,
        payer: &Payer,
    ) -> TurnResult {
        let mut result = self
            .run_models(model, prompt, user, events, seat, payer)
            .await;
        if let Some(answering) = result.answered_by()
            && !matches!(result.status, TurnStatus::LlmFailed(_))
        {
            let note = texts::answered_by(answering, &model.id);
            result.answer.push_str(&note);
        }
        result
    }

    /// [`Agent::run`]'s loop, on `model` and, as it fails, on its fallbacks.
    async fn run_models(
        &self,
        model: &ModelConfig,
        prompt: Vec<ChatMessage>,
        user: ChatMessage,
        events: Option<&Events>,
        seat: &Seat,
        payer: &Payer,
    ) -> TurnResult {
        let mut fallbacks = fallback::chain(&self.models, model).into_iter().skip(1);
        let mut model = model;
        let mut turn = Underway::new(prompt, &user, seat);
        let mut iterations = 0;
        while iterations < self.config.max_iterations {
            let request = self.next_request(model, &turn, seat.caller, events.is_some());
            let hold = match payer.reserve(budget::estimate(&request)).await {
                Ok(hold) => hold,
                Err(spent) => return self.failed(turn.result, user, spent.into()),
            };
            let completion = match self.complete(&request, events).await {
                Ok(completion) => completion,
                Err(error) => {
                    hold.release();
                    let error = match turn.make_room(error, &model.id) {
                        Ok(()) => continue,
                        Err(error) => error,
                    };
                    match fallbacks.next().filter(|_| should_fall_back(&error)) {
                        Some(next) => {
                            turn.hand_over(model, next, error);
                            model = next;
                        }
                        None => return self.failed(turn.result, user, error),
                    }
                    continue;
                }
            };
            iterations += 1;
            turn.result.calls += 1;
            turn.result.usage += completion.usage;
            hold.settle(completion.usage);
            turn.conversation.push(completion.message());
            turn.offered(&request);
            turn.result.last_request = Some(request);
            match turn.judge(&completion) {
                Verdict::AskedAgain => {}
                Verdict::NoAnswer => return turn.no_answer(),
                Verdict::Answered => return turn.answered(&completion, self.answer_cap(model)),
                Verdict::RunTools => {
                    self.run_tools(&mut turn, &completion.tool_calls, seat, events)
                        .await;
                }
            }
        }
        turn.stopped_at(self.config.max_iterations)
    }

    /// The request of the turn's next call. Once the answer was asked for, without tools: a
    /// weak model offered tools calls one instead (Qwen2.5-Coder-1.5B did, every time, and
    /// answered once they were gone). One prompt-cache miss, on this rare path only.
    fn next_request(
        &self,
        model: &ModelConfig,
        turn: &Underway,
        caller: Caller,
        streaming: bool,
    ) -> ChatRequest {
        let mut request = self.request(model, turn.conversation.clone(), caller);
        if turn.asked_again {
            request.tools.clear();
        }
        request.set_streaming(streaming);
        request
    }

    /// Runs a completion's tool calls in order, appending each result to the conversation.
    /// A failed result carries the seat's lessons about its tool, the first time in the turn.
    async fn run_tools(
        &self,
        turn: &mut Underway,
        calls: &[ToolCall],
        seat: &Seat,
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
            let mut output = self.tool_output(turn, call, seat).await;
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
                if let Some(lessons) = seat.lessons.get(&call.function.name)
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
    async fn tool_output(&self, turn: &mut Underway, call: &ToolCall, seat: &Seat) -> String {
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
                crate::memory::REMEMBER_TOOL | scheduling::NAME => lasting_output(turn, seat, call),
                _ => self.tools.call(call, seat.caller).await,
            };
            turn.result.read_external |= output.external;
            if output.external {
                turn.forms.read_from(&call.function.name);
            }
            cap_output(output.text, self.config.max_tool_output_chars)
        }
    }

    /// One LLM call; streamed (text reported as it arrives) when someone is watching. A
    /// completion that is nothing but tool calls written as text comes back as those calls
    /// (with fresh ids, so the history holds a valid call and result); its text is never
    /// reported, as the display holds back anything that starts like such a call.
    async fn complete(
        &self,
        request: &ChatRequest,
        events: Option<&Events>,
    ) -> Result<Completion, LlmError> {
        let mut completion = match events {
            Some(events) => {
                let _ = events.send(AgentEvent::CallStarted);
                let mut held = HeldText::default();
                self.llm
                    .complete_streaming(request, Priority::Interactive, CallKind::Agent, |text| {
                        let shown = held.push(text);
                        if !shown.is_empty() {
                            let _ = events.send(AgentEvent::Text(shown));
                        }
                    })
                    .await?
            }
            None => {
                self.llm
                    .complete(request, Priority::Interactive, CallKind::Agent)
                    .await?
            }
        };
        if completion.tool_calls.is_empty() {
            let offered: Vec<&str> = request
                .tools
                .iter()
                .map(|t| t.function.name.as_ref())
                .collect();
            if let Some(calls) = parse_text_tool_calls(&completion.content, &offered) {
                tracing::info!(
                    calls = calls.len(),
                    "the model wrote its tool calls as text; running them"
                );
                completion.content.clear();
                completion.tool_calls = calls
                    .into_iter()
                    .map(|function| ToolCall {
                        id: new_call_id(),
                        kind: "function".to_string(),
                        function,
                    })
                    .collect();
            }
        }
        Ok(completion)
    }

    /// Ends a turn whose LLM call failed: the user's message stays in the history, followed by
    /// a short note in the assistant's place, so roles keep alternating.
    fn failed(&self, mut result: TurnResult, user: ChatMessage, error: LlmError) -> TurnResult {
        result.answer = llm_failure_text(&error);
        result.messages = vec![user, ChatMessage::assistant(format!("({})", result.answer))];
        result.status = TurnStatus::LlmFailed(error);
        result
    }
}

/// A turn in progress: the conversation so far and what the turn produced, with what the loop
/// remembers between calls.
struct Underway {
    /// The prompt, the user's message and every message of the turn since.
    conversation: Vec<ChatMessage>,
    /// Where the turn's own messages start in `conversation` (earlier after old turns drop).
    turn_start: usize,
    result: TurnResult,
    calls: CallLog,
    /// The tools whose learned lessons this turn already showed with a failed call.
    shown_lessons: HashSet<String>,
    /// The answer was asked for once more ([`ANSWER_NOW_PROMPT`]).
    asked_again: bool,
    /// What the turn's context held that an answer must not merely give back.
    given: parrot::Given,
    /// How often a parroted answer was asked again (see [`Underway::parroted`]).
    parrot_asks: u8,
    /// The argument forms the turn may rewrite calls to, growing as its tools teach.
    forms: rewriting::Forms,
    /// The tools the seat says this message needs, until the model was asked once to call
    /// one (emptied then).
    needed: Vec<String>,
    /// The model was asked to call a tool it needed ([`calls::use_the_tool`]).
    asked_to_use: bool,
    /// The conversation was cut to the question alone (see [`Underway::ask_alone`]).
    alone: bool,
}

/// What a completion, just appended to the conversation, calls for.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Its tool calls run, then the model is called again.
    RunTools,
    /// The answer was asked for once more: the model is called again.
    AskedAgain,
    /// It is the final answer.
    Answered,
    /// No answer is coming.
    NoAnswer,
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
}

impl Underway {
    fn new(prompt: Vec<ChatMessage>, user: &ChatMessage, seat: &Seat) -> Self {
        let given = given(&prompt, user, seat);
        let mut conversation = prompt;
        let turn_start = conversation.len();
        conversation.push(user.clone());
        Self {
            conversation,
            turn_start,
            result: TurnResult::nothing_yet(),
            calls: CallLog::default(),
            shown_lessons: HashSet::new(),
            asked_again: false,
            given,
            parrot_asks: 0,
            forms: seat.forms.clone(),
            needed: seat.needed.clone(),
            asked_to_use: false,
            alone: false,
        }
    }

    /// `call` with its arguments in the forms their tool taught (see [`rewriting`]), and what
    /// changed; the conversation's copy of the call says the same, and the user sees it.
    fn rewrite(
        &mut self,
        call: &ToolCall,
        events: Option<&Events>,
    ) -> (ToolCall, Vec<rewriting::Change>) {
        let tool = call.function.name.as_str();
        let Some((arguments, changes)) = self.forms.rewrite(tool, &call.function.arguments) else {
            return (call.clone(), Vec::new());
        };
        tracing::info!(
            tool,
            "rewrote a call's arguments to the form its tool taught"
        );
        for message in self.conversation[self.turn_start..].iter_mut().rev() {
            if let ChatMessage::Assistant { tool_calls, .. } = message
                && let Some(made) = tool_calls.iter_mut().find(|c| c.id == call.id)
            {
                made.function.arguments.clone_from(&arguments);
                break;
            }
        }
        for change in &changes {
            if let Some(events) = events {
                let line = texts::rewritten(tool, &change.argument, &change.from, &change.to);
                let _ = events.send(AgentEvent::Progress(line));
            }
        }
        let mut call = call.clone();
        call.function.arguments = arguments;
        (call, changes)
    }

    /// What `call`'s `output` teaches of its tool's argument forms, and how its rewritten
    /// arguments (`changes`) went.
    fn learn_form(
        &mut self,
        call: &ToolCall,
        output: &str,
        worked: bool,
        changes: &[rewriting::Change],
    ) {
        let (tool, arguments) = (&call.function.name, &call.function.arguments);
        let refusal = evidence::refusal_words(output);
        // Only what the tool itself said counts for the rewrite: a timeout or the turn's
        // call limit says nothing of the form.
        if !changes.is_empty()
            && (worked || refusal.is_some())
            && self.forms.first_of_its_kind(tool, arguments)
        {
            self.result.rewritten.extend(
                changes
                    .iter()
                    .map(|c| (tool.clone(), c.argument.clone(), worked)),
            );
        }
        let taught = if worked && changes.is_empty() {
            self.forms.worked(tool, arguments)
        } else if let Some(words) = refusal {
            self.forms.refused(tool, arguments, &words)
        } else {
            Vec::new()
        };
        self.result.taught.extend(taught);
    }

    /// Notes the tools `request` offers: a call to one written out after they were taken
    /// away (to ask for the answer) is still a call described, not an answer.
    fn offered(&mut self, request: &ChatRequest) {
        for tool in &request.tools {
            let name = &tool.function.name;
            if !self.given.offered_tools.iter().any(|known| known == name) {
                self.given.offered_tools.push(name.to_string());
            }
        }
    }

    /// What `answer` only gives back of the turn's context (see [`parrot`]), if anything.
    fn parrot_of(&self, answer: &str) -> Option<parrot::Parrot> {
        let mut given = self.given.clone();
        given.errors = self.conversation[self.turn_start..]
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => content.strip_prefix(tools::ERROR_PREFIX),
                _ => None,
            })
            .map(str::to_string)
            .collect();
        // A tool counts as called once a call to it worked: an answer that describes a call
        // that failed is still telling the user how to call it.
        given.results = self.calls_that_worked();
        given.called_tools = given.results.iter().map(|w| w.tool.clone()).collect();
        parrot::parroted(answer, &given)
    }

    /// The calls of this turn whose result was not an error, with what they gave.
    fn calls_that_worked(&self) -> Vec<parrot::Worked> {
        let turn = &self.conversation[self.turn_start..];
        let output = |id: &str| {
            turn.iter().find_map(|m| match m {
                ChatMessage::Tool {
                    tool_call_id,
                    content,
                } if tool_call_id == id && !content.starts_with(tools::ERROR_PREFIX) => {
                    Some(content.clone())
                }
                _ => None,
            })
        };
        turn.iter()
            .filter_map(|m| match m {
                ChatMessage::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })
            .flatten()
            .filter_map(|call| {
                Some(parrot::Worked {
                    tool: call.function.name.clone(),
                    arguments: call.function.arguments.clone(),
                    output: output(&call.id)?,
                })
            })
            .collect()
    }

    /// After an answer that only gave back what the model was shown (it was taken off the
    /// conversation): asked again once with what the turn has (a described call: to make
    /// it), then, where the chat's history is what it may be copying and no call of the turn
    /// has worked yet, once with the question alone; then no answer is coming (the user gets the honest note and 🔁 Retry).
    fn parroted(&mut self, parrot: parrot::Parrot) -> Verdict {
        self.parrot_asks += 1;
        match self.parrot_asks {
            1 => {
                let ask = match parrot {
                    // Not once the tools were taken away to ask for the answer.
                    parrot::Parrot::DescribedCall if !self.asked_again => {
                        calls::MAKE_THE_CALL_PROMPT.to_string()
                    }
                    _ => {
                        calls::answer_from_result(&self.conversation, &self.result.admin_only_calls)
                            .unwrap_or_else(|| calls::NOT_AN_ANSWER_PROMPT.to_string())
                    }
                };
                self.conversation.push(ChatMessage::user(ask));
                Verdict::AskedAgain
            }
            // Not once a call of this turn worked: the question alone drops its result, and
            // the model would make the call again (a task scheduled twice, a fact stored twice).
            2 if self.turn_start > 1 && !self.alone && self.calls_that_worked().is_empty() => {
                tracing::info!("asking once more with the question alone, without the history");
                self.ask_alone();
                Verdict::AskedAgain
            }
            _ => Verdict::NoAnswer,
        }
    }

    /// After a failed call to `model`: `Ok` when the call is worth trying again, because it
    /// was the turn's first context overflow and the oldest whole turns of the history were
    /// dropped (see [`oldest_turns_to_drop`]); otherwise the error that ends the turn.
    fn make_room(&mut self, error: LlmError, model: &str) -> Result<(), LlmError> {
        if !matches!(error, LlmError::ContextOverflow { .. }) {
            tracing::warn!(model, error = %error, "turn failed: LLM error");
            return Err(error);
        }
        let (turns, range) = oldest_turns_to_drop(&self.conversation[..self.turn_start]);
        if self.result.dropped_turns > 0 || turns == 0 {
            return Err(error);
        }
        tracing::info!(
            model,
            turns,
            "context overflow: dropping old turns and retrying"
        );
        self.turn_start -= range.len();
        self.conversation.drain(range);
        self.result.dropped_turns = turns;
        Ok(())
    }

    /// Hands the turn from `from`, which failed with `error`, to `to`: the conversation goes
    /// on as it is, without its photos when `to` does not read images (each is named instead).
    fn hand_over(&mut self, from: &ModelConfig, to: &ModelConfig, error: LlmError) {
        tracing::warn!(from = %from.id, to = %to.id, error = %error, "model failed; falling back");
        if !to.vision {
            self.conversation = self
                .conversation
                .iter()
                .map(ChatMessage::without_images)
                .collect();
        }
        self.result.fallbacks.push(Fallback {
            from: from.id.clone(),
            to: to.id.clone(),
            error,
        });
    }

    /// Judges `completion`, the conversation's last message. An empty answer, or calling
    /// again exactly what already answered in this turn (a weak model's loop:
    /// Qwen2.5-Coder-1.5B called the weather tool three times, then told the user the tool
    /// gave no output), asks once more for the answer from what the tools returned; the
    /// repeated call is dropped. Asked again, tool calls or silence mean no answer is coming.
    fn judge(&mut self, completion: &Completion) -> Verdict {
        let calls_tools = !completion.tool_calls.is_empty();
        let silent =
            completion.content.trim().is_empty() || calls::echoes_the_bot(&completion.content);
        let repeats_answered = calls_tools
            && completion.tool_calls.iter().all(|call| {
                self.calls
                    .answered(&call.function.name, &call.function.arguments)
            });
        if !self.asked_again && repeats_answered {
            tracing::info!(
                "the model repeated a call that already answered; asking for the answer"
            );
            self.conversation.pop();
            self.ask_for_the_answer();
            return Verdict::AskedAgain;
        }
        if !calls_tools && silent {
            if !self.asked_again {
                self.ask_for_the_answer();
                return Verdict::AskedAgain;
            }
            return Verdict::NoAnswer;
        }
        if self.asked_again && calls_tools {
            self.conversation.pop();
            return Verdict::NoAnswer;
        }
        if calls_tools {
            return Verdict::RunTools;
        }
        if let Some(parrot) = self.parrot_of(&completion.content) {
            tracing::info!(
                ?parrot,
                "the answer only gave back what the model was shown"
            );
            self.conversation.pop();
            return self.parroted(parrot);
        }
        if self.result.tools_used.is_empty() && !self.asked_again && !self.needed.is_empty() {
            // A small model answered "20 units in the warehouse" without asking the tool that
            // earlier tasks of this kind needed (Qwen2.5-Coder-1.5B, issue 34): once, it is
            // asked to call it, without its made-up answer in view.
            let tool = std::mem::take(&mut self.needed).remove(0);
            tracing::info!(
                tool,
                "the answer used no tool this kind of message needs; asking to call it"
            );
            self.conversation.pop();
            self.conversation
                .push(ChatMessage::user(calls::use_the_tool(&tool)));
            self.asked_to_use = true;
            return Verdict::AskedAgain;
        }
        if self.result.tools_used.is_empty()
            && self.asked_to_use
            && !self.alone
            && self.turn_start > 1
        {
            // Asked to call it, the model answered from the chat's history again ("The stock
            // level for item 31 is 0 units", Qwen2.5-Coder-1.5B in one chat): once more with
            // the question alone, where it calls the tool as in a fresh chat.
            tracing::info!("the answer still used no tool; asking with the question alone");
            self.conversation.pop();
            self.ask_alone();
            return Verdict::AskedAgain;
        }
        Verdict::Answered
    }

    /// Cuts the conversation to the system prompt and the question alone (no history, no
    /// context block; see [`question_alone`]), for one more ask.
    fn ask_alone(&mut self) {
        let system = self.conversation[..self.turn_start]
            .iter()
            .take_while(|m| matches!(m, ChatMessage::System { .. }))
            .cloned();
        let question = question_alone(&self.conversation[self.turn_start]);
        self.conversation = system.chain(std::iter::once(question)).collect();
        self.turn_start = self.conversation.len() - 1;
        self.alone = true;
        // An earlier answer word for word is still none, history or not.
        self.asked_again = false;
    }

    fn ask_for_the_answer(&mut self) {
        self.asked_again = true;
        let ask = calls::answer_now(&self.conversation, &self.result.admin_only_calls);
        self.conversation.push(ChatMessage::user(ask));
    }

    /// The result of a turn that ended with `completion` as its answer; one cut off at `cap`
    /// tokens says so.
    fn answered(mut self, completion: &Completion, cap: u32) -> TurnResult {
        self.result.answer = completion.content.clone();
        if completion.was_cut_off() {
            self.result.cut_off = true;
            self.result.answer.push_str(&format!(
                "\n\n_(Cut off: the answer reached the limit of {cap} tokens. Ask me to continue.)_"
            ));
        }
        self.finish()
    }

    /// Ends a turn whose model gave no answer even when asked again: the messages so far are
    /// kept (with the honest note as the answer), and the status offers 🔁 Retry.
    fn no_answer(mut self) -> TurnResult {
        let mut messages = self.conversation.split_off(self.turn_start);
        let mut result = self.result;
        result.answer = self.calls.no_answer_text();
        result.last_tool_error = self
            .calls
            .last_error()
            .map(|(tool, error)| (tool.to_string(), error.to_string()));
        // The empty reply is replaced by the note, so the history says what the user saw.
        if matches!(messages.last(), Some(ChatMessage::Assistant { tool_calls, .. }) if tool_calls.is_empty())
        {
            messages.pop();
        }
        messages.push(ChatMessage::assistant(result.answer.clone()));
        result.messages = messages;
        result.status = TurnStatus::NoAnswer;
        result
    }

    /// Ends a turn the cap of `max_iterations` calls stopped before a final answer.
    fn stopped_at(mut self, max_iterations: usize) -> TurnResult {
        self.result.answer = format!(
            "I stopped after {max_iterations} steps without reaching a final answer. \
             Try a narrower question, or ask me to continue."
        );
        self.conversation
            .push(ChatMessage::assistant(self.result.answer.clone()));
        self.result.status = TurnStatus::IterationCap;
        self.finish()
    }

    /// The result, with the turn's messages (user message first) taken out of the
    /// conversation.
    fn finish(mut self) -> TurnResult {
        self.result.messages = self.conversation.split_off(self.turn_start);
        self.result
    }
}

/// Whose turn the tools serve, and what was learned about them.
#[derive(Debug, Clone)]
pub(crate) struct Seat {
    pub caller: Caller,
    /// Per offered tool, the approved lessons about it (id and text), best first.
    pub lessons: std::collections::HashMap<String, Vec<(u64, String)>>,
    /// Whose tasks `schedule_task` makes, where (`None`: the tool is not available).
    pub tasks: Option<scheduling::TaskDesk>,
    /// The asker's personal memory, which `remember` writes; `None` when memory is off.
    pub memory: Option<remember::Keeper>,
    /// Where the turn's message came from and whether its history window holds third-party
    /// text: with what the turn reads, what the provenance gate decides on.
    pub provenance: Provenance,
    /// The tools whose arguments the turn may rewrite, with the forms they taught.
    pub forms: rewriting::Forms,
    /// The offered tools earlier tasks showed this kind of message needs (see
    /// `turn::think`): an answer made without calling any tool is asked once to call them.
    pub needed: Vec<String>,
}

/// What a call of a tool with a lasting effect (`remember`, `schedule_task`) returns in a turn
/// of `seat`, through the provenance gate: made at once, or proposed for the user's ✅ (kept in
/// the turn's result, for the turn to show), or refused where the tool is not available.
fn lasting_output(turn: &mut Underway, seat: &Seat, call: &ToolCall) -> tools::ToolOutput {
    let (name, arguments) = (call.function.name.as_str(), call.function.arguments.trim());
    let provenance = seat.provenance.after_reading(turn.result.read_external);
    let effect = if name == crate::memory::REMEMBER_TOOL {
        Effect::SaveFact
    } else {
        Effect::ScheduleTask
    };
    let confirm = decide(effect, &provenance) != Decision::Allow;
    let lasting = match (effect, &seat.memory, &seat.tasks) {
        (Effect::SaveFact, Some(keeper), _) => keeper.call(arguments, confirm),
        (Effect::ScheduleTask, _, Some(desk)) => {
            desk.call(arguments, chrono::Utc::now().timestamp(), confirm)
        }
        _ => proposing::Lasting::done(Err(format!(
            "{name} is not available in this turn (personal memory is off); nothing was saved"
        ))),
    };
    turn.result.proposed.extend(lasting.proposed);
    lasting.output
}

/// What a turn's answer must not merely give back (see [`parrot`]): the lines of the context
/// block in front of the user's message (skills, lessons), the lessons its failed results may
/// carry, the bot's hints to the model, and the chat's earlier answers in the window.
fn given(prompt: &[ChatMessage], user: &ChatMessage, seat: &Seat) -> parrot::Given {
    let content = crate::memory::without_memory(user.content());
    let mut context: Vec<String> = crate::learning::block::context_of(content)
        .map(|block| block.lines().map(str::to_string).collect())
        .unwrap_or_default();
    context.extend(
        seat.lessons
            .values()
            .flatten()
            .map(|(_, text)| text.clone()),
    );
    context.extend(
        [
            calls::REPEAT_HINT,
            calls::ANSWER_NOW_PROMPT,
            calls::NOT_AN_ANSWER_PROMPT,
            calls::USE_THE_TOOL_PROMPT,
        ]
        .map(str::to_string),
    );
    let earlier_answers = prompt
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant {
                content,
                tool_calls,
            } if tool_calls.is_empty() && !content.trim().is_empty() => Some(content.clone()),
            _ => None,
        })
        .collect();
    let question = match question_alone(user) {
        ChatMessage::User {
            content: crate::llm::UserContent::Text(text),
        } => crate::memory::without_memory(&text).to_string(),
        _ => String::new(),
    };
    parrot::Given {
        context,
        earlier_answers,
        question,
        ..parrot::Given::default()
    }
}

/// The user's message with only the question (and their personal memory): without the
/// skills and lessons in front of it, which a model may be copying. A message with a photo
/// stays as it is.
fn question_alone(user: &ChatMessage) -> ChatMessage {
    let ChatMessage::User {
        content: crate::llm::UserContent::Text(content),
    } = user
    else {
        return user.clone();
    };
    let rest = crate::memory::without_memory(content);
    let memory = &content[..content.len() - rest.len()];
    let question = crate::learning::without_context(rest);
    ChatMessage::user(format!("{memory}{question}"))
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

/// The oldest whole turns to drop so the history shrinks to at most half its estimated size:
/// how many turns, and the range of messages they occupy. Turns start at user messages, so a
/// tool result never loses its call; leading system messages stay.
pub(crate) fn oldest_turns_to_drop(prompt: &[ChatMessage]) -> (usize, Range<usize>) {
    let first = prompt
        .iter()
        .take_while(|m| matches!(m, ChatMessage::System { .. }))
        .count();
    let history = &prompt[first..];
    let target = estimate_tokens(history) / 2;
    let boundaries = history
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, m)| matches!(m, ChatMessage::User { .. }))
        .map(|(i, _)| i)
        .chain(std::iter::once(history.len()));
    let mut dropped = (0, first..first);
    if history.is_empty() {
        return dropped;
    }
    for (turns, cut) in boundaries.enumerate() {
        dropped = (turns + 1, first..first + cut);
        if estimate_tokens(&history[cut..]) <= target {
            break;
        }
    }
    dropped
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
fn llm_failure_text(e: &LlmError) -> String {
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

    /// A user's seat in their private chat, with no lessons, tasks or memory.
    fn test_seat() -> Seat {
        Seat {
            caller: Caller::new(crate::role::Role::User, crate::ids::ChatId(1)),
            lessons: std::collections::HashMap::new(),
            tasks: None,
            memory: None,
            provenance: Provenance {
                message: crate::provenance::Message::Own,
                read_external: false,
                history_external: false,
            },
            forms: rewriting::Forms::default(),
            needed: Vec::new(),
        }
    }
    use crate::llm::FunctionCall;

    fn turn(i: usize, size: usize) -> Vec<ChatMessage> {
        vec![
            ChatMessage::user(format!("q{i} {}", "x".repeat(size))),
            ChatMessage::assistant(format!("a{i}")),
        ]
    }

    /// What each completion calls for, and what it leaves at the end of the conversation.
    #[test]
    fn judging_completions() {
        struct Case {
            name: &'static str,
            asked_again: bool,
            /// A call to `weather` with `{}` that already answered in the turn.
            weather_answered: bool,
            content: &'static str,
            calls: &'static [&'static str],
            verdict: Verdict,
            /// The conversation's last message, after the prompt and the user's "q".
            last: &'static str,
        }
        let cases = [
            Case {
                name: "an answer is final",
                asked_again: false,
                weather_answered: false,
                content: "sunny",
                calls: &[],
                verdict: Verdict::Answered,
                last: "sunny",
            },
            Case {
                name: "tool calls run",
                asked_again: false,
                weather_answered: false,
                content: "",
                calls: &["weather"],
                verdict: Verdict::RunTools,
                last: "",
            },
            Case {
                name: "an empty answer asks once more",
                asked_again: false,
                weather_answered: false,
                content: "  ",
                calls: &[],
                verdict: Verdict::AskedAgain,
                last: ANSWER_NOW_PROMPT,
            },
            Case {
                name: "repeating an answered call asks for the answer, the call dropped",
                asked_again: false,
                weather_answered: true,
                content: "",
                calls: &["weather"],
                verdict: Verdict::AskedAgain,
                last: ANSWER_NOW_PROMPT,
            },
            Case {
                name: "a new call after an answered one runs",
                asked_again: false,
                weather_answered: true,
                content: "",
                calls: &["weather", "current_time"],
                verdict: Verdict::RunTools,
                last: "",
            },
            Case {
                name: "asked again, an answer is final",
                asked_again: true,
                weather_answered: false,
                content: "sunny",
                calls: &[],
                verdict: Verdict::Answered,
                last: "sunny",
            },
            Case {
                name: "asked again, silence is no answer",
                asked_again: true,
                weather_answered: false,
                content: "",
                calls: &[],
                verdict: Verdict::NoAnswer,
                last: "",
            },
            Case {
                name: "asked again, tool calls are no answer and dropped",
                asked_again: true,
                weather_answered: false,
                content: "",
                calls: &["weather"],
                verdict: Verdict::NoAnswer,
                last: ANSWER_NOW_PROMPT,
            },
        ];
        for case in cases {
            let mut turn = Underway::new(
                vec![ChatMessage::system("s")],
                &ChatMessage::user("q"),
                &test_seat(),
            );
            if case.weather_answered {
                turn.calls.record("weather", "{}", "cloudy");
            }
            if case.asked_again {
                turn.ask_for_the_answer();
            }
            let completion = Completion {
                content: case.content.to_string(),
                tool_calls: case
                    .calls
                    .iter()
                    .map(|name| ToolCall {
                        id: format!("call_{name}"),
                        kind: "function".to_string(),
                        function: FunctionCall {
                            name: name.to_string(),
                            arguments: "{}".to_string(),
                        },
                    })
                    .collect(),
                finish_reason: None,
                usage: Usage::default(),
            };
            turn.conversation.push(completion.message());
            assert_eq!(turn.judge(&completion), case.verdict, "case {}", case.name);
            let last = match turn.conversation.last() {
                Some(ChatMessage::User { content }) => content.text().to_string(),
                Some(ChatMessage::Assistant { content, .. }) => content.clone(),
                other => panic!("case {}: {other:?}", case.name),
            };
            assert_eq!(last, case.last, "case {}", case.name);
        }
    }

    #[test]
    fn tool_output_is_capped_on_a_char_boundary() {
        assert_eq!(cap_output("short".into(), 10), "short");
        let capped = cap_output("é".repeat(20), 5);
        assert!(capped.starts_with("ééééé\n[output cut at 5 characters]"));
    }

    #[test]
    fn dropping_keeps_system_and_whole_turns() {
        let mut prompt = vec![ChatMessage::system("sys")];
        for i in 0..4 {
            prompt.extend(turn(i, 300));
        }
        let (turns, range) = oldest_turns_to_drop(&prompt);
        assert_eq!((turns, range.clone()), (2, 1..5));
        let mut kept = prompt.clone();
        kept.drain(range);
        assert_eq!(kept[0], ChatMessage::system("sys"));
        assert!(matches!(kept[1], ChatMessage::User { .. }));

        assert_eq!(oldest_turns_to_drop(&prompt[..1]), (0, 1..1));
        assert_eq!(oldest_turns_to_drop(&prompt[..3]), (1, 1..3));
    }

    #[test]
    fn a_tool_result_never_loses_its_call() {
        let mut prompt = vec![ChatMessage::system("s"), ChatMessage::user("q".repeat(600))];
        prompt.push(ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![crate::llm::ToolCall {
                id: "c".into(),
                kind: "function".into(),
                function: crate::llm::FunctionCall {
                    name: "t".into(),
                    arguments: "{}".into(),
                },
            }],
        });
        prompt.push(ChatMessage::tool_result("c", "r".repeat(600)));
        prompt.push(ChatMessage::assistant("done"));
        prompt.extend(turn(1, 10));
        let (turns, range) = oldest_turns_to_drop(&prompt);
        assert_eq!((turns, range), (1, 1..5));
    }

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
