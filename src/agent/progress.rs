//! A turn in progress ([`TurnProgress`]): the conversation so far, what the loop remembers
//! between calls, and how the turn ends (answered, no answer, stopped at the cap). Also the
//! room a context overflow makes: the oldest whole turns of the history are dropped.

use std::collections::HashSet;
use std::ops::Range;

use crate::config::ModelConfig;
use crate::llm::{ChatMessage, ChatRequest, Completion, LlmError, ToolCall, estimate_tokens};
use crate::texts::agent as texts;

use super::calls::{self, CallLog};
use super::{AgentEvent, Events, Fallback, ToolContext, TurnResult, TurnStatus};
use super::{evidence, parrot, rewriting};

/// A turn in progress: the conversation so far and what the turn produced, with what the loop
/// remembers between calls.
pub(super) struct TurnProgress {
    /// The prompt, the user's message and every message of the turn since.
    pub(super) conversation: Vec<ChatMessage>,
    /// Where the turn's own messages start in `conversation` (earlier after old turns drop).
    pub(super) turn_start: usize,
    pub(super) result: TurnResult,
    pub(super) calls: CallLog,
    /// The tools whose learned lessons this turn already showed with a failed call.
    pub(super) shown_lessons: HashSet<String>,
    /// The answer was asked for once more ([`ANSWER_NOW_PROMPT`](super::calls::ANSWER_NOW_PROMPT)).
    pub(super) asked_again: bool,
    /// What the turn's context held that an answer must not merely give back.
    pub(super) given: parrot::Given,
    /// How often a parroted answer was asked again (see [`TurnProgress::parroted`]).
    pub(super) parrot_asks: u8,
    /// The argument forms the turn may rewrite calls to, growing as its tools teach.
    pub(super) forms: rewriting::Forms,
    /// The tools the context says this message needs, until the model was asked once to call
    /// one (emptied then).
    pub(super) needed: Vec<String>,
    /// The model was asked to call a tool it needed ([`calls::use_the_tool`]).
    pub(super) asked_to_use: bool,
    /// The model was asked to fix a failed call ([`calls::fix_the_call`]).
    pub(super) asked_to_fix: bool,
    /// The conversation was cut to the question alone (see [`TurnProgress::ask_alone`]).
    pub(super) alone: bool,
    /// The model was asked to answer from a result that worked
    /// ([`calls::answer_from_result`]) after a parroted answer.
    pub(super) asked_from_result: bool,
}

impl TurnProgress {
    pub(super) fn new(prompt: Vec<ChatMessage>, user: &ChatMessage, context: &ToolContext) -> Self {
        let given = given(&prompt, user, context);
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
            forms: context.forms.clone(),
            needed: context.needed.clone(),
            asked_to_use: false,
            asked_to_fix: false,
            alone: false,
            asked_from_result: false,
        }
    }

    /// `call` with its arguments in the forms their tool taught (see [`rewriting`]), and what
    /// changed; the conversation's copy of the call says the same, and the user sees it.
    pub(super) fn rewrite(
        &mut self,
        call: &ToolCall,
        events: Option<&Events>,
    ) -> (ToolCall, Vec<rewriting::ArgumentChange>) {
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
    pub(super) fn learn_form(
        &mut self,
        call: &ToolCall,
        output: &str,
        worked: bool,
        changes: &[rewriting::ArgumentChange],
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
    pub(super) fn offered(&mut self, request: &ChatRequest) {
        for tool in &request.tools {
            let name = &tool.function.name;
            if !self.given.offered_tools.iter().any(|known| known == name) {
                self.given.offered_tools.push(name.to_string());
            }
        }
    }

    /// After a failed call to `model`: `Ok` when the call is worth trying again, because it
    /// was the turn's first context overflow and the oldest whole turns of the history were
    /// dropped (see [`oldest_turns_to_drop`]); otherwise the error that ends the turn.
    pub(super) fn make_room(&mut self, error: LlmError, model: &str) -> Result<(), LlmError> {
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
    pub(super) fn hand_over(&mut self, from: &ModelConfig, to: &ModelConfig, error: LlmError) {
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

    pub(super) fn ask_for_the_answer(&mut self) {
        self.asked_again = true;
        let ask = calls::answer_now(&self.conversation, &self.result.admin_only_calls);
        self.conversation.push(ChatMessage::user(ask));
    }

    /// Cuts the conversation to the system prompt and the question alone (no history, no
    /// context block; see [`question_alone`]), for one more ask.
    pub(super) fn ask_alone(&mut self) {
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

    /// The result of a turn that ended with `completion` as its answer; one cut off at `cap`
    /// tokens says so.
    pub(super) fn answered(mut self, completion: &Completion, cap: u32) -> TurnResult {
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
    pub(super) fn no_answer(mut self) -> TurnResult {
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
    pub(super) fn stopped_at(mut self, max_iterations: usize) -> TurnResult {
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
    pub(super) fn finish(mut self) -> TurnResult {
        self.result.messages = self.conversation.split_off(self.turn_start);
        self.result
    }
}
/// What a turn's answer must not merely give back (see [`parrot`]): the lines of the context
/// block in front of the user's message (skills, lessons), the lessons its failed results may
/// carry, the bot's hints to the model, and the chat's earlier answers in the window.
fn given(prompt: &[ChatMessage], user: &ChatMessage, tools_context: &ToolContext) -> parrot::Given {
    let content = crate::memory::without_memory(user.content());
    let mut context: Vec<String> = crate::learning::block::context_of(content)
        .map(|block| block.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut lessons: Vec<String> = crate::learning::block::context_of(content)
        .map(crate::learning::lessons::lessons_in)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    // The lessons a failed result may carry (the block's lines are in `context` already).
    let beside_results: Vec<String> = tools_context
        .lessons
        .values()
        .flatten()
        .map(|(_, text)| text.clone())
        .collect();
    context.extend(beside_results.iter().cloned());
    lessons.extend(beside_results);
    context.extend(
        [
            calls::REPEAT_HINT,
            calls::ANSWER_NOW_PROMPT,
            calls::NOT_AN_ANSWER_PROMPT,
            calls::USE_THE_TOOL_PROMPT,
            calls::FIX_THE_CALL_HOW,
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
        lessons,
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
        // A turn starts at the user's message: the bot's own asks inside a turn (to make a
        // call, to fix one) are part of it.
        .filter(|(_, m)| {
            matches!(m, ChatMessage::User { content } if !calls::is_answer_now(content.text()))
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize, size: usize) -> Vec<ChatMessage> {
        vec![
            ChatMessage::user(format!("q{i} {}", "x".repeat(size))),
            ChatMessage::assistant(format!("a{i}")),
        ]
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
        // The bot's ask inside the first turn does not end it.
        prompt.insert(4, ChatMessage::user(calls::fix_the_call("t")));
        let (turns, range) = oldest_turns_to_drop(&prompt);
        assert_eq!((turns, range), (1, 1..6));
    }
}
