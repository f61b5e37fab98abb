//! The one HTTP client that talks to the LLM: `/chat/completions` with bounded retries.
//!
//! Retries cover what a retry can fix (429, 5xx, connection errors and timeouts), honour the
//! provider's `Retry-After`, and stop once `retry_budget_secs` would be exceeded, so a user
//! hears back within about a minute even when the provider is down. Other 4xx answers are
//! returned at once with what the provider said. The API key is sent, never logged.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::Deserialize;

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
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.request_timeout_secs))
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .build()?;
        Ok(Self {
            http,
            base_url: config.base_url.trim_end_matches('/').to_string(),
            api_key: config.api_key.clone(),
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            retry_budget: Duration::from_secs(config.retry_budget_secs),
        })
    }

    /// Runs one completion, retrying transient failures within the retry budget.
    pub async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let body = self.post("chat/completions", request).await?;
        parse_completion(&body)
    }

    /// Embeds `inputs` with `model` (`/embeddings`), one vector per input, in order.
    pub async fn embed(&self, model: &str, inputs: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let request = serde_json::json!({"model": model, "input": inputs});
        let body = self.post("embeddings", &request).await?;
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

    /// POSTs JSON to `path` under the base URL, retrying transient failures within the retry
    /// budget; returns the body of the successful response.
    async fn post(&self, path: &str, request: &impl serde::Serialize) -> Result<String, LlmError> {
        let url = format!("{}/{path}", self.base_url);
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (reason, retry_after) = match self.attempt(&url, request).await {
                Ok(body) => return Ok(body),
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

    async fn attempt(&self, url: &str, request: &impl serde::Serialize) -> Result<String, Failure> {
        let mut builder = self.http.post(url).json(request);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(|e| Failure::Retry {
            reason: self.redact(describe_transport_error(e)),
            retry_after: None,
        })?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let body = response.text().await.map_err(|e| Failure::Retry {
            reason: self.redact(describe_transport_error(e)),
            retry_after: None,
        })?;
        if status.is_success() {
            return Ok(body);
        }
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
    let usage = wire
        .usage
        .map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(u.prompt_cache_hit_tokens)
                .unwrap_or(0),
        })
        .unwrap_or_default();
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
    fn malformed_bodies_are_errors_not_panics() {
        for body in ["", "{", "[]", r#"{"choices":[]}"#, r#"{"choices":[{}]}"#] {
            assert!(parse_completion(body).is_err(), "{body:?}");
        }
    }
}
