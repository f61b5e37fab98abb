//! Why a completion failed.

/// Why a completion failed, typed so callers can branch (tell the user, trim, give up).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LlmError {
    #[error("the language model is unreachable ({attempts} attempts): {last}")]
    Unavailable { attempts: u32, last: String },
    #[error("the language model rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The prompt does not fit the model's context window (a 400 of its own kind).
    #[error("the conversation does not fit the model's context window: {message}")]
    ContextOverflow { message: String },
    #[error("the language model's answer could not be read: {0}")]
    Malformed(String),
    /// Not asked at all: the user's daily token budget is used up (see `budget`).
    #[error("today's token budget of {budget} tokens is used up")]
    OverBudget { budget: u64 },
}
