//! Configuration: `config/heurist.toml` layered under the user's file and the environment.
//!
//! The defaults live in exactly one place, the shipped `config/heurist.toml`, which is compiled
//! in. A user's file (default `config/heurist.toml`, or `HEURIST_CONFIG`) is deep-merged over it,
//! so it only needs the keys it changes, and unknown keys are rejected so typos do not pass
//! silently. Environment variables with the exact names documented in `.env.example` win last:
//! deployments script against those names.
//!
//! Every error is one line that says what to set and where; start-up never panics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::ids::UserId;
use crate::role::Role;

/// The shipped defaults; also the documentation of every key.
const DEFAULT_TOML: &str = include_str!("../config/heurist.toml");

/// Where the user's config file is looked for when `HEURIST_CONFIG` is not set.
const DEFAULT_CONFIG_PATH: &str = "config/heurist.toml";

/// Everything Heurist can be told. Secrets are only taken from the environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub data_dir: PathBuf,
    pub shutdown_grace_secs: u64,
    /// How many times an update's turn may start without finishing (a crash each time)
    /// before it is given up with an apology: what makes a crash loop impossible.
    pub max_turn_attempts: u32,
    pub cache_bytes: u64,
    /// Answered inbox entries and option/feedback tickets older than this are pruned.
    pub retention_days: u32,
    /// How often that pruning runs while the bot runs (and once at start).
    pub prune_interval_secs: u64,
    /// Compact the store once it is this many times its size after the last compaction; 0 never.
    pub compact_factor: f64,
    /// ... and at least this much larger, in MiB.
    pub compact_min_mb: u64,
    /// Follow-ups waiting to run at most; the oldest waiting one is dropped past it.
    pub max_queued_follow_ups: usize,
    pub telegram: TelegramConfig,
    pub llm: LlmConfig,
    pub models: Vec<ModelConfig>,
    pub agent: AgentConfig,
    pub limits: LimitsConfig,
    pub options: OptionsConfig,
    pub learning: LearningConfig,
    pub access: AccessConfig,
    pub tools: ToolsConfig,
    pub mcp: McpConfig,
    pub speech: SpeechConfig,
    pub documents: DocumentsConfig,
    pub memory: MemoryConfig,
    pub tasks: TasksConfig,
    pub metrics: MetricsConfig,
    pub backup: BackupConfig,
    /// The bot token (`TELOXIDE_TOKEN`); environment only.
    #[serde(skip)]
    pub token: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// Bot API base URL; empty for Telegram's own.
    pub api_url: String,
    pub poll_timeout_secs: u32,
    pub typing_interval_secs: u64,
    pub chat_interval_ms: u64,
    /// Spacing in groups, supergroups and channels (negative chat ids).
    pub group_interval_ms: u64,
    pub global_per_second: u32,
    pub streaming: bool,
    /// In private chats, stream as a native draft (`sendMessageDraft`) instead of edits.
    pub drafts: bool,
    /// Link preview cards under messages with links; off by default (they crowd answers).
    pub link_previews: bool,
    pub max_image_bytes: u32,
    pub max_send_retries: u32,
    pub max_retry_after_secs: u64,
    pub webhook_url: String,
    pub webhook_listen: String,
    pub webhook_secret: String,
    /// The reaction a user's message carries while its turn runs; empty for none.
    pub working_reaction: String,
    /// How long a turn runs before its message gets the working reaction (a quicker answer
    /// needs none and costs no call).
    pub working_reaction_after_ms: u64,
    /// Reactions on an answer that count as its 👍 button.
    pub reaction_up: Vec<String>,
    /// Reactions on an answer that count as its 👎 button.
    pub reaction_down: Vec<String>,
}

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
pub struct LearningConfig {
    pub skills_dir: PathBuf,
    pub max_active_skills: usize,
    /// The evidence a message must give for a skill (see `learning::skill_match`): 2 is two
    /// words of the skill's name or description.
    pub min_skill_score: f32,
    pub embedding_model: String,
    pub min_similarity: f32,
    pub reflect: bool,
    pub max_concurrent_reflections: usize,
    pub dedup_threshold: f32,
    pub max_injected: usize,
    pub min_relevance: f32,
    pub min_utility: f32,
    pub max_heuristics: usize,
    /// Heuristics held for review kept at most, apart from `max_heuristics`: a new pending one
    /// evicts only pending ones, so untrusted lessons never push out approved ones.
    pub max_pending: usize,
    pub review: Review,
    /// A lesson the model writes is stored only if it carries something concrete from its
    /// task's evidence (see `learning::grounding`); off, the other gates alone decide.
    pub grounded_only: bool,
    pub feedback_buttons: bool,
}

/// Which new heuristics wait for an admin's approval before they are injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Review {
    /// Those learned from turns whose context held text a third party wrote.
    External,
    All,
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    pub allowed_users: Vec<UserId>,
    pub admins: Vec<UserId>,
    /// Whether a stranger's refusal carries a "Request access" button that tells the admins.
    pub request_button: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    pub fetch_timeout_secs: u64,
    pub fetch_max_bytes: usize,
    /// A test hook: lets `fetch_url` reach loopback and private addresses, so tests can serve
    /// pages on 127.0.0.1. No config file or environment variable sets it (a file that tries
    /// is refused, see [`Config::from_toml`]); only code that builds a `Config` can, so a
    /// deployed bot always has the SSRF guard on.
    #[serde(skip)]
    pub fetch_allow_private: bool,
    /// SearXNG base URL for `web_search` (`HEURIST_SEARXNG_URL`); empty: the tool is not offered.
    pub searxng_url: String,
    pub search_max_results: usize,
    pub search_snippet_chars: usize,
    pub search_timeout_secs: u64,
}

/// Voice notes and audio files: the OpenAI-compatible transcription endpoint and the caps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeechConfig {
    /// Base URL of `POST {base_url}/audio/transcriptions` (`HEURIST_SPEECH_URL`); empty: voice
    /// notes get a note saying what to configure.
    pub base_url: String,
    pub model: String,
    /// ISO-639-1 language hint; empty: the server detects it.
    pub language: String,
    /// Longer recordings are refused before they are downloaded.
    pub max_audio_secs: u32,
    /// Larger files are refused before they are downloaded (Telegram's bots get up to 20 MB).
    pub max_audio_bytes: u32,
    pub timeout_secs: u64,
    /// `HEURIST_SPEECH_API_KEY`; environment only, never logged.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// Base URL of `POST {tts_url}/audio/speech` (`HEURIST_TTS_URL`), which speaks answers to
    /// voice notes; empty: answers are text only.
    pub tts_url: String,
    pub tts_model: String,
    pub tts_voice: String,
    /// Whether an answer to a voice or video note is also spoken (on by default: it takes
    /// effect wherever `tts_url` is set). Each user can turn it off for themselves
    /// (`/voice off`).
    pub reply_with_voice: bool,
    /// The most characters of an answer spoken (the text message always has all of it).
    pub max_spoken_chars: usize,
    /// `HEURIST_TTS_API_KEY`; environment only, never logged.
    #[serde(skip)]
    pub tts_api_key: Option<String>,
}

impl SpeechConfig {
    /// Whether answers to voice notes are spoken at all (before each user's `/voice`).
    pub(crate) fn speaks(&self) -> bool {
        !self.tts_url.is_empty() && self.reply_with_voice
    }
}

/// Documents read into a turn: how much is downloaded, how much of the text the model gets,
/// and the limits of the child process a PDF is parsed in (see [`crate::agent::jail`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentsConfig {
    pub max_document_chars: usize,
    pub max_document_bytes: u32,
    /// Wall-clock seconds a parser child may take before it is killed.
    pub parser_timeout_secs: u64,
    /// A parser child's address space (RLIMIT_AS), in MiB.
    pub parser_memory_mb: u64,
    /// A parser child's CPU time (RLIMIT_CPU), in seconds.
    pub parser_cpu_secs: u64,
    /// The program run as the parser child; `None`: this very binary. Not a setting: the
    /// in-process tests run inside a test binary, so they name the real `heurist` here.
    #[serde(skip)]
    pub parser_program: Option<PathBuf>,
}

/// Personal memory: the facts each user asked the bot to keep (see [`crate::memory`]).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Facts kept per user; past it, the least recently used goes. 0: no memory at all.
    pub max_memories: usize,
    /// The longest fact, in characters.
    pub max_chars: usize,
}

impl MemoryConfig {
    /// Whether memory is on: the `remember` tool is offered and facts are injected.
    pub(crate) fn enabled(self) -> bool {
        self.max_memories > 0 && self.max_chars > 0
    }
}

/// Scheduled tasks and reminders (the `schedule_task` tool, `/tasks`): the caps per user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// Tasks a user may have at once.
    pub max_per_user: usize,
    /// The smallest interval between two runs of a repeating task, in minutes; at least 1
    /// (checked at load: 0 would let a task run every second).
    pub min_interval_mins: u64,
    /// Runs a user's tasks may make per day (UTC); 0: no limit.
    pub max_runs_per_day: u32,
    /// A test hook: the smallest interval in seconds, in place of `min_interval_mins`, so tests
    /// can watch a task repeat. No config file or environment variable sets it.
    #[serde(skip)]
    pub min_interval_secs: Option<u64>,
}

impl TasksConfig {
    /// The smallest interval between two runs, in seconds.
    pub(crate) fn min_interval(&self) -> i64 {
        let secs = self
            .min_interval_secs
            .unwrap_or(self.min_interval_mins.saturating_mul(60));
        i64::try_from(secs).unwrap_or(i64::MAX)
    }
}

/// MCP servers whose tools the agent may call, and how failed ones are restarted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// First wait before restarting a server that failed to start or died; doubles per
    /// failure in a row, up to `retry_max_secs`.
    pub retry_base_ms: u64,
    pub retry_max_secs: u64,
    pub servers: Vec<McpServerConfig>,
}

/// One `[[mcp.servers]]` entry: a child process (`command`, `args`, `env`) or a streamable-HTTP
/// endpoint (`url`, `headers`). Entries of an array cannot inherit from the shipped file, so
/// the optional keys default here (as documented in config/heurist.toml).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `[a-z0-9_-]`, unique: its tools are offered as `<name>__<tool>`.
    pub name: String,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The child's whole environment besides PATH and HOME: the bot's own (its token, its API
    /// key) is never passed on.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The child's working directory; unset: an empty directory of its own under `data_dir`
    /// (`mcp/<name>/`), so `./.env` and `./data` beside the bot are not its relative paths.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Tools (by the server's names) to offer; empty: all the server lists.
    #[serde(default)]
    pub allowed_tools: Vec<String>,
    #[serde(default)]
    pub roles: McpRoles,
    /// An admin-only server's tools are offered in admins' turns in groups too. Off by
    /// default: text anyone in a shared chat wrote (or a page it fetched) could steer them.
    #[serde(default)]
    pub in_groups: bool,
    /// Longest wait for one call (and for the start-up handshake).
    #[serde(default = "default_mcp_timeout_secs")]
    pub timeout_secs: u64,
    /// The bot may write an argument in the form this server's tools taught by their errors
    /// and successes (see `learning::rewrite`) when the model writes it in an old form.
    #[serde(default = "default_true")]
    pub rewrite_arguments: bool,
}

fn default_mcp_timeout_secs() -> u64 {
    30
}

fn default_true() -> bool {
    true
}

/// The Prometheus endpoint (see [`crate::metrics`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` where `GET /metrics` is served (`HEURIST_METRICS_LISTEN`); empty: off.
    pub listen: String,
}

/// Online backups (see [`crate::store::backup`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupConfig {
    /// Where backups are written (`HEURIST_BACKUP_DIR`); empty: `backups` beside the data
    /// directory ([`Config::backup_dir`]).
    pub dir: PathBuf,
    /// Hours between two scheduled backups; 0: none but `/backup`'s.
    pub every_hours: u64,
    /// Backups kept; the older ones are deleted after each new one. At least 1.
    pub keep: usize,
}

/// Who gets an MCP server's tools: a server that can change things can be kept to admins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpRoles {
    /// Every allowed user (admins included).
    #[default]
    User,
    /// Only admins' turns.
    Admin,
}

impl McpRoles {
    /// The least role whose turns are offered the server's tools.
    pub(crate) fn min_role(self) -> Role {
        match self {
            Self::User => Role::User,
            Self::Admin => Role::Admin,
        }
    }
}

impl Config {
    /// Loads `.env`, the config file and the environment, as the binary does at start-up.
    pub fn load() -> anyhow::Result<Self> {
        // A missing .env is normal (the environment may carry everything); a broken one is not.
        if let Err(e) = dotenvy::dotenv()
            && !e.not_found()
        {
            bail!("cannot read .env: {e} (fix the line or remove the file)");
        }
        let explicit = std::env::var_os("HEURIST_CONFIG").map(PathBuf::from);
        let path = explicit
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH));
        let user_toml = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => None,
            Err(e) => bail!(
                "cannot read config file {}: {e} (set HEURIST_CONFIG to an existing file)",
                path.display()
            ),
        };
        let mut config = Self::from_toml(user_toml.as_deref(), &path)?;
        config.apply_env(|name| std::env::var(name).ok())?;
        Ok(config)
    }

    /// The shipped defaults with `user_toml` merged over them; `path` is only used in errors.
    /// A file that turns `tools.fetch_allow_private` on is refused: turning the SSRF guard off
    /// is a test hook, not a setting (the line with the guard on, as earlier versions shipped
    /// it, is dropped with a warning).
    pub fn from_toml(user_toml: Option<&str>, path: &Path) -> anyhow::Result<Self> {
        let mut merged: toml::Value =
            toml::from_str(DEFAULT_TOML).context("the built-in config/heurist.toml is invalid")?;
        if let Some(text) = user_toml {
            let user: toml::Value = toml::from_str(text)
                .map_err(|e| anyhow::anyhow!(toml_error_line(path, text, &e)))?;
            let mut user = user;
            let guard_off = user
                .get_mut("tools")
                .and_then(toml::Value::as_table_mut)
                .and_then(|tools| tools.remove("fetch_allow_private"));
            match guard_off {
                None => {}
                // The shipped file of earlier versions had this line, with the guard on: such a
                // copy still starts, with a word to the operator.
                Some(toml::Value::Boolean(false)) => tracing::warn!(
                    path = %path.display(),
                    "tools.fetch_allow_private is no longer a setting (the guard is always on); \
                     remove that line"
                ),
                Some(_) => bail!(
                    "invalid config in {}: tools.fetch_allow_private is not a setting (fetch_url \
                     never reaches loopback or private addresses); remove that line",
                    path.display()
                ),
            }
            merge(&mut merged, user);
        }
        let text = toml::to_string(&merged).context("cannot re-serialise the merged config")?;
        toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "invalid config in {}: {} (see the comments in config/heurist.toml)",
                path.display(),
                one_line(e.message())
            )
        })
    }

    /// Applies the documented environment variables; `var` is injectable for tests.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let set = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if let Some(url) = set("TELOXIDE_API_URL") {
            self.telegram.api_url = url;
        }
        if let Some(url) = set("OPENAI_BASE_URL") {
            self.llm.base_url = url;
        }
        self.llm.api_key = set("OPENAI_API_KEY");
        if let Some(url) = set("HEURIST_WEBHOOK_URL") {
            self.telegram.webhook_url = url;
        }
        if let Some(listen) = set("HEURIST_WEBHOOK_LISTEN") {
            self.telegram.webhook_listen = listen;
        }
        if let Some(secret) = set("HEURIST_WEBHOOK_SECRET") {
            self.telegram.webhook_secret = secret;
        }
        if let Some(url) = set("HEURIST_SEARXNG_URL") {
            self.tools.searxng_url = url;
        }
        if let Some(url) = set("HEURIST_SPEECH_URL") {
            self.speech.base_url = url;
        }
        self.speech.api_key = set("HEURIST_SPEECH_API_KEY");
        if let Some(url) = set("HEURIST_TTS_URL") {
            self.speech.tts_url = url;
        }
        self.speech.tts_api_key = set("HEURIST_TTS_API_KEY");
        if let Some(listen) = set("HEURIST_METRICS_LISTEN") {
            self.metrics.listen = listen;
        }
        if let Some(dir) = set("HEURIST_DATA_DIR") {
            self.data_dir = PathBuf::from(dir);
        }
        if let Some(dir) = set("HEURIST_BACKUP_DIR") {
            self.backup.dir = PathBuf::from(dir);
        }
        if let Some(ids) = set("HEURIST_ALLOWED_USERS") {
            self.access.allowed_users = parse_user_ids("HEURIST_ALLOWED_USERS", &ids)?;
        }
        if let Some(ids) = set("HEURIST_ADMINS") {
            self.access.admins = parse_user_ids("HEURIST_ADMINS", &ids)?;
        }
        if let Some(models) = set("HEURIST_MODELS") {
            // Ids named in the file keep their settings; new ids get defaults.
            let configured = std::mem::take(&mut self.models);
            self.models = models
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(|id| {
                    configured
                        .iter()
                        .find(|m| m.id == id)
                        .cloned()
                        .unwrap_or_else(|| ModelConfig::with_id(id))
                })
                .collect();
        }
        self.token = set("TELOXIDE_TOKEN").unwrap_or_default();
        for model in &mut self.models {
            model.api_key = model.api_key_env.as_deref().and_then(set);
        }
        self.validate()?;
        validate_tasks(&self.tasks)?;
        if self.backup.every_hours > 24 * 366 {
            bail!("backup.every_hours must be at most a year (8784); 0 turns backups off");
        }
        if self.backup.keep == 0 {
            bail!("backup.keep must be at least 1 (the backup just written is kept)");
        }
        Ok(())
    }

    /// Where backups go: `backup.dir`, or `backups` beside the data directory.
    pub fn backup_dir(&self) -> PathBuf {
        if !self.backup.dir.as_os_str().is_empty() {
            return self.backup.dir.clone();
        }
        match self.data_dir.parent() {
            Some(parent) => parent.join("backups"),
            None => PathBuf::from("backups"),
        }
    }

    /// The interval between scheduled backups; `None` when they are off.
    pub(crate) fn backup_interval(&self) -> Option<std::time::Duration> {
        (self.backup.every_hours > 0)
            .then(|| std::time::Duration::from_secs(self.backup.every_hours.saturating_mul(3600)))
    }

    /// The Bot API, webhook and metrics addresses and the webhook secret, when set.
    fn validate_addresses(&self) -> anyhow::Result<()> {
        if !self.telegram.api_url.is_empty() {
            reqwest::Url::parse(&self.telegram.api_url).map_err(|e| {
                anyhow::anyhow!("TELOXIDE_API_URL / telegram.api_url is not a URL: {e}")
            })?;
        }
        if !self.telegram.webhook_url.is_empty() {
            reqwest::Url::parse(&self.telegram.webhook_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_WEBHOOK_URL is not a URL: {e}"))?;
            self.telegram
                .webhook_listen
                .parse::<std::net::SocketAddr>()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "HEURIST_WEBHOOK_LISTEN must be host:port, e.g. 127.0.0.1:8443: {e}"
                    )
                })?;
        }
        if !self.metrics.listen.is_empty() {
            self.metrics
                .listen
                .parse::<std::net::SocketAddr>()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "HEURIST_METRICS_LISTEN / metrics.listen must be host:port, e.g. \
                     127.0.0.1:9464: {e}"
                    )
                })?;
        }
        let secret = &self.telegram.webhook_secret;
        if secret.len() > 256
            || !secret
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!(
                "HEURIST_WEBHOOK_SECRET may only use A-Z, a-z, 0-9, _ and -, up to 256 characters"
            );
        }
        Ok(())
    }

    /// Checks what serde cannot: a usable token, models and URLs.
    fn validate(&self) -> anyhow::Result<()> {
        if self.token.is_empty() {
            bail!(
                "TELOXIDE_TOKEN is not set: put TELOXIDE_TOKEN=<token from @BotFather> in .env \
                 (see .env.example) or in the environment"
            );
        }
        if self.models.is_empty() {
            bail!("no model configured: set HEURIST_MODELS or add a [[models]] entry");
        }
        if !(self.compact_factor == 0.0 || self.compact_factor >= 1.1) {
            bail!(
                "compact_factor = {} would compact the store at every check: set it to 1.1 or \
                 more (2.0 is the default), or 0 to turn compaction off",
                self.compact_factor
            );
        }
        self.validate_addresses()?;
        reqwest::Url::parse(&self.llm.base_url)
            .map_err(|e| anyhow::anyhow!("OPENAI_BASE_URL / llm.base_url is not a URL: {e}"))?;
        self.agent.time_zone.parse::<chrono_tz::Tz>().map_err(|_| {
            anyhow::anyhow!(
                "agent.time_zone {:?} is not an IANA time zone (e.g. Europe/Berlin)",
                self.agent.time_zone
            )
        })?;
        if self.agent.max_iterations == 0 {
            bail!("agent.max_iterations must be at least 1");
        }
        if self.llm.max_concurrent == 0 {
            bail!("llm.max_concurrent must be at least 1 (1 makes every LLM call queue)");
        }
        if !self.tools.searxng_url.is_empty() {
            http_url(&self.tools.searxng_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_SEARXNG_URL / tools.searxng_url {e}"))?;
        }
        if !self.speech.base_url.is_empty() {
            http_url(&self.speech.base_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_SPEECH_URL / speech.base_url {e}"))?;
        }
        if !self.speech.tts_url.is_empty() {
            http_url(&self.speech.tts_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_TTS_URL / speech.tts_url {e}"))?;
        }
        validate_turn_attempts(self.max_turn_attempts)
            .and_then(|()| validate_mcp_servers(&self.mcp.servers))
            .and_then(|()| validate_models(&self.models))
            .and_then(|()| validate_parser_limits(&self.documents))
    }

    /// Strings that must never appear in logs or messages: the token (and its secret half, which
    /// URLs may carry separately) and the API key.
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = vec![self.token.clone()];
        if let Some((_, secret)) = self.token.split_once(':') {
            secrets.push(secret.to_string());
        }
        secrets.extend(self.llm.api_key.clone());
        secrets.extend(self.speech.api_key.clone());
        secrets.extend(self.speech.tts_api_key.clone());
        secrets.extend(self.models.iter().filter_map(|m| m.api_key.clone()));
        if !self.telegram.webhook_secret.is_empty() {
            secrets.push(self.telegram.webhook_secret.clone());
        }
        for server in &self.mcp.servers {
            secrets.extend(server.headers.values().cloned());
            secrets.extend(
                server
                    .env
                    .iter()
                    .filter(|(key, _)| looks_secret(key))
                    .map(|(_, value)| value.clone()),
            );
        }
        // Very short strings would redact ordinary text; real secrets are long.
        secrets.retain(|s| s.len() >= 8);
        secrets
    }

    /// The role of a Telegram user: admins are allowed users too; everyone else is denied.
    pub(crate) fn role_of(&self, user: UserId) -> Role {
        if self.access.admins.contains(&user) {
            Role::Admin
        } else if self.access.allowed_users.contains(&user) {
            Role::User
        } else {
            Role::Stranger
        }
    }

    /// The model a chat uses when it has not chosen one.
    pub(crate) fn default_model(&self) -> &ModelConfig {
        &self.models[0]
    }

    /// The configured model with this id, if any.
    pub(crate) fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.id == id)
    }
}

/// Tables merge key by key; any other value in `over` replaces the one in `base`.
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(base), toml::Value::Table(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// One line for a TOML syntax error: file, line number and the parser's message.
fn toml_error_line(path: &Path, text: &str, e: &toml::de::Error) -> String {
    let message = one_line(e.message());
    let line = e
        .span()
        .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
    match line {
        Some(line) => format!(
            "invalid config in {} line {line}: {message}",
            path.display()
        ),
        None => format!("invalid config in {}: {message}", path.display()),
    }
}

/// Parser messages can span lines; start-up errors are one line.
fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether an environment variable's name says it holds a credential.
fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASS", "AUTH"]
        .iter()
        .any(|word| key.contains(word))
}

/// `text` as an http(s) URL, or what is wrong with it (to follow the setting's name).
fn http_url(text: &str) -> anyhow::Result<reqwest::Url> {
    let url = reqwest::Url::parse(text).map_err(|e| anyhow::anyhow!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("must be an http:// or https:// URL");
    }
    Ok(url)
}

/// The smallest address space a parser child can start in: it runs this binary (about 30 MB
/// mapped in a release build, 55 MB in a debug one) before it reads a byte.
const MIN_PARSER_MEMORY_MB: u64 = 64;

/// The parser child's limits: a zero would refuse every PDF, or never end one.
fn validate_parser_limits(documents: &DocumentsConfig) -> anyhow::Result<()> {
    if documents.parser_timeout_secs == 0 {
        bail!("documents.parser_timeout_secs must be at least 1 (10 is the default)");
    }
    if documents.parser_cpu_secs == 0 {
        bail!("documents.parser_cpu_secs must be at least 1 (5 is the default)");
    }
    if documents.parser_memory_mb < MIN_PARSER_MEMORY_MB {
        bail!(
            "documents.parser_memory_mb must be at least {MIN_PARSER_MEMORY_MB}: the PDF parser \
             runs this program, which needs that much to start (256 is the default)"
        );
    }
    Ok(())
}

/// `max_turn_attempts` counts starts, the first one too: 0 would never run a turn.
fn validate_turn_attempts(attempts: u32) -> anyhow::Result<()> {
    if attempts == 0 {
        bail!(
            "max_turn_attempts must be at least 1: 1 never runs again a turn a crash \
             interrupted, 2 (the default) runs it once more"
        );
    }
    Ok(())
}

/// Longest MCP server name: with the `__` separator, tools keep at least 30 of OpenAI's 64
/// characters of a tool name.
const MAX_MCP_NAME: usize = 32;

/// The checks of `[tasks]`: a task may not repeat more often than once a minute, whatever
/// the daily cap says (0 there means no cap, so 0 here would run a task every second).
fn validate_tasks(tasks: &TasksConfig) -> anyhow::Result<()> {
    if tasks.min_interval_mins == 0 {
        bail!(
            "tasks.min_interval_mins must be at least 1: 0 would let a task run every second \
             (max_runs_per_day = 0 means no daily cap, not no interval)"
        );
    }
    Ok(())
}

/// The checks of `[[mcp.servers]]` serde cannot make; the first problem, in one line.
fn validate_mcp_servers(servers: &[McpServerConfig]) -> anyhow::Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for server in servers {
        let name = &server.name;
        if name.is_empty()
            || name.len() > MAX_MCP_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            bail!(
                "mcp.servers: name {name:?} must be 1 to {MAX_MCP_NAME} characters of a-z, 0-9, \
                 _ and - (its tools are offered as <name>__<tool>)"
            );
        }
        if !seen.insert(name.as_str()) {
            bail!("mcp.servers: two servers are named {name:?}; names must be unique");
        }
        let at = format!("mcp server {name:?}");
        match (&server.command, &server.url) {
            (Some(_), Some(_)) => {
                bail!("{at}: set either command (stdio) or url (streamable HTTP), not both")
            }
            (None, None) => bail!("{at}: set command (stdio) or url (streamable HTTP)"),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    bail!("{at}: command is empty");
                }
                if !server.headers.is_empty() {
                    bail!("{at}: headers only apply to url servers; use env for a command");
                }
            }
            (None, Some(url)) => {
                http_url(url).map_err(|e| anyhow::anyhow!("{at}: url {e}"))?;
                if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                    bail!("{at}: args, env and cwd only apply to command servers");
                }
                for (header, value) in &server.headers {
                    reqwest::header::HeaderName::from_bytes(header.as_bytes())
                        .map_err(|_| anyhow::anyhow!("{at}: {header:?} is not a header name"))?;
                    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                        anyhow::anyhow!("{at}: the value of header {header:?} is not valid")
                    })?;
                }
            }
        }
        if server.timeout_secs == 0 {
            bail!("{at}: timeout_secs must be at least 1");
        }
    }
    Ok(())
}

/// The checks of `[[models]]` serde cannot make (their own endpoints and fallbacks); the first
/// problem, in one line. A fallback list may lead back to a model already tried: the turn
/// tries each model once (see `llm::fallback`), so only a model naming itself is refused.
fn validate_models(models: &[ModelConfig]) -> anyhow::Result<()> {
    let known = || {
        models
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for model in models {
        let at = format!("model {:?}", model.id);
        if let Some(url) = &model.base_url {
            http_url(url).map_err(|e| anyhow::anyhow!("{at}: base_url {e}"))?;
        }
        if let Some(name) = &model.api_key_env {
            // Not echoed when it is not a name: it may be the key itself, pasted by mistake.
            if !is_env_name(name) {
                bail!(
                    "{at}: api_key_env must be the name of an environment variable (A-Z, 0-9, _)                      that holds the key, not the key itself"
                );
            }
            if model.api_key.is_none() {
                bail!("{at}: api_key_env names {name}, which is not set: put {name}=<key> in .env");
            }
        }
        for id in &model.fallback {
            if *id == model.id {
                bail!("{at}: its fallback list names itself; list other models");
            }
            if !models.iter().any(|m| m.id == *id) {
                bail!(
                    "{at}: fallback {id:?} is not a configured model (configured: {})",
                    known()
                );
            }
        }
    }
    Ok(())
}

/// Whether `name` reads as an environment variable's name: letters, digits and `_`, not
/// starting with a digit.
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_user_ids(name: &str, list: &str) -> anyhow::Result<Vec<UserId>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>().map(UserId).map_err(|_| {
                anyhow::anyhow!(
                    "{name} must be comma-separated numeric Telegram user ids, got {s:?}"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn defaults_parse_and_need_a_token() {
        let mut config = Config::from_toml(None, Path::new("x.toml")).unwrap();
        let err = config.apply_env(env(&[])).unwrap_err().to_string();
        assert!(err.starts_with("TELOXIDE_TOKEN is not set"), "{err}");
        assert!(!err.contains('\n'));
    }

    /// The shipped file cannot turn the SSRF guard off; a user's file that tries is refused
    /// (see `errors_are_one_clear_line`), and no environment variable names it. A copy of an
    /// earlier shipped file, which had the line with the guard on, still starts.
    #[test]
    fn a_loaded_config_keeps_the_ssrf_guard_on() {
        for (name, toml) in [
            ("no line", "[tools]\n"),
            (
                "an earlier version's shipped line",
                "[tools]\nfetch_allow_private = false\n",
            ),
        ] {
            let mut config = Config::from_toml(Some(toml), Path::new("x.toml")).unwrap();
            config.apply_env(env(&[("TELOXIDE_TOKEN", "t")])).unwrap();
            assert!(!config.tools.fetch_allow_private, "{name}");
        }
    }

    #[test]
    fn a_compact_factor_that_would_compact_at_every_check_is_refused() {
        for (factor, ok) in [
            (0.0, true),
            (1.1, true),
            (2.0, true),
            (1.0, false),
            (0.5, false),
        ] {
            let file = format!("compact_factor = {factor:?}\n");
            let mut config = Config::from_toml(Some(&file), Path::new("x.toml")).unwrap();
            let checked = config.apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")]));
            match checked {
                Ok(()) => assert!(ok, "{factor} was accepted"),
                Err(e) => {
                    assert!(!ok, "{factor} was refused: {e}");
                    assert!(e.to_string().contains("compact_factor"), "{e}");
                }
            }
        }
    }

    /// A task may not repeat more often than once a minute, whatever the daily cap says: an
    /// interval of 0 with no daily cap would run a task every second.
    #[test]
    fn a_task_interval_under_a_minute_is_refused() {
        struct Case {
            name: &'static str,
            tasks: &'static str,
            refused: bool,
        }
        let cases = [
            Case {
                name: "the shipped caps",
                tasks: "",
                refused: false,
            },
            Case {
                name: "once a minute, no daily cap",
                tasks: "min_interval_mins = 1\nmax_runs_per_day = 0\n",
                refused: false,
            },
            Case {
                name: "every second, no daily cap",
                tasks: "min_interval_mins = 0\nmax_runs_per_day = 0\n",
                refused: true,
            },
            Case {
                name: "every second, even with a daily cap",
                tasks: "min_interval_mins = 0\nmax_runs_per_day = 48\n",
                refused: true,
            },
        ];
        for case in cases {
            let file = format!("[tasks]\n{}", case.tasks);
            let mut config = Config::from_toml(Some(&file), Path::new("x.toml")).unwrap();
            match config.apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")])) {
                Ok(()) => assert!(!case.refused, "{}: accepted", case.name),
                Err(e) => {
                    assert!(case.refused, "{}: refused: {e}", case.name);
                    let said = e.to_string();
                    assert!(
                        said.contains("tasks.min_interval_mins must be at least 1"),
                        "{}: {said}",
                        case.name
                    );
                    assert!(!said.contains('\n'), "{}: {said}", case.name);
                }
            }
        }
    }

    #[test]
    fn environment_overrides_file() {
        let file = "data_dir = \"/srv\"\n[llm]\nbase_url = \"http://file/v1\"\n";
        let mut config = Config::from_toml(Some(file), Path::new("x.toml")).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/srv"));
        config
            .apply_env(env(&[
                ("TELOXIDE_TOKEN", "123:abc"),
                ("OPENAI_BASE_URL", "http://env/v1"),
                ("HEURIST_ALLOWED_USERS", "1, 2"),
                ("HEURIST_ADMINS", "3"),
                ("HEURIST_MODELS", "a/b, llama3.1:8b"),
                ("HEURIST_DATA_DIR", "/tmp/h"),
                ("HEURIST_SEARXNG_URL", "http://10.0.0.5:8888"),
                ("HEURIST_METRICS_LISTEN", "127.0.0.1:9464"),
            ]))
            .unwrap();
        assert_eq!(config.tools.searxng_url, "http://10.0.0.5:8888");
        assert_eq!(config.metrics.listen, "127.0.0.1:9464");
        assert_eq!(config.llm.base_url, "http://env/v1");
        assert_eq!(config.data_dir, PathBuf::from("/tmp/h"));
        assert_eq!(config.default_model().id, "a/b");
        assert_eq!(config.models.len(), 2);
        assert_eq!(config.role_of(UserId(1)), Role::User);
        assert_eq!(config.role_of(UserId(3)), Role::Admin);
        assert_eq!(config.role_of(UserId(4)), Role::Stranger);
    }

    #[test]
    fn the_speech_endpoint_comes_from_the_environment_and_its_key_is_a_secret() {
        let with = |vars: &[(&str, &str)]| {
            let mut config = Config::from_toml(None, Path::new("x.toml")).unwrap();
            config.apply_env(env(vars)).map(|()| config)
        };
        let token = ("TELOXIDE_TOKEN", "123:abc");
        let config = with(&[
            token,
            ("HEURIST_SPEECH_URL", "http://127.0.0.1:8080/v1"),
            ("HEURIST_SPEECH_API_KEY", "sk-speech-0123456789"),
        ])
        .unwrap();
        assert_eq!(config.speech.base_url, "http://127.0.0.1:8080/v1");
        assert!(
            config
                .secrets()
                .contains(&"sk-speech-0123456789".to_string())
        );
        assert!(
            with(&[token]).unwrap().speech.base_url.is_empty(),
            "off by default"
        );
        let refused = with(&[token, ("HEURIST_SPEECH_URL", "ftp://x")]).unwrap_err();
        assert!(
            refused.to_string().contains("HEURIST_SPEECH_URL"),
            "{refused}"
        );
    }

    #[test]
    fn the_documented_mcp_block_parses() {
        let file = r#"
[[mcp.servers]]
name = "files"                 # [a-z0-9_-], unique; tools are offered as "<name>__<tool>"
command = "npx"                # stdio: command + args + env ...
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
env = { }                      # the child gets only this env plus PATH/HOME, never the bot's secrets
# cwd = "/srv/docs"              # its working directory; unset: an empty one, <data_dir>/mcp/<name>/
# url = "https://mcp.example.com/mcp"   # ... or streamable HTTP
# headers = { Authorization = "Bearer …" }
allowed_tools = []             # empty: all the server lists
roles = "user"                 # "user": offered to every allowed user; "admin": only in admins' turns
timeout_secs = 30

[[mcp.servers]]
name = "search-docs"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer abcdefgh12345" }
roles = "admin"
"#;
        let mut config = Config::from_toml(Some(file), Path::new("x.toml")).unwrap();
        config
            .apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")]))
            .unwrap();
        let [files, docs] = &config.mcp.servers[..] else {
            panic!("two servers: {:?}", config.mcp.servers);
        };
        assert_eq!(files.command.as_deref(), Some("npx"));
        assert_eq!(files.args.len(), 3);
        assert_eq!((files.roles, files.timeout_secs), (McpRoles::User, 30));
        assert_eq!(docs.url.as_deref(), Some("https://mcp.example.com/mcp"));
        assert_eq!(
            (docs.roles.min_role(), docs.timeout_secs),
            (Role::Admin, 30)
        );
        assert!(
            config
                .secrets()
                .contains(&"Bearer abcdefgh12345".to_string()),
            "header values are redacted from logs"
        );
    }

    #[test]
    fn errors_are_one_clear_line() {
        struct Case {
            name: &'static str,
            toml: &'static str,
            env: &'static [(&'static str, &'static str)],
            expect: &'static str,
        }
        let cases = [
            Case {
                name: "syntax error names the line",
                toml: "[llm]\nbase_url = \n",
                env: &[],
                expect: "x.toml line 2",
            },
            Case {
                name: "unknown key is rejected",
                toml: "[llm]\nbase_ur = \"x\"\n",
                env: &[],
                expect: "unknown field `base_ur`",
            },
            Case {
                name: "bad user id",
                toml: "",
                env: &[("TELOXIDE_TOKEN", "t"), ("HEURIST_ADMINS", "12,abc")],
                expect: "HEURIST_ADMINS must be comma-separated",
            },
            Case {
                name: "no request slots",
                toml: "[llm]\nmax_concurrent = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "llm.max_concurrent must be at least 1",
            },
            Case {
                name: "a parser that may never run",
                toml: "[documents]\nparser_timeout_secs = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_timeout_secs must be at least 1",
            },
            Case {
                name: "a parser without CPU time",
                toml: "[documents]\nparser_cpu_secs = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_cpu_secs must be at least 1",
            },
            Case {
                name: "a parser without room to start",
                toml: "[documents]\nparser_memory_mb = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_memory_mb must be at least 64",
            },
            Case {
                name: "a turn that may never start",
                toml: "max_turn_attempts = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "max_turn_attempts must be at least 1",
            },
            Case {
                name: "a removed key is rejected",
                toml: "[tools]\nfetch_max_chars = 20000\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown field `fetch_max_chars`",
            },
            Case {
                name: "bad time zone",
                toml: "[agent]\ntime_zone = \"Mars/Base\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "not an IANA time zone",
            },
            Case {
                name: "searxng url that is not http",
                toml: "",
                env: &[("TELOXIDE_TOKEN", "t"), ("HEURIST_SEARXNG_URL", "ftp://s")],
                expect: "HEURIST_SEARXNG_URL / tools.searxng_url must be an http",
            },
            Case {
                name: "metrics address without a port",
                toml: "[metrics]\nlisten = \"localhost\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "HEURIST_METRICS_LISTEN / metrics.listen must be host:port",
            },
            Case {
                name: "mcp name with capitals",
                toml: "[[mcp.servers]]\nname = \"Files\"\ncommand = \"x\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "name \"Files\" must be 1 to 32 characters of a-z",
            },
            Case {
                name: "mcp names must be unique",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\n\
                       [[mcp.servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "two servers are named \"a\"",
            },
            Case {
                name: "mcp command and url",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "set either command (stdio) or url (streamable HTTP), not both",
            },
            Case {
                name: "mcp neither command nor url",
                toml: "[[mcp.servers]]\nname = \"a\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "mcp server \"a\": set command (stdio) or url",
            },
            Case {
                name: "mcp bad url",
                toml: "[[mcp.servers]]\nname = \"a\"\nurl = \"mcp.example.com\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "mcp server \"a\": url is not a URL",
            },
            Case {
                name: "mcp unknown role",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nroles = \"root\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown variant `root`",
            },
            Case {
                name: "mcp unknown key",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nenviron = {}\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown field `environ`",
            },
            Case {
                name: "the SSRF guard cannot be turned off by a file",
                toml: "[tools]\nfetch_allow_private = true\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "tools.fetch_allow_private is not a setting (fetch_url never reaches \
                         loopback or private addresses); remove that line",
            },
            Case {
                name: "nor by a file that writes it as a string",
                toml: "[tools]\nfetch_allow_private = \"true\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "tools.fetch_allow_private is not a setting",
            },
        ];
        for case in cases {
            let err = Config::from_toml(Some(case.toml), Path::new("x.toml"))
                .and_then(|mut c| c.apply_env(env(case.env)).map(|()| c))
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(err.contains(case.expect), "case {}: {err}", case.name);
            assert!(!err.contains('\n'), "case {}: {err}", case.name);
        }
    }

    /// Where the reference of every setting lives; its first lines say how a key is written.
    const CONFIG_DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    /// The environment variables a deployment may set, each on a line `NAME=` or `# NAME=`.
    const ENV_EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.env.example");

    /// A table header, real (`[llm]`, `[[models]]`) or shown commented out (`# [[mcp.servers]]`):
    /// the table's dotted name.
    fn table_header(line: &str) -> Option<&str> {
        let line = line.trim_start_matches(['#', ' ']).trim_end();
        let name = line.strip_prefix('[')?.strip_suffix(']')?;
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let dotted = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.".contains(c);
        (!name.is_empty() && name.chars().all(dotted)).then_some(name)
    }

    /// A key the file shows commented out, `# key = value` (or `# # key = value` inside a
    /// commented example), as opposed to a comment in words.
    fn commented_key(line: &str) -> Option<&str> {
        let rest = line.strip_prefix('#')?.trim_start_matches(['#', ' ']);
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let (key, after) = rest.split_at(end);
        let assigns = after.trim_start().starts_with('=') && !after.trim_start().starts_with("==");
        (key.starts_with(|c: char| c.is_ascii_lowercase()) && assigns).then_some(key)
    }

    /// A key as docs/configuration.md writes it: `section.key`, or bare before any section.
    fn dotted(section: &str, key: &str) -> String {
        if section.is_empty() {
            key.to_string()
        } else {
            format!("{section}.{key}")
        }
    }

    /// Every key under `table`, written as docs/configuration.md writes it: a key of an array of
    /// tables under the array's name (`models.id`), an empty array as a key of its own.
    fn parsed_keys(prefix: &str, table: &toml::Table, keys: &mut BTreeMap<String, String>) {
        for (key, value) in table {
            let path = dotted(prefix, key);
            match value {
                toml::Value::Table(inner) => parsed_keys(&path, inner, keys),
                toml::Value::Array(items)
                    if !items.is_empty() && items.iter().all(toml::Value::is_table) =>
                {
                    for item in items.iter().filter_map(toml::Value::as_table) {
                        parsed_keys(&path, item, keys);
                    }
                }
                _ => {
                    let place = if prefix.is_empty() {
                        "top level"
                    } else {
                        prefix
                    };
                    keys.entry(path).or_insert(format!("set in [{place}]"));
                }
            }
        }
    }

    /// The keys of config/heurist.toml, each with where it is: those it sets and those it shows
    /// commented out (found by line, under the last header above them).
    fn shipped_keys() -> BTreeMap<String, String> {
        let mut keys = BTreeMap::new();
        let parsed: toml::Table = toml::from_str(DEFAULT_TOML).expect("config/heurist.toml parses");
        parsed_keys("", &parsed, &mut keys);
        let mut section = "";
        for (n, line) in DEFAULT_TOML.lines().enumerate() {
            if let Some(header) = table_header(line) {
                section = header;
            } else if let Some(key) = commented_key(line) {
                keys.entry(dotted(section, key))
                    .or_insert(format!("commented out at line {}", n + 1));
            }
        }
        keys
    }

    /// The first code span of each table row of docs/configuration.md, by line number.
    fn documented_names(docs: &str) -> Vec<(usize, &str)> {
        docs.lines()
            .enumerate()
            .filter_map(|(n, line)| {
                let name = line.strip_prefix("| `")?.split('`').next()?;
                Some((n + 1, name))
            })
            .collect()
    }

    /// A config key (`llm.base_url`), as opposed to an environment variable (`OPENAI_BASE_URL`).
    fn is_config_key(name: &str) -> bool {
        name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.".contains(c))
    }

    #[test]
    fn every_config_key_is_documented_and_every_documented_key_exists() {
        let docs = std::fs::read_to_string(CONFIG_DOCS).expect("docs/configuration.md is readable");
        let documented: BTreeMap<&str, usize> = documented_names(&docs)
            .into_iter()
            .filter(|(_, name)| is_config_key(name))
            .map(|(line, name)| (name, line))
            .collect();
        let shipped = shipped_keys();
        let mut drift = Vec::new();
        for (key, place) in &shipped {
            if !documented.contains_key(key.as_str()) {
                drift.push(format!(
                    "config/heurist.toml has `{key}` ({place}), but docs/configuration.md has no \
                     table row whose first cell is `{key}`: add one (key, default, meaning) \
                     under its section"
                ));
            }
        }
        for (key, line) in &documented {
            if !shipped.contains_key(*key) {
                drift.push(format!(
                    "docs/configuration.md line {line} documents `{key}`, which \
                     config/heurist.toml does not have (set or commented out)"
                ));
            }
        }
        assert!(
            drift.is_empty(),
            "config and its docs drifted:\n{}",
            drift.join("\n")
        );
        assert!(shipped.contains_key("mcp.servers.cwd") && shipped.contains_key("models.id"));
    }

    #[test]
    fn every_environment_variable_is_documented() {
        let docs = std::fs::read_to_string(CONFIG_DOCS).expect("docs/configuration.md is readable");
        let documented: Vec<&str> = documented_names(&docs)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let example = std::fs::read_to_string(ENV_EXAMPLE).expect(".env.example is readable");
        let names: Vec<&str> = example
            .lines()
            .filter_map(|line| {
                let (name, _) = line.trim_start_matches(['#', ' ']).split_once('=')?;
                let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
                (!name.is_empty() && name.chars().all(upper)).then_some(name)
            })
            .collect();
        assert!(names.contains(&"TELOXIDE_TOKEN"), "{names:?}");
        let missing: Vec<&&str> = names.iter().filter(|n| !documented.contains(n)).collect();
        assert!(
            missing.is_empty(),
            ".env.example names {missing:?}, which docs/configuration.md has no row for"
        );
    }

    #[test]
    fn the_commented_out_examples_of_the_shipped_file_are_real_keys() {
        // Each table that shows keys commented out, uncommented on its own, must parse as the
        // real Config (unknown keys are refused), so an example cannot name a key that is gone.
        let lines: Vec<&str> = DEFAULT_TOML.lines().collect();
        let starts: Vec<usize> = (0..lines.len())
            .filter(|&n| table_header(lines[n]).is_some())
            .chain([lines.len()])
            .collect();
        let mut checked = 0;
        for pair in starts.windows(2) {
            let section = &lines[pair[0]..pair[1]];
            if !section.iter().any(|line| commented_key(line).is_some()) {
                continue;
            }
            let uncommented: String = section
                .iter()
                .map(|line| match (table_header(line), commented_key(line)) {
                    (Some(_), _) | (_, Some(_)) => line.trim_start_matches(['#', ' ']),
                    _ => line,
                })
                .collect::<Vec<_>>()
                .join("\n");
            if let Err(e) = Config::from_toml(Some(&uncommented), Path::new("x.toml")) {
                panic!(
                    "config/heurist.toml line {}: its commented-out keys do not parse: {e}",
                    pair[0] + 1
                );
            }
            checked += 1;
        }
        assert_eq!(
            checked, 2,
            "[[models]] and [[mcp.servers]] show their optional keys"
        );
    }

    /// `[[models]]`' own endpoints and fallback lists: what loads, and the one clear line
    /// for what does not.
    #[test]
    fn model_endpoints_and_fallbacks_are_checked_at_load() {
        struct Case {
            name: &'static str,
            toml: &'static str,
            env: &'static [(&'static str, &'static str)],
            /// `None`: it loads.
            error: Option<&'static str>,
        }
        const LOCAL_AND_HOSTED: &str = "[[models]]\nid = \"local\"\n\
            base_url = \"http://localhost:8080/v1\"\nfallback = [\"hosted\"]\n\
            [[models]]\nid = \"hosted\"\nbase_url = \"https://openrouter.ai/api/v1\"\n\
            api_key_env = \"HOSTED_KEY\"\nfallback = [\"local\"]\n";
        let cases = [
            Case {
                name: "a local model falls back to a hosted one, and back (a cycle)",
                toml: LOCAL_AND_HOSTED,
                env: &[("HOSTED_KEY", "sk-hosted-12345678")],
                error: None,
            },
            Case {
                name: "the key's variable is not set",
                toml: LOCAL_AND_HOSTED,
                env: &[],
                error: Some(
                    "model \"hosted\": api_key_env names HOSTED_KEY, which is not set: put \
                     HOSTED_KEY=<key> in .env",
                ),
            },
            Case {
                name: "the key itself instead of a variable's name, not echoed",
                toml: "[[models]]\nid = \"m\"\napi_key_env = \"sk-or-v1-abcdef\"\n",
                env: &[],
                error: Some("model \"m\": api_key_env must be the name of an environment variable"),
            },
            Case {
                name: "an unknown fallback",
                toml: "[[models]]\nid = \"a\"\nfallback = [\"b\"]\n",
                env: &[],
                error: Some(
                    "model \"a\": fallback \"b\" is not a configured model (configured: a)",
                ),
            },
            Case {
                name: "a model that falls back to itself",
                toml: "[[models]]\nid = \"a\"\nfallback = [\"a\"]\n",
                env: &[],
                error: Some("model \"a\": its fallback list names itself"),
            },
            Case {
                name: "a base_url that is not http",
                toml: "[[models]]\nid = \"a\"\nbase_url = \"localhost:8080\"\n",
                env: &[],
                error: Some("model \"a\": base_url "),
            },
        ];
        for case in cases {
            let mut env_pairs = vec![("TELOXIDE_TOKEN", "t")];
            env_pairs.extend_from_slice(case.env);
            let loaded = Config::from_toml(Some(case.toml), Path::new("x.toml"))
                .and_then(|mut c| c.apply_env(env(&env_pairs)).map(|()| c));
            match (loaded, case.error) {
                (Ok(config), None) => {
                    let hosted = config.model("hosted").expect("hosted is configured");
                    assert_eq!(hosted.api_key.as_deref(), Some("sk-hosted-12345678"));
                    assert!(
                        config.secrets().contains(&"sk-hosted-12345678".to_string()),
                        "case {}: a model's key is redacted from logs",
                        case.name
                    );
                }
                (Err(e), Some(expect)) => {
                    let e = e.to_string();
                    assert!(e.contains(expect), "case {}: {e}", case.name);
                    assert!(!e.contains("sk-or"), "case {}: {e}", case.name);
                    assert!(!e.contains('\n'), "case {}: {e}", case.name);
                }
                (loaded, _) => panic!("case {}: {:?}", case.name, loaded.map(|_| ())),
            }
        }
    }
}
