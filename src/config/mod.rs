//! Configuration: `config/heurist.toml` layered under the user's file and the environment.
//!
//! The defaults live in exactly one place, the shipped `config/heurist.toml`, which is compiled
//! in. A user's file (default `config/heurist.toml`, or `HEURIST_CONFIG`) is deep-merged over it,
//! so it only needs the keys it changes, and unknown keys are rejected so typos do not pass
//! silently. Environment variables with the exact names documented in `.env.example` win last:
//! deployments script against those names.
//!
//! Every error is one line that says what to set and where; start-up never panics.

use std::path::PathBuf;

use crate::ids::UserId;
use crate::role::Role;
use serde::Deserialize;

mod agent;
mod env;
mod learning;
mod llm;
mod load;
mod mcp;
mod media;
mod memory;
mod ops;
mod telegram;
#[cfg(test)]
mod testing;
mod validate;

pub use agent::{AgentConfig, LimitsConfig, OptionsConfig, ToolsConfig};
pub use learning::{LearningConfig, Review};
pub use llm::{LlmConfig, MaxTokensField, ModelConfig};
pub use mcp::{McpConfig, McpRoles, McpServerConfig};
pub use media::{DocumentsConfig, SpeechConfig};
pub use memory::{MemoryConfig, TasksConfig};
pub use ops::{BackupConfig, MetricsConfig};
pub use telegram::{AccessConfig, TelegramConfig};

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

impl Config {
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

/// Whether an environment variable's name says it holds a credential.
fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASS", "AUTH"]
        .iter()
        .any(|word| key.contains(word))
}
