//! Reaching a server: the MCP handshake over its transport (a child process over stdio, in a
//! working directory of its own and with a cleared environment, or a streamable-HTTP
//! session), then its tool list, each step within the server's timeout. A child's stderr is
//! logged in lines of bounded length.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::Notify;

use super::call::service_error_words;
use super::ingest::{MAX_SCHEMA_BYTES, offered_tools, within_schema_budget};
use super::server::{Connection, ServerFailure};
use crate::config::McpServerConfig;

/// Bytes kept of one line a child writes on stderr, when it is logged; the rest of a longer
/// line is skipped unread into memory.
const MAX_LOG_LINE: usize = 500;

/// Starts the server and lists its tools, each step within the server's timeout.
pub(super) async fn connect(
    config: &McpServerConfig,
    cwd: &Path,
) -> Result<(RunningService<RoleClient, ClientConfig>, Connection), ServerFailure> {
    let limit = Duration::from_secs(config.timeout_secs);
    let running = tokio::time::timeout(limit, start(config, cwd))
        .await
        .map_err(|_| {
            ServerFailure::own(format!(
                "no answer to the MCP handshake within {} s",
                config.timeout_secs
            ))
        })??;
    let tools = tokio::time::timeout(limit, running.list_all_tools())
        .await
        .map_err(|_| {
            ServerFailure::own(format!(
                "tools/list got no answer within {} s",
                config.timeout_secs
            ))
        })?
        .map_err(|e| ServerFailure::said("tools/list failed", service_error_words(&e)))?;
    let (tools, left_out) = within_schema_budget(offered_tools(config, tools), MAX_SCHEMA_BYTES);
    for tool in &left_out {
        tracing::warn!(
            server = %config.name,
            tool = %tool.name,
            bytes = tool.bytes,
            cap = MAX_SCHEMA_BYTES,
            "MCP tool left out: the server's tool schemas are over the cap, largest first"
        );
    }
    let connection = Connection {
        peer: running.peer().clone(),
        tools,
        left_out,
        broken: Notify::new(),
    };
    Ok((running, connection))
}

/// The MCP handshake over the server's transport.
async fn start(
    config: &McpServerConfig,
    cwd: &Path,
) -> Result<RunningService<RoleClient, ClientConfig>, ServerFailure> {
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("heurist", env!("CARGO_PKG_VERSION")),
    );
    let label = transport_label(config);
    let served = match (&config.command, &config.url) {
        (Some(command), _) => {
            if config.cwd.is_none() {
                std::fs::create_dir_all(cwd).map_err(|e| {
                    ServerFailure::own(format!(
                        "cannot create its working directory {}: {e}",
                        cwd.display()
                    ))
                })?;
            }
            let mut child = tokio::process::Command::new(program(command));
            child.args(&config.args).current_dir(cwd).env_clear();
            for inherited in ["PATH", "HOME"] {
                if let Some(value) = std::env::var_os(inherited) {
                    child.env(inherited, value);
                }
            }
            child.envs(&config.env).kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(child)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| ServerFailure::own(format!("cannot start {command:?}: {e}")))?;
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(config.name.clone(), stderr));
            }
            client.serve(transport).await
        }
        (None, Some(url)) => {
            install_crypto_provider();
            let mut headers = HashMap::new();
            for (name, value) in &config.headers {
                // Checked when the config was loaded; a bad one is skipped, never a panic.
                if let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    headers.insert(name, value);
                }
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers),
            );
            client.serve(transport).await
        }
        (None, None) => return Err(ServerFailure::own("neither command nor url is set")),
    };
    served.map_err(|e| {
        ServerFailure::said(
            format!("{label}: the handshake failed"),
            crate::error_chain(&e),
        )
    })
}

/// rmcp's HTTP client brings no TLS crypto of its own: it uses rustls' process default,
/// which is the ring provider our other HTTP clients already use.
fn install_crypto_provider() {
    // Fails only when one is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A command as the child is started with: a relative path (`./server`) made absolute
/// against the bot's working directory, since the child starts in another one; a bare name is
/// looked up in `PATH` as before.
fn program(command: &str) -> PathBuf {
    let path = Path::new(command);
    if path.is_relative() && path.components().count() > 1 {
        std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
    } else {
        path.to_path_buf()
    }
}

/// Logs what a child writes on stderr, line by line, under its server's name.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let reader = tokio::io::BufReader::new(stderr);
    bounded_lines(reader, MAX_LOG_LINE, |line, cut| {
        let more = if cut { " … (line cut)" } else { "" };
        tracing::info!(server = %server, "MCP server says: {line}{more}");
    })
    .await;
}

/// Hands each line of `reader` to `line` with whether it was cut: at most `max` bytes of a
/// line are kept, a longer one is handed over as soon as it has them and the rest of it is
/// skipped, so a child that writes without end and without a newline costs no more memory
/// than that (`lines()` would buffer it all).
async fn bounded_lines(
    mut reader: impl AsyncBufRead + Unpin,
    max: usize,
    mut line: impl FnMut(String, bool),
) {
    let mut kept: Vec<u8> = Vec::new();
    let mut skipping = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let end = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..end.unwrap_or(chunk.len())];
        if !skipping {
            let room = max - kept.len();
            if part.len() > room {
                kept.extend_from_slice(&part[..room]);
                line(text_of(&std::mem::take(&mut kept)), true);
                skipping = true;
            } else {
                kept.extend_from_slice(part);
            }
        }
        if end.is_some() {
            if !skipping {
                line(text_of(&std::mem::take(&mut kept)), false);
            }
            skipping = false;
        }
        let used = part.len() + usize::from(end.is_some());
        reader.consume(used);
    }
    if !kept.is_empty() {
        line(text_of(&kept), false);
    }
}

/// A line's bytes as text (a character cut at the end shows as `�`), without a `\r`.
fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\r')
        .to_string()
}

/// How the server is reached, for `/tools` and errors: no env, headers or URL query (they may
/// carry credentials).
pub(super) fn transport_label(config: &McpServerConfig) -> String {
    match (&config.command, &config.url) {
        (Some(command), _) => format!("stdio: {command}"),
        (None, Some(url)) => match reqwest::Url::parse(url) {
            Ok(mut url) => {
                url.set_query(None);
                let _ = url.set_password(None);
                let _ = url.set_username("");
                format!("http: {url}")
            }
            Err(_) => "http".to_string(),
        },
        (None, None) => "none".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::agent::mcp::ingest::tests::server;

    /// A child's stderr of `size` bytes without a newline, then two short lines, counting
    /// what has been read from it.
    struct Flood {
        left: usize,
        read: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl tokio::io::AsyncRead for Flood {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            const TAIL: &[u8] = b"\nnext line\r\nlast";
            let total = self.left;
            let n = buf.remaining().min(total);
            for i in 0..n {
                let from_end = total - i;
                buf.put_slice(&[if from_end <= TAIL.len() {
                    TAIL[TAIL.len() - from_end]
                } else {
                    b'x'
                }]);
            }
            self.left -= n;
            self.read.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn stderr_lines_are_bounded_and_never_buffered_whole() {
        const FLOOD: usize = 8 << 20;
        let read = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let flood = Flood {
            left: FLOOD + b"\nnext line\r\nlast".len(),
            read: read.clone(),
        };
        let mut lines = Vec::new();
        bounded_lines(tokio::io::BufReader::new(flood), 500, |line, cut| {
            lines.push((line, cut, read.load(std::sync::atomic::Ordering::SeqCst)));
        })
        .await;
        let shown: Vec<(&str, bool)> = lines.iter().map(|(l, c, _)| (l.as_str(), *c)).collect();
        let cut = "x".repeat(500);
        assert_eq!(
            shown,
            [(cut.as_str(), true), ("next line", false), ("last", false)]
        );
        // Handed over once it had its 500 bytes: the 8 MB line was never held whole.
        let read_by_then = lines[0].2;
        assert!(
            read_by_then <= 500 + 8192,
            "{read_by_then} bytes read first"
        );
    }

    #[test]
    fn transport_labels_hide_credentials() {
        let mut http = server("h", &[]);
        http.command = None;
        http.url = Some("https://user:pw@mcp.example.com/mcp?token=abc".to_string());
        assert_eq!(transport_label(&http), "http: https://mcp.example.com/mcp");
        assert_eq!(transport_label(&server("s", &[])), "stdio: x");
    }
}
