//! One user turn, from the chat's queue to the reply: history → prompt → agent → store → send.
//!
//! The history is written before the reply is sent, so a reply the user saw is always in the
//! history, and a failed send never loses the turn. A turn whose LLM failed still stores the
//! user's message (with a short assistant note), so nothing the user said is lost.

use std::sync::Arc;

use teloxide::prelude::*;

use crate::agent::TurnStatus;
use crate::app::App;
use crate::llm::{ChatMessage, LlmError};
use crate::options;
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
    let prompt = prompt(&app, window.messages);
    let result = app.agent.run(&model, prompt, &text).await;

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
    // A conversation too long for the model gets a one-tap way out.
    let markup = matches!(
        result.status,
        TurnStatus::LlmFailed(LlmError::ContextOverflow { .. })
    )
    .then(keyboards::clear);
    let sent = match send_markdown(&bot, app.send_policy, chat, &result.answer, markup).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(chat = chat.0, error = %e, "cannot send the answer");
            return;
        }
    };
    // Option buttons come after the answer, in the background: they never delay it.
    if app.config.options.enabled
        && matches!(result.status, TurnStatus::Answered)
        && let (Some(request), Some(answer), Some(&last)) =
            (result.last_request, result.messages.last(), sent.last())
    {
        tokio::spawn(options::attach(
            app.clone(),
            bot,
            chat,
            last,
            window.epoch,
            request,
            answer.clone(),
        ));
    }
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
