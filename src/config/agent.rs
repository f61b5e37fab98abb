//! `[agent]` (the loop and its prompt), `[limits]` (per user), `[options]` (option buttons) and
//! `[tools]` (fetch and web search): what one turn may do.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub max_iterations: usize,
    pub history_tokens: usize,
    pub max_concurrent_turns: usize,
    pub max_tool_calls: usize,
    pub max_tool_output_chars: usize,
    pub time_zone: String,
    pub system_prompt: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub turns_per_minute: usize,
    pub commands_per_minute: usize,
    pub daily_tokens: u64,
    pub exempt_admins: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionsConfig {
    pub enabled: bool,
    pub max_count: usize,
    pub max_attempts: usize,
    pub timeout_secs: u64,
    /// How long an answer's final send or edit waits for its options, so quick options come
    /// with 👍/👎 in one call and the keyboard changes at most once after the answer.
    pub attach_wait_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    pub fetch_timeout_secs: u64,
    pub fetch_max_bytes: usize,
    /// A test hook: lets `fetch_url` reach loopback and private addresses, so tests can serve
    /// pages on 127.0.0.1. No config file or environment variable sets it (a file that tries
    /// is refused, see [`super::Config::from_toml`]); only code that builds a `Config` can, so a
    /// deployed bot always has the SSRF guard on.
    #[serde(skip)]
    pub fetch_allow_private: bool,
    /// SearXNG base URL for `web_search` (`HEURIST_SEARXNG_URL`); empty: the tool is not offered.
    pub searxng_url: String,
    pub search_max_results: usize,
    pub search_snippet_chars: usize,
    pub search_timeout_secs: u64,
}
