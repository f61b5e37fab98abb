//! One user turn, from the chat's queue to the reply: history → skills and heuristics → prompt
//! → agent → store → send → (background) option buttons and reflection.
//!
//! The history is written before the reply is sent, so a reply the user saw is always in the
//! history, and a failed send never loses the turn. A turn whose LLM failed still stores the
//! user's message (with a short assistant note), so nothing the user said is lost.

use std::sync::Arc;

use teloxide::prelude::*;

use crate::agent::TurnStatus;
use crate::app::App;
use crate::learning::reflection;
use crate::llm::{ChatMessage, LlmError};
use crate::options;
use crate::store::{FeedbackTicket, ReflectionJob};
use crate::telegram::keyboards;
use crate::telegram::send::{Typing, send_markdown};

/// Runs one turn for `text` in `chat`. Errors are logged and told to the user, never returned:
/// the chat's queue goes on with the next message either way.
pub async fn run(app: Arc<App>, bot: Bot, chat: ChatId, text: String) {
    let typing = Typing::start(bot.clone(), chat, app.typing_interval());
    let model = app.model_for(chat.0);
    let window = app
        .store
        .history(chat.0, app.history_budget(&model))
        .unwrap_or_else(|e| {
            tracing::error!(chat = chat.0, error = %e, "cannot read history; answering without it");
            Default::default()
        });
    let context = app.learning.context_for(&text, &window.messages).await;
    let prompt = prompt(&app, window.messages);
    let result = app
        .agent
        .run(&model, prompt, &context.user_content(&text))
        .await;

    if result.dropped_turns > 0
        && let Err(e) = app.store.skip_turns(chat.0, result.dropped_turns)
    {
        tracing::warn!(chat = chat.0, error = %e, "cannot move the history window");
    }
    match app
        .store
        .append_turn(chat.0, window.epoch, &result.messages)
    {
        Ok(true) => {}
        Ok(false) => tracing::info!(
            chat = chat.0,
            "chat was cleared during the turn; not stored"
        ),
        Err(e) => tracing::error!(chat = chat.0, error = %e, "cannot store the turn"),
    }
    if result.calls > 0
        && let Err(e) = app
            .store
            .record_usage(chat.0, &model.id, 1, result.calls, result.usage)
    {
        tracing::warn!(chat = chat.0, error = %e, "cannot record usage");
    }
    drop(typing);

    let job = ReflectionJob {
        chat: chat.0,
        model: model.id.clone(),
        task: reflection::task_summary(&text),
        tools: result.tools_used.clone(),
        outcome: result.outcome(),
    };
    let answered = matches!(result.status, TurnStatus::Answered);
    let feedback = (answered && app.config.learning.feedback_buttons)
        .then(|| {
            let ticket = FeedbackTicket {
                chat: chat.0,
                heuristics: context.heuristics.clone(),
                job: job.clone(),
                vote: None,
            };
            app.store
                .create_feedback(&ticket)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot store a feedback ticket"))
                .ok()
        })
        .flatten();
    // A conversation too long for the model gets a one-tap way out; answers get 👍/👎.
    let markup = if matches!(
        result.status,
        TurnStatus::LlmFailed(LlmError::ContextOverflow { .. })
    ) {
        Some(keyboards::clear())
    } else {
        feedback
            .as_deref()
            .map(|id| keyboards::answer(None, Some(id)))
    };
    let sent = match send_markdown(&bot, app.send_policy, chat, &result.answer, markup).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(chat = chat.0, error = %e, "cannot send the answer");
            Vec::new()
        }
    };

    // Follow-ups run in the background on the turn's own request prefix: they never delay it.
    let prefix = result.prefix();
    if app.config.options.enabled
        && answered
        && let (Some(prefix), Some(&last)) = (prefix.clone(), sent.last())
    {
        app.spawn(options::attach(
            app.clone(),
            bot,
            chat,
            last,
            window.epoch,
            prefix,
            feedback,
        ));
    }
    reflection::spawn(&app, job, prefix);
}

/// The request prefix of every turn: the constant system message, then the history window.
/// Nothing here may change between two turns unless the history window moves, so the
/// provider's prompt cache keeps hitting.
fn prompt(app: &App, history: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(app.agent.system_message());
    messages.extend(history);
    messages
}
