//! The loop of a turn: a request, its completion judged, tools run, again, until an answer
//! or an honest stop (the iteration cap, a spent budget, an LLM failure past every fallback
//! model).

use crate::budget::{self, Payer};
use crate::config::ModelConfig;
use crate::llm::fallback::{self, should_fall_back};
use crate::llm::{ChatMessage, LlmError};
use crate::texts::agent as texts;

use super::judge::NextStep;
use super::progress::TurnProgress;
use super::result::llm_failure_text;
use super::{Agent, Events, ToolContext, TurnResult, TurnStatus};

impl Agent {
    /// Runs one turn: `prompt` (system + history) followed by the user's `text`.
    ///
    /// A context overflow is not a dead end: the oldest whole turns of the history are dropped
    /// (see [`oldest_turns_to_drop`](super::progress::oldest_turns_to_drop)) and the call is retried once.
    /// With `events`, answers are streamed and progress is reported as it happens. The
    /// `context`'s caller (the user's role, and whether this is their private chat) decides which
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
        context: &ToolContext,
        payer: &Payer,
    ) -> TurnResult {
        let mut result = self
            .run_models(model, prompt, user, events, context, payer)
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
        context: &ToolContext,
        payer: &Payer,
    ) -> TurnResult {
        let mut fallbacks = fallback::chain(&self.models, model).into_iter().skip(1);
        let mut model = model;
        let mut turn = TurnProgress::new(prompt, &user, context);
        let mut iterations = 0;
        while iterations < self.config.max_iterations {
            let request = self.next_request(model, &turn, context.caller, events.is_some());
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
                NextStep::AskedAgain => {}
                NextStep::NoAnswer => return turn.no_answer(),
                NextStep::Answered => return turn.answered(&completion, self.answer_cap(model)),
                NextStep::RunTools => {
                    self.run_tools(&mut turn, &completion.tool_calls, context, events)
                        .await;
                }
            }
        }
        turn.stopped_at(self.config.max_iterations)
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
