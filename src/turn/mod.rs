//! One user turn, from the chat's queue to the reply, in the order README's "how a turn
//! flows" tells it: earlier options retired → history → skills and heuristics → prompt → agent
//! → store → (in the background) option buttons, then reflection → answer shown, with the
//! options when they are ready within `options.attach_wait_ms`, else they follow by one edit.
//!
//! The history is written before the reply is shown, so a reply the user saw is always in the
//! history, and a failed send never loses the turn. A turn whose LLM failed still stores the
//! user's message (with a short assistant note), so nothing the user said is lost.
//!
//! The turn talks to the chat only through [`Messenger`], which the Telegram adapter
//! implements; [`actions`] holds the chat-level decisions (clear, model switch, stop,
//! feedback) that commands and buttons share, and `retry` the 🔁 Retry of a failed turn.

pub mod actions;
mod gate;
pub mod messenger;
pub(crate) mod retry;

use std::sync::Arc;
use std::time::Duration;

use crate::agent::correction::correction;
use crate::agent::evidence::{evidence_section, proven_lessons, turn_calls};
use crate::agent::{AgentEvent, TurnResult, TurnStatus};
use crate::app::App;
use crate::background::Lane;
use crate::config::{Caller, Role};
use crate::conversation::Conversation;
use crate::learning::reflection;
use crate::llm::extraction::Prefix;
use crate::llm::{ChatMessage, LlmError};
use crate::options;
use crate::store::inbox_state::{Resume, resume};
use crate::store::{
    Arrival, FeedbackTicket, InboxEntry, InboxState, Offered, Provenance, ReflectionJob,
};
pub use messenger::{Keyboard, Live, Messenger, OnVisible, Options, unrecorded};

/// The chat a turn answers in, as the turn layer holds it.
pub type Out = Arc<dyn Messenger>;

/// What starts a turn.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub chat: i64,
    /// The user whose message it is; their role and budget are checked when the turn runs.
    pub user: u64,
    /// The update recorded in the inbox for this turn (`None` for turns without one).
    pub update: Option<u32>,
    /// The user's text, or a pressed option's full label.
    pub text: String,
    /// A photo's file id (downloaded in the turn, so a resumed turn can fetch it).
    pub image: Option<String>,
    /// The forum topic the message came from: the turn's history, queue and answer are that
    /// topic's.
    pub topic: Option<i32>,
    /// The message the answer replies to (the one that started the turn, in groups).
    pub reply_to: Option<i32>,
    /// The message was forwarded: someone else wrote its text, so the turn is marked as
    /// holding third-party text.
    pub forwarded: bool,
}

impl TurnInput {
    /// The conversation the turn belongs to.
    pub fn conversation(&self) -> Conversation {
        Conversation::new(self.chat, self.topic)
    }
}

/// Records the update in the inbox (on disk) and queues its turn; `false` if the update was
/// seen before (Telegram re-delivers after a crash) and must not be answered again.
///
/// The turn is queued first and the inbox flushed while it starts; this returns only after
/// the flush, and Telegram is told the update arrived only after its handler returned (see
/// `telegram::listener`), so a crash at any point before loses nothing Telegram forgot.
pub async fn accept(app: &Arc<App>, out: &Out, mut input: TurnInput) -> bool {
    if let Some(update) = input.update {
        let entry = InboxEntry {
            chat: input.chat,
            user: input.user,
            text: input.text.clone(),
            image: input.image.clone(),
            state: InboxState::Pending,
            received: chrono::Utc::now().timestamp(),
            topic: input.topic,
            reply_to: input.reply_to,
            parts: Vec::new(),
            first_seq: 0,
            forwarded: input.forwarded,
        };
        match app.store().inbox().accept(update, &entry) {
            Ok(Arrival::New | Arrival::Reused) => {}
            Ok(Arrival::Redelivered) => {
                tracing::info!(update, "ignoring an update that was already accepted");
                return false;
            }
            // Its id's record is another update's: the turn must not change that record.
            Ok(Arrival::Unrecorded) => input.update = None,
            Err(e) => {
                tracing::error!(update, error = %e, "cannot record the update; answering anyway")
            }
        }
    }
    let (chat, update) = (input.conversation(), input.update);
    let on_panic = failed(app.clone(), out.clone(), chat, update);
    app.queues()
        .enqueue(chat, update, run(app.clone(), out.clone(), input), on_panic);
    if let Err(e) = app.store().db().flush_async().await {
        tracing::error!(error = %e, "cannot flush the inbox");
    }
    true
}

/// At start-up: finishes what a crash or shutdown interrupted. A turn that was not stored runs
/// again; a stored turn whose answer may not have reached the user has its answer sent;
/// unfinished reflections resume. Records older than `retention_days` are pruned now and then
/// every `prune_interval_secs` in the background.
pub async fn recover(app: &Arc<App>, out: &Out) {
    let config = app.config();
    app.spawn_loop(prune_forever(
        app.clone(),
        std::time::Duration::from_secs(config.prune_interval_secs),
    ));
    for (id, job) in app.learning().pending_reflections() {
        tracing::info!(id, chat = job.chat, "resuming an unfinished reflection");
        let prefix = bare_prefix(app, &job);
        queue_reflection(app, id, job, prefix);
    }
    for (update, entry) in app.store().inbox().unfinished() {
        let chat = Conversation::new(entry.chat, entry.topic);
        let answer = app.store().history().stored_answer(chat, update);
        match (resume(entry.state, answer.is_some()), answer) {
            // The answer may be on screen, in a message we cannot name: never a second one.
            (Resume::Notice, _) => {
                tracing::info!(update, %chat, "a crash came as an answer was being sent");
                out.notice(chat, RESTART_NOTICE).await;
                set_state(app, update, InboxState::Answered).await;
            }
            (Resume::Finish, Some(answer)) => {
                tracing::info!(update, %chat, "finishing an answer a crash interrupted");
                let live = Live {
                    messages: app.store().inbox().visible_messages(update),
                };
                let shown = out
                    .answer(chat, None, live, &answer, Keyboard::None, unrecorded())
                    .await;
                if shown.is_empty() {
                    out.notice(chat, RESTART_NOTICE).await;
                }
                set_state(app, update, InboxState::Answered).await;
            }
            (Resume::Send, Some(answer)) => {
                tracing::info!(update, %chat, "sending an answer a crash held back");
                let on_visible = record_visible(app, Some(update), false);
                let live = Live::default();
                out.answer(
                    chat,
                    entry.reply_to,
                    live,
                    &answer,
                    Keyboard::None,
                    on_visible,
                )
                .await;
                set_state(app, update, InboxState::Answered).await;
            }
            // Not stored yet: run again (into the message already showing it, if any).
            (Resume::Rerun, _) => {
                tracing::info!(update, %chat, "resuming a turn a crash interrupted");
                let input = TurnInput {
                    chat: entry.chat,
                    user: entry.user,
                    update: Some(update),
                    text: entry.text,
                    image: entry.image,
                    topic: entry.topic,
                    reply_to: entry.reply_to,
                    forwarded: entry.forwarded,
                };
                let on_panic = failed(app.clone(), out.clone(), chat, Some(update));
                app.queues().enqueue(
                    chat,
                    Some(update),
                    run(app.clone(), out.clone(), input),
                    on_panic,
                );
            }
            // Stored, but the chat was cleared since: nothing left to send.
            (Resume::Close | Resume::Finish | Resume::Send, _) => {
                set_state(app, update, InboxState::Answered).await
            }
        }
    }
}

/// What a chat is told when a crash came while its answer was being shown and the answer
/// cannot be finished in the message that shows it.
pub const RESTART_NOTICE: &str = "⚠️ I was restarted while answering; the answer above may be incomplete. Send your message again if you need the rest.";

/// Records (flushed) that the answer of `update` may be visible, before its first send, and
/// (`with_id`) the ids of the messages that show it, after each send (the first in the state,
/// later parts of a long answer beside it): what recovery needs to never send an answer twice. An answer sent whole is marked `Answered` right after its send, which says
/// more than its id, so it skips that second fsync.
fn record_visible(app: &Arc<App>, update: Option<u32>, with_id: bool) -> OnVisible {
    let app = app.clone();
    Arc::new(move |message| {
        let app = app.clone();
        Box::pin(async move {
            let Some(update) = update else {
                return;
            };
            match message {
                None => set_state(&app, update, InboxState::Visible { message }).await,
                Some(_) if !with_id => {}
                // A later part of an answer already recorded by its first message.
                Some(id)
                    if app
                        .store()
                        .inbox()
                        .visible_message(update)
                        .is_some_and(|f| f != id) =>
                {
                    let added = app.store().inbox().add_visible_part(update, id);
                    if let Err(e) = added.and(app.store().db().flush_async().await) {
                        tracing::warn!(update, error = %e, "cannot record an answer's part");
                    }
                }
                Some(_) => set_state(&app, update, InboxState::Visible { message }).await,
            }
        })
    })
}

/// Prunes records older than `retention_days` now and then every `interval` (at least a
/// second), until the shutdown aborts it. It holds the app, not a bare store handle, so a
/// shutdown that waits for the app to be released also waits for a prune in progress.
///
/// After a prune, a store due for compaction asks for a restart in place
/// ([`App::compaction_wanted`]) once nothing is running: no turn, no reflection, no follow-up.
/// It waits up to a minute for such a moment after each prune; a bot never idle that long asks
/// anyway after a day (its running turns then get the shutdown's grace period, and what is
/// left resumes after the restart).
async fn prune_forever(app: Arc<App>, interval: std::time::Duration) {
    const IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
    const AT_MOST: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
    let mut ticks = tokio::time::interval(interval.max(std::time::Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut due_since = None;
    loop {
        ticks.tick().await;
        let now = chrono::Utc::now().timestamp();
        let before = crate::store::retention::cutoff(now, app.config().retention_days);
        let app2 = app.clone();
        match tokio::task::spawn_blocking(move || app2.store().db().prune(before)).await {
            Ok(Ok(report)) => tracing::debug!(?report, "pruned old records"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot prune old records"),
            Err(e) => tracing::warn!(error = %e, "the prune task failed"),
        }
        if !app.data_dir().compaction_due() {
            continue;
        }
        let since = *due_since.get_or_insert_with(tokio::time::Instant::now);
        let deadline = tokio::time::Instant::now() + IDLE_WAIT;
        while !app.idle() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        if app.idle() || since.elapsed() >= AT_MOST {
            tracing::info!(
                mb = app.data_dir().size() >> 20,
                "the store is due for compaction: restarting in place"
            );
            app.want_compaction();
            return;
        }
        tracing::debug!("the store is due for compaction; waiting for a quiet moment");
    }
}

/// Marks an update's progress; `Answered` and `Visible` are flushed to disk (with the turn's
/// history written before them), so a crash right after does not send the answer again.
/// Failures are logged: recovery then redoes a little.
pub(crate) async fn set_state(app: &App, update: u32, state: InboxState) {
    let written = app.store().inbox().set_state(update, state);
    let flushed = match written {
        Ok(()) if matches!(state, InboxState::Answered | InboxState::Visible { .. }) => {
            app.store().db().flush_async().await
        }
        other => other,
    };
    if let Err(e) = flushed {
        tracing::warn!(update, error = %e, "cannot record an update's progress");
    }
}

/// After a turn panicked: its update is marked failed (flushed, so it is never replayed, not
/// even after a restart), and the user is told once that the message could not be handled.
async fn failed(app: Arc<App>, out: Out, chat: Conversation, update: Option<u32>) {
    if let Some(update) = update {
        tracing::error!(
            update,
            %chat,
            "a turn panicked; its message is marked failed"
        );
        let written = app.store().inbox().set_state(update, InboxState::Failed);
        if let Err(e) = written.and(app.store().db().flush_async().await) {
            tracing::warn!(update, error = %e, "cannot record a failed turn");
        }
    }
    out.notice(chat, PANIC_NOTICE).await;
}

/// What the user is told when the conversation's stored history or state cannot be read.
pub const UNREADABLE_NOTICE: &str = "⚠️ Sorry, this conversation's stored history cannot be read, so I cannot answer here without risking it. Nothing was changed; the bot's owner can see why in its log.";

/// What the user is told when their message crashed its turn.
pub const PANIC_NOTICE: &str = "⚠️ Sorry, something went wrong and this message could not be handled. Please try again or rephrase it.";

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
        .map(|u| app.store().inbox().visible_messages(u))
        .filter(|ids| !ids.is_empty());
    let typing = AbortOnDrop(tokio::spawn(out.typing(at)));
    let round = retire_options(&app, &out, at);

    // Prompt: the history window, skills and heuristics for this message, the user message.
    let model = app.model_for(at);
    let budget = app.history_budget(&model).await;
    let window = match app.store().history().window(at, budget) {
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
        result.answer = "Sorry, I cannot answer right now: the bot's language model settings \
                         need fixing by its owner."
            .to_string();
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
                .tickets()
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

/// Starts the turn's follow-ups in the background, on its own request prefix: option buttons
/// (for `extraction`), then the reflection (one after the other, so a local server's shared
/// context is not asked for two long prompts at once, and the second reuses the first's cached
/// prefix). The returned receiver gets the options, or nothing when there are none to wait for.
fn follow_ups(
    app: &Arc<App>,
    result: &TurnResult,
    job: ReflectionJob,
    extraction: Option<options::Answer>,
) -> tokio::sync::oneshot::Receiver<Option<options::Attached>> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let Some(prefix) = result.prefix() else {
        return receiver;
    };
    // A turn whose LLM failed is not reflected on: the endpoint that just failed would only
    // be asked again, and there is nothing to learn from an error.
    let failed = matches!(result.status, TurnStatus::LlmFailed(_));
    let reflection = (!failed)
        .then(|| app.learning().plan_reflection(&job))
        .flatten();
    // Without its photos from here on: the reflection may wait in the queue.
    let reflection = reflection.map(|id| (id, job, without_images(&prefix)));
    let Some(answer) = extraction else {
        if let Some((id, job, prefix)) = reflection {
            queue_reflection(app, id, job, prefix);
        }
        return receiver;
    };
    let app2 = app.clone();
    let (store, planned) = (app.store().clone(), reflection.as_ref().map(|r| r.0));
    let extract = async move {
        let attached = extract_options(&app2, answer, &prefix).await;
        // The turn may have stopped waiting; the options are then simply not shown.
        let _ = sender.send(attached);
        if let Some((id, job, prefix)) = reflection {
            queue_reflection(&app2, id, job, prefix);
        }
    };
    // Dropped, the options are not shown (the turn's receiver sees the sender go) and the
    // reflection that was to follow them is forgotten with them.
    let dropped = move || {
        if let Some(id) = planned {
            forget_reflection(&store, id);
        }
    };
    app.follow_up(Lane::Options, extract, dropped);
    receiver
}

/// Queues saved reflection `id` on `prefix` (a turn's, without its photos, or a bare one).
/// Dropped from a full queue, it is forgotten: its saved job is removed, so the backlog that
/// filled the queue does not come back at every start, and the store holds no job that nothing
/// will run. (A shutdown keeps the job; it resumes at the next start.)
pub(crate) fn queue_reflection(app: &Arc<App>, id: u64, job: ReflectionJob, prefix: Prefix) {
    let app2 = app.clone();
    let store = app.store().clone();
    app.follow_up(
        Lane::Reflection,
        async move { app2.learning().reflect(id, &job, prefix).await },
        move || forget_reflection(&store, id),
    );
}

/// Removes the saved job of reflection `id`, which the follow-up queue dropped.
fn forget_reflection(store: &crate::store::Store, id: u64) {
    tracing::warn!(
        id,
        "a reflection dropped from the full follow-up queue is forgotten"
    );
    if let Err(e) = store.learning().finish_reflection(id) {
        tracing::warn!(id, error = %e, "cannot forget a dropped reflection");
    }
}

/// `prefix` without its photos' data (each is named instead, as in the history): what a
/// queued reflection holds, so a backlog of reflections does not hold megabytes of images, and
/// what it sends, which does not need them.
fn without_images((request, messages): &Prefix) -> Prefix {
    let strip =
        |messages: &[ChatMessage]| messages.iter().map(ChatMessage::without_images).collect();
    let request = crate::llm::ChatRequest {
        messages: strip(&request.messages),
        ..request.clone()
    };
    (request, strip(messages))
}

/// Takes the chat's live option buttons off the answer that shows them (its 👍/👎 stay, with
/// the vote given), in the background: a new turn or a clear makes them an earlier answer's.
/// An answer whose option was chosen keeps its mark. Returns the new option round for this turn's own options (`None`
/// if the chat's state cannot be read: no options are offered then).
pub fn retire_options(app: &Arc<App>, out: &Out, chat: Conversation) -> Option<u64> {
    let (round, offered) = app
        .store()
        .chats()
        .retire_offered(chat)
        .inspect_err(|e| tracing::warn!(%chat, error = %e, "cannot retire the chat's options"))
        .ok()?;
    if let Some(offered) = offered
        && app
            .store()
            .tickets()
            .get(&offered.ticket)
            .is_none_or(|ticket| ticket.chosen.is_none())
    {
        let out = out.clone();
        let vote = vote_on(app, offered.feedback.as_deref());
        app.spawn(async move {
            let keyboard = Keyboard::Answer {
                options: Options::None,
                feedback: offered.feedback,
                vote,
            };
            out.set_keyboard(chat.chat, offered.message, keyboard).await;
        });
    }
    Some(round)
}

/// The vote given so far on feedback ticket `feedback`, for a keyboard edit to keep showing.
pub(crate) fn vote_on(app: &App, feedback: Option<&str>) -> Option<bool> {
    app.store().tickets().feedback_vote(feedback?)
}

/// Records that `message` shows `attached` as the chat's live options; `false` when a newer
/// turn or a clear came first (the options then belong to an earlier answer).
fn offer(
    app: &App,
    chat: Conversation,
    round: u64,
    attached: &options::Attached,
    message: i32,
    feedback: Option<String>,
) -> bool {
    let offered = Offered {
        ticket: attached.ticket.clone(),
        message,
        feedback,
    };
    let recorded = app
        .store()
        .tickets()
        .set_message(&attached.ticket, message)
        .and_then(|()| app.store().chats().offer(chat, round, &offered));
    match recorded {
        Ok(current) => current,
        Err(e) => {
            tracing::warn!(%chat, error = %e, "cannot record the answer's options");
            false
        }
    }
}

/// Tells the admins (in their private chats) that the LLM refused the bot's setup, at most
/// once an hour; `false` if there is no admin to tell, so the user is not promised one was.
async fn alert_admins(app: &App, out: &Out, model: &str, error: &LlmError) -> bool {
    let admins = &app.config().access.admins;
    if admins.is_empty() {
        return false;
    }
    if app.claim_admin_alert() {
        let text = format!(
            "⚠️ The language model refused the bot's setup for model {model}: {error}. \
             Check the API key and the model id (this alert repeats at most once an hour)."
        );
        let text = crate::logging::redact(&text, &app.config().secrets());
        for admin in admins {
            let Ok(chat) = i64::try_from(*admin) else {
                continue;
            };
            out.notice(chat.into(), &text).await;
        }
    }
    true
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
        && let Err(e) = store
            .history()
            .skip(input.conversation(), result.dropped_turns)
    {
        tracing::warn!(chat, error = %e, "cannot move the history window");
    }
    let stored: Vec<ChatMessage> = result
        .messages
        .iter()
        .map(ChatMessage::without_images)
        .collect();
    match store.history().append(
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
        && let Err(e) = store.inbox().mark_stored(update)
    {
        tracing::warn!(update, error = %e, "cannot record an update's progress");
    }
    if let Err(e) = store
        .usage()
        .charge(chat, model, 1, result.calls, result.usage)
    {
        tracing::warn!(chat, error = %e, "cannot record usage");
    }
}

/// Extracts the answer's options and stores them as a ticket.
async fn extract_options(
    app: &App,
    answer: options::Answer,
    prefix: &Prefix,
) -> Option<options::Attached> {
    let config = app.config();
    let llm = app.agent().llm();
    // Charged call by call, so an extraction that times out still counts.
    let payer = app.ledger().payer(Some(answer.user), None);
    options::extract(
        llm,
        &payer,
        app.store(),
        &config.options,
        &config.llm,
        answer,
        prefix,
    )
    .await
}

/// The prefix a reflection without its turn extends, with the parameters of the job's model
/// (or the default model, if it is no longer configured): the system prompt, and for a 👎
/// the request and the answer it rated.
fn bare_prefix(app: &App, job: &ReflectionJob) -> Prefix {
    let model = app
        .config()
        .model(&job.model)
        .cloned()
        .unwrap_or_else(|| app.config().default_model().clone());
    let mut messages = vec![app.agent().system_message()];
    if let Some(answer) = &job.answer {
        messages.push(ChatMessage::user(job.task.clone()));
        messages.push(ChatMessage::assistant(answer.clone()));
    }
    (
        app.agent().request(&model, messages.clone(), Caller::USER),
        messages,
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued reflection holds no photo data: neither its request template nor its messages.
    #[test]
    fn a_reflection_prefix_holds_no_photo() {
        let photo =
            ChatMessage::user_with_image("what is this?", "data:image/jpeg;base64,/9j/AAAA");
        let messages = vec![
            ChatMessage::user("hi"),
            photo,
            ChatMessage::assistant("a cat"),
        ];
        let request = crate::llm::ChatRequest {
            model: "m".into(),
            messages: messages[..2].to_vec(),
            tools: Vec::new(),
            temperature: 0.0,
            reasoning_effort: None,
            provider: None,
            max_tokens: None,
            max_completion_tokens: None,
            stream: false,
            stream_options: None,
            context_tokens: None,
        };
        let held = without_images(&(request, messages));
        let text =
            serde_json::to_string(&held.0).unwrap() + &serde_json::to_string(&held.1).unwrap();
        assert!(!text.contains("data:image"), "{text}");
        assert!(text.contains("what is this?") && text.contains("a cat"));
        assert_eq!(held.1.len(), 3);
    }
}
