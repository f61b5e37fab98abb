//! `[telegram]`: the Bot API, pacing, streaming, webhooks and reactions; and `[access]`: who
//! may use the bot.

use crate::ids::UserId;
use serde::Deserialize;

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
pub struct AccessConfig {
    pub allowed_users: Vec<UserId>,
    pub admins: Vec<UserId>,
    /// Whether a stranger's refusal carries a "Request access" button that tells the admins.
    pub request_button: bool,
}
