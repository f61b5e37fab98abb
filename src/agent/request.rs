//! The requests of a turn and the LLM call that sends them: every request (the agent's and
//! the follow-up extraction calls) is assembled in one place, so model, temperature,
//! reasoning, routing and tools are byte-identical; a completion that writes its tool calls
//! as text comes back as those calls.

use crate::config::ModelConfig;
use crate::llm::text_calls::{HeldText, parse_text_tool_calls};
use crate::llm::{
    ChatMessage, ChatRequest, Completion, LlmError, Priority, ProviderRouting, ToolCall,
    new_call_id,
};
use crate::metrics::CallKind;
use crate::role::Caller;

use super::progress::TurnProgress;
use super::{Agent, AgentEvent, Events};

impl Agent {
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

    /// The request of the turn's next call. Once the answer was asked for, without tools: a
    /// weak model offered tools calls one instead (Qwen2.5-Coder-1.5B did, every time, and
    /// answered once they were gone). One prompt-cache miss, on this rare path only.
    pub(super) fn next_request(
        &self,
        model: &ModelConfig,
        turn: &TurnProgress,
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

    /// One LLM call; streamed (text reported as it arrives) when someone is watching. A
    /// completion that is nothing but tool calls written as text comes back as those calls
    /// (with fresh ids, so the history holds a valid call and result); its text is never
    /// reported, as the display holds back anything that starts like such a call.
    pub(super) async fn complete(
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
}
