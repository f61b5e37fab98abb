//! The OpenAI-compatible chat-completions protocol: typed messages, requests and responses.
//!
//! The types serialise to what every common server accepts (OpenAI, OpenRouter, Ollama, vLLM,
//! llama.cpp's `llama-server`): an assistant message always carries a string `content`, even
//! beside tool calls, because some servers reject `null` there. Serialisation is deterministic
//! (fixed field order), which is what keeps prompts byte-stable for providers' prompt caches.
//!
//! ```
//! use heurist::llm::ChatMessage;
//! let json = serde_json::to_string(&ChatMessage::assistant("hi")).unwrap();
//! assert_eq!(json, r#"{"role":"assistant","content":"hi"}"#);
//! ```

mod client;
mod concurrency;
mod context;
mod endpoints;
mod error;
pub mod extraction;
pub mod fallback;
pub mod reasoning;
pub(crate) mod synthesis;
pub mod text_calls;
pub(crate) mod transcription;
mod types;
pub mod voice_note;
mod wire;

pub(crate) use concurrency::Priority;
pub use endpoints::LlmClient;
pub(crate) use endpoints::{Served, served};
pub(crate) use error::LlmError;
pub(crate) use types::new_call_id;
pub use types::{
    ChatMessage, ChatRequest, Completion, ContentPart, FunctionCall, FunctionSpec, ImageUrl,
    ProviderRouting, StreamOptions, ToolCall, ToolSpec, Usage, UserContent,
    estimate_request_tokens, estimate_tokens,
};
