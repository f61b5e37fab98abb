//! Tool calls written as text, as small local models write them.
//!
//! Served without a tool-call parser (or with one that does not know their format), models
//! like Qwen2.5-Coder answer with the call in `content` instead of `tool_calls`:
//! ```` ```json {"name": "fetch_url", "arguments": {"url": "…"}} ``` ````, or Hermes-style
//! `<tool_call>{…}</tool_call>`, sometimes with every brace doubled (`{{…}}`). When the *whole*
//! answer is such a call (or a list of them) naming tools that were offered, or written as a
//! call with arguments to a tool-like name no tool has (the agent then tells the model the
//! names), it is a call, not an answer: the agent runs it and the user never sees it. Anything
//! else — prose around the JSON, a JSON object with a name and no arguments — stays an answer.
//!
//! Accepted forms: a JSON object `{"name": …, "arguments": …}` (`parameters` is read as
//! `arguments`, as Llama 3 writes it; OpenAI's own `{"type": "function", "function": {…}}` too),
//! or a list of them, each optionally wrapped in `<tool_call>…</tool_call>` and/or a ``` fence
//! tagged `json`, `tool_call` or nothing. `arguments` may be an object or a JSON string.
//!
//! While an answer streams, [`HeldText`] holds back text that may still turn out to be such a
//! call, so its JSON never flashes up on the user's screen.
//!
//! ```
//! use heurist::llm::text_calls::parse_text_tool_calls;
//! let text = "```json\n{\"name\": \"current_time\", \"arguments\": {}}\n```";
//! let calls = parse_text_tool_calls(text, &["current_time"]).unwrap();
//! assert_eq!(calls[0].name, "current_time");
//! assert!(parse_text_tool_calls("{\"name\": \"Ada\"}", &["current_time"]).is_none());
//! let made_up = r#"{"name": "ticket__status", "arguments": {"id": "98"}}"#;
//! assert_eq!(parse_text_tool_calls(made_up, &["desk__ticket"]).unwrap()[0].name, "ticket__status");
//! ```

use serde_json::Value;

use super::types::FunctionCall;

const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";
const FENCE: &str = "```";
/// Fence info strings a call may be tagged with (compared ignoring ASCII case).
const FENCE_INFOS: &[&str] = &["", "json", "tool_call", "tool_calls"];
/// Longest fence info string looked at: longer first lines are not one of [`FENCE_INFOS`].
const MAX_FENCE_INFO: usize = 16;
/// Wrappers nest at most this deep (a fenced `<tool_call>` is two); deeper is not a call, and
/// a hostile answer cannot recurse the parser off its stack.
const MAX_NESTING: usize = 4;
/// Text held back while undecided beyond this many bytes is shown: wrappers are short.
const MAX_UNDECIDED: usize = 256;

/// The calls `content` consists of, if it is nothing but calls to tools in `offered`.
pub fn parse_text_tool_calls(content: &str, offered: &[&str]) -> Option<Vec<FunctionCall>> {
    let mut values = Vec::new();
    if units(content, 0, &mut values).is_none() {
        if !content.contains("{{") && !content.contains("}}") {
            return None;
        }
        values = undoubled(content).find_map(|text| {
            let mut values = Vec::new();
            units(&text, 0, &mut values).map(|()| values)
        })?;
    }
    let mut calls = Vec::new();
    for value in values {
        match value {
            Value::Array(items) => {
                for item in items {
                    calls.push(call_from(&item, offered)?);
                }
            }
            other => calls.push(call_from(&other, offered)?),
        }
    }
    (!calls.is_empty()).then_some(calls)
}

/// Collects the JSON values of `text`, a sequence of (possibly wrapped) values and white space
/// only; `None` if anything else is in it.
fn units(text: &str, depth: usize, out: &mut Vec<Value>) -> Option<()> {
    if depth > MAX_NESTING {
        return None;
    }
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if let Some(inner) = strip_prefix_ignore_case(rest, TAG_OPEN) {
            let (body, after) = match inner.find(TAG_CLOSE) {
                Some(end) => (&inner[..end], &inner[end + TAG_CLOSE.len()..]),
                None => (inner, ""),
            };
            units(body, depth + 1, out)?;
            rest = after;
        } else if let Some(inner) = rest.strip_prefix(FENCE) {
            let newline = inner.find('\n')?;
            if !is_call_fence_info(&inner[..newline]) {
                return None;
            }
            let body = &inner[newline + 1..];
            let (body, after) = match body.find(FENCE) {
                Some(end) => (&body[..end], &body[end + FENCE.len()..]),
                None => (body, ""),
            };
            units(body, depth + 1, out)?;
            rest = after;
        } else if rest.starts_with(['{', '[']) {
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            let value = stream.next()?.ok()?;
            let end = stream.byte_offset();
            out.push(value);
            rest = &rest[end..];
        } else {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(())
}

/// One call from `{"name", "arguments"}` (or `parameters`, or OpenAI's `function` object),
/// if it names an offered tool or is written as a call (see [`is_tool_like`]).
fn call_from(value: &Value, offered: &[&str]) -> Option<FunctionCall> {
    let object = value
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(value);
    let name = object.get("name")?.as_str()?;
    let given = object.get("arguments").or_else(|| object.get("parameters"));
    // A name no tool has is still a call when it is written as one, a tool-like name with
    // arguments (Qwen2.5-Coder-1.5B wrote `{"name": "ticket__status", "arguments": {…}}`):
    // the tool's "no such tool" tells the model the names, and the user never sees the JSON.
    let written_as_call = is_tool_like(name) && given.is_some_and(Value::is_object);
    if !offered.contains(&name) && !written_as_call {
        return None;
    }
    let arguments = match given {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(text)) => text.clone(),
        Some(object @ Value::Object(_)) => object.to_string(),
        Some(_) => return None,
    };
    Some(FunctionCall {
        name: name.to_string(),
        arguments,
    })
}

/// A name a tool could have: an identifier (letters, digits, `_`, `-`, `.`) of at most 64
/// characters with a letter, as OpenAI's function names are.
fn is_tool_like(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `text` with its doubled braces read as single ones, in the three ways a model doubles
/// them, the first that parses wins: every brace doubled (`{{…{{…}}}}`), or only the object's
/// own braces (`{{…{…}}}`, both come out balanced by collapsing every pair); and only the
/// opening one (`{{"name": …, "arguments": {…}}`, Qwen2.5-Coder-1.5B), or only the closing.
fn undoubled(text: &str) -> impl Iterator<Item = String> + '_ {
    [
        ("{{", "{", "}}", "}"),
        ("{{", "{", "", ""),
        ("", "", "}}", "}"),
    ]
    .into_iter()
    .map(move |(open, one_open, close, one_close)| {
        let text = if open.is_empty() {
            text.to_string()
        } else {
            text.replace(open, one_open)
        };
        if close.is_empty() {
            text
        } else {
            text.replace(close, one_close)
        }
    })
}

fn is_call_fence_info(info: &str) -> bool {
    let info = info.trim();
    FENCE_INFOS
        .iter()
        .any(|known| known.eq_ignore_ascii_case(info))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// What the start of an answer says about it being a text tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnswerStart {
    /// Only white space, wrappers or a part of one so far.
    Undecided,
    /// Wrappers (if any) and then JSON: only the whole answer can tell.
    Json,
    /// Not a call: show it.
    Prose,
}

/// Classifies the start of an answer: every prefix of something [`parse_text_tool_calls`]
/// accepts is `Undecided` or `Json`, never `Prose`.
fn classify_start(text: &str) -> AnswerStart {
    let mut rest = text;
    for _ in 0..=MAX_NESTING {
        rest = rest.trim_start();
        if rest.is_empty() {
            return AnswerStart::Undecided;
        }
        if rest.starts_with('{') {
            return AnswerStart::Json;
        }
        if let Some(items) = rest.strip_prefix('[') {
            // A list of calls, or a Markdown link (shown at once).
            let items = items.trim_start();
            return if items.is_empty() {
                AnswerStart::Undecided
            } else if items.starts_with('{') {
                AnswerStart::Json
            } else {
                AnswerStart::Prose
            };
        }
        if let Some(inner) = strip_prefix_ignore_case(rest, TAG_OPEN) {
            rest = inner;
            continue;
        }
        if is_prefix_ignore_case(rest, TAG_OPEN) {
            return AnswerStart::Undecided;
        }
        if let Some(inner) = rest.strip_prefix(FENCE) {
            let head = &inner[..floor_boundary(inner, MAX_FENCE_INFO + 1)];
            match head.find('\n') {
                Some(newline) if is_call_fence_info(&inner[..newline]) => {
                    rest = &inner[newline + 1..];
                    continue;
                }
                Some(_) => return AnswerStart::Prose,
                None if head.len() <= MAX_FENCE_INFO
                    && FENCE_INFOS
                        .iter()
                        .any(|known| is_prefix_ignore_case(head.trim(), known)) =>
                {
                    return AnswerStart::Undecided;
                }
                None => return AnswerStart::Prose,
            }
        }
        if FENCE.starts_with(rest) {
            return AnswerStart::Undecided;
        }
        return AnswerStart::Prose;
    }
    AnswerStart::Prose
}

/// Whether `text` is the beginning of `whole`, ignoring ASCII case.
fn is_prefix_ignore_case(text: &str, whole: &str) -> bool {
    text.len() <= whole.len()
        && whole.as_bytes()[..text.len()].eq_ignore_ascii_case(text.as_bytes())
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Streamed answer text, held back while it may still be a text tool call.
#[derive(Debug, Default)]
pub(crate) struct HeldText {
    held: String,
    state: HoldState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum HoldState {
    #[default]
    Undecided,
    /// It starts like a call: nothing is shown until the answer is complete.
    ToTheEnd,
    /// It is an answer: everything is shown as it comes.
    Shown,
}

impl HeldText {
    /// Feeds a piece of answer text; returns what may be shown now (possibly empty).
    pub(crate) fn push(&mut self, piece: &str) -> String {
        match self.state {
            HoldState::Shown => return piece.to_string(),
            HoldState::ToTheEnd => {
                self.held.push_str(piece);
                return String::new();
            }
            HoldState::Undecided => self.held.push_str(piece),
        }
        match classify_start(&self.held) {
            AnswerStart::Json => self.state = HoldState::ToTheEnd,
            AnswerStart::Undecided if self.held.len() <= MAX_UNDECIDED => {}
            AnswerStart::Undecided | AnswerStart::Prose => {
                self.state = HoldState::Shown;
                return std::mem::take(&mut self.held);
            }
        }
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: &[&str] = &["current_time", "fetch_url"];

    fn names_and_args(calls: &[FunctionCall]) -> Vec<(String, Value)> {
        calls
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    serde_json::from_str(&c.arguments).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    #[test]
    fn text_tool_call_cases() {
        struct Case {
            name: &'static str,
            text: &'static str,
            calls: Option<&'static [(&'static str, &'static str)]>,
        }
        let cases = [
            Case {
                name: "bare object",
                text: r#"{"name": "fetch_url", "arguments": {"url": "https://e.com"}}"#,
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "json fence as Qwen2.5-Coder writes it",
                text: "```json\n{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}\n```",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "doubled braces",
                text: "```json\n{{\"name\": \"fetch_url\", \"arguments\": {{\"url\": \"https://e.com\"}}}}\n```",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "outer braces doubled",
                text: "{{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}}",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "only the opening brace doubled (Qwen2.5-Coder-1.5B)",
                text: "{{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "only the opening brace doubled, in a fence",
                text: "```json\n{{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}\n```",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "only the closing brace doubled",
                text: "{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}}}",
                calls: Some(&[("fetch_url", r#"{"url":"https://e.com"}"#)]),
            },
            Case {
                name: "hermes tags, two calls",
                text: "<tool_call>\n{\"name\": \"current_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://e.com\"}}\n</tool_call>",
                calls: Some(&[
                    ("current_time", "{}"),
                    ("fetch_url", r#"{"url":"https://e.com"}"#),
                ]),
            },
            Case {
                name: "tag inside a fence, unclosed",
                text: "```tool_call\n<tool_call>{\"name\": \"current_time\"}",
                calls: Some(&[("current_time", "{}")]),
            },
            Case {
                name: "a list",
                text: "[{\"name\": \"current_time\", \"arguments\": {}}, {\"name\": \"fetch_url\", \"arguments\": \"{\\\"url\\\":\\\"https://e.com\\\"}\"}]",
                calls: Some(&[
                    ("current_time", "{}"),
                    ("fetch_url", r#"{"url":"https://e.com"}"#),
                ]),
            },
            Case {
                name: "llama 3 parameters",
                text: "{\"name\": \"current_time\", \"parameters\": {}}",
                calls: Some(&[("current_time", "{}")]),
            },
            Case {
                name: "openai shape",
                text: "{\"type\": \"function\", \"function\": {\"name\": \"current_time\", \"arguments\": \"{}\"}}",
                calls: Some(&[("current_time", "{}")]),
            },
            Case {
                name: "names no offered tool",
                text: "{\"name\": \"Ada Lovelace\", \"arguments\": {\"born\": 1815}}",
                calls: None,
            },
            Case {
                name: "a made-up tool written as a call, as Qwen2.5-Coder-1.5B wrote one",
                text: "{\n    \"name\": \"ticket__status\",\n    \"arguments\": {\n        \"id\": \"98\"\n    }\n}",
                calls: Some(&[("ticket__status", "{\"id\":\"98\"}")]),
            },
            Case {
                name: "one of the list names no offered tool",
                text: "[{\"name\": \"current_time\"}, {\"name\": \"rm\"}]",
                calls: None,
            },
            Case {
                name: "prose before",
                text: "I will fetch it:\n```json\n{\"name\": \"fetch_url\", \"arguments\": {}}\n```",
                calls: None,
            },
            Case {
                name: "prose after",
                text: "{\"name\": \"current_time\", \"arguments\": {}} and then I answer",
                calls: None,
            },
            Case {
                name: "a rust fence",
                text: "```rust\n{\"name\": \"current_time\"}\n```",
                calls: None,
            },
            Case {
                name: "arguments of the wrong type",
                text: "{\"name\": \"current_time\", \"arguments\": 3}",
                calls: None,
            },
            Case {
                name: "plain answer",
                text: "It is noon.",
                calls: None,
            },
            Case {
                name: "empty",
                text: "",
                calls: None,
            },
            Case {
                name: "an empty list",
                text: "[]",
                calls: None,
            },
        ];
        for case in cases {
            let parsed = parse_text_tool_calls(case.text, OFFERED);
            let expected = case.calls.map(|calls| {
                calls
                    .iter()
                    .map(|(n, a)| (n.to_string(), serde_json::from_str::<Value>(a).unwrap()))
                    .collect::<Vec<_>>()
            });
            assert_eq!(
                parsed.as_deref().map(names_and_args),
                expected,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn start_classification_cases() {
        struct Case {
            name: &'static str,
            text: &'static str,
            start: AnswerStart,
        }
        let cases = [
            Case {
                name: "nothing yet",
                text: "",
                start: AnswerStart::Undecided,
            },
            Case {
                name: "a brace",
                text: "{",
                start: AnswerStart::Json,
            },
            Case {
                name: "half a fence",
                text: "``",
                start: AnswerStart::Undecided,
            },
            Case {
                name: "fence info so far",
                text: "```js",
                start: AnswerStart::Undecided,
            },
            Case {
                name: "json fence",
                text: "```json\n",
                start: AnswerStart::Undecided,
            },
            Case {
                name: "json fence and brace",
                text: "```json\n {",
                start: AnswerStart::Json,
            },
            Case {
                name: "code fence",
                text: "```rust\n",
                start: AnswerStart::Prose,
            },
            Case {
                name: "fence of prose",
                text: "```\nls -l",
                start: AnswerStart::Prose,
            },
            Case {
                name: "half a tag",
                text: "<tool_",
                start: AnswerStart::Undecided,
            },
            Case {
                name: "tag then brace",
                text: "<tool_call>\n{",
                start: AnswerStart::Json,
            },
            Case {
                name: "other tag",
                text: "<b>",
                start: AnswerStart::Prose,
            },
            Case {
                name: "prose",
                text: "Hello",
                start: AnswerStart::Prose,
            },
            Case {
                name: "a link",
                text: "[docs](x)",
                start: AnswerStart::Prose,
            },
            Case {
                name: "a list of calls",
                text: "[ {",
                start: AnswerStart::Json,
            },
            Case {
                name: "long info line",
                text: "```a very long info string here",
                start: AnswerStart::Prose,
            },
        ];
        for case in cases {
            assert_eq!(classify_start(case.text), case.start, "case {}", case.name);
        }
    }

    #[test]
    fn held_text_shows_prose_at_once_and_holds_calls() {
        let mut held = HeldText::default();
        assert_eq!(held.push("``"), "");
        assert_eq!(held.push("`json\n{\"na"), "");
        assert_eq!(held.push("me\": \"current_time\"}\n```"), "");

        let mut held = HeldText::default();
        assert_eq!(held.push("<"), "");
        assert_eq!(held.push("b>Hi"), "<b>Hi");
        assert_eq!(held.push(" there"), " there");

        let mut held = HeldText::default();
        let wrappers = "<tool_call>".repeat(MAX_NESTING + 1);
        assert_eq!(held.push(&wrappers), wrappers, "too deep to be a call");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Text calls in every accepted wrapping.
        fn wrapped_call() -> impl Strategy<Value = String> {
            let call =
                (prop::sample::select(OFFERED), "[a-z:/. ]{0,12}").prop_map(|(name, url)| {
                    serde_json::json!({"name": name, "arguments": {"url": url}}).to_string()
                });
            (call, 0usize..6, "[ \n]{0,2}").prop_map(|(call, wrapping, space)| match wrapping {
                0 => call,
                1 => format!("```json\n{space}{call}{space}\n```"),
                2 => format!("<tool_call>{space}{call}{space}</tool_call>"),
                3 => format!("```\n<tool_call>\n{call}\n</tool_call>\n```"),
                4 => format!("[{call}]"),
                _ => call.replace('{', "{{").replace('}', "}}"),
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn the_parser_never_panics(text in "(```|json|<tool_call>|</tool_call>|\\{|\\}|\\[|\\]|\"|:|,|name|arguments|current_time|\\n|.){0,120}") {
                let _ = parse_text_tool_calls(&text, OFFERED);
                let mut held = HeldText::default();
                let _ = held.push(&text);
            }

            /// Every accepted call is recognised, and no prefix of it is ever shown while it
            /// streams.
            #[test]
            fn calls_are_recognised_and_never_shown(text in wrapped_call(), step in 1usize..9) {
                prop_assert!(parse_text_tool_calls(&text, OFFERED).is_some(), "{}", text);
                let mut held = HeldText::default();
                let mut at = 0;
                while at < text.len() {
                    let mut end = (at + step).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    prop_assert_eq!(held.push(&text[at..end]), "");
                    at = end;
                }
            }

            /// Prose is shown from its first visible character on.
            #[test]
            fn prose_is_shown_at_once(text in "[A-Za-z][A-Za-z0-9 ,.]{0,40}") {
                let mut held = HeldText::default();
                prop_assert_eq!(held.push(&text), text.clone());
                prop_assert!(parse_text_tool_calls(&text, OFFERED).is_none());
            }
        }
    }
}
