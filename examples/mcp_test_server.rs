//! An MCP server for Heurist's end-to-end tests, not part of the bot. `cargo test` builds it;
//! the tests start it as a child process, as a deployment starts any MCP server.
//!
//! Its tools exercise what the bot must cope with: `echo` (a round trip), `env` (what the
//! child process was given, and its pid), `sleep` (a call that outlives its timeout), `fail` (an `is_error`
//! result), `crash` (the server dies mid-call), `mixed` (text, an image and structured
//! content) and `read.file` (a name that needs sanitising).
//!
//! ```text
//! mcp_test_server                          # stdio
//! mcp_test_server --http [--header 'name: value']
//!     # streamable HTTP on 127.0.0.1 (a free port), path /mcp; prints its URL as the first
//!     # line on stdout; with --header, requests without that header get 401
//! ```

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone)]
struct TestServer;

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

fn tools() -> Vec<Tool> {
    let none = || schema(json!({"type": "object", "properties": {}}));
    vec![
        Tool::new(
            "echo",
            "Echo the text back.",
            schema(
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
        ),
        Tool::new("env", "The server's environment variables.", none()),
        Tool::new(
            "sleep",
            "Wait this many seconds, then answer.",
            schema(json!({"type": "object", "properties": {"secs": {"type": "number"}}})),
        ),
        Tool::new("fail", "Always reports an error.", none()),
        Tool::new("crash", "Exits the server without answering.", none()),
        Tool::new("mixed", "Text, an image and structured content.", none()),
        Tool::new(
            "read.file",
            "Pretends to read a file.",
            schema(json!({"type": "object", "properties": {"path": {"type": "string"}}})),
        ),
    ]
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let arg = |name: &str| args.get(name).cloned().unwrap_or(Value::Null);
        Ok(match request.name.as_ref() {
            "echo" => text(format!(
                "echo: {}",
                arg("text").as_str().unwrap_or_default()
            )),
            "env" => {
                let mut vars: Vec<String> =
                    std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
                vars.sort();
                text(format!("pid: {}\n{}", std::process::id(), vars.join("\n")))
            }
            "sleep" => {
                let secs = arg("secs").as_f64().unwrap_or(1.0);
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                text("slept")
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the disk is on fire")]).into(),
            "crash" => std::process::exit(3),
            "mixed" => {
                let mut result = CallToolResult::success(vec![
                    ContentBlock::text("a chart"),
                    ContentBlock::image("iVBORw0KGgoAAAANSUhEUg==", "image/png"),
                ]);
                result.structured_content = Some(json!({"points": 3}));
                result.into()
            }
            "read.file" => text(format!(
                "contents of {}",
                arg("path").as_str().unwrap_or("nothing")
            )),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A line on stderr, which the bot logs under the server's name.
    eprintln!("mcp_test_server started");
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("--http") {
        let running = TestServer.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        return Ok(());
    }
    let header = match args.get(1).map(String::as_str) {
        Some("--header") => args
            .get(2)
            .and_then(|h| h.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string())),
        _ => None,
    };
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(TestServer),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let header = header.clone();
                    async move {
                        let allowed = header.as_ref().is_none_or(|(name, value)| {
                            request
                                .headers()
                                .get(name.as_str())
                                .and_then(|v| v.to_str().ok())
                                == Some(value.as_str())
                        });
                        if allowed {
                            next.run(request).await
                        } else {
                            axum::response::IntoResponse::into_response(
                                axum::http::StatusCode::UNAUTHORIZED,
                            )
                        }
                    }
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}
