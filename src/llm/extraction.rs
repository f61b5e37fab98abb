//! Structured extraction: ask the model, in the same conversation, for a JSON value.
//!
//! [`retry_extract_structured`] is the one way to do it. The extraction request is the agent's own
//! last request with only `messages` extended: model, temperature, reasoning effort, provider
//! routing and tools are *the same value*, not rebuilt, so they are byte-identical, and the
//! messages begin with exactly the agent call's messages. Providers key their prompt caches on
//! that prefix, so an extraction costs little more than its own prompt and answer.
//!
//! ```
//! use heurist::llm::extraction::parse_fenced_json;
//! #[derive(serde::Deserialize)]
//! struct ExtractedOptions { options: Vec<String> }
//! let text = "Sure!\n```json\n{\"options\": [\"Yes\", \"No\"]}\n```\nAnything else?";
//! let parsed: ExtractedOptions = parse_fenced_json(text).unwrap();
//! assert_eq!(parsed.options, ["Yes", "No"]);
//! ```

use serde::de::DeserializeOwned;

use futures_util::future::BoxFuture;

use super::concurrency::Priority;
use super::endpoints::LlmClient;
use super::error::LlmError;
use super::types::{ChatMessage, ChatRequest, Usage};
use crate::config::MaxTokensField;
use crate::metrics::CallKind;

/// How much of the last raw reply a failure quotes.
const SNIPPET_CHARS: usize = 300;

/// Replies are read this far at most: an extraction answer is a few hundred tokens.
const MAX_REPLY_BYTES: usize = 64 << 10;
/// Fenced blocks, and `{`/`[` positions within one piece of text, tried at most: each try may
/// parse to the end of the text, so this keeps the work bounded whatever a provider sends.
const MAX_TRIES: usize = 16;
/// The request a follow-up call extends: the turn's last request, and its messages followed
/// by the answer.
pub(crate) type Prefix = (ChatRequest, Vec<ChatMessage>);

/// Pays for each call an extraction makes (implemented by `budget::Payer`, for the user whose
/// turn the extraction serves), so an extraction that times out or fails still charges the
/// calls it made.
pub(crate) trait Meter: Sync {
    /// Before a call to `request`: `Err` refuses it (the extraction ends with that error);
    /// `Ok` is to be called with the call's usage once it completed.
    fn reserve(&self, request: &ChatRequest) -> BoxFuture<'_, Result<Settle, LlmError>>;
}

/// Charges one completed call's usage.
pub(crate) type Settle = Box<dyn FnOnce(Usage) + Send>;

/// What to reuse and how hard to try.
pub(crate) struct ExtractionConfig<'a> {
    pub llm: &'a LlmClient,
    pub meter: &'a dyn Meter,
    /// The agent call whose parameters are reused unchanged; only `messages` differs.
    pub template: &'a ChatRequest,
    pub max_attempts: usize,
    /// The completion cap of extraction calls (it does not affect the cached prefix).
    pub max_tokens: u32,
    pub max_tokens_field: MaxTokensField,
    /// Whether a user waits for the result; options and reflection are
    /// [`Priority::Background`], so they never hold up a user's answer.
    pub priority: Priority,
    /// What the calls are counted as in the metrics.
    pub kind: CallKind,
}

/// An extraction's outcome and what it cost (also when it failed).
pub(crate) struct Extraction<T> {
    pub result: anyhow::Result<T>,
    pub usage: Usage,
    pub calls: u32,
}

/// Pushes `extraction_prompt` (unless empty) after `history` and asks up to `max_attempts`
/// times. A reply with tool calls or text that does not parse as `T` is pushed back with
/// `retry_prompt`; a reply that parses returns.
pub(crate) async fn retry_extract_structured<T: DeserializeOwned>(
    history: &[ChatMessage],
    extraction_prompt: &str,
    retry_prompt: &str,
    config: ExtractionConfig<'_>,
) -> Extraction<T> {
    let mut request = config.template.clone();
    request.messages = history.to_vec();
    request.set_completion_cap(config.max_tokens, config.max_tokens_field);
    // Parsed whole, so never streamed (the stream flag is not part of the cached prefix).
    request.set_streaming(false);
    if !extraction_prompt.is_empty() {
        request.messages.push(ChatMessage::user(extraction_prompt));
    }
    let mut usage = Usage::default();
    let mut calls = 0;
    let mut last_raw = String::new();
    for _ in 0..config.max_attempts {
        let reserved = config.meter.reserve(&request).await;
        let completion = match reserved {
            Ok(settle) => match config
                .llm
                .complete(&request, config.priority, config.kind)
                .await
            {
                Ok(completion) => Ok((settle, completion)),
                Err(e) => {
                    // A failed call costs nothing; one cut off by a timeout (this future
                    // dropped) is charged its estimate when `settle` is dropped.
                    settle(Usage::default());
                    Err(e)
                }
            },
            Err(e) => Err(e),
        };
        let (settle, completion) = match completion {
            Ok(done) => done,
            Err(e) => {
                return Extraction {
                    result: Err(e.into()),
                    usage,
                    calls,
                };
            }
        };
        settle(completion.usage);
        calls += 1;
        usage += completion.usage;
        last_raw = completion.content;
        if completion.tool_calls.is_empty()
            && let Ok(value) = parse_fenced_json::<T>(&last_raw)
        {
            return Extraction {
                result: Ok(value),
                usage,
                calls,
            };
        }
        request
            .messages
            .push(ChatMessage::assistant(last_raw.clone()));
        request.messages.push(ChatMessage::user(retry_prompt));
    }
    let snippet: String = last_raw.chars().take(SNIPPET_CHARS).collect();
    Extraction {
        result: Err(anyhow::anyhow!(
            "failed to extract a structured response after {} attempts; last raw reply: {snippet}",
            config.max_attempts
        )),
        usage,
        calls,
    }
}

/// Parses `T` from a ```json fenced block, any fenced block, or bare JSON with prose around it
/// (in the first 64 KB of `text`).
pub fn parse_fenced_json<T: DeserializeOwned>(text: &str) -> anyhow::Result<T> {
    let mut end = text.len().min(MAX_REPLY_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    for block in fenced_blocks(text).into_iter().take(MAX_TRIES) {
        if let Some(value) = first_json_value(block) {
            return Ok(value);
        }
    }
    first_json_value(text).ok_or_else(|| anyhow::anyhow!("no JSON value of the expected shape"))
}

/// Fenced blocks, those tagged `json` first.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut tagged = Vec::new();
    let mut other = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(newline) = after.find('\n') else {
            break;
        };
        let info = after[..newline].trim();
        let body = &after[newline + 1..];
        let Some(close) = body.find("```") else { break };
        if info.eq_ignore_ascii_case("json") {
            tagged.push(&body[..close]);
        } else {
            other.push(&body[..close]);
        }
        rest = &body[close + 3..];
    }
    tagged.extend(other);
    tagged
}

/// The first JSON value in `text` (starting at a `{` or `[`) that deserialises as `T`; text
/// after the value is ignored.
fn first_json_value<T: DeserializeOwned>(text: &str) -> Option<T> {
    text.char_indices()
        .filter(|(_, c)| *c == '{' || *c == '[')
        .take(MAX_TRIES)
        .find_map(|(i, _)| {
            let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<T>();
            stream.next()?.ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct ExtractedOptions {
        options: Vec<String>,
    }

    #[test]
    fn parsing_cases() {
        struct Case {
            name: &'static str,
            text: &'static str,
            expected: Option<&'static [&'static str]>,
        }
        let cases = [
            Case {
                name: "bare",
                text: r#"{"options":["a"]}"#,
                expected: Some(&["a"]),
            },
            Case {
                name: "json fence",
                text: "x\n```json\n{\"options\":[\"b\"]}\n```",
                expected: Some(&["b"]),
            },
            Case {
                name: "plain fence",
                text: "```\n{\"options\":[]}\n```",
                expected: Some(&[]),
            },
            Case {
                name: "json fence preferred over earlier other fence",
                text: "```\n{\"options\":[\"no\"]}\n```\n```json\n{\"options\":[\"yes\"]}\n```",
                expected: Some(&["yes"]),
            },
            Case {
                name: "prose around",
                text: "Here: {\"options\": [\"c\"]} hope it helps {",
                expected: Some(&["c"]),
            },
            Case {
                name: "wrong shape then right",
                text: "{\"x\":1} {\"options\":[\"d\"]}",
                expected: Some(&["d"]),
            },
            Case {
                name: "prose only",
                text: "I suggest you pick one.",
                expected: None,
            },
            Case {
                name: "empty",
                text: "",
                expected: None,
            },
            Case {
                name: "truncated",
                text: "{\"options\": [\"e\"",
                expected: None,
            },
            Case {
                name: "unclosed fence",
                text: "```json\n{\"options\":[\"f\"]}",
                expected: Some(&["f"]),
            },
        ];
        for case in cases {
            let parsed = parse_fenced_json::<ExtractedOptions>(case.text).ok();
            let expected = case.expected.map(|labels| ExtractedOptions {
                options: labels.iter().map(|s| s.to_string()).collect(),
            });
            assert_eq!(parsed, expected, "case {}", case.name);
        }
    }

    #[test]
    fn never_panics_on_odd_input() {
        for text in [
            "```",
            "``````",
            "```json",
            "{[{[",
            "\u{0}{",
            "é{\"options\":[\"ü\"]}",
            "[[[[[[[[",
            "{\"options\":[1]}",
        ] {
            let _ = parse_fenced_json::<ExtractedOptions>(text);
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn the_parser_never_panics(text in "(```|json|\\{|\\}|\\[|\\]|\"|:|,|options|\\n|.){0,200}") {
                let _ = parse_fenced_json::<ExtractedOptions>(&text);
                let _ = parse_fenced_json::<serde_json::Value>(&text);
            }

            #[test]
            fn options_wrapped_in_prose_are_found(
                labels in prop::collection::vec("[^`]{0,20}", 0..5),
                before in "[^{\\[`]{0,40}",
                after in ".{0,40}",
            ) {
                let json = serde_json::json!({"options": labels}).to_string();
                let parsed: ExtractedOptions = parse_fenced_json(&format!("{before}{json}{after}")).unwrap();
                prop_assert_eq!(parsed.options, labels);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            /// Megabytes of hostile near-JSON: an answer (or none) in bounded work, no panic.
            #[test]
            fn large_hostile_replies_are_bounded(
                unit in "(\\{\"options\":\\[|\\[\\[\"|\\{\"a\":|```json\n|\"\\{\",|0,|\\[)",
                repeat in 1usize..300_000,
            ) {
                let text = unit.repeat(repeat);
                let _ = parse_fenced_json::<ExtractedOptions>(&text);
                let _ = parse_fenced_json::<serde_json::Value>(&text);
            }
        }
    }
}
