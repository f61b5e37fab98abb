//! `[llm]` (the endpoint and its request caps) and `[[models]]` (the models a chat may choose,
//! each with its own request settings, endpoint and fallbacks).

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    pub base_url: String,
    pub temperature: f32,
    pub request_timeout_secs: u64,
    pub connect_timeout_secs: u64,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    pub retry_budget_secs: u64,
    pub max_tokens_answer: u32,
    pub max_tokens_extraction: u32,
    pub max_tokens_reflection: u32,
    pub max_tokens_field: MaxTokensField,
    /// Requests in flight at once to the endpoint, all kinds of call together.
    pub max_concurrent: usize,
    /// `OPENAI_API_KEY`; environment only, never logged.
    #[serde(skip)]
    pub api_key: Option<String>,
}

/// Which request field carries the completion cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// One selectable model and the request settings that go with it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub id: String,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// OpenRouter provider routing: providers to try, in order.
    #[serde(default)]
    pub provider_order: Vec<String>,
    #[serde(default)]
    pub allow_fallbacks: Option<bool>,
    /// This model's answer cap, instead of `llm.max_tokens_answer`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// This model's context window in tokens, if known.
    #[serde(default)]
    pub context_tokens: Option<usize>,
    /// The model reads images: photos (with their caption) are sent to it.
    #[serde(default)]
    pub vision: bool,
    /// This model's endpoint, instead of `llm.base_url`: a local model and a hosted one can
    /// be offered side by side (and one fall back to the other).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The name of the environment variable that holds this model's API key (never the key
    /// itself: keys stay out of files).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The models that take over a turn this one cannot answer (its endpoint down, or not
    /// knowing the model), in order; see `llm::fallback`.
    #[serde(default)]
    pub fallback: Vec<String>,
    /// The key `api_key_env` names, read from the environment; never logged.
    #[serde(skip)]
    pub api_key: Option<String>,
}

impl ModelConfig {
    /// A model known only by its id (from `HEURIST_MODELS`), with default request settings.
    pub fn with_id(id: &str) -> Self {
        Self {
            id: id.to_string(),
            reasoning_effort: None,
            provider_order: Vec::new(),
            allow_fallbacks: None,
            max_tokens: None,
            context_tokens: None,
            vision: false,
            base_url: None,
            api_key_env: None,
            fallback: Vec::new(),
            api_key: None,
        }
    }
}
