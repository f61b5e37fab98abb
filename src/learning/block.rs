//! The block learning adds in front of a user message (matched skills' instructions and learned
//! lessons): its markers, and reading it back out of a message.
//!
//! ```
//! use heurist::learning::block::{context_of, without_context};
//! let content = "[Context from Heurist for this message: skills and learned heuristics, \
//!     not written by the user]\n## Learned Heuristics\n- tip\n[End of context]\n\nhi";
//! assert_eq!(without_context(content), "hi");
//! assert_eq!(context_of(content), Some("## Learned Heuristics\n- tip\n"));
//! assert_eq!(context_of("hi"), None);
//! ```

/// The opening and closing lines of the block learning adds to a user message.
pub(crate) const CONTEXT_OPEN: &str = "[Context from Heurist for this message: skills and learned heuristics, not written by the user]\n";
pub(crate) const CONTEXT_CLOSE: &str = "[End of context]\n\n";

/// A user message's content without the block learning put in front of it.
pub fn without_context(content: &str) -> &str {
    context_and_text(content).map_or(content, |(_, text)| text)
}

/// The block learning put in front of a user message's content, if it has one.
pub fn context_of(content: &str) -> Option<&str> {
    context_and_text(content).map(|(block, _)| block)
}

/// The block and the text after it.
fn context_and_text(content: &str) -> Option<(&str, &str)> {
    content
        .strip_prefix(CONTEXT_OPEN)?
        .split_once(CONTEXT_CLOSE)
}
