//! Grounded lessons: a lesson the model writes is stored only if it carries something concrete
//! from its own turn's evidence — a value or format a tool's refusal stated, an argument of the
//! call that then worked, or the user's correction in their words ([`Grounds`], read off the
//! evidence by `agent::evidence::grounds`) — checked mechanically against that evidence.
//!
//! With Qwen2.5-Coder-1.5B, lessons such as "When the tool reports an error, change the
//! arguments to ensure the SKU is correctly formatted." passed a gate of phrase lists, and the
//! model then gave one of them as its answer to three questions. Every new vague wording got
//! through a list; none of them carries what the error said (`SKU-004411`), which is what the
//! next turn needs. A lesson is *grounded* when it holds one of the evidence's values (a token
//! with a digit or a code-like token with inner `-_./:#=`, at least three characters, in the
//! refusal's text or in the leaves of the working call's arguments; a number must be the whole
//! token), or enough of the content words the evidence states that the request did not already
//! say: [`CORRECTION_WORDS`] of the user's correction, [`STATED_WORDS`] of a tool's refusal
//! that gave no values (a rule stated in words only: "call lock first, then deploy"). Where the
//! refusal gave values, a lesson must carry one: Qwen2.5-Coder-1.5B's "check the weight, as it
//! should be a whole number of grams" left out the example (`0.3 kg is 300`) that the next
//! call needs. The bot's own lessons, read off the calls
//! (`evidence::proven_lessons`), are grounded by construction.
//!
//! A lesson that quotes the bot's own lesson of the same turn (a sentence's worth of it,
//! [`QUOTE_CHARS`]) and adds advice around it ("… its error said '…', consider using a
//! different tool") is the bot's lesson plus noise: only the concrete part is kept, which is
//! the bot's own lesson, already learned from the same turn ([`quotes_proven`]).
//!
//! ```
//! use heurist::learning::grounding::{grounded, value_tokens};
//! use heurist::store::Grounds;
//! let error = "SKUs are written SKU- followed by the item number as six digits (item 4411 is SKU-004411)";
//! let grounds = Grounds { values: value_tokens(error), ..Grounds::default() };
//! assert!(grounded("When checking stock, write SKUs as SKU-004411: SKU- and six digits.", &grounds));
//! assert!(!grounded("When the tool reports an error, make sure the SKU is correctly formatted.", &grounds));
//! ```

use super::quality::is_generic;
use super::text::{STOPWORDS, stem, words};
use crate::store::Grounds;

/// Characters of the bot's own lesson a model's lesson must repeat verbatim to count as
/// quoting it: more than a restated rule shares with the error that stated it ("TCK- and six
/// digits, zero-padded" is 33), less than a quoted error.
pub const QUOTE_CHARS: usize = 60;

/// Content words of the user's correction a lesson about it must carry.
pub const CORRECTION_WORDS: usize = 2;

/// Content words of a tool's refusal a lesson without its values must carry: more than a
/// correction's, as a refusal's words name the tool's subject too ("SKUs are written …").
pub const STATED_WORDS: usize = 3;

/// The shortest value that grounds a lesson (a two-character token is too common to say
/// anything).
const MIN_VALUE_CHARS: usize = 3;

/// The concrete values in `text`, lower-cased and deduplicated: tokens with a digit, and
/// code-like tokens (an inner or trailing `-_./:#=`, as `SKU-`, `DD.MM.YYYY`, `desk__lock`).
/// Links are not values (a lesson with one is never stored anyway).
pub fn value_tokens(text: &str) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for token in text.split_whitespace() {
        let punctuation = |c: char| ",;:!?()[]{}\"'«»“”‘’`<>".contains(c);
        // A quoted value that ends a sentence ("'SKU-004411'.") is the value alone.
        let word = token
            .trim_start_matches(punctuation)
            .trim_end_matches(|c: char| c == '.' || punctuation(c));
        if word.contains("://") || word.chars().count() < MIN_VALUE_CHARS {
            continue;
        }
        let digit = word.chars().any(|c| c.is_ascii_digit());
        let code = word.chars().skip(1).any(|c| "-_./:#=".contains(c))
            && word.chars().any(char::is_alphanumeric);
        let value = word.to_lowercase();
        if (digit || code) && !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// The values of a call's JSON `arguments`: those of its leaves (strings and numbers), not of
/// its keys; of the whole text when it is not JSON.
pub fn argument_values(arguments: &str) -> Vec<String> {
    fn leaves(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Number(n) => out.push(n.to_string()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            _ => {}
        }
    }
    let Ok(parsed) = serde_json::from_str::<serde_json::Value>(arguments) else {
        return value_tokens(arguments);
    };
    let mut texts = Vec::new();
    leaves(&parsed, &mut texts);
    let mut values: Vec<String> = Vec::new();
    for value in texts.iter().flat_map(|t| value_tokens(t)) {
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// The content words of `text`, stemmed, deduplicated: at least three letters, neither
/// stopwords nor words of general advice.
pub fn content_words(text: &str) -> Vec<String> {
    let mut stems: Vec<String> = words(text)
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| !is_generic(w) && !w.chars().all(|c| c.is_ascii_digit()))
        .map(|w| stem(&w))
        .collect();
    stems.sort();
    stems.dedup();
    stems
}

/// Whether `lesson` carries something concrete from `grounds` (see the module doc).
pub fn grounded(lesson: &str, grounds: &Grounds) -> bool {
    let lower = without_refused(lesson, &grounds.refused);
    let lesson_values = value_tokens(&lower);
    let carries_value = grounds.values.iter().any(|value| {
        if value.chars().all(|c| c.is_ascii_digit()) {
            lesson_values.contains(value)
        } else {
            lower.contains(value.as_str())
        }
    });
    let said = content_words(lesson);
    let shared = |words: &[String]| said.iter().filter(|w| words.contains(w)).count();
    // A refusal that gave values (an example, a format) is carried by one of them: its rule
    // retold in words alone ("a whole number of grams") is what a small model rewrites
    // vaguely next time, and the bot's own lesson already quotes the refusal.
    carries_value
        || shared(&grounds.corrected) >= CORRECTION_WORDS
        || grounds.values.is_empty() && shared(&grounds.stated) >= STATED_WORDS
}

/// `lesson` lower-cased, without its tokens that are a refused call's values (`refused`): a
/// value that failed grounds nothing, even where a value of the refusal is part of it. One
/// chat, seed 6 (Qwen2.5-Coder-1.5B): after `stock_level({"sku":"SKU-0005127"})` was refused
/// with "SKUs are written SKU- followed by the item number as six digits", the lesson "ensure
/// the SKU is in the format 'SKU-0005127'" was stored, grounded by the `sku-` inside the value
/// that had failed; the next answers gave that wrong form back.
fn without_refused(lesson: &str, refused: &[String]) -> String {
    lesson
        .split_whitespace()
        .filter(|token| {
            let value = value_tokens(token);
            value.is_empty() || !value.iter().all(|v| refused.contains(v))
        })
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether `lesson` repeats a sentence's worth ([`QUOTE_CHARS`]) of one of the bot's own
/// lessons `proven` verbatim (case and spacing aside): then its concrete part is that lesson.
pub fn quotes_proven(lesson: &str, proven: &[String]) -> bool {
    let lesson = folded(lesson);
    proven.iter().any(|own| {
        let own = folded(own);
        let chars: Vec<char> = own.chars().collect();
        chars.len() >= QUOTE_CHARS
            && chars.windows(QUOTE_CHARS).any(|window| {
                let part: String = window.iter().collect();
                lesson.contains(&part)
            })
    })
}

/// `text` lower-cased with its runs of spaces folded to one, so a quote matches however the
/// model spaced it.
fn folded(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal the issue's stock tool gave, and the call that then worked.
    const SKU_ERROR: &str = "SKUs are written SKU- followed by the item number as six digits, \
        zero-padded (item 4411 is SKU-004411)";

    /// What the evidence of "How many units of item 982 are in stock?" states, refused once
    /// and then answered.
    fn sku_grounds() -> Grounds {
        let mut values = value_tokens(SKU_ERROR);
        values.extend(argument_values(r#"{"sku":"SKU-000982"}"#));
        let asked = content_words("How many units of item 982 are in stock?");
        let stated = content_words(SKU_ERROR)
            .into_iter()
            .filter(|w| !asked.contains(w))
            .collect();
        Grounds {
            values,
            stated,
            corrected: Vec::new(),
            refused: Vec::new(),
        }
    }

    #[test]
    fn values_are_read_off_text() {
        let cases = [
            (
                "a house format",
                SKU_ERROR,
                vec!["sku-", "4411", "sku-004411"],
            ),
            (
                "a date format",
                "cannot read the date '2026-12-14': dates are written DD.MM.YYYY",
                vec!["2026-12-14", "dd.mm.yyyy"],
            ),
            (
                "a tool to call first",
                "the service is not locked: call desk__lock first",
                vec!["desk__lock"],
            ),
            ("plain prose", "The tool reported an error.", vec![]),
            ("a link is no value", "see https://example.com/x", vec![]),
            (
                "an apostrophe is no value",
                "the user's SKU isn't right",
                vec![],
            ),
        ];
        assert_eq!(
            argument_values(r#"{"sku":"SKU-000982","qty":3,"note":"a b"}"#),
            ["sku-000982"],
            "the leaves' values, not the keys"
        );
        for (name, text, want) in cases {
            let got = value_tokens(text);
            for value in &want {
                assert!(
                    got.contains(&value.to_string()),
                    "{name}: {value} in {got:?}"
                );
            }
            if want.is_empty() {
                assert!(got.is_empty(), "{name}: {got:?}");
            }
        }
    }

    /// The lessons the issue saw stored, and many more wordings a model writes every run: none
    /// of the vague ones carries the format, so none gets through, however it is worded.
    #[test]
    fn vague_lessons_are_refused_in_any_wording() {
        let grounds = sku_grounds();
        let situations = [
            "When the tool reports an error",
            "When the tool fails repeatedly with the same error",
            "If a stock lookup fails",
            "When checking warehouse stock",
            "Whenever inv__stock_level returns an error",
            "When calling inv__stock_level",
            "After a failed call",
        ];
        let actions = [
            "change the arguments to ensure the SKU is correctly formatted.",
            "consider changing the SKU or using a different tool.",
            "double-check the SKU and try again.",
            "read the error message carefully and adjust the request.",
            "make sure the SKU matches the expected format before calling.",
            "use the proper SKU format required by the inventory system.",
            "contact support or consult the documentation.",
            "retry with a valid SKU.",
            "verify the item number is right.",
        ];
        for situation in situations {
            for action in actions {
                let lesson = format!("{situation}, {action}");
                assert!(!grounded(&lesson, &grounds), "stored: {lesson}");
            }
        }
        let concrete = [
            "When checking stock, write the SKU as SKU- and the item number in six digits: item 4411 is SKU-004411.",
            "When calling inv__stock_level, pass sku like SKU-000982.",
            "Stock SKUs start with SKU- and are zero-padded to six digits.",
            "When asking for stock, write the item number as six digits, zero-padded.",
        ];
        for lesson in concrete {
            assert!(grounded(lesson, &grounds), "refused: {lesson}");
        }
    }

    /// A refusal's rule in words grounds a lesson only where the refusal gave no values; with
    /// them, the lesson must carry one (Qwen2.5-Coder-1.5B's shipping lessons, issue 34's
    /// benchmark).
    #[test]
    fn a_rule_in_words_needs_the_refusals_values_where_it_gave_some() {
        let refusal = "cannot quote the weight: weights are whole grams, digits only, without a \
                       unit (a 0.3 kg parcel is 300)";
        let asked = content_words("What does it cost to ship a 1.5 kg parcel?");
        let stated: Vec<String> = content_words(refusal)
            .into_iter()
            .filter(|w| !asked.contains(w))
            .collect();
        let with_values = Grounds {
            values: value_tokens(refusal),
            stated: stated.clone(),
            corrected: Vec::new(),
            refused: Vec::new(),
        };
        let cases = [
            "When you are asked to ship a parcel, check the weight, as it should be a whole number of grams without a unit.",
            "If the weight is not a whole number of grams, or if it has a unit (like kg or lbs), you may need to adjust the weight to a whole number before using the shipping quote tool.",
        ];
        for lesson in cases {
            assert!(!grounded(lesson, &with_values), "stored: {lesson}");
        }
        assert!(grounded(
            "When quoting shipping, give the weight in whole grams: a 0.3 kg parcel is 300.",
            &with_values
        ));
        let lock = "service is not locked: call lock with service first, then deploy";
        let words_only = Grounds {
            values: value_tokens(lock),
            stated: content_words(lock),
            corrected: Vec::new(),
            refused: Vec::new(),
        };
        assert!(words_only.values.is_empty());
        assert!(grounded(
            "When deploying a service, call lock with the service first, then deploy.",
            &words_only
        ));
    }

    /// One chat, seed 6 (Qwen2.5-Coder-1.5B, learning on): the call with `SKU-0005127` was
    /// refused and no call worked; the lesson that gave that value as "the format" was stored,
    /// grounded by the `SKU-` inside it. A value that failed grounds nothing; a lesson that
    /// names it beside the right form still has the right form.
    #[test]
    fn a_refused_value_grounds_nothing() {
        let refusal = "no item 'SKU-0005127': SKUs are written SKU- followed by the item number \
                       as six digits, zero-padded (item 4411 is SKU-004411)";
        let refused = argument_values(r#"{"sku":"SKU-0005127"}"#);
        let grounds = Grounds {
            values: value_tokens(refusal)
                .into_iter()
                .filter(|v| !refused.contains(v))
                .collect(),
            stated: content_words(refusal),
            corrected: Vec::new(),
            refused: refused.clone(),
        };
        let stored = "When calling desk__stock_level with a valid SKU, ensure the SKU is in the \
                      format 'SKU-0005127'. If the tool reports an error, try using the correct \
                      SKU format or contact the support team for help.";
        assert!(!grounded(stored, &grounds), "stored: {stored}");
        for lesson in [
            "When checking stock, write SKU- and six digits (item 4411 is SKU-004411), not 'SKU-0005127'.",
            "When checking stock, write SKU-005127 for item 5127, not SKU-0005127.",
        ] {
            assert!(grounded(lesson, &grounds), "refused: {lesson}");
        }
        // Without the refused value known (a record stored before), the old reading holds.
        let old = Grounds {
            refused: Vec::new(),
            ..grounds
        };
        assert!(grounded(stored, &old));
    }

    #[test]
    fn a_correction_grounds_a_lesson_in_the_users_words() {
        let grounds = Grounds {
            corrected: content_words(
                "No, always give temperatures in Fahrenheit as well as Celsius.",
            ),
            ..Grounds::default()
        };
        let cases = [
            (
                "the user's rule",
                "When giving temperatures, state Fahrenheit and Celsius.",
                true,
            ),
            (
                "one word of it",
                "When giving temperatures, be accurate.",
                false,
            ),
            (
                "general advice",
                "When the user corrects you, follow their instructions.",
                false,
            ),
        ];
        for (name, lesson, want) in cases {
            assert_eq!(grounded(lesson, &grounds), want, "{name}: {lesson}");
        }
    }

    #[test]
    fn a_lesson_that_quotes_the_bots_own_keeps_only_that() {
        let proven = vec![format!(
            "When calling inv__stock_level: its error said \"{SKU_ERROR}\""
        )];
        let merged = "When calling inv__stock_level: its error said 'SKUs are written SKU- \
            followed by the item number as six digits, zero-padded (item 4411 is SKU-004411)', \
            consider changing the SKU or using a different tool.";
        assert!(quotes_proven(merged, &proven));
        let own_words = "When checking stock, write SKU-004411 for item 4411.";
        assert!(!quotes_proven(own_words, &proven));
        assert!(!quotes_proven(merged, &[]));
    }
}
