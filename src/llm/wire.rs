//! What a server sends back, read without trusting it: completion bodies, streamed events,
//! error bodies and `Retry-After`.
//!
//! A provider may be flaky, misconfigured or hostile; nothing it sends may panic the bot or
//! grow its memory without bound. So every size is capped: a body at [`MAX_BODY_BYTES`], a
//! stream at [`MAX_STREAM_BYTES`] in all and [`MAX_LINE_BYTES`] per event line, tool calls at
//! [`MAX_TOOL_CALLS`] (a streamed `index` is never used to size anything beyond that), and a
//! `Retry-After` at the caller's retry budget. What does not fit is an error the caller can
//! tell the user about, never a crash. Reasoning (`<think>` blocks) is removed from content
//! here, so no caller ever sees it (see [`super::reasoning`]).

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

use super::error::LlmError;
use super::reasoning::{ThinkFilter, strip_think};
use super::types::{Completion, FunctionCall, ToolCall, Usage};

/// Longest piece of a provider's error text we carry around (and may show a user).
pub(crate) const ERROR_SNIPPET_CHARS: usize = 300;
/// Largest response body read (a completion capped at a few thousand tokens is far smaller).
pub(crate) const MAX_BODY_BYTES: usize = 16 << 20;
/// Largest streamed response read, all events together.
pub(crate) const MAX_STREAM_BYTES: usize = 16 << 20;
/// Longest line of a stream: one event carries one JSON chunk, a few hundred bytes usually.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;
/// Most tool calls one completion may hold (a turn runs at most `agent.max_tool_calls`).
pub(crate) const MAX_TOOL_CALLS: usize = 128;

/// Whether a refusal means "prompt too long": llama.cpp's `exceed_context_size_error`,
/// OpenAI's `context_length_exceeded`, and the phrasings of vLLM, Ollama and others.
pub(crate) fn is_context_overflow(status: StatusCode, body: &str) -> bool {
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

/// Whether a server error means "the shared context is full right now": llama.cpp's
/// `llama-server` shares one KV cache among its parallel slots and answers 500 "Context size
/// has been exceeded." when requests in flight together outgrow it. Worth a retry once the
/// others are done; if it persists, the prompt alone is too long.
pub(crate) fn is_shared_context_full(status: StatusCode, body: &str) -> bool {
    status.is_server_error()
        && body
            .to_ascii_lowercase()
            .contains("context size has been exceeded")
}

/// `Retry-After` in seconds, at most `limit` (a wait beyond the retry budget is never waited
/// for anyway; `1e20` must not overflow a `Duration`). The HTTP-date form is rare for APIs
/// and treated as absent.
pub(crate) fn retry_after(
    headers: &reqwest::header::HeaderMap,
    limit: Duration,
) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds = value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::try_from_secs_f64(seconds).map_or(limit, |wait| wait.min(limit)))
}

/// The provider's own words: `{"error":{"message":…}}`, `{"error":"…"}`, or the raw body.
pub(crate) fn provider_error_message(body: &str) -> String {
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
pub(crate) struct WireEmbeddings {
    pub(crate) data: Vec<WireEmbedding>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

impl WireEmbeddings {
    /// What the server said the call used (nothing, when it does not say).
    pub(crate) fn take_usage(&mut self) -> Option<Usage> {
        self.usage.take().map(Usage::from)
    }
}

#[derive(Deserialize)]
pub(crate) struct WireEmbedding {
    #[serde(default)]
    pub(crate) index: usize,
    pub(crate) embedding: Vec<f32>,
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

/// A whole (non-streamed) completion body.
pub(crate) fn parse_completion(body: &str) -> Result<Completion, LlmError> {
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
    let tool_calls = choice.message.tool_calls.unwrap_or_default();
    if tool_calls.len() > MAX_TOOL_CALLS {
        return Err(too_many_tool_calls());
    }
    Ok(Completion {
        content: strip_think(&choice.message.content.unwrap_or_default()),
        tool_calls: usable_tool_calls(tool_calls),
        finish_reason: choice.finish_reason,
        usage,
    })
}

/// The error a stream reported instead of (the rest of) its answer. The context filling up
/// mid-answer cannot be retried without taking back what was shown, so it is an overflow at
/// once: the agent trims the history and asks again.
fn stream_error(error: &serde_json::Value) -> LlmError {
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .or_else(|| error.as_str())
        .unwrap_or("error in stream");
    let message: String = message.chars().take(ERROR_SNIPPET_CHARS).collect();
    let kind = error
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or_default();
    if kind == "exceed_context_size_error"
        || message
            .to_ascii_lowercase()
            .contains("context size has been exceeded")
    {
        LlmError::ContextOverflow { message }
    } else {
        LlmError::Unavailable {
            attempts: 1,
            last: message,
        }
    }
}

fn too_many_tool_calls() -> LlmError {
    LlmError::Malformed(format!(
        "the answer holds more than {MAX_TOOL_CALLS} tool calls"
    ))
}

/// The calls worth running: nameless ones (gaps a server left between streamed indices) are
/// dropped, and a call without an id gets one, so its result can refer to it.
fn usable_tool_calls(calls: Vec<ToolCall>) -> Vec<ToolCall> {
    calls
        .into_iter()
        .filter(|call| !call.function.name.is_empty())
        .map(|mut call| {
            if call.id.is_empty() {
                call.id = super::types::new_call_id();
            }
            call
        })
        .collect()
}

/// Assembles a streamed completion from the bytes of its server-sent events, within the
/// bounds of this module. Text deltas go to `on_text` with leading thinking removed.
#[derive(Default)]
pub(crate) struct StreamAccumulator {
    /// The unfinished last line.
    line: Vec<u8>,
    received: usize,
    think: ThinkFilter,
    content: String,
    tool_calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl StreamAccumulator {
    /// Feeds bytes as they arrive; returns `true` at `data: [DONE]` (the rest is not read).
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        on_text: &mut impl FnMut(&str),
    ) -> Result<bool, LlmError> {
        self.received += bytes.len();
        if self.received > MAX_STREAM_BYTES {
            return Err(LlmError::Malformed(format!(
                "the streamed answer is over {} MB",
                MAX_STREAM_BYTES >> 20
            )));
        }
        let mut rest = bytes;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            let done = if self.line.is_empty() {
                let line = &rest[..newline];
                self.check_line_length(line.len())?;
                self.feed_line(&String::from_utf8_lossy(line), on_text)?
            } else {
                self.line.extend_from_slice(&rest[..newline]);
                let line = std::mem::take(&mut self.line);
                self.check_line_length(line.len())?;
                self.feed_line(&String::from_utf8_lossy(&line), on_text)?
            };
            if done {
                return Ok(true);
            }
            rest = &rest[newline + 1..];
        }
        self.check_line_length(self.line.len() + rest.len())?;
        self.line.extend_from_slice(rest);
        Ok(false)
    }

    fn check_line_length(&self, len: usize) -> Result<(), LlmError> {
        if len > MAX_LINE_BYTES {
            return Err(LlmError::Malformed(format!(
                "a line of the stream is over {} KB",
                MAX_LINE_BYTES >> 10
            )));
        }
        Ok(())
    }

    /// Feeds one SSE line; returns `true` at `data: [DONE]`. `"content": null` (llama.cpp's
    /// first chunk), comments and other fields are skipped.
    fn feed_line(&mut self, line: &str, on_text: &mut impl FnMut(&str)) -> Result<bool, LlmError> {
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(error) = line.strip_prefix("error:") {
            // llama.cpp reports a failure mid-stream as an `error` event.
            let error = serde_json::from_str(error.trim())
                .unwrap_or_else(|_| serde_json::Value::String(error.trim().to_string()));
            return Err(stream_error(&error));
        }
        let Some(data) = line.strip_prefix("data:") else {
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
            return Err(stream_error(error));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null())
            && let Ok(wire) = WireUsage::deserialize(usage)
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
        if let Some(text) = delta.get("content").and_then(|c| c.as_str()) {
            let visible = self.think.push(text);
            self.show(visible, on_text);
        }
        for call in delta
            .get("tool_calls")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(|i| i.as_u64()).unwrap_or(0);
            let index = usize::try_from(index)
                .ok()
                .filter(|&i| i < MAX_TOOL_CALLS)
                .ok_or_else(too_many_tool_calls)?;
            if self.tool_calls.len() <= index {
                self.tool_calls.resize_with(index + 1, || ToolCall {
                    id: String::new(),
                    kind: "function".to_string(),
                    function: FunctionCall {
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

    fn show(&mut self, text: String, on_text: &mut impl FnMut(&str)) {
        if !text.is_empty() {
            on_text(&text);
            self.content.push_str(&text);
        }
    }

    /// The completion, once the stream ended (at `[DONE]` or when the server closed it): a
    /// last line without its newline is read too.
    pub(crate) fn finish(mut self, on_text: &mut impl FnMut(&str)) -> Result<Completion, LlmError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.feed_line(&String::from_utf8_lossy(&line), on_text)?;
        }
        let rest = self.think.finish();
        self.show(rest, on_text);
        Ok(Completion {
            content: self.content,
            tool_calls: usable_tool_calls(self.tool_calls),
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `lines` (each with its newline) and finishes; returns what `on_text` saw too.
    fn stream(lines: &[&str]) -> Result<(Completion, String), LlmError> {
        let mut acc = StreamAccumulator::default();
        let mut seen = String::new();
        for line in lines {
            if acc.feed(format!("{line}\n").as_bytes(), &mut |t| seen.push_str(t))? {
                break;
            }
        }
        let completion = acc.finish(&mut |t| seen.push_str(t))?;
        Ok((completion, seen))
    }

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
    fn context_errors_are_recognised() {
        struct Case {
            name: &'static str,
            status: u16,
            body: &'static str,
            overflow: bool,
            shared_full: bool,
        }
        let cases = [
            Case {
                name: "llama.cpp 400",
                status: 400,
                body: r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4100,"n_ctx":4096}}"#,
                overflow: true,
                shared_full: false,
            },
            Case {
                name: "openai",
                status: 400,
                body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                overflow: true,
                shared_full: false,
            },
            Case {
                name: "other 400",
                status: 400,
                body: r#"{"error":{"message":"invalid model"}}"#,
                overflow: false,
                shared_full: false,
            },
            Case {
                name: "llama.cpp shared cache full",
                status: 500,
                body: r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}"#,
                overflow: false,
                shared_full: true,
            },
            Case {
                name: "other server error",
                status: 500,
                body: "context length",
                overflow: false,
                shared_full: false,
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
            assert_eq!(
                is_shared_context_full(status, case.body),
                case.shared_full,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn retry_after_is_clamped_to_the_limit() {
        struct Case {
            name: &'static str,
            value: &'static str,
            wait: Option<Duration>,
        }
        let limit = Duration::from_secs(60);
        let cases = [
            Case {
                name: "seconds",
                value: "2",
                wait: Some(Duration::from_secs(2)),
            },
            Case {
                name: "fraction",
                value: " 0.5 ",
                wait: Some(Duration::from_millis(500)),
            },
            Case {
                name: "beyond any duration",
                value: "1e20",
                wait: Some(limit),
            },
            Case {
                name: "beyond the budget",
                value: "3600",
                wait: Some(limit),
            },
            Case {
                name: "infinite",
                value: "inf",
                wait: None,
            },
            Case {
                name: "negative",
                value: "-1",
                wait: None,
            },
            Case {
                name: "http date",
                value: "Wed, 21 Oct 2015 07:28:00 GMT",
                wait: None,
            },
        ];
        for case in cases {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(reqwest::header::RETRY_AFTER, case.value.parse().unwrap());
            assert_eq!(
                retry_after(&headers, limit),
                case.wait,
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
    fn completions_lose_their_thinking_and_get_call_ids() {
        let body = r#"{"choices":[{"message":{"content":"<think>plan</think>Hi",
            "tool_calls":[{"function":{"name":"t","arguments":"{}"}}]}}]}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.content, "Hi");
        assert!(
            c.tool_calls[0].id.starts_with("call_"),
            "{:?}",
            c.tool_calls
        );
    }

    #[test]
    fn a_stream_assembles_text_tool_calls_and_usage() {
        let (c, seen) = stream(&[
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
            "data: ignored after done",
        ])
        .unwrap();
        assert_eq!(seen, "Hello");
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
    fn streamed_thinking_is_never_shown_nor_kept() {
        let (c, seen) = stream(&[
            r#"data: {"choices":[{"delta":{"content":"<thi"}}]}"#,
            r#"data: {"choices":[{"delta":{"content":"nk>secret</think>\n\nIt is"}}]}"#,
            r#"data: {"choices":[{"delta":{"content":" 4."}}]}"#,
        ])
        .unwrap();
        assert_eq!(seen, "It is 4.");
        assert_eq!(c.content, "It is 4.");
    }

    #[test]
    fn hostile_streams_are_errors_not_panics_nor_memory() {
        struct Case {
            name: &'static str,
            bytes: Vec<u8>,
            error: &'static str,
        }
        let cases = [
            Case {
                name: "a tool index of 10^12",
                bytes: br#"data: {"choices":[{"delta":{"tool_calls":[{"index":1000000000000,"function":{"name":"x"}}]}}]}
"#
                .to_vec(),
                error: "more than 128 tool calls",
            },
            Case {
                name: "an endless line",
                bytes: vec![b'a'; MAX_LINE_BYTES + 1],
                error: "a line of the stream is over",
            },
            Case {
                name: "not json",
                bytes: b"data: {not json\n".to_vec(),
                error: "stream chunk",
            },
            Case {
                name: "llama.cpp's error event",
                bytes: br#"error: {"code":500,"message":"Context size has been exceeded.","type":"server_error"}
"#
                .to_vec(),
                error: "does not fit the model's context window",
            },
            Case {
                name: "an error event",
                bytes: br#"data: {"error":{"message":"boom"}}
"#
                .to_vec(),
                error: "boom",
            },
        ];
        for case in cases {
            let mut acc = StreamAccumulator::default();
            let err = acc.feed(&case.bytes, &mut |_| {}).err();
            let err = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(case.error), "case {}: {err:?}", case.name);
        }
        // A stream that never ends is cut at its size cap.
        let mut acc = StreamAccumulator::default();
        let line = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}]}}\n",
            "x".repeat(1000)
        );
        let mut result = Ok(false);
        for _ in 0..=(MAX_STREAM_BYTES / line.len()) {
            result = acc.feed(line.as_bytes(), &mut |_| {});
            if result.is_err() {
                break;
            }
        }
        assert!(result.is_err(), "cut at the cap");
    }

    #[test]
    fn sparse_tool_indices_leave_no_nameless_calls() {
        let (c, _) = stream(&[
            r#"data: {"choices":[{"delta":{"tool_calls":[{"index":3,"function":{"name":"current_time","arguments":"{}"}}]}}]}"#,
        ])
        .unwrap();
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].function.name, "current_time");
        assert!(!c.tool_calls[0].id.is_empty());
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        for body in ["", "{", "[]", r#"{"choices":[]}"#, r#"{"choices":[{}]}"#] {
            assert!(parse_completion(body).is_err(), "{body:?}");
        }
        let many: Vec<String> = (0..=MAX_TOOL_CALLS)
            .map(|i| format!(r#"{{"id":"{i}","function":{{"name":"t","arguments":"{{}}"}}}}"#))
            .collect();
        let body = format!(
            r#"{{"choices":[{{"message":{{"tool_calls":[{}]}}}}]}}"#,
            many.join(",")
        );
        assert!(parse_completion(&body).is_err(), "too many tool calls");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Lines a stream might carry, hostile ones included.
        fn line() -> impl Strategy<Value = String> {
            prop_oneof![
                "[ -~]{0,40}",
                ("[a-z<>/ ]{0,12}").prop_map(|t| format!(
                    "data: {}",
                    serde_json::json!({"choices": [{"delta": {"content": t}}]})
                )),
                (any::<u64>(), "[a-z_]{0,8}", "[{}\":a-z]{0,8}").prop_map(|(i, n, a)| format!(
                    "data: {}",
                    serde_json::json!({"choices": [{"delta": {"tool_calls": [
                        {"index": i % 300, "id": n, "function": {"name": n, "arguments": a}}
                    ]}}]})
                )),
                Just("data: [DONE]".to_string()),
                Just(r#"data: {"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#.to_string()),
                Just(r#"data: {"choices":"x","usage":{"prompt_tokens":-3}}"#.to_string()),
                Just("data: {\"error\": 5}".to_string()),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// Any bytes, cut anywhere: never a panic, never more than the cap of calls.
            #[test]
            fn the_accumulator_never_panics(
                lines in prop::collection::vec(line(), 0..12),
                cut in 1usize..64,
                raw in prop::collection::vec(any::<u8>(), 0..64),
            ) {
                let mut bytes = lines.join("\n").into_bytes();
                bytes.extend(raw);
                let mut acc = StreamAccumulator::default();
                let mut failed = false;
                for chunk in bytes.chunks(cut) {
                    match acc.feed(chunk, &mut |_| {}) {
                        Ok(true) => break,
                        Ok(false) => {}
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                if !failed && let Ok(completion) = acc.finish(&mut |_| {}) {
                    prop_assert!(completion.tool_calls.len() <= MAX_TOOL_CALLS);
                    prop_assert!(completion.tool_calls.iter().all(|c| !c.function.name.is_empty() && !c.id.is_empty()));
                }
            }

            #[test]
            fn completion_bodies_never_panic(body in "(\\{|\\}|\\[|\\]|\"|:|,|choices|message|content|tool_calls|null|1|<think>|.){0,120}") {
                let _ = parse_completion(&body);
                let _ = provider_error_message(&body);
            }
        }
    }
}
