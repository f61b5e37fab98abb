//! The bot's shared state: configuration and the long-lived services every handler needs.
//!
//! Built once at start-up and handed to dptree handlers as an `Arc<App>` dependency, so
//! handlers stay plain async functions that take what they use as arguments.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::agent::Agent;
use crate::agent::mcp::Mcp;
use crate::agent::tools::Tools;
use crate::config::{Config, ModelConfig};
use crate::learning::Learning;
use crate::limits::Limits;
use crate::llm::{LlmClient, estimate_tokens};
use crate::queue::ChatQueues;
use crate::store::Store;
use crate::telegram::send::SendPolicy;

pub struct App {
    pub config: Config,
    pub store: Store,
    pub agent: Agent,
    pub learning: Learning,
    pub limits: Limits,
    pub queues: ChatQueues,
    pub send_policy: SendPolicy,
    /// Bounds the turns running at once across all chats.
    pub turn_slots: tokio::sync::Semaphore,
    /// Background work (option buttons, reflections), aborted at the end of a shutdown.
    background: Mutex<JoinSet<()>>,
}

impl App {
    /// Opens the database and builds the clients; fails with a message naming what to fix.
    pub fn new(config: Config) -> anyhow::Result<Arc<Self>> {
        let store = Store::open_with_cache(&config.data_dir, config.cache_bytes)?;
        let llm = LlmClient::new(&config.llm)?;
        let tools =
            Tools::new(&config.tools, &config.agent.time_zone)?.with_mcp(Mcp::start(&config.mcp));
        let learning = Learning::new(config.learning.clone(), store.clone(), llm.clone());
        let agent = Agent::new(llm, tools, &config);
        Ok(Arc::new(Self {
            send_policy: SendPolicy::new(&config.telegram),
            store,
            agent,
            learning,
            limits: Limits::new(config.limits.clone()),
            queues: ChatQueues::default(),
            background: Mutex::default(),
            turn_slots: tokio::sync::Semaphore::new(config.agent.max_concurrent_turns.max(1)),
            config,
        }))
    }

    /// The model this chat uses: its own choice if still configured, else the default.
    pub fn model_for(&self, chat: i64) -> ModelConfig {
        self.store
            .chat_model(chat)
            .and_then(|id| self.config.model(&id).cloned())
            .unwrap_or_else(|| self.config.default_model().clone())
    }

    /// The history budget of a chat on `model`: the configured budget, shrunk where the model's
    /// context window must also hold the system prompt, the answer cap and a reserve for the
    /// new message and tool results.
    pub fn history_budget(&self, model: &ModelConfig) -> usize {
        const RESERVE: usize = 1024;
        let budget = self.config.agent.history_tokens;
        match model.context_tokens {
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
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.background.lock().unwrap_or_else(|e| e.into_inner());
        // Reap finished tasks so the set does not grow with the bot's uptime.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(work);
    }

    /// Aborts all background work (at the end of a shutdown's grace period).
    pub fn abort_background(&self) {
        self.background
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
    }

    pub fn typing_interval(&self) -> Duration {
        Duration::from_secs(self.config.telegram.typing_interval_secs.max(1))
    }
}
