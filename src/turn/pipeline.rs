//! One turn, from admission to the answer shown and its follow-ups started.

use std::sync::Arc;
use std::time::Duration;

use super::alerts::alert_admins;
use super::follow_up::follow_ups;
use super::gate;
use super::input::TurnInput;
use super::messenger::{Keyboard, Live, Options, Out};
use super::offers::{offer, retire_options, vote_on};
use super::retry;
use super::visibility::{record_visible, set_state};
use crate::agent::correction::correction;
use crate::agent::evidence::{evidence_section, proven_lessons, turn_calls};
use crate::agent::{AgentEvent, TurnResult, TurnStatus};
use crate::app::App;
use crate::config::{Caller, Role};
use crate::learning::reflection;
use crate::llm::{ChatMessage, LlmError};
use crate::options;
use crate::store::{FeedbackTicket, InboxState, Provenance, ReflectionJob};
use crate::texts::turn::{RESTART_NOTICE, SETUP_BROKEN, UNREADABLE_NOTICE, photo_unreadable};

/// Runs one turn. Errors are logged and told to the user, never returned: the chat's queue
/// goes on with the next message either way.
pub async fn run(app: Arc<App>, out: Out, input: TurnInput) {
    let admitted = gate::admit(
        &app,
        out.as_ref(),
        input.user,
        input.conversation(),
        input.update,
    );
    let Some(gate::Admitted { role, payer }) = admitted.await else {
        return;
    };
    // Registered first, so a stop finds the turn while it waits for a slot too.
    let turn = app.turns().begin(input.conversation());
    let Some(_slot) = app.turn_slot().await else {
        return;
    };
    let (chat, at) = (input.chat, input.conversation());
    // A turn resumed after a crash whose answer was already showing goes into that message.
    let resumed = input
        .update
        .map(|u| app.store().visible_messages(u))
        .filter(|ids| !ids.is_empty());
    let typing = AbortOnDrop(tokio::spawn(out.typing(at)));
    let round = retire_options(&app, &out, at);

    // Prompt: the history window, skills and heuristics for this message, the user message.
    let model = app.model_for(at);
    let budget = app.history_budget(&model).await;
    let window = match app.store().history(at, budget) {
        Ok(window) => window,
        // Answering without it would store the turn over the chat's history (or next to
        // turns it cannot place): the turn stops, and stores nothing.
        Err(e) => {
            tracing::error!(%at, error = %format!("{e:#}"), "cannot read the history; the turn stops");
            drop(typing);
            out.notice(at, UNREADABLE_NOTICE).await;
            if let Some(update) = input.update {
                set_state(&app, update, InboxState::Answered).await;
            }
            return;
        }
    };
    // What an admin-only tool returned stays with admins' turns.
    let window = if role == Role::Admin {
        window
    } else {
        window.for_non_admin()
    };
    // Text a third party wrote anywhere in what this turn reads taints what it produces.
    let external_window = window.external;
    let caller = Caller::new(role, chat);
    let specs = app.agent().tools().specs(caller);
    // A message that corrects the answer before it is evidence for this turn's reflection (a
    // forwarded one is someone else's words, not the user correcting the bot).
    let corrected = (!input.forwarded)
        .then(|| correction(&window.messages, &input.text))
        .flatten();
    let context = app
        .learning()
        .context_for(&input.text, &window.messages, &specs, &payer)
        .await;
    let prompt = prompt(&app, window.messages);
    let user_message =
        user_message(&out, context.user_content(&input.text), input.image.clone()).await;

    // Agent: LLM ↔ tools until an answer, shown live while it streams.
    let (events, live) = if app.config().telegram.streaming && resumed.is_none() {
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        let on_visible = record_visible(&app, input.update, true);
        let display = out.live(at, input.reply_to, turn.id(), receiver, on_visible);
        (Some(events), Some(tokio::spawn(display)))
    } else {
        (None, None)
    };
    let offered: Vec<String> = specs
        .into_iter()
        .map(|spec| spec.function.name.to_string())
        .collect();
    let seat = crate::agent::Seat {
        caller,
        lessons: app.learning().tool_lessons(&offered),
    };
    // The safe point: a stop before the agent is done drops its LLM or tool call at once and
    // the turn stores nothing; once it is done, the turn is `Storing` and a stop keeps it.
    let agent = app
        .agent()
        .run(&model, prompt, user_message, events.as_ref(), &seat, &payer);
    let Some(mut result) = turn.until_store(agent).await else {
        return stopped(&app, input.update, events, live).await;
    };
    if let TurnStatus::LlmFailed(error) = &result.status
        && crate::agent::is_configuration_error(error)
        && !alert_admins(&app, &out, &model.id, error).await
    {
        result.answer = SETUP_BROKEN.to_string();
    }
    if let Some(events) = events {
        let _ = events.send(AgentEvent::Finished);
    }
    let live = match live {
        Some(handle) => handle.await.ok().flatten().unwrap_or_default(),
        None => Live {
            messages: resumed.clone().unwrap_or_default(),
        },
    };

    // A passing LLM failure keeps the message for one 🔁 Retry.
    let (text, image) = (&input.text, input.image.as_deref());
    let retry = retry::offer(
        &app,
        &mut result,
        chat,
        input.topic,
        input.user,
        text,
        image,
    );

    // Store: the whole turn, what it cost, and how it went for the heuristics it carried.
    let provenance = Provenance {
        external: external_window || input.forwarded || result.external_content(),
        admin_only: result.admin_only_calls.clone(),
    };
    store_turn(&app, &input, window.epoch, &model.id, &result, &provenance);
    drop(typing);
    let answered = matches!(result.status, TurnStatus::Answered);
    if !matches!(result.status, TurnStatus::LlmFailed(_))
        && let Err(e) = app
            .learning()
            .record_outcome(&context.heuristics, result.succeeded())
    {
        tracing::warn!(chat, error = %e, "cannot score the heuristics a turn carried");
    }

    // Show: the answer with 👍/👎 (or a way out of an overflowing conversation).
    let calls = turn_calls(&result.messages);
    let job = ReflectionJob {
        chat,
        user: Some(input.user),
        model: model.id.clone(),
        task: reflection::task_summary(&input.text),
        tools: result.tools_used.clone(),
        outcome: result.outcome(),
        external: provenance.external,
        answer: None,
        skills: context.skills.clone(),
        evidence: evidence_section(&calls, corrected.as_ref()),
        proven: proven_lessons(&calls),
    };
    let feedback = (answered && app.config().learning.feedback_buttons)
        .then(|| {
            let rated: String = result
                .answer
                .chars()
                .take(reflection::RATED_ANSWER_CHARS)
                .collect();
            let ticket = FeedbackTicket {
                chat,
                heuristics: context.heuristics.clone(),
                job: ReflectionJob {
                    answer: Some(rated),
                    ..job.clone()
                },
                vote: None,
                changes: 0,
                created: chrono::Utc::now().timestamp(),
            };
            app.store()
                .create_feedback(&ticket)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot store a feedback ticket"))
                .ok()
        })
        .flatten();
    // Options, in the background on the turn's own request prefix; the answer waits for them
    // at most `attach_wait_ms`, so quick ones come in the same call as its 👍/👎.
    let extraction = (app.config().options.enabled && answered).then(|| options::Answer {
        chat,
        topic: input.topic,
        user: input.user,
        epoch: window.epoch,
        feedback: feedback.clone(),
    });
    let mut options = follow_ups(&app, &result, job, extraction);
    let wait = Duration::from_millis(app.config().options.attach_wait_ms);
    // `None`: not ready yet; `Some(None)`: nothing to attach.
    let quick = tokio::time::timeout(wait, &mut options)
        .await
        .ok()
        .map(|ready| ready.ok().flatten());
    let keyboard = match &quick {
        _ if matches!(
            result.status,
            TurnStatus::LlmFailed(LlmError::ContextOverflow { .. })
        ) =>
        {
            Keyboard::Clear
        }
        Some(Some(attached)) => Keyboard::Answer {
            options: Options::Offered {
                ticket: attached.ticket.clone(),
                labels: attached.labels.clone(),
            },
            feedback: feedback.clone(),
            vote: None,
        },
        _ => Keyboard::answer(feedback.clone()),
    };
    let keyboard = retry.map_or(keyboard, Keyboard::Retry);
    // An answer sent whole is marked answered right after its send; one that finishes a live
    // display records the parts it adds, as the display recorded its own.
    let on_visible = record_visible(&app, input.update, !live.messages.is_empty());
    let shown = out
        .answer(
            at,
            input.reply_to,
            live,
            &result.answer,
            keyboard,
            on_visible,
        )
        .await;
    turn.apply(crate::cancel::Event::Show);
    if resumed.is_some() && shown.is_empty() {
        out.notice(at, RESTART_NOTICE).await;
    }
    // Shown, or given up on after Telegram's retries: either way, not to be redone. Recorded
    // (and flushed) in the background, so the chat's next message does not wait for an fsync.
    if let Some(update) = input.update {
        let app2 = app.clone();
        app.spawn(async move { set_state(&app2, update, InboxState::Answered).await });
    }
    let (Some(message), Some(round)) = (shown.last().copied(), round) else {
        return;
    };
    match quick {
        Some(Some(attached)) => {
            offer(&app, at, round, &attached, message, feedback);
        }
        Some(None) => {}
        // Later options: attached by one keyboard edit when they come.
        None => {
            let app2 = app.clone();
            app.spawn(async move {
                let Ok(Some(attached)) = options.await else {
                    return;
                };
                if offer(&app2, at, round, &attached, message, feedback.clone()) {
                    let keyboard = Keyboard::Answer {
                        options: Options::Offered {
                            ticket: attached.ticket,
                            labels: attached.labels,
                        },
                        vote: vote_on(&app2, feedback.as_deref()),
                        feedback,
                    };
                    out.set_keyboard(chat, message, keyboard).await;
                }
            });
        }
    }
}

/// Ends a turn stopped before its history write: its live display, left without `Finished`,
/// marks the message stopped (awaited, so the chat's next turn comes after it), and its update
/// is done (flushed before the next turn), so recovery never resumes it.
async fn stopped(
    app: &Arc<App>,
    update: Option<u32>,
    events: Option<tokio::sync::mpsc::UnboundedSender<AgentEvent>>,
    live: Option<tokio::task::JoinHandle<Option<Live>>>,
) {
    drop(events);
    if let Some(display) = live {
        let _ = display.await;
    }
    // Awaited (flushed) before the chat's next turn: a crash right after a stop must not
    // resume the stopped turn into its "Stopped" message.
    if let Some(update) = update {
        set_state(app, update, InboxState::Answered).await;
    }
    tracing::info!(update, "a turn was stopped before its history write");
}

/// Appends the turn to the history (moving the window past turns an overflow dropped), marks
/// its update stored, and records its usage per chat (the user's budget was charged per call).
fn store_turn(
    app: &App,
    input: &TurnInput,
    epoch: u64,
    model: &str,
    result: &TurnResult,
    provenance: &Provenance,
) {
    let (chat, store) = (input.chat, app.store());
    if result.dropped_turns > 0
        && let Err(e) = store.skip_turns(input.conversation(), result.dropped_turns)
    {
        tracing::warn!(chat, error = %e, "cannot move the history window");
    }
    let stored: Vec<ChatMessage> = result
        .messages
        .iter()
        .map(ChatMessage::without_images)
        .collect();
    match store.append_turn(
        input.conversation(),
        epoch,
        input.update,
        &stored,
        provenance,
    ) {
        Ok(true) => {}
        Ok(false) => tracing::info!(chat, "chat was cleared during the turn; not stored"),
        Err(e) => tracing::error!(chat, error = %e, "cannot store the turn"),
    }
    if let Some(update) = input.update
        && let Err(e) = store.mark_stored(update)
    {
        tracing::warn!(update, error = %e, "cannot record an update's progress");
    }
    if result.calls > 0
        && let Err(e) = store.record_usage(chat, model, 1, result.calls, result.usage)
    {
        tracing::warn!(chat, error = %e, "cannot record usage");
    }
}

/// The user message the model gets: the text, with the photo as a `data:` URL if there is one
/// (a photo that cannot be fetched is mentioned, so the model can say it did not see it).
async fn user_message(out: &Out, content: String, image: Option<String>) -> ChatMessage {
    let Some(file_id) = image else {
        return ChatMessage::user(content);
    };
    match out.image(&file_id).await {
        Ok(url) => ChatMessage::user_with_image(content, url),
        Err(e) => {
            tracing::warn!(error = %e, "cannot fetch a photo");
            ChatMessage::user(photo_unreadable(&content, &e.to_string()))
        }
    }
}

/// The request prefix of every turn: the constant system message, then the history window.
/// Nothing here may change between two turns unless the history window moves, so the
/// provider's prompt cache keeps hitting.
fn prompt(app: &App, history: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(app.agent().system_message());
    messages.extend(history);
    messages
}

/// Aborts a task when dropped (the typing indicator ends with the turn, also a stopped one).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
