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

/// Words of general advice: they fit every task, so they say nothing about any.
const GENERIC: &[&str] = &[
    "accurate",
    "accurately",
    "action",
    "actions",
    "alway",
    "always",
    "answer",
    "answers",
    "appropriate",
    "approach",
    "assist",
    "assistant",
    "avoid",
    "best",
    "better",
    "careful",
    "carefully",
    "case",
    "cases",
    "check",
    "clear",
    "clearly",
    "confirm",
    "consider",
    "correct",
    "correctly",
    "data",
    "detail",
    "details",
    "double",
    "effective",
    "ensure",
    "error",
    "errors",
    "argument",
    "arguments",
    "change",
    "changing",
    "exact",
    "fail",
    "failed",
    "failing",
    "fails",
    "match",
    "matching",
    "message",
    "messages",
    "exactly",
    "follow",
    "future",
    "good",
    "help",
    "helpful",
    "important",
    "info",
    "information",
    "input",
    "inputs",
    "issue",
    "issues",
    "make",
    "necessary",
    "never",
    "output",
    "outputs",
    "proper",
    "properly",
    "provide",
    "provided",
    "query",
    "question",
    "questions",
    "relevant",
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
    "sure",
    "task",
    "tasks",
    "thing",
    "things",
    "tool",
    "tools",
    "try",
    "understand",
    "user",
    "users",
    "using",
    "valid",
    "validate",
    "value",
    "values",
    "verify",
    "way",
];

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
