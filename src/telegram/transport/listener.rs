//! Taking updates from Telegram so that none is lost: an update is confirmed to Telegram only
//! once it was released, and a message is released only after its inbox entry is written and
//! flushed ([`crate::turn::accept`]), or once it is known to record nothing (a refusal).
//!
//! The handshake is [`Intake`]: the listener holds every update that may start a turn (an
//! allowed user's message, an option or 🔁 Retry press) as it hands it to the dispatcher, the
//! schema's root holds a [`Handling`] guard for the update while its handler runs, and the
//! handler releases it once the update is durable or refused ([`Handling::done`]; the guard's
//! drop, also on a panic, releases it at the latest). Long polling ([`Polling`]) asks Telegram for
//! the next batch, whose `offset` confirms every earlier update, only when no update is held
//! any more; in webhook mode [`answer_when_handled`] answers Telegram's POST only then, so
//! Telegram re-sends an update whose handler never finished. A crash before the release means
//! Telegram delivers the update again, and the inbox (keyed by update id) ignores a message it
//! already has. Commands, other button presses and strangers' messages record nothing and are
//! not held: their replies, paced per chat, would otherwise make every chat's next message
//! wait.
//!
//! One case must not stop intake for good: a handler that panics ends its chat's teloxide
//! worker, and the updates queued behind it there are dropped unhandled, their holds never
//! released. [`Intake`] knows each hold's chat and whether its handler started, and which
//! chats have handlers running: a hold whose handler never started, in a chat whose handlers
//! all ended a while ago, was lost that way (a live worker starts its next update at once).
//! Only such holds are given up after [`STALLED`]; every other update, of any chat, is
//! confirmed only once its handler released it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::requests::Request as _;
use teloxide::stop::{StopFlag, StopToken, mk_stop_token};
use teloxide::types::{AllowedUpdate, UpdateKind};
use teloxide::update_listeners::{AsUpdateStream, UpdateListener};
use tokio::sync::Notify;

use super::draft_stop::{DraftStop, ask_for_stops, draft_stop, stop_in};
use super::drafts::Drafts;
use crate::ids::UpdateId;
use crate::telegram::callback_data::CallbackData;

/// How long the next batch waits for held updates before it looks for lost ones: far longer
/// than a handler takes to reach the inbox.
const STALLED: Duration = Duration::from_secs(120);

/// How long a chat with held updates has had no handler running before those that never
/// started count as lost: a live worker starts its next update the moment the last one ends.
const IDLE_WORKER: Duration = Duration::from_secs(5);

/// The kinds of update the schema routes, which a webhook asks Telegram for (polling asks for
/// what the schema's description says). `message_reaction` is sent only to bots that ask.
pub(crate) const ALLOWED_UPDATES: [AllowedUpdate; 3] = [
    AllowedUpdate::Message,
    AllowedUpdate::CallbackQuery,
    AllowedUpdate::MessageReaction,
];

/// What the listener (polling, or the webhook's middleware) does with a draft's stop, which
/// never reaches the dispatcher (see [`super::draft_stop`]).
pub(crate) type OnDraftStop = Box<dyn Fn(DraftStop) + Send + Sync>;

/// Whether an update may start a turn (and so must be in the inbox before it is confirmed).
pub(crate) type StartsTurn = Box<dyn Fn(&Update) -> bool + Send + Sync>;

/// The chat teloxide's default distribution gives an update to (its worker), `None` for
/// updates without a chat (one worker runs those concurrently).
type Worker = Option<crate::ids::ChatId>;

fn worker_of(update: &Update) -> Worker {
    update.chat().map(|chat| crate::ids::ChatId::from(chat.id))
}

/// The id of `update`, as the bot names it from here on.
fn id_of(update: &Update) -> UpdateId {
    UpdateId::from(update.id)
}

/// The updates handed to the dispatcher that may start a turn and whose handlers have not
/// finished yet.
pub(crate) struct Intake {
    state: Mutex<Handlers>,
    released: Notify,
    starts_turn: StartsTurn,
}

/// What [`Intake`] knows: the held updates, and the handlers of each chat.
#[derive(Default)]
struct Handlers {
    held: BTreeMap<UpdateId, Held>,
    /// Chats with a handler running, or with one ended while updates of the chat are held.
    workers: HashMap<Worker, Activity>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Held {
    worker: Worker,
    /// Whether its handler has started.
    started: bool,
}

#[derive(Debug, Clone, Copy)]
struct Activity {
    running: usize,
    /// When a handler of the chat last started or ended.
    since: Instant,
}

impl Handlers {
    /// The holds lost with a handler that panicked (see the module docs): never started, in
    /// a chat with no handler running for [`IDLE_WORKER`].
    fn lost(&self, now: Instant) -> Vec<UpdateId> {
        let idle = |worker: &Worker| {
            self.workers.get(worker).is_some_and(|activity| {
                activity.running == 0 && now.duration_since(activity.since) >= IDLE_WORKER
            })
        };
        self.held
            .iter()
            .filter(|(_, held)| !held.started && idle(&held.worker))
            .map(|(&update, _)| update)
            .collect()
    }

    /// A handler of `worker` ended: forget the chat unless updates of it are still held.
    fn ended(&mut self, worker: Worker, now: Instant) {
        let Some(activity) = self.workers.get_mut(&worker) else {
            return;
        };
        activity.running = activity.running.saturating_sub(1);
        activity.since = now;
        if activity.running == 0 && !self.held.values().any(|held| held.worker == worker) {
            self.workers.remove(&worker);
        }
    }
}

impl Intake {
    pub(crate) fn new(starts_turn: StartsTurn) -> Self {
        Self {
            state: Mutex::default(),
            released: Notify::new(),
            starts_turn,
        }
    }

    /// Holds an update that is about to be handled if it may start a turn; `true` if held.
    fn hold(&self, update: &Update) -> bool {
        self.hold_owned(update).is_some()
    }

    /// [`Self::hold`], saying whether this call took the hold (`Some(false)`: the update was
    /// held already, by an earlier request for it).
    fn hold_owned(&self, update: &Update) -> Option<bool> {
        // The dispatcher drops updates it cannot parse without handling them.
        let held = !matches!(update.kind, UpdateKind::Error(_)) && (self.starts_turn)(update);
        let hold = Held {
            worker: worker_of(update),
            started: false,
        };
        held.then(|| {
            let mut state = self.state();
            let new = !state.held.contains_key(&id_of(update));
            state.held.entry(id_of(update)).or_insert(hold);
            new
        })
    }

    /// The guard the schema holds while `update` is handled; dropping its last clone releases
    /// the update, and [`Handling::done`] releases it sooner.
    pub(crate) fn handling(self: &Arc<Self>, update: &Update) -> Handling {
        let worker = worker_of(update);
        let mut state = self.state();
        if let Some(held) = state.held.get_mut(&id_of(update)) {
            held.started = true;
        }
        let activity = state.workers.entry(worker).or_insert(Activity {
            running: 0,
            since: Instant::now(),
        });
        activity.running += 1;
        activity.since = Instant::now();
        Handling(Arc::new(Guard {
            intake: self.clone(),
            update: id_of(update),
            worker,
        }))
    }

    fn release(&self, update: UpdateId) {
        if self.state().held.remove(&update).is_some() {
            self.released.notify_waiters();
        }
    }

    /// Waits until no update is held.
    async fn drained(&self) {
        self.wait_until(|held| held.is_empty()).await;
    }

    /// Waits until `update` is no longer held.
    async fn released(&self, update: UpdateId) {
        self.wait_until(|held| !held.contains_key(&update)).await;
    }

    async fn wait_until(&self, done: impl Fn(&BTreeMap<UpdateId, Held>) -> bool) {
        loop {
            let released = self.released.notified();
            if done(&self.state().held) {
                return;
            }
            released.await;
        }
    }

    /// Releases the holds lost with a handler that panicked; returns their ids (see
    /// [`STALLED`]).
    fn forget_lost(&self) -> Vec<UpdateId> {
        let mut state = self.state();
        let lost = state.lost(Instant::now());
        for update in &lost {
            state.held.remove(update);
        }
        drop(state);
        self.released.notify_waiters();
        lost
    }

    /// The updates still held.
    fn held(&self) -> Vec<UpdateId> {
        self.state().held.keys().copied().collect()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Handlers> {
        // A poisoned lock still holds a valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Held by the schema while one update is handled (see [`crate::telegram::schema()`]); a
/// handler that may start a turn gets a clone, and says [`Handling::done`] once the update is
/// durable (its turn accepted into the inbox) or known to record nothing (a refusal), so its
/// paced replies do not hold every chat's next update.
#[derive(Clone)]
pub(crate) struct Handling(Arc<Guard>);

impl Handling {
    /// Releases the update now: nothing more of it needs to be on disk before Telegram may be
    /// told it arrived. Releasing twice is harmless.
    pub(crate) fn done(&self) {
        self.0.intake.release(self.0.update);
    }

    /// The id of the update being handled (recorded in the inbox with the turn it starts).
    pub(crate) fn update(&self) -> UpdateId {
        self.0.update
    }
}

struct Guard {
    intake: Arc<Intake>,
    update: UpdateId,
    worker: Worker,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.intake.release(self.update);
        self.intake.state().ended(self.worker, Instant::now());
    }
}

/// Long polling that confirms an offset only when every update below it was handled.
pub(crate) struct Polling {
    bot: Bot,
    intake: Arc<Intake>,
    /// Long-poll timeout, in seconds.
    timeout: u32,
    allowed: Option<Vec<AllowedUpdate>>,
    /// Telegram was told the kinds to send, draft stops included (once, before the first
    /// batch): `getUpdates` then names none, and Telegram keeps what it was told.
    told: bool,
    on_stop: OnDraftStop,
    /// Told when Telegram agreed to send draft stops, so drafts offer the stop control.
    drafts: Arc<Drafts>,
    token: StopToken,
    flag: StopFlag,
}

impl Polling {
    /// Polling for `bot`; deletes a webhook left registered (Telegram refuses getUpdates then).
    /// A draft's stop goes to `on_stop`; `drafts` offer the stop control once Telegram agreed
    /// to send stops.
    pub(crate) async fn new(
        bot: Bot,
        intake: Arc<Intake>,
        timeout: u32,
        on_stop: OnDraftStop,
        drafts: Arc<Drafts>,
    ) -> Self {
        match bot.get_webhook_info().await {
            Ok(info) if info.url.is_some() => {
                if let Err(e) = bot.delete_webhook().await {
                    tracing::error!(error = %e, "cannot delete the webhook; polling may fail");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the webhook settings"),
        }
        let (token, flag) = mk_stop_token();
        Self {
            bot,
            intake,
            timeout,
            allowed: None,
            told: false,
            on_stop,
            drafts,
            token,
            flag,
        }
    }
}

impl UpdateListener for Polling {
    type Err = RequestError;

    fn stop_token(&mut self) -> StopToken {
        self.token.clone()
    }

    fn hint_allowed_updates(&mut self, hint: &mut dyn Iterator<Item = AllowedUpdate>) {
        self.allowed = Some(hint.collect());
    }
}

impl<'a> AsUpdateStream<'a> for Polling {
    type StreamErr = RequestError;
    type Stream = BoxStream<'a, Result<Update, RequestError>>;

    fn as_stream(&'a mut self) -> Self::Stream {
        let state = Batches {
            polling: self,
            offset: 0,
            buffer: VecDeque::new(),
            errors: 0,
            pause: None,
            done: false,
        };
        futures_util::stream::unfold(state, |mut state| async move {
            let next = state.next().await?;
            Some((next, state))
        })
        .boxed()
    }
}

/// The polling loop's state between two updates it yields.
struct Batches<'a> {
    polling: &'a mut Polling,
    /// The next `offset`: one past the last update received.
    offset: i32,
    buffer: VecDeque<Update>,
    /// Failed getUpdates in a row.
    errors: u32,
    /// A wait before the next request (after a failure).
    pause: Option<Duration>,
    done: bool,
}

impl Batches<'_> {
    async fn next(&mut self) -> Option<Result<Update, RequestError>> {
        let polling = &mut *self.polling;
        loop {
            if let Some(update) = self.buffer.pop_front() {
                if let Some(stop) = draft_stop(&update) {
                    (polling.on_stop)(stop);
                    continue;
                }
                polling.intake.hold(&update);
                return Some(Ok(update));
            }
            if self.done {
                return None;
            }
            // The next request's offset confirms the whole batch: wait until it is released.
            // Stopping, a batch still held is not confirmed: Telegram sends it again.
            if !settled(&polling.intake, &mut polling.flag).await {
                self.done = true;
                return None;
            }
            if polling.flag.is_stopped() {
                self.done = true;
                // Confirms the last batch, so the next start does not get it again.
                let confirmed = polling
                    .bot
                    .get_updates()
                    .offset(self.offset)
                    .limit(1)
                    .timeout(0)
                    .await;
                if let Err(e) = confirmed {
                    tracing::warn!(error = %e, "cannot confirm the last updates to Telegram");
                }
                return None;
            }
            if let Some(pause) = self.pause.take() {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = &mut polling.flag => {}
                }
                continue;
            }
            let mut request = polling
                .bot
                .get_updates()
                .offset(self.offset)
                .timeout(polling.timeout);
            if let Some(allowed) = &polling.allowed {
                if !polling.told {
                    polling.told = ask_for_stops(&polling.bot, allowed).await;
                    if polling.told {
                        polling.drafts.stops_reach_bot();
                    }
                }
                if !polling.told {
                    request = request.allowed_updates(allowed.clone());
                }
            }
            let received = tokio::select! {
                received = request.send() => received,
                // Stopping: an abandoned batch is not confirmed, so Telegram sends it again.
                () = &mut polling.flag => continue,
            };
            match received {
                Ok(updates) => {
                    self.errors = 0;
                    if let Some(last) = updates.last() {
                        self.offset = last.id.as_offset();
                    }
                    self.buffer = updates.into();
                }
                Err(e) => {
                    self.pause = Some(retry_delay(&e, self.errors));
                    self.errors = self.errors.saturating_add(1);
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Waits until no update is held, giving up holds lost with a panicked handler after
/// [`STALLED`] (see the module docs); `false` if stopped while updates were still held (for
/// [`IDLE_WORKER`] more).
async fn settled(intake: &Intake, stop: &mut StopFlag) -> bool {
    loop {
        tokio::select! {
            drained = tokio::time::timeout(STALLED, intake.drained()) => {
                if drained.is_ok() {
                    return true;
                }
                let lost = intake.forget_lost();
                if lost.is_empty() {
                    tracing::warn!(held = ?intake.held(), "updates still held after {STALLED:?}: waiting for their handlers");
                } else {
                    tracing::error!(?lost, "updates lost with a handler that panicked: confirming them");
                }
            }
            // Handlers reach the inbox within moments: the batch is confirmed if they do.
            () = &mut *stop => {
                return tokio::time::timeout(IDLE_WORKER, intake.drained()).await.is_ok();
            }
        }
    }
}

/// How long to wait before asking again after the `errors`-th failure in a row: what a 429
/// asks for, else 1 s doubling up to a minute (a network that is down is not hammered).
fn retry_delay(error: &RequestError, errors: u32) -> Duration {
    match error {
        RequestError::RetryAfter(seconds) => seconds.duration(),
        _ => backoff(errors),
    }
}

fn backoff(errors: u32) -> Duration {
    Duration::from_secs(1u64 << errors.min(6)).min(Duration::from_secs(60))
}

/// The largest webhook body read; Telegram's updates are far smaller.
const MAX_UPDATE_BYTES: usize = 1 << 20;

/// What the webhook route's middleware needs: the intake, and where a draft's stop goes.
#[derive(Clone)]
pub(crate) struct Webhook {
    pub(crate) intake: Arc<Intake>,
    pub(crate) on_stop: Arc<OnDraftStop>,
    /// The secret token Telegram sends with each POST (set once the webhook is registered).
    pub(crate) secret: String,
}

/// The header Telegram sends the webhook's secret token in.
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Middleware for the webhook route: answers Telegram's POST only after the update was
/// released (its message is then in the inbox, or it records nothing), so an update lost to a
/// crash is sent again. A draft's stop goes to `on_stop` here, its secret token checked, and
/// never on to the route: teloxide cannot parse it, and its dispatcher would log the whole
/// update (the user's name) as an error (see [`super::draft_stop`]).
/// A request the route refuses (a wrong secret token) is answered at once.
pub(crate) async fn answer_when_handled(
    State(webhook): State<Webhook>,
    request: Request,
    next: Next,
) -> Response {
    let intake = &webhook.intake;
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_UPDATE_BYTES).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let stop = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|update| stop_in(&update));
    if let Some(stop) = stop {
        let secret = parts.headers.get(SECRET_HEADER).map(|v| v.as_bytes());
        if secret != Some(webhook.secret.as_bytes()) {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        (webhook.on_stop)(stop);
        return StatusCode::OK.into_response();
    }
    // Whether this request holds the update, and whether it took the hold (a second POST of
    // an update already held, forged or re-sent, must not release the first one's hold).
    let held = serde_json::from_slice::<Update>(&bytes)
        .ok()
        .and_then(|update| Some((id_of(&update), intake.hold_owned(&update)?)));
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let answered = response.status() == StatusCode::OK;
    match held {
        // As in polling: a hold lost with a panicked handler must not hang Telegram's requests
        // for ever, and no other is answered before its handler released it.
        Some((update, _)) if answered => loop {
            let released = tokio::time::timeout(STALLED, intake.released(update)).await;
            if released.is_ok() {
                break;
            }
            if intake.forget_lost().contains(&update) {
                tracing::error!(
                    %update,
                    "update lost with a handler that panicked: answering"
                );
                break;
            }
            tracing::warn!(
                %update,
                "update still held after {STALLED:?}: waiting for its handler"
            );
        },
        Some((update, true)) => intake.release(update),
        _ => {}
    }
    response
}

/// Whether `update` may start a turn: a text message that is not a command, a photo, an
/// option press or a 🔁 Retry (the routes that call [`crate::turn::accept`]).
pub(crate) fn may_start_turn(update: &Update) -> bool {
    match &update.kind {
        UpdateKind::Message(msg) => {
            msg.text().is_some_and(|text| !text.starts_with('/')) || msg.photo().is_some()
        }
        UpdateKind::CallbackQuery(query) => query
            .data
            .as_deref()
            .and_then(CallbackData::parse)
            .is_some_and(|data| data.starts_turn()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        struct Case {
            name: &'static str,
            errors: u32,
            secs: u64,
        }
        let cases = [
            Case {
                name: "first failure",
                errors: 0,
                secs: 1,
            },
            Case {
                name: "third failure",
                errors: 2,
                secs: 4,
            },
            Case {
                name: "capped",
                errors: 6,
                secs: 60,
            },
            Case {
                name: "no overflow",
                errors: u32::MAX,
                secs: 60,
            },
        ];
        for case in cases {
            assert_eq!(
                backoff(case.errors),
                Duration::from_secs(case.secs),
                "case {}",
                case.name
            );
        }
    }

    fn update(json: &str) -> Update {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn only_updates_that_may_start_a_turn_are_held() {
        struct Case {
            name: &'static str,
            update: String,
            held: bool,
        }
        let message = |content: &str| {
            format!(
                r#"{{"update_id": 7, "message": {{"message_id": 1, "date": 0,
                "chat": {{"id": 1, "type": "private", "first_name": "A"}}, {content}}}}}"#
            )
        };
        let press = |data: &str| {
            format!(
                r#"{{"update_id": 8, "callback_query": {{"id": "q", "chat_instance": "c",
                "from": {{"id": 1, "is_bot": false, "first_name": "A"}}, "data": "{data}"}}}}"#
            )
        };
        let photo =
            r#""photo": [{"file_id": "f", "file_unique_id": "u", "width": 1, "height": 1}]"#;
        let cases = [
            Case {
                name: "a text message",
                update: message(r#""text": "hi""#),
                held: true,
            },
            Case {
                name: "a photo",
                update: message(photo),
                held: true,
            },
            Case {
                name: "a command",
                update: message(r#""text": "/help""#),
                held: false,
            },
            Case {
                name: "a voice note",
                update: message(
                    r#""voice": {"file_id": "v", "file_unique_id": "u", "duration": 1}"#,
                ),
                held: false,
            },
            Case {
                name: "an option press",
                update: press(
                    &crate::telegram::callback_data::OptionPress::encode("t", 0, "x").unwrap(),
                ),
                held: true,
            },
            Case {
                name: "a retry press",
                update: press(
                    &crate::telegram::callback_data::Action::Retry { ticket: "t".into() }
                        .encode()
                        .unwrap(),
                ),
                held: true,
            },
            Case {
                name: "another press",
                update: press("nonsense"),
                held: false,
            },
            Case {
                name: "a kind teloxide cannot parse",
                update: r#"{"update_id": 9, "some_future_kind": {}}"#.to_string(),
                held: false,
            },
        ];
        let intake = Intake::new(Box::new(may_start_turn));
        for case in cases {
            assert_eq!(
                intake.hold(&update(&case.update)),
                case.held,
                "case {}",
                case.name
            );
        }
    }

    /// A text message, update `id`, in private chat `chat`.
    fn text_in(id: u32, chat: i64) -> Update {
        update(&format!(
            r#"{{"update_id": {id}, "message": {{"message_id": 1, "date": 0,
            "chat": {{"id": {chat}, "type": "private", "first_name": "A"}}, "text": "hi"}}}}"#
        ))
    }

    #[tokio::test]
    async fn the_intake_drains_only_when_every_handler_finished() {
        let intake = Arc::new(Intake::new(Box::new(|_| true)));
        let (one, two) = (text_in(1, 1), text_in(2, 1));
        assert!(intake.hold(&one) && intake.hold(&two));
        let first = intake.handling(&one);
        let second = intake.handling(&two);
        drop(first);
        let waiting = tokio::spawn({
            let intake = intake.clone();
            async move { intake.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "update 2 is still being handled");
        intake.released(UpdateId(1)).await;
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("drained once the last handler finished")
            .unwrap();
        assert!(
            intake.state().workers.is_empty(),
            "idle chats are forgotten"
        );
    }

    #[test]
    fn only_holds_lost_with_a_panicked_handler_are_given_up() {
        let intake = Arc::new(Intake::new(Box::new(|_| true)));
        // Chat 1: update 1's handler panicked (its guard dropped), so update 2, queued behind
        // it in the chat's worker, never starts. Chat 2: update 3's handler is still writing
        // the inbox, update 4 waits behind it. Chat 3: update 5 is on its way to its worker.
        let updates = [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)].map(|(id, chat)| text_in(id, chat));
        for update in &updates {
            assert!(intake.hold(update));
        }
        drop(intake.handling(&updates[0]));
        let _writing = intake.handling(&updates[2]);
        let now = Instant::now();
        let state = intake.state();
        assert_eq!(
            state.lost(now),
            Vec::<UpdateId>::new(),
            "a worker idle for a moment may be starting its next update"
        );
        assert_eq!(
            state.lost(now + IDLE_WORKER),
            [UpdateId(2)],
            "only the update behind the panic: no other chat's"
        );
    }

    #[test]
    fn only_the_first_hold_of_an_update_owns_it() {
        let intake = Intake::new(Box::new(|_| true));
        let update: Update = serde_json::from_str(
            r#"{"update_id": 5, "message": {"message_id": 1, "date": 0,
                "chat": {"id": 1, "type": "private"}, "text": "hi"}}"#,
        )
        .unwrap();
        assert_eq!(intake.hold_owned(&update), Some(true));
        assert_eq!(
            intake.hold_owned(&update),
            Some(false),
            "a second POST of it"
        );
    }
}
