//! The quality gate on learned lessons: a lesson with nothing concrete in it is not stored,
//! and among stored ones the specific outrank the vague at equal fit.
//!
//! With Qwen2.5-Coder-1.5B the vague lessons ("Use the correct tool: ensure you are using the
//! correct tool to check the ticket status", "Verify the id is correct") filled the learned
//! block and outranked the one precise lesson, and changed nothing the model did. What makes
//! a lesson work is what it names: a format, an argument's shape, a tool, a value, an order of
//! steps.
//!
//! A lesson is *concrete* when it holds a specific token (a number, a code-like word such as
//! `ticket_lookup`, `ABC-004411` or `UTC`, a quoted or back-ticked value, a file name), or at
//! least [`MIN_CONTENT_WORDS`] words that are neither stopwords nor general advice words
//! ("correct", "ensure", "verify", "careful", "tool", ...).
//!
//! ```
//! use heurist::learning::quality::concrete;
//! assert!(!concrete("Be careful and verify the result is correct"));
//! assert!(concrete("When calling ticket_lookup, pad the id: ABC-004411"));
//! assert!(concrete("Confirm the time zone before converting meeting times"));
//! ```

use super::text::{STOPWORDS, stem, words};

/// Content words a lesson without a specific token needs to say something.
pub(crate) const MIN_CONTENT_WORDS: usize = 3;

/// Words of general advice: they fit every turn, so they say nothing about any.
const GENERIC: &[&str] = &[
    "accurate",
    "accurately",
    "action",
    "actions",
    "alway",
    "always",
    "answer",
    "answers",
    "approach",
    "appropriate",
    "argument",
    "arguments",
    "assist",
    "assistant",
    "available",
    "avoid",
    "best",
    "better",
    "call",
    "calls",
    "careful",
    "carefully",
    "case",
    "cases",
    "change",
    "changing",
    "check",
    "clear",
    "clearly",
    "clue",
    "clues",
    "confirm",
    "consider",
    "contact",
    "contacting",
    "correct",
    "correctly",
    "data",
    "detail",
    "details",
    "different",
    "documentation",
    "double",
    "due",
    "effective",
    "ensure",
    "error",
    "errors",
    "exact",
    "exactly",
    "expected",
    "fail",
    "failed",
    "failing",
    "fails",
    "fix",
    "follow",
    "format",
    "forum",
    "function",
    "functioning",
    "future",
    "good",
    "help",
    "helpful",
    "important",
    "incorrect",
    "incorrectly",
    "info",
    "information",
    "input",
    "inputs",
    "instruction",
    "instructions",
    "issue",
    "issues",
    "make",
    "match",
    "matching",
    "message",
    "messages",
    "necessary",
    "never",
    "ones",
    "output",
    "outputs",
    "problem",
    "problems",
    "proper",
    "properly",
    "provide",
    "provided",
    "query",
    "question",
    "questions",
    "read",
    "relevant",
    "report",
    "reported",
    "reports",
    "request",
    "requests",
    "respond",
    "response",
    "responses",
    "result",
    "results",
    "similar",
    "specific",
    "step",
    "steps",
    "support",
    "supported",
    "sure",
    "task",
    "tasks",
    "team",
    "thing",
    "things",
    "tool",
    "tools",
    "try",
    "understand",
    "used",
    "user",
    "users",
    "using",
    "valid",
    "validate",
    "value",
    "values",
    "verify",
    "way",
    "went",
    "wrong",
];

/// Whether `word` (lower-case) is a word of general advice, or one's stem.
pub(crate) fn is_generic(word: &str) -> bool {
    GENERIC.contains(&word) || GENERIC.contains(&stem(word).as_str())
}

/// Whether `text` says something concrete enough to store (see the module doc).
pub fn concrete(text: &str) -> bool {
    specificity(text) > 0.0
}

/// How specific a lesson is: 1 with a specific token, 0.5 with enough content words, 0 for
/// general advice. Retrieval weighs a lesson's rank by it.
pub(crate) fn specificity(text: &str) -> f32 {
    if text.split_whitespace().any(specific_token) {
        return 1.0;
    }
    let content = words(text)
        .into_iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .filter(|w| !GENERIC.contains(&w.as_str()) && !GENERIC.contains(&stem(w).as_str()))
        .count();
    if content >= MIN_CONTENT_WORDS {
        0.5
    } else {
        0.0
    }
}

/// A number, a code-like word (`snake_case`, `kebab-case` with a digit, `CamelCase`, an
/// acronym, `a.b`), or a quoted or back-ticked value.
fn specific_token(token: &str) -> bool {
    if token.contains('`') || token.starts_with(['"', '\'', '«', '“']) {
        return true;
    }
    let word = token.trim_matches(|c: char| !c.is_alphanumeric());
    if word.is_empty() {
        return false;
    }
    let has_digit = word.chars().any(|c| c.is_ascii_digit());
    let inner_mark = word.len() >= 4 && word.contains(['_', '.', '/', '=', ':']);
    let caps = word.chars().filter(char::is_ascii_uppercase).count();
    let acronym = caps >= 2
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    let camel = caps >= 1
        && word.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric());
    has_digit || inner_mark || acronym || camel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vague_lessons_are_not_concrete_and_specific_ones_are() {
        struct Case {
            name: &'static str,
            text: &'static str,
            specificity: f32,
        }
        let cases = [
            // What Qwen2.5-Coder-1.5B wrote, and lessons like them.
            Case {
                name: "qwen: use the correct tool",
                text: "Use the correct tool: ensure you are using the correct tool to check the \
                       ticket status.",
                specificity: 0.0,
            },
            Case {
                name: "qwen: verify the id",
                text: "Verify the id is correct.",
                specificity: 0.0,
            },
            Case {
                name: "qwen on llama-server: change the arguments to match the error",
                text: "When a tool fails with an error, try changing the arguments to match the \
                       error message.",
                specificity: 0.0,
            },
            Case {
                name: "be careful",
                text: "Be careful and double check the results before answering.",
                specificity: 0.0,
            },
            Case {
                name: "provide accurate information",
                text: "Always provide accurate and relevant information to the user.",
                specificity: 0.0,
            },
            // What Qwen2.5-Coder-1.5B's reflections stored in the benefit benchmark's run of
            // 2026-12-02 (llama-server, learning on), beside the lessons the bot read itself.
            Case {
                name: "qwen run: clues, documentation, support forum",
                text: "When a tool call fails with an error, check the error message for clues \
                       about what went wrong. If the error message is not clear, try searching \
                       for the error message on the tool's documentation or support forum.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: supported arguments",
                text: "If a tool call fails due to an argument that is not supported by the \
                       tool, check the tool's documentation for the supported arguments and use \
                       the correct ones.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: another tool or its support team",
                text: "If a tool call fails due to a tool that is not available or not \
                       functioning correctly, try using a different tool or contacting the \
                       tool's support team.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: understand what went wrong",
                text: "When you need to avoid errors, always check the error message provided by \
                       the tool to understand what went wrong and how to fix it.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: the expected format",
                text: "When a tool call fails, try changing the arguments to match the expected \
                       format.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: read the error carefully",
                text: "When the tool reports an error, read the error message carefully to \
                       understand what went wrong.",
                specificity: 0.0,
            },
            Case {
                name: "qwen run: follow the instructions",
                text: "When a tool is used incorrectly, make sure to follow the instructions \
                       carefully.",
                specificity: 0.0,
            },
            // Concrete, from the same run: a tool's own refusal, a call that worked, an order.
            Case {
                name: "qwen run: the refusal the bot read",
                text: "When calling desk__booking: its error said \"cannot read the date \
                       '2026-12-14': dates are written DD.MM.YYYY (this one is 14.12.2026)\"",
                specificity: 1.0,
            },
            Case {
                name: "qwen run: lock before deploy, in plain words",
                text: "When the service is not locked, call lock with the service name first, \
                       then deploy.",
                specificity: 0.5,
            },
            Case {
                name: "a format in plain words",
                text: "Format dates as day, month and year with dots between them",
                specificity: 0.5,
            },
            Case {
                name: "support tickets routed by subject",
                text: "Route support tickets about billing to the accounts team",
                specificity: 0.5,
            },
            // Concrete.
            Case {
                name: "qwen: the format rule",
                text: "When calling ticket_lookup, write the id as ABC- plus six digits: 4411 \
                       becomes ABC-004411.",
                specificity: 1.0,
            },
            Case {
                name: "a tool named in back-ticks",
                text: "Call `fetch_url` on the changelog before answering about versions",
                specificity: 1.0,
            },
            Case {
                name: "an acronym",
                text: "Give times in UTC and in the user's zone",
                specificity: 1.0,
            },
            Case {
                name: "a procedure in plain words",
                text: "Confirm the time zone before converting meeting times",
                specificity: 0.5,
            },
            Case {
                name: "an output convention",
                text: "Write temperatures in Celsius with one decimal",
                specificity: 0.5,
            },
        ];
        for case in cases {
            assert_eq!(specificity(case.text), case.specificity, "{}", case.name);
            assert_eq!(concrete(case.text), case.specificity > 0.0, "{}", case.name);
        }
    }
}
