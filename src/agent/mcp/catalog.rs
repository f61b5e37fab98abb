//! What `/tools` shows of the MCP servers: every tool with its source, and every server's
//! status (how it is reached, without credentials, and why it is down).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::connect::transport_label;
use super::ingest::LeftOut;
use super::server::{Server, ServerState};
use crate::role::Role;

/// Every tool with its source and every server's status, for `/tools`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Catalog {
    pub tools: Vec<CatalogTool>,
    pub servers: Vec<ServerReport>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CatalogTool {
    pub name: String,
    /// The MCP server it comes from; `None` for a built-in tool.
    pub server: Option<String>,
    pub admins_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerReport {
    pub name: String,
    /// `stdio: <command>` or `http: <url without its query>` (never headers or env).
    pub transport: String,
    pub admins_only: bool,
    pub status: ServerStatus,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServerStatus {
    Starting,
    Up {
        tools: usize,
        left_out: Vec<LeftOut>,
    },
    Down {
        error: String,
        since: DateTime<Utc>,
        retry_at: DateTime<Utc>,
    },
}

/// Every tool of the `configured` servers (as offered to admins, so every one) and every
/// server's status.
pub(super) fn catalog(configured: &[Arc<Server>]) -> Catalog {
    let mut tools = Vec::new();
    let mut servers = Vec::new();
    for server in configured {
        let admins_only = server.config.roles.min_role() == Role::Admin;
        let status = match &*server.state.borrow() {
            ServerState::Starting => ServerStatus::Starting,
            ServerState::Up(connection) => {
                tools.extend(connection.tools.iter().map(|tool| CatalogTool {
                    name: tool.spec.function.name.to_string(),
                    server: Some(server.config.name.clone()),
                    admins_only,
                }));
                ServerStatus::Up {
                    tools: connection.tools.len(),
                    left_out: connection.left_out.clone(),
                }
            }
            ServerState::Down {
                error,
                since,
                retry_at,
            } => ServerStatus::Down {
                error: error.to_string(),
                since: *since,
                retry_at: *retry_at,
            },
        };
        servers.push(ServerReport {
            name: server.config.name.clone(),
            transport: transport_label(&server.config),
            admins_only,
            status,
        });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Catalog { tools, servers }
}
