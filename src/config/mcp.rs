//! `[mcp]`: the MCP servers whose tools the agent may call, who gets them, and how failed ones
//! are restarted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::role::Role;

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
