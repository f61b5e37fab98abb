//! The MCP test server (`tests/bin/mcp_test_server.rs`) as the bot's tests start it: over stdio
//! as a configured child process, or as a separate streamable-HTTP server process.

use std::io::BufRead;
use std::path::PathBuf;

use heurist::config::{McpRoles, McpServerConfig};
use serde_json::Value;

/// The test server's executable: a binary of this package, which Cargo builds before any
/// integration test or bench (`cargo test --test e2e` alone included).
pub(crate) fn test_server() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp_test_server"))
}

/// A stdio server entry running the test server, with the defaults a user's entry gets.
pub(crate) fn stdio_server(name: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.to_string(),
        command: Some(test_server().display().to_string()),
        args: Vec::new(),
        env: Default::default(),
        cwd: None,
        url: None,
        headers: Default::default(),
        allowed_tools: Vec::new(),
        roles: McpRoles::User,
        in_groups: false,
        timeout_secs: 30,
        rewrite_arguments: true,
    }
}

/// The test server serving streamable HTTP on 127.0.0.1; killed when dropped.
pub(crate) struct HttpServer {
    pub(crate) url: String,
    child: std::process::Child,
}

impl HttpServer {
    /// Starts it; with `header` (`"name: value"`), requests without that header get 401.
    pub(crate) fn start(header: Option<&str>) -> Self {
        let mut command = std::process::Command::new(test_server());
        command.arg("--http");
        if let Some(header) = header {
            command.args(["--header", header]);
        }
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
        Self {
            url: line.trim().to_string(),
            child,
        }
    }

    /// An entry for this server.
    pub(crate) fn entry(&self, name: &str) -> McpServerConfig {
        McpServerConfig {
            command: None,
            url: Some(self.url.clone()),
            ..stdio_server(name)
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool results of the request's current turn (after its last user message), in order.
pub(crate) fn this_turns_results(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The names in a request's `tools` array, in order.
pub(crate) fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The tool results a request carries (its `role: tool` messages), in order.
pub(crate) fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}
