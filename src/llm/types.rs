//! The chat-completions types: typed messages, requests and responses, and the small helpers
//! every part of the client shares.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

use crate::config::MaxTokensField;

/// One message of a conversation, in the wire format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: UserContent,
    },
    Assistant {
        #[serde(default, deserialize_with = "null_as_empty")]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    pub(crate) fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: UserContent::Text(content.into()),
        }
    }

    /// A user message with an image (a `data:` URL), for vision-capable models.
    pub(crate) fn user_with_image(text: impl Into<String>, image_url: impl Into<String>) -> Self {
        Self::User {
            content: UserContent::Parts(vec![
                ContentPart::Text { text: text.into() },
                ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: image_url.into(),
                    },
                },
            ]),
        }
    }

    /// The message with images replaced by a placeholder: what the history keeps (an image
    /// is sent once, with the turn it came with, not with every later request).
    pub(crate) fn without_images(&self) -> Self {
        match self {
            Self::User {
                content: UserContent::Parts(parts),
            } => {
                let images = parts
                    .iter()
                    .filter(|p| matches!(p, ContentPart::ImageUrl { .. }))
                    .count();
                Self::user(format!(
                    "{}\n[{images} image(s) were attached here]",
                    self.content()
                ))
            }
            other => other.clone(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    pub(crate) fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// The text of the message (empty for an assistant message that only calls tools).
    pub fn content(&self) -> &str {
        match self {
            Self::User { content } => content.text(),
            Self::System { content }
            | Self::Assistant { content, .. }
            | Self::Tool { content, .. } => content,
        }
    }
}

/// A user message's content: plain text (serialised as a string, byte-identical to a text-only
/// API), or content parts with images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl UserContent {
    /// The text (of the first text part).
    pub(crate) fn text(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Parts(parts) => parts
                .iter()
                .find_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::ImageUrl { .. } => None,
                })
                .unwrap_or(""),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
}

/// A function call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Some servers leave it out; the client then gives the call one (see [`new_call_id`]).
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the model produced it (it may be malformed; the tool reports that).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub arguments: String,
}

/// A tool the model may call: name, description and a JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionSpec,
}

/// Built-in tools have static names and descriptions; MCP servers' tools are only known at
/// run time, hence `Cow`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionSpec {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// Shared: every turn's request carries every tool, and a schema is a tree of maps that
    /// would otherwise be copied and freed per turn.
    pub parameters: Arc<serde_json::Value>,
}

impl ToolSpec {
    pub fn function(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        parameters: serde_json::Value,
    ) -> Self {
        Self {
            kind: "function",
            function: FunctionSpec {
                name: name.into(),
                description: description.into(),
                parameters: Arc::new(parameters),
            },
        }
    }
}

/// OpenRouter-style provider routing, sent as `provider`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderRouting {
    pub order: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_fallbacks: Option<bool>,
}

/// A `/chat/completions` request. Agent and extraction calls build it the same way, so the
/// fields that providers key their caches on stay byte-identical between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    pub temperature: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRouting>,
    /// The completion cap, under the field name the server wants (set with
    /// [`ChatRequest::set_completion_cap`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    pub stream: bool,
    /// With `stream`, asks for `usage` in the last chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// The model's context window as configured (`context_tokens`), if any: not sent, but
    /// the client fits the completion cap into it when the server does not say its own.
    #[serde(skip)]
    pub context_tokens: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

impl ChatRequest {
    /// Asks for (or stops asking for) a streamed answer, with usage in the last chunk.
    pub(crate) fn set_streaming(&mut self, stream: bool) {
        self.stream = stream;
        self.stream_options = stream.then_some(StreamOptions {
            include_usage: true,
        });
    }

    /// The completion cap, in whichever field carries it.
    pub(crate) fn completion_cap(&self) -> Option<u32> {
        self.max_tokens.or(self.max_completion_tokens)
    }

    /// Lowers the completion cap to `tokens` (in the field that carries it; `max_tokens` if
    /// none does), never raising it.
    pub(crate) fn lower_completion_cap(&mut self, tokens: u32) {
        match (&mut self.max_tokens, &mut self.max_completion_tokens) {
            (Some(cap), _) | (None, Some(cap)) => *cap = (*cap).min(tokens),
            (None, None) => self.max_tokens = Some(tokens),
        }
    }

    /// Caps the completion at `tokens`, in the field `field` names.
    pub(crate) fn set_completion_cap(&mut self, tokens: u32, field: MaxTokensField) {
        let (cap, other) = match field {
            MaxTokensField::MaxTokens => (&mut self.max_tokens, &mut self.max_completion_tokens),
            MaxTokensField::MaxCompletionTokens => {
                (&mut self.max_completion_tokens, &mut self.max_tokens)
            }
        };
        *cap = Some(tokens);
        *other = None;
    }
}

/// Token counts the provider reported for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
}

/// Saturating: a provider's counts are outside input, and a wrapped sum would read as almost
/// nothing spent.
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
    }
}

impl Usage {
    /// The tokens a budget counts: read and written (saturating).
    pub(crate) fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// What one completion returned: the assistant message, why it stopped, and its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Usage,
}

impl Completion {
    /// Whether the completion stopped at its token cap rather than finishing.
    pub(crate) fn was_cut_off(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }

    /// The assistant message to append to the conversation.
    pub(crate) fn message(&self) -> ChatMessage {
        ChatMessage::Assistant {
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
        }
    }
}

/// A conservative token estimate (about three bytes a token; real tokenisers average more for
/// English), so budgets err on the side of fitting.
pub fn estimate_tokens(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| {
            let tool_calls = match m {
                ChatMessage::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .map(|c| c.function.name.len() + c.function.arguments.len() + c.id.len())
                    .sum(),
                _ => 0,
            };
            (m.content().len() + tool_calls) / 3 + 4
        })
        .sum()
}

/// The estimated prompt of a request: its messages and its tool schemas, which the server
/// puts into the prompt too.
pub fn estimate_request_tokens(request: &ChatRequest) -> usize {
    let tools = serde_json::to_string(&request.tools).map_or(0, |json| json.len() / 3);
    estimate_tokens(&request.messages) + tools
}

/// A fresh tool-call id, for calls a server sent without one and for text tool calls.
pub(crate) fn new_call_id() -> String {
    format!("call_{:016x}", random_u64())
}

/// 64 random bits from the standard library's per-process random hash keys: enough for
/// backoff jitter and call ids (nothing secret depends on them).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

fn function_type() -> String {
    "function".to_string()
}

/// Servers send `"content": null` beside tool calls; we hold that as an empty string.
fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_tool_call_message_never_has_null_content() {
        let msg = ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                kind: "function".into(),
                function: FunctionCall {
                    name: "current_time".into(),
                    arguments: "{}".into(),
                },
            }],
        };
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(json["content"], "");
        let back: ChatMessage = serde_json::from_value(json).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn image_parts_serialise_as_openai_content_parts_and_stay_out_of_history() {
        let msg = ChatMessage::user_with_image("what is this?", "data:image/jpeg;base64,AAAA");
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(
            json["content"][0],
            serde_json::json!({"type": "text", "text": "what is this?"})
        );
        assert_eq!(
            json["content"][1]["image_url"]["url"],
            "data:image/jpeg;base64,AAAA"
        );
        assert_eq!(serde_json::from_value::<ChatMessage>(json).unwrap(), msg);
        let kept = msg.without_images();
        assert_eq!(
            kept.content(),
            "what is this?\n[1 image(s) were attached here]"
        );
        assert_eq!(
            serde_json::to_string(&ChatMessage::user("hi")).unwrap(),
            r#"{"role":"user","content":"hi"}"#,
            "text stays a plain string"
        );
    }

    #[test]
    fn null_content_reads_as_empty() {
        let msg: ChatMessage =
            serde_json::from_str(r#"{"role":"assistant","content":null}"#).unwrap();
        assert_eq!(msg, ChatMessage::assistant(""));
    }
}
