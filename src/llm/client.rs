//! One OpenAI-compatible endpoint: `/chat/completions` with bounded retries, a cap on requests
//! in flight, and completion caps that fit the model's context. [`super::LlmClient`] holds one
//! per distinct base URL and key, and sends each call to its model's.
//!
//! Retries cover what a retry can fix (429, 5xx, connection errors and timeouts), after a
//! jittered exponential backoff or the provider's `Retry-After`, and stop once
//! `retry_budget_secs` would be exceeded, so a user hears back within about a minute even when
//! the provider is down. A 500 "Context size has been exceeded" (llama.cpp's shared context,
//! full because of other requests in flight) is retried the same way, and if it persists it
//! is a [`LlmError::ContextOverflow`]: the prompt alone is too long. Other 4xx answers are
//! returned at once with what the provider said. The API key is sent, never logged.
//!
//! At most `llm.max_concurrent` requests are in flight at once to the endpoint, shared by
//! every kind of call, with users' calls served first (see [`super::concurrency`]). A request
//! holds its slot while it runs, never while it waits to retry.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use super::concurrency::{Permit, Priority, PrioritySemaphore};
use super::context::{ContextWindows, completion_room, from_models, from_props};
use super::error::LlmError;
use super::types::{ChatRequest, Completion, Usage, estimate_request_tokens};
use super::wire::{
    MAX_BODY_BYTES, StreamAccumulator, WireEmbeddings, is_context_overflow, is_shared_context_full,
    parse_completion, provider_error_message, retry_after,
};
use crate::backoff::Backoff;
use crate::config::LlmConfig;
use crate::metrics::{CallKind, Metrics, Tokens};

/// Longest error body read for its message.
pub(super) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// Longest `/models` or `/props` answer read (OpenRouter lists hundreds of models).
const MAX_DISCOVERY_BODY_BYTES: usize = 8 << 20;
/// A discovery request gives up after this long: the call it precedes is waiting.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// An OpenAI-compatible endpoint. Cheap to clone; clones share the connection pool, the
/// request slots and what was learned about models' contexts.
#[derive(Clone)]
pub(crate) struct Endpoint {
    http: reqwest::Client,
    /// Base URL without a trailing slash, e.g. `http://localhost:11434/v1`.
    base_url: String,
    api_key: Option<String>,
    /// Limit of a whole non-streaming request.
    request_timeout: Duration,
    max_retries: u32,
    retry_base: Duration,
    retry_budget: Duration,
    slots: PrioritySemaphore,
    contexts: std::sync::Arc<ContextWindows>,
    /// Where each call is counted (its own, unscraped, until [`Endpoint::with_metrics`]).
    metrics: Metrics,
}

/// One attempt's failure: either worth another attempt or final.
enum AttemptFailure {
    Retry {
        reason: String,
        retry_after: Option<Duration>,
        /// llama.cpp's shared context was full: if retries do not help, the prompt is too long.
        context_full: Option<String>,
    },
    Final(LlmError),
}

/// The one HTTP client every endpoint shares (one connection pool), with `config`'s timeouts.
pub(crate) fn http_client(config: &LlmConfig) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .read_timeout(Duration::from_secs(config.request_timeout_secs))
        .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
        .build()?)
}

impl Endpoint {
    /// The endpoint at `base_url` with `api_key`, on `http`, with `config`'s retries and cap
    /// of requests in flight (its own slots: a local server's cap does not hold back a hosted
    /// one).
    pub(crate) fn new(
        config: &LlmConfig,
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<String>,
    ) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            request_timeout: Duration::from_secs(config.request_timeout_secs),
            api_key,
            max_retries: config.max_retries,
            retry_base: Duration::from_millis(config.retry_base_ms),
            retry_budget: Duration::from_secs(config.retry_budget_secs),
            slots: PrioritySemaphore::new(config.max_concurrent),
            contexts: Default::default(),
            metrics: Metrics::new(),
        }
    }

    /// The client counting its calls in the bot's `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics this client counts in (what else serves the same calls counts there too).
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs one completion, retrying transient failures within the retry budget; counted as
    /// a call of `kind`.
    pub(crate) async fn complete(
        &self,
        request: &ChatRequest,
        priority: Priority,
        kind: CallKind,
    ) -> Result<Completion, LlmError> {
        let done = self.completion(request, priority).await;
        self.count(kind, &request.model, &done);
        done
    }

    /// Counts a finished call of `kind` to `model` with what it used.
    fn count(&self, kind: CallKind, model: &str, done: &Result<Completion, LlmError>) {
        let used = done.as_ref().ok().map(|c| tokens(c.usage));
        self.metrics.llm_call(kind, model, used);
    }

    /// [`Endpoint::complete`], uncounted.
    async fn completion(
        &self,
        request: &ChatRequest,
        priority: Priority,
    ) -> Result<Completion, LlmError> {
        let request = self.fit_to_context(request).await;
        let (response, _slot) = self
            .post("chat/completions", &*request, false, priority)
            .await?;
        parse_completion(&self.body(response).await?)
    }

    /// Runs one completion of a request with `stream: true` (see
    /// [`ChatRequest::set_streaming`]), calling `on_text` with each piece of answer text as it
    /// arrives (server-sent events, tool-call deltas assembled, thinking left out). A server
    /// that answers with a plain JSON completion instead is handled too: `on_text` is then not
    /// called. Counted as a call of `kind`.
    pub(crate) async fn complete_streaming(
        &self,
        request: &ChatRequest,
        priority: Priority,
        kind: CallKind,
        on_text: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        let done = self.streamed_completion(request, priority, on_text).await;
        self.count(kind, &request.model, &done);
        done
    }

    /// [`Endpoint::complete_streaming`], uncounted.
    async fn streamed_completion(
        &self,
        request: &ChatRequest,
        priority: Priority,
        mut on_text: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        debug_assert!(
            request.stream,
            "complete_streaming needs a streaming request"
        );
        let request = self.fit_to_context(request).await;
        let (mut response, _slot) = self
            .post("chat/completions", &*request, true, priority)
            .await?;
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            return parse_completion(&self.body(response).await?);
        }
        let mut completion = StreamAccumulator::default();
        loop {
            let chunk = response.chunk().await.map_err(|e| LlmError::Unavailable {
                attempts: 1,
                last: self.redact(format!(
                    "the stream broke off: {}",
                    describe_transport_error(e)
                )),
            })?;
            match chunk {
                Some(chunk) if completion.feed(&chunk, &mut on_text)? => break,
                Some(_) => {}
                None => break,
            }
        }
        completion.finish(&mut on_text)
    }

    /// Embeds `inputs` with `model` (`/embeddings`), one vector per input, in order. A
    /// message's embedding chooses the skills and lessons of its turn, so a user waits for
    /// it ([`Priority::Interactive`]); newly learned lessons are embedded in the background.
    /// Also returns the usage the server reported, if it did. Counted as an embedding call.
    pub(crate) async fn embed(
        &self,
        model: &str,
        inputs: &[String],
        priority: Priority,
    ) -> Result<(Vec<Vec<f32>>, Option<Usage>), LlmError> {
        let done = self.embeddings(model, inputs, priority).await;
        let used = done
            .as_ref()
            .ok()
            .map(|(_, usage)| tokens(usage.unwrap_or_default()));
        self.metrics.llm_call(CallKind::Embedding, model, used);
        done
    }

    /// [`Endpoint::embed`], uncounted.
    async fn embeddings(
        &self,
        model: &str,
        inputs: &[String],
        priority: Priority,
    ) -> Result<(Vec<Vec<f32>>, Option<Usage>), LlmError> {
        let request = serde_json::json!({"model": model, "input": inputs});
        let (response, _slot) = self.post("embeddings", &request, false, priority).await?;
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
        let usage = wire.take_usage();
        Ok((wire.data.into_iter().map(|d| d.embedding).collect(), usage))
    }

    /// `model`'s context window: what the server says (asked once per model), else
    /// `configured` (the model's `context_tokens`), else unknown.
    pub(crate) async fn context_window(
        &self,
        model: &str,
        configured: Option<usize>,
    ) -> Option<usize> {
        let discovered = self
            .contexts
            .get(model, || self.discover_context(model))
            .await;
        discovered.or(configured)
    }

    /// The request with its completion cap lowered to what the model's context leaves after
    /// the estimated prompt, when the context is known (from the server, else from config).
    async fn fit_to_context<'a>(&self, request: &'a ChatRequest) -> Cow<'a, ChatRequest> {
        let window = self
            .context_window(&request.model, request.context_tokens)
            .await;
        let Some(context) = window else {
            return Cow::Borrowed(request);
        };
        let room = completion_room(context, estimate_request_tokens(request));
        if request.completion_cap().is_some_and(|cap| cap <= room) {
            return Cow::Borrowed(request);
        }
        let mut fitted = request.clone();
        fitted.lower_completion_cap(room);
        Cow::Owned(fitted)
    }

    /// Asks the server for `model`'s context window: its `/models` entry, then llama.cpp's
    /// `/props` (at the server's root, beside `/v1`). Runs once per model (see
    /// [`ContextWindows`]); a server that says nothing costs two short requests, once.
    async fn discover_context(&self, model: &str) -> Option<usize> {
        let models_url = format!("{}/models", self.base_url);
        if let Some(context) = self
            .get_json(&models_url)
            .await
            .and_then(|models| from_models(&models, model))
        {
            tracing::info!(
                model,
                context,
                "the server reports the model's context (/models)"
            );
            return Some(context);
        }
        let root = self.base_url.strip_suffix("/v1").unwrap_or(&self.base_url);
        if let Some(context) = self
            .get_json(&format!("{root}/props"))
            .await
            .as_ref()
            .and_then(from_props)
        {
            tracing::info!(
                model,
                context,
                "the server reports the model's context (/props)"
            );
            return Some(context);
        }
        tracing::debug!(model, "the server does not report the model's context");
        None
    }

    /// A small GET for discovery: any failure is just "the server does not say".
    async fn get_json(&self, url: &str) -> Option<serde_json::Value> {
        let mut builder = self.http.get(url).timeout(DISCOVERY_TIMEOUT);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let (body, cut) = read_up_to(response, MAX_DISCOVERY_BODY_BYTES).await.ok()?;
        if cut {
            return None;
        }
        serde_json::from_slice(&body).ok()
    }

    /// A successful response's body, up to [`MAX_BODY_BYTES`].
    async fn body(&self, response: reqwest::Response) -> Result<String, LlmError> {
        let (body, cut) =
            read_up_to(response, MAX_BODY_BYTES)
                .await
                .map_err(|e| LlmError::Unavailable {
                    attempts: 1,
                    last: self.redact(describe_transport_error(e)),
                })?;
        if cut {
            return Err(LlmError::Malformed(format!(
                "the answer is over {} MB",
                MAX_BODY_BYTES >> 20
            )));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// POSTs JSON to `path` under the base URL, retrying transient failures within the retry
    /// budget; returns the successful response, its body unread, with the request slot it
    /// holds until the body is read. A streaming request has no overall time limit, only the
    /// per-read one (a long answer may stream for minutes). The budget starts with the first
    /// attempt, not while the request waits for a slot.
    async fn post(
        &self,
        path: &str,
        request: &impl serde::Serialize,
        streaming: bool,
        priority: Priority,
    ) -> Result<(reqwest::Response, Permit), LlmError> {
        let url = format!("{}/{path}", self.base_url);
        let mut started = None;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let slot = self.slots.acquire(priority).await;
            let started = *started.get_or_insert_with(Instant::now);
            let (reason, retry_after, context_full) =
                match self.attempt(&url, request, streaming).await {
                    Ok(response) => return Ok((response, slot)),
                    Err(AttemptFailure::Final(e)) => return Err(e),
                    Err(AttemptFailure::Retry {
                        reason,
                        retry_after,
                        context_full,
                    }) => (reason, retry_after, context_full),
                };
            drop(slot);
            let backoff = jittered(Backoff::new(self.retry_base, Duration::MAX).after(attempt));
            let wait = retry_after.unwrap_or(backoff);
            if attempt > self.max_retries || started.elapsed() + wait > self.retry_budget {
                return Err(match context_full {
                    Some(message) => LlmError::ContextOverflow { message },
                    None => LlmError::Unavailable {
                        attempts: attempt,
                        last: reason,
                    },
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
    ) -> Result<reqwest::Response, AttemptFailure> {
        let mut builder = self.http.post(url).json(request);
        if !streaming {
            builder = builder.timeout(self.request_timeout);
        }
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let transport = |e| AttemptFailure::Retry {
            reason: self.redact(describe_transport_error(e)),
            retry_after: None,
            context_full: None,
        };
        let response = builder.send().await.map_err(transport)?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers(), self.retry_budget);
        let (body, _) = read_up_to(response, MAX_ERROR_BODY_BYTES)
            .await
            .map_err(transport)?;
        let body = String::from_utf8_lossy(&body);
        let message = self.redact(provider_error_message(&body));
        if is_shared_context_full(status, &body) {
            Err(AttemptFailure::Retry {
                reason: format!("HTTP {}: {message}", status.as_u16()),
                retry_after,
                context_full: Some(message),
            })
        } else if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Err(AttemptFailure::Retry {
                reason: format!("HTTP {}: {message}", status.as_u16()),
                retry_after,
                context_full: None,
            })
        } else if is_context_overflow(status, &body) {
            Err(AttemptFailure::Final(LlmError::ContextOverflow { message }))
        } else {
            Err(AttemptFailure::Final(LlmError::Rejected {
                status: status.as_u16(),
                message,
            }))
        }
    }
}

/// `wait` scaled by a random factor in [0.5, 1.5), so calls that failed together (two requests
/// that filled a shared context) do not retry together.
fn jittered(wait: Duration) -> Duration {
    let factor = 0.5 + (super::types::random_u64() >> 11) as f64 / (1u64 << 53) as f64;
    Duration::try_from_secs_f64(wait.as_secs_f64() * factor).unwrap_or(wait)
}

/// Reads at most `cap` bytes of a body; says whether there was more (which is not read).
pub(super) async fn read_up_to(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A transport error without the URL (which may carry credentials in some deployments).
pub(super) fn describe_transport_error(e: reqwest::Error) -> String {
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

/// A provider's usage as the metrics count it.
fn tokens(usage: Usage) -> Tokens {
    Tokens {
        prompt: usage.prompt_tokens,
        completion: usage.completion_tokens,
        cached: usage.cached_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_half_and_one_and_a_half() {
        let base = Duration::from_millis(1000);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(base)).collect();
        assert!(waits.iter().all(|w| *w >= base / 2 && *w < base * 3 / 2));
        assert!(waits.iter().any(|w| *w != waits[0]), "the waits differ");
        let _ = jittered(Duration::MAX);
    }
}
