//! MCP (Model Context Protocol) servers: their tools, offered to the model as `<server>__<tool>`.
//!
//! Each configured server has a supervisor task. It starts the server (a child process over
//! stdio, or a streamable-HTTP session), lists its tools, and waits for the connection to end;
//! then it logs why with the server's name, waits a backoff and starts it again. While a server
//! is down its tools are not offered. A call never fails the turn: `is_error` results, timeouts
//! and broken connections all come back as tool results. Everything a server returns was
//! written by a third party, so it is delimited as data and flagged as external content: its
//! results, and the words of its errors too (a JSON-RPC error's message and `data`, why its
//! `tools/list` or handshake failed), around the bot's own sentence saying what happened.
//!
//! A child process starts in a working directory of its own (`cwd`, by default an empty
//! `<data_dir>/mcp/<name>/` created when it starts), so the bot's `./.env` and `./data` are not
//! what its relative paths reach; its stderr is logged in lines of bounded length. A server's
//! tool schemas are sent with every request, so their total size is capped: past
//! [`MAX_SCHEMA_BYTES`] its largest tools are left out (logged, and shown by `/tools`).
//!
//! The tools array must be byte-identical between requests while the set of servers that are
//! up does not change (providers' prompt caches key on it): each connection's tool specs are
//! built once, when it starts, and offered sorted by name.
//!
//! The rooms: [`server`] (a server's state), [`connect`] (handshake and tool list),
//! [`retry`] (the supervisor and its backoff), [`ingest`] (a tool list made into the specs
//! offered), [`call`] (a call and its result), [`catalog`] (what `/tools` shows).

mod call;
mod catalog;
mod connect;
mod ingest;
mod retry;
mod server;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// Read by `/tools`' tests, which build a catalog by hand.
#[cfg(test)]
pub(crate) use self::catalog::ServerReport;
pub(crate) use self::catalog::{Catalog, CatalogTool, ServerStatus};
pub(crate) use self::ingest::MAX_SCHEMA_BYTES;
use self::server::{Server, ServerState};
use super::output::ToolOutput;
use crate::config::McpConfig;
use crate::llm::ToolSpec;
use crate::role::{Caller, Role};

/// The configured MCP servers, shared by all turns. Dropping the last clone stops every
/// supervisor (and with it every child process).
#[derive(Clone, Default)]
pub(crate) struct Mcp {
    inner: Arc<McpServers>,
}

/// The servers and their supervisors' tasks.
#[derive(Default)]
struct McpServers {
    /// Sorted by name, so everything listed from here is in a stable order.
    servers: Vec<Arc<Server>>,
    supervisors: Vec<tokio::task::AbortHandle>,
}

impl Drop for McpServers {
    fn drop(&mut self) {
        for supervisor in &self.supervisors {
            supervisor.abort();
        }
    }
}

impl Mcp {
    /// Starts a supervisor per server (inside the bot's runtime); see [`Mcp::ready`]. Child
    /// processes without a `cwd` get their own directory under `data_dir`.
    pub(crate) fn start(config: &McpConfig, data_dir: &Path) -> Self {
        let base = Duration::from_millis(config.retry_base_ms.max(1));
        let max = Duration::from_secs(config.retry_max_secs.max(1));
        let mut servers: Vec<Arc<Server>> = config
            .servers
            .iter()
            .map(|config| {
                let cwd = config
                    .cwd
                    .clone()
                    .unwrap_or_else(|| data_dir.join("mcp").join(&config.name));
                Arc::new(Server {
                    config: config.clone(),
                    // Absolute, so it means the same once the child is in it.
                    cwd: std::path::absolute(&cwd).unwrap_or(cwd),
                    state: watch::Sender::new(ServerState::Starting),
                })
            })
            .collect();
        servers.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        let supervisors = servers
            .iter()
            .map(|server| tokio::spawn(retry::supervise(server.clone(), base, max)).abort_handle())
            .collect();
        Self {
            inner: Arc::new(McpServers {
                servers,
                supervisors,
            }),
        }
    }

    /// Returns once every server's first start has finished, up or not (each is bounded by
    /// its `timeout_secs`), so the first turns are offered the tools of the servers that work.
    pub(crate) async fn ready(&self) {
        for server in &self.inner.servers {
            let mut state = server.state.subscribe();
            // The sender lives as long as `server`: waiting cannot fail.
            let _ = state
                .wait_for(|state| !matches!(state, ServerState::Starting))
                .await;
        }
    }

    /// The specs of the tools a turn of `caller` is offered, sorted by name.
    pub(crate) fn specs(&self, caller: Caller) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .inner
            .servers
            .iter()
            .filter(|server| server.offered_to(caller))
            .filter_map(|server| server.connection())
            .flat_map(|connection| {
                connection
                    .tools
                    .iter()
                    .map(|tool| tool.spec.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        specs.sort_by(|a, b| a.function.name.cmp(&b.function.name));
        specs
    }

    /// Runs the MCP tool `name`, or `None` if no server offered to `caller` has a tool by
    /// that name (the caller then answers as for any unknown tool).
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: &str,
        caller: Caller,
    ) -> Option<ToolOutput> {
        let servers = || {
            self.inner
                .servers
                .iter()
                .filter(move |server| server.offered_to(caller))
        };
        let live = servers().find_map(|server| {
            let connection = server.connection()?;
            let original = connection
                .tools
                .iter()
                .find(|tool| tool.spec.function.name == name)?
                .original
                .clone();
            Some((server, connection, original))
        });
        let Some((server, connection, original)) = live else {
            // A tool of a server that is down (the model remembers it from earlier turns).
            let server = servers()
                .filter(|server| name.starts_with(&format!("{}__", server.config.name)))
                .max_by_key(|server| server.config.name.len())?;
            return Some(call::unavailable(server, name));
        };
        Some(server.call(&connection, name, &original, arguments).await)
    }

    /// Every MCP tool offered to admins (so every one) and every server's status.
    pub(crate) fn catalog(&self) -> Catalog {
        catalog::catalog(&self.inner.servers)
    }

    /// Whether the bot may rewrite `name`'s arguments to the forms its tools taught (its
    /// server's `rewrite_arguments`); never for a tool no server offers.
    pub(crate) fn rewrites_arguments(&self, name: &str) -> bool {
        self.inner
            .servers
            .iter()
            .filter(|server| server.config.rewrite_arguments)
            .any(|server| {
                name.strip_prefix(&server.config.name)
                    .is_some_and(|rest| rest.starts_with("__"))
            })
    }

    /// Whether tool `name` (as offered: `<server>__<tool>`) belongs to an admin-only server:
    /// its results are for admins' eyes, and a user's turn never gets them back from the
    /// history.
    pub(crate) fn admin_only(&self, name: &str) -> bool {
        self.inner
            .servers
            .iter()
            .filter(|server| server.config.roles.min_role() == Role::Admin)
            .any(|server| {
                name.strip_prefix(&server.config.name)
                    .is_some_and(|rest| rest.starts_with("__"))
            })
    }
}
