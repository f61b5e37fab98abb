//! Echoes: a lesson the reflection only repeats from what the turn was given.
//!
//! The reflection sees the turn's messages byte for byte, context blocks included (so the
//! provider's prompt cache serves it up to the reflection prompt). The model can then write
//! back a lesson or a skill's instruction it was shown; counted as learned again, that
//! echo would vouch for itself. So a lesson is an echo, and dropped, when it is the same
//! lesson (word-set Jaccard at the dedupe threshold) as a line of a block the prompt carried,
//! or when nearly all its terms come from one block.
//!
//! ```
//! use heurist::learning::echo::{given_blocks, is_echo};
//! let block = "## Learned Heuristics\n- When converting times, name IANA zones.\n";
//! let blocks = vec![block.to_string()];
//! assert!(is_echo("when converting times, name IANA zones", &blocks, 0.8));
//! assert!(!is_echo("When a ticket id is asked, pad it to six digits.", &blocks, 0.8));
//! assert!(given_blocks(&[]).is_empty());
//! ```

use super::block::context_of;
use super::text::text_similarity;
use crate::llm::ChatMessage;

/// The context blocks (skills' instructions and learned lessons) the user messages of
/// `messages` carry, in order.
pub fn given_blocks(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(m, ChatMessage::User { .. }))
        .filter_map(|m| context_of(m.content()).map(str::to_string))
        .collect()
}

/// Whether `lesson` repeats a line of one of `blocks` (see the module doc); `threshold` is
/// the dedupe threshold that makes two lessons the same.
pub fn is_echo(lesson: &str, blocks: &[String], threshold: f32) -> bool {
    blocks
        .iter()
        .flat_map(|block| block.lines())
        .map(|line| line.trim_start_matches("- "))
        .any(|line| text_similarity(line, lesson) >= threshold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learning::block::{CONTEXT_CLOSE, CONTEXT_OPEN};

    const SKILL: &str = "## Skill: time zones\nAlways name the IANA zone (Europe/Berlin) and \
        say whether daylight saving applies.\n## Learned Heuristics\n- When a date is \
        ambiguous, write it as YYYY-MM-DD.\n";

    #[test]
    fn echoes_are_told_from_new_lessons() {
        let blocks = vec![SKILL.to_string()];
        let cases = [
            (
                "a heuristic line, reworded in case",
                "when a date is ambiguous, write it as yyyy-mm-dd",
                true,
            ),
            (
                "a skill's line, word for word",
                "always name the IANA zone (Europe/Berlin) and say whether daylight saving applies",
                true,
            ),
            (
                "a new lesson in the skill's words",
                "When daylight saving applies, name the IANA zone and say whether.",
                false,
            ),
            (
                "a new lesson on the same subject",
                "When the user gives a city, look up its zone with get_time before answering.",
                false,
            ),
            (
                "a lesson on another subject",
                "When pip fails, pin the version.",
                false,
            ),
            ("no terms at all", "the and of", false),
        ];
        for (name, lesson, echo) in cases {
            assert_eq!(is_echo(lesson, &blocks, 0.8), echo, "{name}");
        }
        assert!(!is_echo(
            "When a date is ambiguous, write it as YYYY-MM-DD.",
            &[],
            0.8
        ));
    }

    #[test]
    fn blocks_are_read_from_user_messages_only() {
        let with_block = format!("{CONTEXT_OPEN}{SKILL}{CONTEXT_CLOSE}what time is it?");
        let messages = [
            ChatMessage::system("you are helpful"),
            ChatMessage::user(&with_block),
            ChatMessage::assistant("noon"),
            ChatMessage::user("and in Lima?"),
        ];
        assert_eq!(given_blocks(&messages), [SKILL]);
    }
}
