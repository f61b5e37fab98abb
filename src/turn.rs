//! One user turn, from the chat's queue to the reply: history → skills and heuristics → prompt
//! → agent → store → send → (background) option buttons and reflection.
//!
//! The history is written before the reply is sent, so a reply the user saw is always in the
//! history, and a failed send never loses the turn. A turn whose LLM failed still stores the
//! user's message (with a short assistant note), so nothing the user said is lost.

use std::sync::Arc;

use teloxide::prelude::*;

use crate::agent::{AgentEvent, TurnStatus};
use crate::app::App;
use crate::learning::reflection;
use crate::llm::{ChatMessage, LlmError};
use crate::options;
use crate::store::{FeedbackTicket, InboxEntry, InboxState, ReflectionJob};
use crate::telegram::keyboards;
use crate::telegram::send::{Typing, send_markdown};
use crate::telegram::{media, stream};

/// What starts a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub chat: ChatId,
    pub user: u64,
    /// The update recorded in the inbox for this turn (`None` for turns without one).
    pub update: Option<u32>,
    /// The user's text, or a pressed option's full label.
    pub text: String,
    /// A photo's Telegram `file_id` (downloaded in the turn, so a resumed turn can fetch it).
    pub image: Option<String>,
}

/// Records the update in the inbox (on disk) and queues its turn; `false` if the update was
/// seen before (Telegram re-delivers after a crash) and must not be answered again.
///
/// The turn is queued first and the inbox flushed while it starts: teloxide confirms updates
/// to Telegram on its own schedule, not when a handler returns, so waiting for the flush before
/// starting would only add an fsync to every answer's latency.
pub async fn accept(app: &Arc<App>, bot: Bot, input: TurnInput) -> bool {
    let update = input.update;
    if let Some(update) = update {
        let entry = InboxEntry {
            chat: input.chat.0,
            user: input.user,
            text: input.text.clone(),
            image: input.image.clone(),
            state: InboxState::Pending,
            received: chrono::Utc::now().timestamp(),
        };
        match app.store.accept_update(update, &entry) {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(update, "ignoring an update that was already accepted");
                return false;
            }
            Err(e) => {
                tracing::error!(update, error = %e, "cannot record the update; answering anyway")
            }
        }
    }
    app.queues
        .enqueue(input.chat.0, update, run(app.clone(), bot, input));
    if let Err(e) = app.store.flush_async().await {
        tracing::error!(error = %e, "cannot flush the inbox");
    }
    true
}

/// At start-up: finishes what a crash interrupted. A turn that was not stored runs again; a
/// stored turn whose answer may not have reached the user has its answer sent; answered
/// updates older than a week are forgotten.
pub async fn recover(app: &Arc<App>, bot: &Bot) {
    const KEEP_SECS: i64 = 7 * 24 * 3600;
    if let Err(e) = app
        .store
        .prune_inbox(chrono::Utc::now().timestamp() - KEEP_SECS)
    {
        tracing::warn!(error = %e, "cannot prune the inbox");
    }
    for (update, entry) in app.store.unfinished_updates() {
        let chat = ChatId(entry.chat);
        match app.store.stored_answer(entry.chat, update) {
            Some(answer) => {
                tracing::info!(
                    update,
                    chat = entry.chat,
                    "sending an answer a crash held back"
                );
                if let Err(e) = send_markdown(bot, &app.send_policy, chat, &answer, None).await {
                    tracing::warn!(update, error = %e, "cannot send a recovered answer");
                }
                set_state(app, update, InboxState::Answered).await;
            }
            None if entry.state == InboxState::Pending => {
                tracing::info!(
                    update,
                    chat = entry.chat,
                    "resuming a turn a crash interrupted"
                );
                let input = TurnInput {
                    chat,
                    user: entry.user,
                    update: Some(update),
                    text: entry.text,
                    image: entry.image,
                };
                app.queues.enqueue(
                    entry.chat,
                    Some(update),
                    run(app.clone(), bot.clone(), input),
                );
            }
            // Stored, but the chat was cleared since: nothing left to send.
            None => set_state(app, update, InboxState::Answered).await,
        }
    }
}

/// Stops the turn running in `chat` (/cancel, ⏹ Stop); says whether one was running. Its
/// future is dropped before it wrote any history, and its update is marked done in the
/// background, so recovery never resumes a stopped turn.
pub fn cancel(app: &Arc<App>, chat: ChatId) -> bool {
    let Some(cancelled) = app.queues.cancel(chat.0) else {
        return false;
    };
    if let Some(update) = cancelled.tag {
        // Written now (an in-memory sled write), flushed in the background; a shutdown's final
        // flush persists it too.
        match app.store.set_update_state(update, InboxState::Answered) {
            Ok(()) => {
                let store = app.store.clone();
                app.spawn(async move {
                    if let Err(e) = store.flush_async().await {
                        tracing::warn!(error = %e, "cannot flush a cancelled update's state");
                    }
                });
            }
            Err(e) => tracing::warn!(update, error = %e, "cannot mark a cancelled update done"),
        }
    }
    true
}

/// Marks an update's progress; `Answered` is flushed to disk (with the turn's history written
/// before it), so a crash right after an answer does not send it again. Failures are logged:
/// recovery then redoes a little.
pub async fn set_state(app: &App, update: u32, state: InboxState) {
    let written = app.store.set_update_state(update, state);
    let flushed = match written {
        Ok(()) if state == InboxState::Answered => app.store.flush_async().await,
        other => other,
    };
    if let Err(e) = flushed {
        tracing::warn!(update, error = %e, "cannot record an update's progress");
    }
}

/// Runs one turn. Errors are logged and told to the user, never returned: the chat's queue
/// goes on with the next message either way.
pub async fn run(app: Arc<App>, bot: Bot, input: TurnInput) {
    let TurnInput {
        chat,
        user,
        update,
        text,
        image,
    } = input;
    // The semaphore is never closed, so acquiring only waits.
    let Ok(_slot) = app.turn_slots.acquire().await else {
        return;
    };
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
    let user_message = user_message(&app, &bot, context.user_content(&text), image).await;
    let (events, live) = if app.config.telegram.streaming {
        let (events, live) = stream::start(app.clone(), bot.clone(), chat);
        (Some(events), Some(live))
    } else {
        (None, None)
    };
    let result = app
        .agent
        .run(&model, prompt, user_message, events.as_ref())
        .await;
    if let Some(events) = events {
        let _ = events.send(AgentEvent::Finished);
    }
    let live = match live {
        Some(handle) => handle.await.ok().flatten(),
        None => None,
    };

    if result.dropped_turns > 0
        && let Err(e) = app.store.skip_turns(chat.0, result.dropped_turns)
    {
        tracing::warn!(chat = chat.0, error = %e, "cannot move the history window");
    }
    let stored: Vec<ChatMessage> = result
        .messages
        .iter()
        .map(ChatMessage::without_images)
        .collect();
    match app.store.append_turn(chat.0, window.epoch, update, &stored) {
        Ok(true) => {}
        Ok(false) => tracing::info!(
            chat = chat.0,
            "chat was cleared during the turn; not stored"
        ),
        Err(e) => tracing::error!(chat = chat.0, error = %e, "cannot store the turn"),
    }
    if let Some(update) = update {
        set_state(&app, update, InboxState::Stored).await;
    }
    if let Err(e) = app.store.record_user_tokens(user, result.usage) {
        tracing::warn!(user, error = %e, "cannot record the user's token use");
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
    let sent = match live.filter(|live| !live.is_empty()) {
        Some(live) => stream::finish(&app, &bot, chat, live, &result.answer, markup).await,
        None => match send_markdown(&bot, &app.send_policy, chat, &result.answer, markup).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(chat = chat.0, error = %e, "cannot send the answer");
                Vec::new()
            }
        },
    };
    // Sent, or given up on after Telegram's retries: either way, not to be redone. Recorded
    // (and flushed) in the background, so the chat's next message does not wait for an fsync.
    if let Some(update) = update {
        let app = app.clone();
        app.clone()
            .spawn(async move { set_state(&app, update, InboxState::Answered).await });
    }

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

/// The user message the model gets: the text, with the photo as a `data:` URL if there is one
/// (a photo that cannot be fetched is mentioned, so the model can say it did not see it).
async fn user_message(app: &App, bot: &Bot, content: String, image: Option<String>) -> ChatMessage {
    let Some(file_id) = image else {
        return ChatMessage::user(content);
    };
    match media::download_image(
        bot,
        &app.send_policy,
        &file_id,
        app.config.telegram.max_image_bytes,
    )
    .await
    {
        Ok(url) => ChatMessage::user_with_image(content, url),
        Err(e) => {
            tracing::warn!(error = %e, "cannot fetch a photo");
            ChatMessage::user(format!(
                "{content}\n[a photo was attached but could not be fetched: {e}]"
            ))
        }
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
