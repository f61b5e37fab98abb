//! The one HTTP client that talks to the LLM: `/chat/completions` with bounded retries.
//!
//! Retries cover what a retry can fix (429, 5xx, connection errors and timeouts), honour the
//! provider's `Retry-After`, and stop once `retry_budget_secs` would be exceeded, so a user
//! hears back within about a minute even when the provider is down. Other 4xx answers are
//! returned at once with what the provider said. The API key is sent, never logged.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::Deserialize;

use futures_util::StreamExt;

use super::{ChatRequest, Completion, ToolCall, Usage};
use crate::config::LlmConfig;

/// Longest piece of a provider's error text we carry around (and may show a user).
const ERROR_SNIPPET_CHARS: usize = 300;

/// Why a completion failed, typed so callers can branch (tell the user, trim, give up).
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the language model is unreachable ({attempts} attempts): {last}")]
    Unavailable { attempts: u32, last: String },
    #[error("the language model rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The prompt does not fit the model's context window (a 400 of its own kind).
    #[error("the conversation does not fit the model's context window: {message}")]
    ContextOverflow { message: String },
    #[error("the language model's answer could not be read: {0}")]
    Malformed(String),
}

/// An OpenAI-compatible endpoint. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    /// Base URL without a trailing slash, e.g. `http://localhost:11434/v1`.
    base_url: String,
    api_key: Option<String>,
    /// Limit of a whole non-streaming request.
    request_timeout: Duration,
    max_retries: u32,
    retry_base: Duration,
    retry_budget: Duration,
}

/// One attempt's failure: either worth another attempt or final.
enum Failure {
    Retry {
        reason: String,
        retry_after: Option<Duration>,
    },
    Final(LlmError),
}

impl LlmClient {
    pub fn new(config: &LlmConfig) -> anyhow::Result<Self> {
        let request_timeout = Duration::from_secs(config.request_timeout_secs);
        let http = reqwest::Client::builder()
            .read_timeout(request_timeout)
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .build()?;
        Ok(Self {
            http,
            base_url: config.base_url.trim_end_matches('/').to_string(),
            request_timeout,
            api_key: config.api_key.clone(),
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            retry_budget: Duration::from_secs(config.retry_budget_secs),
        })
    }

    /// Runs one completion, retrying transient failures within the retry budget.
    pub async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let response = self.post("chat/completions", request, false).await?;
        parse_completion(&self.body(response).await?)
    }

    /// Runs one completion of a request with `stream: true` (see
    /// [`ChatRequest::set_streaming`]), calling `on_text` with each piece of answer text as it
    /// arrives (server-sent events, tool-call deltas assembled). A server that answers with a
    /// plain JSON completion instead is handled too: `on_text` is then not called.
    pub async fn complete_streaming(
        &self,
        request: &ChatRequest,
        mut on_text: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        debug_assert!(
            request.stream,
            "complete_streaming needs a streaming request"
        );
        let response = self.post("chat/completions", request, true).await?;
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            return parse_completion(&self.body(response).await?);
        }
        let mut stream = response.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut completion = StreamAccumulator::default();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| LlmError::Unavailable {
                attempts: 1,
                last: self.redact(format!(
                    "the stream broke off: {}",
                    describe_transport_error(e)
                )),
            })?;
            buffer.extend_from_slice(&chunk);
            while let Some(newline) = buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=newline).collect();
                if completion.feed_line(&String::from_utf8_lossy(&line), &mut on_text)? {
                    return Ok(completion.finish());
                }
            }
        }
        if !buffer.is_empty() {
            completion.feed_line(&String::from_utf8_lossy(&buffer), &mut on_text)?;
        }
        Ok(completion.finish())
    }

    /// Embeds `inputs` with `model` (`/embeddings`), one vector per input, in order.
    pub async fn embed(&self, model: &str, inputs: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let request = serde_json::json!({"model": model, "input": inputs});
        let response = self.post("embeddings", &request, false).await?;
        let body = self.body(response).await?;
        let mut wire: WireEmbeddings = serde_json::from_str(&body)
            .map_err(|e| LlmError::Malformed(format!("embeddings: {e}")))?;
        wire.data.sort_by_key(|d| d.index);
        if wire.data.len() != inputs.len() {
            return Err(LlmError::Malformed(format!(
                "asked for {} embeddings, got {}",
                inputs.len(),
                wire.data.len()
            )));
        }
        Ok(wire.data.into_iter().map(|d| d.embedding).collect())
    }

    /// A successful response's body.
    async fn body(&self, response: reqwest::Response) -> Result<String, LlmError> {
        response.text().await.map_err(|e| LlmError::Unavailable {
            attempts: 1,
            last: self.redact(describe_transport_error(e)),
        })
    }

    /// POSTs JSON to `path` under the base URL, retrying transient failures within the retry
    /// budget; returns the successful response, its body unread. A streaming request has no
    /// overall time limit, only the per-read one (a long answer may stream for minutes).
    async fn post(
        &self,
        path: &str,
        request: &impl serde::Serialize,
        streaming: bool,
    ) -> Result<reqwest::Response, LlmError> {
        let url = format!("{}/{path}", self.base_url);
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (reason, retry_after) = match self.attempt(&url, request, streaming).await {
                Ok(response) => return Ok(response),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Retry {
                    reason,
                    retry_after,
                }) => (reason, retry_after),
            };
            let backoff = self.retry_base * 2u32.saturating_pow(attempt - 1);
            let wait = retry_after.unwrap_or(backoff);
            if attempt > self.max_retries || started.elapsed() + wait > self.retry_budget {
                return Err(LlmError::Unavailable {
                    attempts: attempt,
                    last: reason,
                });
            }
            tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, %reason, "LLM call failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    /// Removes the API key from text that may reach logs or users (some servers echo it).
    fn redact(&self, text: String) -> String {
        match &self.api_key {
            Some(key) if !key.is_empty() && text.contains(key.as_str()) => {
                text.replace(key.as_str(), "[redacted]")
            }
            _ => text,
        }
    }

    async fn attempt(
        &self,
        url: &str,
        request: &impl serde::Serialize,
        streaming: bool,
    ) -> Result<reqwest::Response, Failure> {
        let mut builder = self.http.post(url).json(request);
        if !streaming {
            builder = builder.timeout(self.request_timeout);
        }
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(|e| Failure::Retry {
            reason: self.redact(describe_transport_error(e)),
            retry_after: None,
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body = response.text().await.map_err(|e| Failure::Retry {
            reason: self.redact(describe_transport_error(e)),
            retry_after: None,
        })?;
        let message = self.redact(provider_error_message(&body));
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Err(Failure::Retry {
                reason: format!("HTTP {}: {message}", status.as_u16()),
                retry_after,
            })
        } else if is_context_overflow(status, &body) {
            Err(Failure::Final(LlmError::ContextOverflow { message }))
        } else {
            Err(Failure::Final(LlmError::Rejected {
                status: status.as_u16(),
                message,
            }))
        }
    }
}

/// A transport error without the URL (which may carry credentials in some deployments).
fn describe_transport_error(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "transport error"
    };
    let e = e.without_url();
    match std::error::Error::source(&e) {
        Some(source) => format!("{kind}: {e}: {source}"),
        None => format!("{kind}: {e}"),
    }
}

/// Whether a refusal means "prompt too long": llama.cpp's `exceed_context_size_error`,
/// OpenAI's `context_length_exceeded`, and the phrasings of vLLM, Ollama and others.
fn is_context_overflow(status: StatusCode, body: &str) -> bool {
    const MARKERS: &[&str] = &[
        "exceed_context_size",
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "context length",
        "prompt is too long",
        "too many tokens",
        "exceeds the available context",
    ];
    if !matches!(status.as_u16(), 400 | 413 | 422) {
        return false;
    }
    let body = body.to_ascii_lowercase();
    MARKERS.iter().any(|marker| body.contains(marker))
}

/// `Retry-After` in seconds (the HTTP-date form is rare for APIs and treated as absent).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The provider's own words: `{"error":{"message":…}}`, `{"error":"…"}`, or the raw body.
fn provider_error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            let error = v.get("error")?;
            error
                .get("message")
                .and_then(|m| m.as_str())
                .or_else(|| error.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.trim().to_string());
    if message.is_empty() {
        return "(empty body)".to_string();
    }
    message.chars().take(ERROR_SNIPPET_CHARS).collect()
}

#[derive(Deserialize)]
struct WireEmbeddings {
    data: Vec<WireEmbedding>,
}

#[derive(Deserialize)]
struct WireEmbedding {
    #[serde(default)]
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
    /// DeepSeek reports cache hits here instead.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Assembles a streamed completion from its server-sent events.
#[derive(Default)]
pub(crate) struct StreamAccumulator {
    content: String,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl StreamAccumulator {
    /// Feeds one SSE line; returns `true` at `data: [DONE]`. Text deltas go to `on_text`;
    /// `"content": null` (llama.cpp's first chunk) and comments are skipped.
    pub(crate) fn feed_line(
        &mut self,
        line: &str,
        on_text: &mut impl FnMut(&str),
    ) -> Result<bool, LlmError> {
        let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else {
            return Ok(false);
        };
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: serde_json::Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Malformed(format!("stream chunk: {e}")))?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("error in stream");
            return Err(LlmError::Unavailable {
                attempts: 1,
                last: message.chars().take(ERROR_SNIPPET_CHARS).collect(),
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null())
            && let Ok(wire) = serde_json::from_value::<WireUsage>(usage.clone())
        {
            self.usage = wire.into();
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return Ok(false);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(|r| r.as_str()) {
            self.finish_reason = Some(reason.to_string());
        }
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(|c| c.as_str())
            && !text.is_empty()
        {
            self.content.push_str(text);
            on_text(text);
        }
        for call in delta
            .get("tool_calls")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(|i| i.as_u64()).unwrap_or(0) as usize;
            while self.tool_calls.len() <= index {
                self.tool_calls.push(ToolCall {
                    id: String::new(),
                    kind: "function".to_string(),
                    function: super::FunctionCall {
                        name: String::new(),
                        arguments: String::new(),
                    },
                });
            }
            let slot = &mut self.tool_calls[index];
            if let Some(id) = call.get("id").and_then(|v| v.as_str()) {
                slot.id = id.to_string();
            }
            let function = &call["function"];
            if let Some(name) = function.get("name").and_then(|v| v.as_str()) {
                slot.function.name.push_str(name);
            }
            if let Some(arguments) = function.get("arguments").and_then(|v| v.as_str()) {
                slot.function.arguments.push_str(arguments);
            }
        }
        Ok(false)
    }

    pub(crate) fn finish(self) -> Completion {
        Completion {
            content: self.content,
            tool_calls: self.tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(u.prompt_cache_hit_tokens)
                .unwrap_or(0),
        }
    }
}

fn parse_completion(body: &str) -> Result<Completion, LlmError> {
    let wire: WireResponse = serde_json::from_str(body).map_err(|e| {
        LlmError::Malformed(format!(
            "{e}; body starts with {:?}",
            body.chars().take(ERROR_SNIPPET_CHARS).collect::<String>()
        ))
    })?;
    let choice = wire
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| LlmError::Malformed("the response has no choices".to_string()))?;
    let usage = wire.usage.map(Usage::from).unwrap_or_default();
    Ok(Completion {
        content: choice.message.content.unwrap_or_default(),
        tool_calls: choice.message.tool_calls.unwrap_or_default(),
        finish_reason: choice.finish_reason,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_error_messages() {
        struct Case {
            name: &'static str,
            body: &'static str,
            expect: &'static str,
        }
        let cases = [
            Case {
                name: "openai shape",
                body: r#"{"error":{"message":"bad model","type":"x"}}"#,
                expect: "bad model",
            },
            Case {
                name: "ollama shape",
                body: r#"{"error":"model not found"}"#,
                expect: "model not found",
            },
            Case {
                name: "plain text",
                body: "  gateway exploded ",
                expect: "gateway exploded",
            },
            Case {
                name: "empty",
                body: "",
                expect: "(empty body)",
            },
        ];
        for case in cases {
            assert_eq!(
                provider_error_message(case.body),
                case.expect,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn context_overflow_is_recognised() {
        struct Case {
            name: &'static str,
            status: u16,
            body: &'static str,
            overflow: bool,
        }
        let cases = [
            Case {
                name: "llama.cpp",
                status: 400,
                body: r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4100,"n_ctx":4096}}"#,
                overflow: true,
            },
            Case {
                name: "openai",
                status: 400,
                body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                overflow: true,
            },
            Case {
                name: "other 400",
                status: 400,
                body: r#"{"error":{"message":"invalid model"}}"#,
                overflow: false,
            },
            Case {
                name: "server error",
                status: 500,
                body: "context length",
                overflow: false,
            },
        ];
        for case in cases {
            let status = StatusCode::from_u16(case.status).unwrap();
            assert_eq!(
                is_context_overflow(status, case.body),
                case.overflow,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn completion_with_null_content_and_cached_usage() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":"{}"}}]},
            "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.content, "");
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.usage.cached_tokens, 8);
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn a_stream_assembles_text_tool_calls_and_usage() {
        let lines = [
            r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            ": keep-alive comment",
            "",
            r#"data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"fetch_url","arguments":""}}]}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"url\":"}}]}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"https://e.com\"}"}}]}}]}"#,
            r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            "data: [DONE]",
        ];
        let mut acc = StreamAccumulator::default();
        let mut seen = String::new();
        let mut done = false;
        for line in lines {
            done = acc.feed_line(line, &mut |t| seen.push_str(t)).unwrap();
        }
        assert!(done);
        assert_eq!(seen, "Hello");
        let c = acc.finish();
        assert_eq!(c.content, "Hello");
        assert_eq!(c.tool_calls[0].id, "c1");
        assert_eq!(c.tool_calls[0].function.name, "fetch_url");
        assert_eq!(
            c.tool_calls[0].function.arguments,
            r#"{"url":"https://e.com"}"#
        );
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            c.usage,
            Usage {
                prompt_tokens: 5,
                completion_tokens: 2,
                cached_tokens: 4
            }
        );
    }

    #[test]
    fn stream_errors_and_garbage_are_errors_not_panics() {
        let mut acc = StreamAccumulator::default();
        assert!(acc.feed_line("data: {not json", &mut |_| {}).is_err());
        assert!(
            acc.feed_line(r#"data: {"error":{"message":"boom"}}"#, &mut |_| {})
                .is_err()
        );
        assert!(!acc.feed_line("event: ping", &mut |_| {}).unwrap());
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        for body in ["", "{", "[]", r#"{"choices":[]}"#, r#"{"choices":[{}]}"#] {
            assert!(parse_completion(body).is_err(), "{body:?}");
        }
    }
}
