//! Which of the offered tools a message is likely to call, from the tools' names and
//! descriptions alone: lessons about a tool fit a message that needs it even when they share
//! no word with it (see [`super::tool_lessons`]).

use std::collections::HashSet;

use super::text;
use crate::llm::ToolSpec;

/// The offered `tools` that `message` is likely to call: a word of the tool's name (its MCP
/// short name split at `_` and `-`: "ticket" in `desk__ticket_status`) is a term of the
/// message, or two distinctive terms of its description are. Terms are stemmed and without
/// stopwords ([`text::terms`]), so "tickets" fits `ticket` and "what is" fits nothing.
///
/// ```
/// use heurist::learning::likely_tools;
/// use heurist::llm::ToolSpec;
/// use serde_json::json;
/// let tools = [
///     ToolSpec::function("desk__ticket", "Look up a support ticket's status", json!({})),
///     ToolSpec::function("fetch_url", "Fetch a web page and return its text", json!({})),
/// ];
/// assert_eq!(likely_tools("Can you check my tickets 5127?", &tools), ["desk__ticket"]);
/// assert_eq!(likely_tools("What is the status of my support request?", &tools), ["desk__ticket"]);
/// assert!(likely_tools("Write me a poem", &tools).is_empty());
/// ```
pub fn likely_tools<'a>(
    message: &str,
    tools: impl IntoIterator<Item = &'a ToolSpec>,
) -> Vec<String> {
    let message: HashSet<String> = text::terms(message).into_iter().collect();
    if message.is_empty() {
        return Vec::new();
    }
    tools
        .into_iter()
        .filter(|tool| {
            let name = tool.function.name.as_ref();
            let short = name.rsplit("__").next().unwrap_or(name);
            let by_name = text::terms(&short.replace(['_', '-'], " "))
                .iter()
                .any(|term| message.contains(term));
            let mut described: Vec<String> = text::terms(&tool.function.description);
            described.sort_unstable();
            described.dedup();
            let by_description = described.iter().filter(|t| message.contains(*t)).count() >= 2;
            by_name || by_description
        })
        .map(|tool| tool.function.name.to_string())
        .collect()
}
