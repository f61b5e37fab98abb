//! User-facing texts of the agent layer (see [`crate::texts`]): the progress line shown while a
//! tool runs, what the user reads when the language model failed or gave no answer, and the
//! daily budget's notice. Prompts and hints written for the model stay beside the code that
//! sends them: they are part of the agent's protocol, not something a user reads.

/// The progress line while `fetch_url` reads a page on `host` ("a page" when the URL is unreadable).
pub(crate) fn fetching(host: &str) -> String {
    format!("🔎 fetching {host}…")
}

/// The progress line while `web_search` runs.
pub(crate) const SEARCHING: &str = "🔎 searching the web…";

/// The progress line while `remember` saves a fact in the user's personal memory.
pub(crate) const REMEMBERING: &str = "🧠 remembering…";

/// The progress line while any other tool (an MCP tool, `current_time`) runs.
pub(crate) fn running(tool: &str) -> String {
    format!("⚙️ running {tool}…")
}

/// A call's argument the bot wrote in the form its tool taught (see `agent::rewriting`).
pub(crate) fn rewritten(tool: &str, argument: &str, from: &str, to: &str) -> String {
    let short = |s: &str| -> String {
        let mut cut: String = s.chars().take(40).collect();
        if cut.len() < s.len() {
            cut.push('…');
        }
        cut
    };
    format!(
        "✏️ {tool}: {} {} → {}, the form it asked for",
        short(argument),
        short(from),
        short(to)
    )
}

/// The endpoint, key or model is set up wrongly: nothing the user can do; the admins are told.
pub(crate) const LLM_MISCONFIGURED: &str = "Sorry, I cannot answer right now: the bot's language model settings need fixing. I told the bot's admins.";

/// The provider answered 403: a moderation refusal (OpenRouter) or a key without access to the
/// model. Not handed to a fallback model (see `llm::fallback`); the admins are alerted as for a
/// setup error.
pub(crate) const LLM_FORBIDDEN: &str = "Sorry, the language model's provider refused this request: its moderation may have flagged it, or the bot's key may lack access to this model. I did not send it to another model; I told the bot's admins.";

/// The endpoint could not be reached (after the client's retries).
pub(crate) const LLM_UNREACHABLE: &str = "Sorry, the language model is not reachable right now.";

/// The provider refused the request (a 4xx that is not a setup error).
pub(crate) const LLM_REJECTED: &str =
    "Sorry, the language model refused this request. Please rephrase it or try again later.";

/// The conversation does not fit the context window even after older messages were dropped.
pub(crate) const LLM_CONTEXT_OVERFLOW: &str = "Sorry, this conversation no longer fits the model's context window, even after I dropped older messages. Send /clear to start afresh.";

/// The provider's answer could not be parsed.
pub(crate) const LLM_MALFORMED: &str = "Sorry, the language model sent an answer I could not read.";

/// The model gave no answer, even when asked again, after `tool` failed with `error` (already
/// cut to a quotable length).
pub(crate) fn no_answer_after_failure(tool: &str, error: &str) -> String {
    format!(
        "Sorry, I could not finish this. The tool `{tool}` failed ({error}), and the model gave no answer after it."
    )
}

/// The model gave no answer, even when asked again, and no tool had failed.
pub(crate) const NO_ANSWER: &str = "Sorry, the model gave no answer to this message.";

/// The user's daily token `budget` is used up.
pub(crate) fn budget_spent(budget: u64) -> String {
    format!("You have used today's budget of {budget} tokens. It renews at midnight UTC.")
}

/// The note under an answer a fallback model gave, because the chat's own model failed.
pub(crate) fn answered_by(answering: &str, chosen: &str) -> String {
    format!("\n\n_(Answered by `{answering}`: `{chosen}` is not available right now.)_")
}
