//! The doctor's checks of what the tools use: SearXNG answers a query in JSON (a 403 is the
//! instance without the `json` format), and each MCP server starts and lists its tools,
//! through the bot's own MCP client, so what works here works for the bot.

use super::context::{Checked, Context};
use super::report::Line;
use crate::agent::mcp::{Mcp, ServerStatus};
use crate::texts::ops as texts;

/// A query as `web_search` sends it, read as SearXNG's JSON.
pub(super) fn searxng<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let url = &context.config.tools.searxng_url;
        if url.is_empty() {
            return vec![Line::skipped(texts::SEARXNG, texts::NOT_CONFIGURED)];
        }
        // Config validation already refused a `searxng_url` that is not an http(s) URL.
        let Ok(mut endpoint) = reqwest::Url::parse(url) else {
            return vec![Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(url),
                texts::SEARXNG_FIX,
            )];
        };
        let path = format!("{}/search", endpoint.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        let response = context
            .http
            .get(endpoint)
            .query(&[("q", "heurist"), ("format", "json")])
            .send()
            .await;
        let line = match response {
            Ok(response) if response.status() == reqwest::StatusCode::FORBIDDEN => Line::warn(
                texts::SEARXNG,
                texts::SEARXNG_NO_JSON,
                texts::SEARXNG_NO_JSON_FIX,
            ),
            Ok(response) if !response.status().is_success() => Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(&format!("HTTP {}", response.status())),
                texts::SEARXNG_FIX,
            ),
            Ok(response) => match response.json::<serde_json::Value>().await {
                Ok(answer) if answer["results"].is_array() => Line::ok(
                    texts::SEARXNG,
                    texts::searxng_ok(answer["results"].as_array().map_or(0, Vec::len)),
                ),
                Ok(_) => Line::warn(
                    texts::SEARXNG,
                    texts::searxng_failed("the answer has no results list"),
                    texts::SEARXNG_FIX,
                ),
                Err(e) => Line::warn(
                    texts::SEARXNG,
                    texts::searxng_failed(&crate::error_chain(&e.without_url())),
                    texts::SEARXNG_FIX,
                ),
            },
            Err(e) => Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(&crate::error_chain(&e.without_url())),
                texts::SEARXNG_FIX,
            ),
        };
        vec![line]
    })
}

/// Starts every configured MCP server as the bot does, waits for each first start, and says
/// how it went; the servers stop when the client is dropped at the end.
pub(super) fn mcp<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        if context.config.mcp.servers.is_empty() {
            return Vec::new();
        }
        let mcp = Mcp::start(&context.config.mcp, &context.config.data_dir);
        mcp.ready().await;
        mcp.catalog()
            .servers
            .into_iter()
            .map(|server| {
                let what = texts::mcp(&server.name);
                match server.status {
                    ServerStatus::Up { tools, left_out } => {
                        Line::ok(what, texts::mcp_ok(tools, left_out.len()))
                    }
                    ServerStatus::Down { error, .. } => {
                        Line::warn(what, texts::mcp_down(&error), texts::MCP_FIX)
                    }
                    ServerStatus::Starting => Line::warn(what, texts::MCP_STARTING, texts::MCP_FIX),
                }
            })
            .collect()
    })
}
