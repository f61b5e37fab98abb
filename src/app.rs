//! The bot's shared state: configuration and the long-lived services every handler needs.
//!
//! Built once at start-up and handed to dptree handlers as an `Arc<App>` dependency, so
//! handlers stay plain async functions that take what they use as arguments.

use std::sync::Arc;
use std::time::Duration;

use crate::agent::Agent;
use crate::agent::tools::Tools;
use crate::config::{Config, ModelConfig};
use crate::llm::LlmClient;
use crate::queue::ChatQueues;
use crate::store::Store;
use crate::telegram::send::SendPolicy;

pub struct App {
    pub config: Config,
    pub store: Store,
    pub agent: Agent,
    pub queues: ChatQueues,
    pub send_policy: SendPolicy,
}

impl App {
    /// Opens the database and builds the clients; fails with a message naming what to fix.
    pub fn new(config: Config) -> anyhow::Result<Arc<Self>> {
        let store = Store::open(&config.data_dir)?;
        let llm = LlmClient::new(&config.llm)?;
        let tools = Tools::new(&config.tools, &config.agent.time_zone)?;
        let agent = Agent::new(llm, tools, config.agent.clone(), config.llm.temperature);
        Ok(Arc::new(Self {
            send_policy: SendPolicy::new(&config.telegram),
            store,
            agent,
            queues: ChatQueues::default(),
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

    pub fn typing_interval(&self) -> Duration {
        Duration::from_secs(self.config.telegram.typing_interval_secs.max(1))
    }
}
