//! The bot's services: configuration, store, agent, learning, limits and the chat queues.
//!
//! Built once at start-up and shared as an `Arc<App>`. It knows nothing of Telegram: the turn
//! layer runs turns with it, and the Telegram adapter hands it to its handlers as a dptree
//! dependency, so handlers stay plain async functions that take what they use as arguments.

use std::future::Future;
use std::sync::Arc;

use crate::agent::Agent;
use crate::agent::jail::Jail;
use crate::agent::mcp::Mcp;
use crate::agent::tools::Tools;
use crate::background::Background;
use crate::budget::Ledger;
use crate::budget::limits::Limits;
use crate::cancel::Turns;
use crate::clock::Clock;
use crate::config::{Config, ModelConfig};
use crate::conversation::Conversation;
use crate::learning::Learning;
use crate::llm::synthesis::Synthesizer;
use crate::llm::transcription::Transcriber;
use crate::llm::{LlmClient, estimate_tokens};
use crate::metrics::Metrics;
use crate::queue::ChatQueues;
use crate::shutdown::Shutdown;
use crate::store::Store;
use crate::store::compaction::{CompactionPolicy, DataDir};

pub struct App {
    config: Config,
    store: Store,
    /// Which generation of the store is live, and whether it is due for compaction.
    data_dir: DataDir,
    /// Set once the store is due for compaction and the chats are idle: the bot restarts in
    /// place, and the new start compacts.
    compaction_wanted: tokio::sync::watch::Sender<bool>,
    agent: Agent,
    learning: Learning,
    limits: Limits,
    /// The daily token budgets, charged per LLM call.
    ledger: Ledger,
    /// The transcription endpoint of voice notes (`None`: `[speech]` not configured).
    speech: Option<Transcriber>,
    /// The endpoint that speaks answers to voice notes (`None`: spoken replies off).
    voice: Option<Synthesizer>,
    /// Where PDFs are parsed: child processes with limits, a few at once.
    jail: Jail,
    queues: ChatQueues,
    /// Replies that are not turns (command replies, refusals, button edits), in order per
    /// conversation, off the dispatcher: a paced reply never holds the next update.
    replies: ChatQueues,
    /// The turn running in each chat, with its phase (what a stop may still do).
    turns: Arc<Turns>,
    /// Bounds the turns running at once across all chats.
    turn_slots: tokio::sync::Semaphore,
    /// Follow-ups of answers (option buttons, reflections), aborted at the end of a shutdown.
    background: Background,
    /// When the admins were last told of an LLM setup error (at most once an hour).
    admin_alerted: std::sync::Mutex<Option<std::time::Instant>>,
    /// What the bot counts for Prometheus (`[metrics]`).
    metrics: Metrics,
    /// The time the scheduler reads (tests move it).
    clock: Clock,
    /// This run's shutdown, which every loop and server listens to; the runtime begins it.
    shutdown: Shutdown,
}

impl App {
    /// Opens the database and builds the clients; fails with a message naming what to fix.
    pub fn new(config: Config) -> anyhow::Result<Arc<Self>> {
        Self::with_clock(config, Clock::system())
    }

    /// [`App::new`], with the scheduler reading `clock`.
    pub fn with_clock(config: Config, clock: Clock) -> anyhow::Result<Arc<Self>> {
        let policy = CompactionPolicy::configured(&config);
        let (store, data_dir) = Store::open_data_dir(&config.data_dir, config.cache_bytes, policy)?;
        let metrics = Metrics::new();
        let llm =
            LlmClient::with_models(&config.llm, &config.models)?.with_metrics(metrics.clone());
        let tools = Tools::new(&config.tools, &config.agent.time_zone)?
            .with_memory(config.memory)
            .with_mcp(Mcp::start(&config.mcp, &config.data_dir));
        let ledger = Ledger::new(&config, store.clone());
        let learning = Learning::new(
            config.learning.clone(),
            &config.llm,
            store.clone(),
            llm.clone(),
            ledger.clone(),
        );
        let agent = Agent::new(llm, tools, &config);
        let speech = Transcriber::new(&config.speech)?;
        let voice = Synthesizer::new(&config.speech)?;
        Ok(Arc::new(Self {
            store,
            data_dir,
            compaction_wanted: tokio::sync::watch::Sender::new(false),
            agent,
            learning,
            limits: Limits::new(config.limits.clone()),
            ledger,
            speech,
            voice,
            jail: Jail::new(&config.documents),
            queues: ChatQueues::default(),
            replies: ChatQueues::default(),
            turns: Arc::default(),
            background: Background::new(
                config.agent.max_concurrent_turns,
                config.learning.max_concurrent_reflections,
                config.max_queued_follow_ups,
            ),
            admin_alerted: std::sync::Mutex::new(None),
            turn_slots: tokio::sync::Semaphore::new(config.agent.max_concurrent_turns.max(1)),
            metrics,
            clock,
            shutdown: Shutdown::new(),
            config,
        }))
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The time the scheduler reads.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// This run's shutdown: a loop or server started with the app ends when it begins.
    pub(crate) fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// Whether the admins may be alerted of a setup error now; if so, the next hour's alerts
    /// are held back, so a broken key does not flood them with one message per user message.
    pub(crate) fn claim_admin_alert(&self) -> bool {
        const EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
        let mut last = self
            .admin_alerted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = last.is_none_or(|at| at.elapsed() >= EVERY);
        if due {
            *last = Some(std::time::Instant::now());
        }
        due
    }

    /// The sled store (tests inspect it through here).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The data directory: the live store's generation (tests look at it through here).
    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    /// Asks for the restart in place that compacts the store.
    pub(crate) fn want_compaction(&self) {
        self.compaction_wanted.send_replace(true);
    }

    /// Resolves once a restart to compact the store is wanted.
    pub(crate) async fn compaction_wanted(&self) {
        let mut wanted = self.compaction_wanted.subscribe();
        // The sender lives as long as `self`, so this only returns once it is set.
        let _ = wanted.wait_for(|wanted| *wanted).await;
    }

    /// Whether no turn, queued turn, reflection or other follow-up (option buttons, say) is
    /// running: a quiet moment to restart (and for a test, a moment where nothing is on its way).
    pub fn idle(&self) -> bool {
        self.queues.busy_chats() == 0 && self.follow_ups_done()
    }

    /// Whether no reply, reflection or other follow-up of a turn is running or waiting (the
    /// turns themselves aside).
    pub(crate) fn follow_ups_done(&self) -> bool {
        self.replies.busy_chats() == 0
            && self.learning.reflections_running() == 0
            && self.background.running() == 0
    }

    /// What the bot counts for Prometheus.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn learning(&self) -> &Learning {
        &self.learning
    }

    pub(crate) fn agent(&self) -> &Agent {
        &self.agent
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The speech synthesis endpoint, if spoken replies are on.
    pub(crate) fn voice(&self) -> Option<&Synthesizer> {
        self.voice.as_ref()
    }

    /// The transcription endpoint, if `[speech]` configures one.
    pub(crate) fn speech(&self) -> Option<&Transcriber> {
        self.speech.as_ref()
    }

    /// Where third-party files are parsed (see [`crate::agent::jail`]).
    pub(crate) fn jail(&self) -> &Jail {
        &self.jail
    }

    pub(crate) fn queues(&self) -> &ChatQueues {
        &self.queues
    }

    pub(crate) fn turns(&self) -> &Arc<Turns> {
        &self.turns
    }

    /// Waits for a turn slot (the semaphore is never closed, so this only waits).
    pub(crate) async fn turn_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.turn_slots.acquire().await.ok()
    }

    /// The model this chat uses: its own choice if still configured, else the default.
    pub(crate) fn model_for(&self, chat: crate::conversation::Conversation) -> ModelConfig {
        self.store
            .chats()
            .model(chat)
            .and_then(|id| self.config.model(&id).cloned())
            .unwrap_or_else(|| self.config.default_model().clone())
    }

    /// The history budget of a chat on `model`: the configured budget, shrunk where the model's
    /// context window (as the server reports it, else `context_tokens`) must also hold the
    /// system prompt, the answer cap and a reserve for the new message and tool results.
    pub(crate) async fn history_budget(&self, model: &ModelConfig) -> usize {
        const RESERVE: usize = 1024;
        let budget = self.config.agent.history_tokens;
        let window = self
            .agent
            .llm()
            .context_window(&model.id, model.context_tokens)
            .await;
        match window {
            Some(context) => {
                let system = estimate_tokens(&[self.agent.system_message()]);
                let room = context
                    .saturating_sub(system + self.agent.answer_cap(model) as usize + RESERVE);
                budget.min(room)
            }
            None => budget,
        }
    }

    /// Runs `work` in the background, tracked so a shutdown can end it.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.background.spawn(work);
    }

    /// Queues `work`, a follow-up of an answer, in `lane`; `dropped` runs instead if the full
    /// queue drops it (see [`crate::background`]).
    pub(crate) fn follow_up(
        &self,
        lane: crate::background::Lane,
        work: impl Future<Output = ()> + Send + 'static,
        dropped: impl FnOnce() + Send + 'static,
    ) {
        self.background.follow_up(lane, work, dropped);
    }

    /// Sends a reply to `chat` (its paced calls, in the order replies were posted there) off
    /// the caller's task: a handler posts it and returns.
    pub(crate) fn reply(
        &self,
        chat: Conversation,
        work: impl Future<Output = ()> + Send + 'static,
    ) {
        let on_panic = async move { tracing::error!(%chat, "a reply panicked") };
        self.replies.enqueue(chat, None, work, on_panic);
    }

    /// Runs `work`, a loop that never ends by itself, until the shutdown ends it.
    pub(crate) fn spawn_loop(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.background.spawn_loop(work);
    }

    /// Aborts every turn, reply, follow-up and loop still running (the end of a shutdown's
    /// grace period), and waits until the background tasks have let go of what they held.
    /// Reflections cut off stay saved in sled and resume at the next start; nothing started
    /// after this runs.
    pub(crate) async fn abort_remaining(&self) {
        self.queues.abort_all();
        self.replies.abort_all();
        self.background.abort_all().await;
    }
}
