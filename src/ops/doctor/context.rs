//! What the doctor's checks share: the configuration, the clients they ask with, and what
//! earlier checks found (a model is not asked when its endpoint is down).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::report::Line;
use crate::config::Config;
use crate::llm::{LlmClient, Served, served};

/// What the checks share: the configuration, the clients, and what earlier checks found.
pub(crate) struct Context<'c> {
    pub(super) config: &'c Config,
    /// The bot's own LLM client, without retries: the doctor reports a failure at once. Each
    /// model's calls go to its own endpoint with its own key, as the bot sends them.
    pub(super) llm: LlmClient,
    /// For the checks' own small requests (`/models`, SearXNG).
    pub(super) http: reqwest::Client,
    pub(super) telegram_up: AtomicBool,
    /// Every distinct LLM endpoint, the default first, and whether it answered.
    pub(super) endpoints: Vec<(Served, AtomicBool)>,
}

/// A check's future: boxed, so checks of different bodies fit one list.
pub(super) type Checked<'a> = Pin<Box<dyn Future<Output = Vec<Line>> + Send + 'a>>;

/// One check: the lines it reports.
pub(super) type Check = for<'a> fn(&'a Context<'a>) -> Checked<'a>;

/// How long one of the doctor's own requests may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

impl<'c> Context<'c> {
    /// The context for checking `config`: the bot's LLM client without retries (the doctor
    /// reports a failure at once), and a client for its own small requests.
    pub(super) fn new(config: &'c Config) -> anyhow::Result<Self> {
        let mut llm_config = config.llm.clone();
        llm_config.max_retries = 0;
        llm_config.request_timeout_secs = llm_config.request_timeout_secs.min(60);
        Ok(Self {
            config,
            llm: LlmClient::with_models(&llm_config, &config.models)?,
            http: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .connect_timeout(Duration::from_secs(config.llm.connect_timeout_secs))
                .build()?,
            telegram_up: AtomicBool::new(false),
            endpoints: served(&config.llm, &config.models)
                .into_iter()
                .map(|endpoint| (endpoint, AtomicBool::new(false)))
                .collect(),
        })
    }
}

impl Context<'_> {
    pub(super) fn telegram_up(&self) -> bool {
        self.telegram_up.load(Ordering::Relaxed)
    }

    /// Whether the endpoint that serves `model` answered (the default one for a model no
    /// `[[models]]` entry names, such as the embeddings model).
    pub(super) fn llm_up(&self, model: &str) -> bool {
        let serves =
            |(endpoint, _): &&(Served, AtomicBool)| endpoint.models.iter().any(|m| m == model);
        self.endpoints
            .iter()
            .find(serves)
            .or(self.endpoints.first())
            .is_some_and(|(_, up)| up.load(Ordering::Relaxed))
    }
}
