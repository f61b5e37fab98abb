//! One configured server as the bot sees it: its config, its working directory, and its
//! state (starting, up with a live connection and the tools offered through it, or down and
//! why), which its supervisor writes and every turn reads.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use rmcp::Peer;
use rmcp::service::RoleClient;
use tokio::sync::{Notify, watch};

use super::ingest::{LeftOut, OfferedTool};
use crate::config::McpServerConfig;
use crate::role::{Caller, Role};

pub(super) struct Server {
    pub(super) config: McpServerConfig,
    /// The child's working directory: `config.cwd`, or its own under `data_dir`.
    pub(super) cwd: PathBuf,
    pub(super) state: watch::Sender<ServerState>,
}

#[derive(Clone)]
pub(super) enum ServerState {
    /// The first start has not finished yet.
    Starting,
    Up(Arc<Connection>),
    Down {
        error: ServerFailure,
        since: DateTime<Utc>,
        retry_at: DateTime<Utc>,
    },
}

/// Why a server is down: what happened, in the bot's words, and what the server (or its
/// transport) said about it, which the server wrote and so is third-party text.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ServerFailure {
    pub(super) what: String,
    pub(super) said: Option<String>,
}

impl ServerFailure {
    /// A failure the bot describes entirely in its own words.
    pub(super) fn own(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            said: None,
        }
    }

    /// A failure with the server's own account of it.
    pub(super) fn said(what: impl Into<String>, said: String) -> Self {
        Self {
            what: what.into(),
            said: Some(said),
        }
    }
}

/// For logs and admins' `/tools`: the server's words quoted as such.
impl std::fmt::Display for ServerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.said {
            None => f.write_str(&self.what),
            Some(said) => write!(f, "{}; the server said: “{said}”", self.what),
        }
    }
}

/// A live session with a server and the tools it offers through it.
pub(super) struct Connection {
    pub(super) peer: Peer<RoleClient>,
    pub(super) tools: Vec<OfferedTool>,
    /// Tools listed but not offered: their schemas did not fit
    /// [`MAX_SCHEMA_BYTES`](super::MAX_SCHEMA_BYTES).
    pub(super) left_out: Vec<LeftOut>,
    /// Wakes the supervisor when a call found this connection broken (an HTTP session whose
    /// server went away does not always end by itself).
    pub(super) broken: Notify,
}

impl Server {
    /// An admin-only server serves admins in their private chat (or, with `in_groups`, in
    /// any chat); any other server every allowed user anywhere.
    pub(super) fn offered_to(&self, caller: Caller) -> bool {
        match self.config.roles.min_role() {
            Role::Admin => caller.role == Role::Admin && (caller.private || self.config.in_groups),
            least => least <= caller.role,
        }
    }

    pub(super) fn connection(&self) -> Option<Arc<Connection>> {
        match &*self.state.borrow() {
            ServerState::Up(connection) => Some(connection.clone()),
            _ => None,
        }
    }
}
