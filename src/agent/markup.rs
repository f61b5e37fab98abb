//! The chat template's markup in a final answer: a tool result the model made up, a call it
//! did not finish, or the template's tags with nothing else. Such an answer is no answer
//! (see [`super::parrot`]).

/// The tags chat templates wrap the tool list, tool calls and results in (Qwen's, Hermes'):
/// in a final answer they are a result the model made up, a call it did not finish, or the
/// template written back.
const TOOL_MARKUP: &[&str] = &[
    "<tool_response>",
    "</tool_response>",
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
];

/// Whether the answer is template markup: a line outside code (fences) that begins with one
/// of the [`TOOL_MARKUP`] tags, as the template writes them (an answer that quotes a tag in
/// code, or mentions one inside a sentence, is not markup), or nothing but tags outside code
/// ([`only_tags`]). Qwen2.5-Coder-1.5B
/// in one chat (the benefit benchmark, seed 13, learning off), after a refused booking call,
/// answered "<tools></tools>" twice, and both were shown.
pub(super) fn has_tool_markup(answer: &str) -> bool {
    let mut in_fence = false;
    only_tags(answer)
        || answer.lines().any(|line| {
            let line = line.trim_start();
            if line.starts_with("```") {
                in_fence = !in_fence;
                return false;
            }
            let lower = line.to_lowercase();
            !in_fence && TOOL_MARKUP.iter().any(|tag| lower.starts_with(tag))
        })
}

/// Whether `answer` holds at least one tag (`<name>`, `</name>`, `<name/>`, `<|name|>`) and,
/// without its tags, nothing but white space and punctuation: whatever template or tag the
/// model wrote, it said nothing. A tag is a name alone: `<https://example.com>` (a link) and
/// `<3` are text; an answer with code (a backtick) quotes its tags (`` `<br>` ``), and a sign
/// or an emoji between tags (`<b>€</b>`) is said.
fn only_tags(answer: &str) -> bool {
    if answer.contains('`') {
        return false;
    }
    let says = |text: &str| {
        text.chars()
            .any(|c| !c.is_whitespace() && !c.is_ascii_punctuation())
    };
    let mut rest = answer;
    let mut tags = 0;
    let mut said = false;
    while let Some(open) = rest.find('<') {
        said |= says(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('>') {
            Some(close) if is_tag(&after[..close]) => {
                tags += 1;
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    said |= says(rest);
    tags > 0 && !said
}

/// Whether `inner` (what stands between `<` and `>`) is a tag's name, closing or
/// self-closing: ASCII letters, digits, `_`, `-` and `|`, with a letter.
fn is_tag(inner: &str) -> bool {
    let name = inner.strip_prefix('/').unwrap_or(inner);
    let name = name.strip_suffix('/').unwrap_or(name);
    name.chars().any(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_markup_counts_only_as_the_template_writes_it() {
        assert!(has_tool_markup(
            "<tool_response>\n{\"units\": 12}\n</tool_response>"
        ));
        assert!(has_tool_markup("Sure.\n<tool_call>\n{\"name\": \"x\"}"));
        assert!(has_tool_markup(
            "<tools>\n{\"type\": \"function\"}\n</tools>"
        ));
        assert!(!has_tool_markup("Qwen wraps calls in `<tool_call>` tags."));
        assert!(!has_tool_markup(
            "```\n<tool_call>\n{\"name\": \"x\"}\n</tool_call>\n```"
        ));
    }

    #[test]
    fn an_answer_of_tags_alone_is_markup_whatever_the_tags() {
        for answer in [
            "<tools></tools>",
            " <tools>\n</tools> ",
            "<|im_end|>",
            "<answer></answer>",
            "<br/>",
            "<result> </result>.",
        ] {
            assert!(has_tool_markup(answer), "{answer:?}");
        }
        for answer in [
            "",
            "<b>12 units</b>",
            "<https://example.com>",
            "<3",
            "Item <42> is out of stock.",
            "a < b and c > d",
            "Room <Delta>",
            "`<br>`",
            "```\n<div></div>\n```",
            "<b>\u{1F44D}</b>",
            "<b>€</b>",
        ] {
            assert!(!has_tool_markup(answer), "{answer:?}");
        }
    }
}
