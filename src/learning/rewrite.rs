//! Argument rewrites a tool taught: where a tool's errors and successes show an exact change
//! of one argument's form (a prefix and zero-padding, a date's order and separators, a unit's
//! scale), the bot writes a call in the old form in the tool's form itself before sending it.
//! A small model given "item 4411 is SKU-004411" still wrote `SKU-15` for item 15, or repeated
//! a refused call word for word (Qwen2.5-Coder-1.5B, issue 34); the bot need not.
//!
//! Never a guess. A rewrite is one of three small families of rules, and a rule is kept only
//! if it reproduces every example it was learned from; several rules can fit the examples
//! (one example `5127 → TCK-5127` fits every zero-padding width up to 4), so a value is
//! rewritten only where *every* rule that fits gives the same result (`98765`, not `98`). The examples
//! are the tool's own words: a refused value and the value a later call of the same tool
//! worked with ([`fixed_pair`]), or a refusal that states the form by example, in reading
//! order ("… (this one is TCK-005127)", "a 0.3 kg parcel is 300"; [`stated_pairs`]). What
//! the tool takes is the check: a rewritten call that fails counts against the rewrite.
//!
//! ```
//! use heurist::learning::rewrite::{Example, rewrite};
//! let taught = [Example::new("4411", "SKU-004411"), Example::new("SKU-15", "SKU-000015")];
//! assert_eq!(rewrite(&taught, "982").as_deref(), Some("SKU-000982"));
//! assert_eq!(rewrite(&taught, "SKU-31").as_deref(), Some("SKU-000031"));
//! // Already in the tool's form (even with the wrong number): left as the model wrote it.
//! assert_eq!(rewrite(&taught, "SKU-009822"), None);
//! // One example cannot tell whether 2027-2-3's fields are zero-padded: no rewrite.
//! let dates = [Example::new("2026-12-14", "14.12.2026")];
//! assert_eq!(rewrite(&dates, "2027-03-15").as_deref(), Some("15.03.2027"));
//! assert_eq!(rewrite(&dates, "2027-3-5"), None);
//! ```

/// One tool's taught forms: per argument name, its examples (newest first).
pub type ToolForms = Vec<(String, Vec<Example>)>;

/// Examples of one argument kept at most (the newest).
pub const MAX_EXAMPLES: usize = 8;

pub use crate::store::RewriteExample as Example;
use crate::store::Store;

/// One rule of the three families.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// The value's one number, zero-padded to `width`, between a
    /// literal `prefix` and `suffix` (`982` → `SKU-000982`).
    Pad {
        prefix: String,
        suffix: String,
        width: usize,
    },
    /// The value's three numbers in another order (`order[i]` is the input field of output
    /// field i), each zero-padded to its width, joined by the separators
    /// (`2026-12-14` → `14.12.2026`).
    Fields {
        order: [usize; 3],
        widths: [usize; 3],
        separators: [String; 2],
        /// The output fields' lengths in the examples: the tool's form.
        lengths: [usize; 3],
    },
    /// A decimal number times 10^`power`, written as a whole number (`1.5` → `1500`).
    Scale { power: u32 },
}

/// What `value` becomes in the form that `examples` taught, if it is not in that form
/// already and every rule that fits all the examples agrees on it.
#[must_use]
pub fn rewrite(examples: &[Example], value: &str) -> Option<String> {
    let rules = rules_for(examples);
    if rules.is_empty() || rules.iter().any(|rule| rule.in_form(value)) {
        return None;
    }
    // Only a value written like one the tool was shown (or like its own form with another
    // padding): `INC-98` is another kind of thing than `TCK-5127`, whatever its number.
    let shape = shape_of(value);
    let known = examples
        .iter()
        .flat_map(|e| [shape_of(&e.from), shape_of(&e.to)])
        .any(|known| known.fits(&shape));
    if !known {
        return None;
    }
    let mut outputs = rules.iter().map(|rule| rule.apply(value));
    let first = outputs.next()??;
    (outputs.all(|o| o.as_deref() == Some(first.as_str())) && first != value).then_some(first)
}

/// Whether `examples` teach any rule at all (all of them fitting one).
#[must_use]
pub fn teaches(examples: &[Example]) -> bool {
    !rules_for(examples).is_empty()
}

/// The newest examples that one rule still fits, newest first: an argument's examples after a
/// new one, so a tool that changed its form is followed and the old form forgotten.
#[must_use]
pub fn consistent_newest(newest_first: &[Example]) -> Vec<Example> {
    let mut kept: Vec<Example> = Vec::new();
    for example in newest_first.iter().take(MAX_EXAMPLES) {
        kept.push(example.clone());
        if !teaches(&kept) {
            kept.pop();
            break;
        }
    }
    kept
}

/// Every rule that reproduces all `examples`.
fn rules_for(examples: &[Example]) -> Vec<Rule> {
    let Some((first, rest)) = examples.split_first() else {
        return Vec::new();
    };
    candidates(&first.from, &first.to)
        .into_iter()
        .filter(|rule| {
            rest.iter()
                .all(|e| rule.apply(&e.from).as_deref() == Some(e.to.as_str()))
        })
        .collect()
}

/// Every rule that takes `from` to `to` (never to itself).
fn candidates(from: &str, to: &str) -> Vec<Rule> {
    if from == to {
        return Vec::new();
    }
    let mut rules = pad_candidates(from, to);
    rules.extend(field_candidates(from, to));
    rules.extend(scale_candidates(from, to));
    rules.retain(|rule| rule.apply(from).as_deref() == Some(to));
    rules
}

impl Rule {
    fn apply(&self, value: &str) -> Option<String> {
        match self {
            Rule::Pad {
                prefix,
                suffix,
                width,
            } => {
                let [number] = digit_runs(value)[..] else {
                    return None;
                };
                Some(format!("{prefix}{}{suffix}", padded(number, *width)))
            }
            Rule::Fields {
                order,
                widths,
                separators,
                ..
            } => {
                let (fields, _) = three_fields(value)?;
                let field = |i: usize| padded(fields[order[i]], widths[i]);
                Some(format!(
                    "{}{}{}{}{}",
                    field(0),
                    separators[0],
                    field(1),
                    separators[1],
                    field(2)
                ))
            }
            Rule::Scale { power } => {
                let number = plain_decimal(value).filter(|n| n.fract() != 0.0)?;
                let scaled = number * 10f64.powi(i32::try_from(*power).ok()?);
                let whole = scaled.round();
                ((scaled - whole).abs() < 1e-6 && whole.abs() < 1e15).then(|| format!("{whole:.0}"))
            }
        }
    }

    /// Whether `value` is already written the way this rule writes: then it is the model's
    /// choice (right or wrong), never rewritten.
    fn in_form(&self, value: &str) -> bool {
        match self {
            Rule::Pad {
                prefix,
                suffix,
                width,
            } => value
                .strip_prefix(prefix.as_str())
                .and_then(|rest| rest.strip_suffix(suffix.as_str()))
                .is_some_and(|digits| {
                    !digits.is_empty()
                        && digits.bytes().all(|b| b.is_ascii_digit())
                        && digits.len() >= *width
                }),
            Rule::Fields {
                separators,
                lengths,
                ..
            } => three_fields(value).is_some_and(|(fields, seps)| {
                seps == [separators[0].as_str(), separators[1].as_str()]
                    && fields.iter().zip(lengths).all(|(f, l)| f.len() == *l)
            }),
            // A whole number, however written (`800`, `800.0`), is the model's.
            Rule::Scale { .. } => plain_decimal(value).is_some_and(|n| n.fract() == 0.0),
        }
    }
}

/// Pad rules: the output's one number is the input's, between the output's literal text; its
/// width is exact where the output has leading zeros, else any up to its length.
fn pad_candidates(from: &str, to: &str) -> Vec<Rule> {
    let ([number_in], [number_out]) = (&digit_runs(from)[..], &digit_runs(to)[..]) else {
        return Vec::new();
    };
    if number_in.trim_start_matches('0') != number_out.trim_start_matches('0') {
        return Vec::new();
    }
    let Some((prefix, suffix)) = around(to, number_out) else {
        return Vec::new();
    };
    widths_of(number_out)
        .map(|width| Rule::Pad {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
            width,
        })
        .collect()
}

/// Field rules: every order of the input's three numbers that gives the output's, with each
/// field's possible widths.
fn field_candidates(from: &str, to: &str) -> Vec<Rule> {
    let (Some((input, _)), Some((output, seps))) = (three_fields(from), three_fields(to)) else {
        return Vec::new();
    };
    let mut rules = Vec::new();
    for order in PERMUTATIONS {
        let fits = (0..3)
            .all(|i| input[order[i]].trim_start_matches('0') == output[i].trim_start_matches('0'));
        if !fits {
            continue;
        }
        for w0 in widths_of(output[0]) {
            for w1 in widths_of(output[1]) {
                for w2 in widths_of(output[2]) {
                    rules.push(Rule::Fields {
                        order,
                        widths: [w0, w1, w2],
                        separators: [seps[0].to_string(), seps[1].to_string()],
                        lengths: [output[0].len(), output[1].len(), output[2].len()],
                    });
                }
            }
        }
    }
    rules
}

/// Scale rules: a decimal that is not whole, times a power of ten (up to a million), is the
/// whole number given.
fn scale_candidates(from: &str, to: &str) -> Vec<Rule> {
    match plain_decimal(from) {
        Some(number) if number.fract() != 0.0 && to.bytes().all(|b| b.is_ascii_digit()) => {
            (1..=6).map(|power| Rule::Scale { power }).collect()
        }
        _ => Vec::new(),
    }
}

/// How a value is written around its numbers: the text between them, and each number's
/// length. Two values of one shape differ only in their numbers.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    literals: Vec<String>,
    lengths: Vec<usize>,
}

impl Shape {
    /// Whether a value of shape `other` is written like one of this shape: the same text
    /// around its numbers, and for three numbers (a date's) the same lengths (a lone
    /// number's padding, a decimal's digits, are what a rule reads whatever they are); a bare
    /// number is written like any one number (it has no text that could name another kind).
    fn fits(&self, other: &Shape) -> bool {
        let bare_number = other.lengths.len() == 1 && other.literals == [""];
        (bare_number && self.lengths.len() == 1)
            || self.literals == other.literals
                && (self.lengths.len() != 3 || self.lengths == other.lengths)
    }
}

fn shape_of(value: &str) -> Shape {
    let mut literals = vec![String::new()];
    let mut lengths = Vec::new();
    let mut in_number = false;
    for c in value.trim().chars() {
        if c.is_ascii_digit() {
            if !in_number {
                lengths.push(0);
                in_number = true;
            }
            if let Some(length) = lengths.last_mut() {
                *length += 1;
            }
        } else {
            if in_number {
                literals.push(String::new());
                in_number = false;
            }
            if let Some(literal) = literals.last_mut() {
                literal.push(c);
            }
        }
    }
    Shape { literals, lengths }
}

const PERMUTATIONS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// The widths a written number may have been padded to: exactly its length if it starts
/// with a zero, else any up to it (1 is the same as none).
fn widths_of(number: &str) -> std::ops::RangeInclusive<usize> {
    if number.len() > 1 && number.starts_with('0') {
        number.len()..=number.len()
    } else {
        1..=number.len()
    }
}

/// `number` zero-padded to `width` (as written when it is as long already).
fn padded(number: &str, width: usize) -> String {
    format!("{number:0>width$}")
}

/// Longest value a rule reads or writes, in characters: ids, dates and amounts are short,
/// and a hostile server's error must not make the rules many or long.
pub const MAX_VALUE_CHARS: usize = 40;

/// Digits of the longest number a rule reads.
const MAX_DIGITS: usize = 15;

/// The maximal runs of ASCII digits in `value` (none for a value too long to be a form, or
/// with a number too long to be one).
fn digit_runs(value: &str) -> Vec<&str> {
    if value.chars().count() > MAX_VALUE_CHARS {
        return Vec::new();
    }
    let runs: Vec<&str> = value
        .split(|c: char| !c.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .collect();
    if runs.iter().any(|run| run.len() > MAX_DIGITS) {
        return Vec::new();
    }
    runs
}

/// The text before and after the one `number` in `value`.
fn around<'v>(value: &'v str, number: &str) -> Option<(&'v str, &'v str)> {
    let at = value.find(number)?;
    Some((&value[..at], &value[at + number.len()..]))
}

/// A value that is exactly three numbers with one short separator between each (a date), and
/// those separators.
fn three_fields(value: &str) -> Option<([&str; 3], [&str; 2])> {
    let value = value.trim();
    let runs = digit_runs(value);
    let [a, b, c] = runs[..] else {
        return None;
    };
    let (before_a, after_a) = around(value, a)?;
    let first_sep = &after_a[..after_a.find(b)?];
    let after_b = &after_a[first_sep.len() + b.len()..];
    let second_sep = &after_b[..after_b.find(c)?];
    let rest = &after_b[second_sep.len() + c.len()..];
    let short = |s: &str| (1..=2).contains(&s.chars().count()) && !s.contains(char::is_whitespace);
    (before_a.is_empty() && rest.is_empty() && short(first_sep) && short(second_sep))
        .then_some(([a, b, c], [first_sep, second_sep]))
}

/// A plain decimal number (digits, one optional point), as a float.
fn plain_decimal(value: &str) -> Option<f64> {
    let value = value.trim();
    let plain = !value.is_empty()
        && value.len() <= MAX_DIGITS + 1
        && value.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && value.bytes().filter(|&b| b == b'.').count() <= 1
        && value.bytes().any(|b| b.is_ascii_digit());
    plain.then(|| value.parse().ok()).flatten()
}

/// The examples a refusal states, in reading order: pairs of the refused `value` or a word of
/// the error, and a later word of the error, that one rule takes from the first to the
/// second; only those whose result is the last such word (the example the error ends on: "…
/// (item 4411 is SKU-004411)" also holds `4411` after `SKU-4411`, which is not the form).
#[must_use]
pub fn stated_pairs(value: &str, error: &str) -> Vec<Example> {
    // The error's last words: where an example is given, and a bound on the pairs tried.
    let words = words(error);
    let words = &words[words.len().saturating_sub(MAX_WORDS)..];
    let value = value.trim();
    let mut pairs: Vec<(usize, Example)> = Vec::new();
    for (j, to) in words.iter().enumerate() {
        if *to == value {
            continue;
        }
        for from in words[..j].iter().copied().chain(std::iter::once(value)) {
            if from != *to && !mentions(to, from) && !candidates(from, to).is_empty() {
                pairs.push((j, Example::new(from, to)));
            }
        }
    }
    let Some(last) = pairs.iter().map(|(j, _)| *j).max() else {
        return Vec::new();
    };
    let mut stated: Vec<Example> = Vec::new();
    for (j, pair) in pairs {
        if j == last && !stated.contains(&pair) {
            stated.push(pair);
        }
    }
    stated
}

/// Words of an error read for examples, at most (its last ones).
const MAX_WORDS: usize = 200;

/// Whether `to` holds `from` as it was written, words and all (`/items/SKU-000015` holds
/// `SKU-000015`: a path that names the value, not its corrected form); a bare number in a
/// form (`4411` in `SKU-004411`) is how forms are made.
fn mentions(to: &str, from: &str) -> bool {
    !from.bytes().all(|b| b.is_ascii_digit()) && to.contains(from)
}

/// What may quote a word in an error.
const QUOTES: &[char] = &['\'', '"', '`', '(', ')', '[', ']', ',', ';', ':', '!', '?'];

/// The error's words, without the quotes and punctuation around them (a full stop too, unless
/// it is part of a number or date).
#[must_use]
pub fn words(error: &str) -> Vec<&str> {
    error
        .split_whitespace()
        .map(|w| w.trim_matches(QUOTES).trim_end_matches('.'))
        .map(|w| w.trim_matches(QUOTES))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The example a call fix gives: the value a refused call had and the one a later call of the
/// same tool worked with, where the rest of the arguments stayed the same and one rule fits.
#[must_use]
pub fn fixed_pair(refused: &str, worked: &str) -> Option<Example> {
    // Only a number's form: what a tool takes does not tell a model's wrong date order or
    // scale from the right one (12.05 and 05.12 are both dates, ×100 and ×1000 both whole),
    // which only the tool's own example states.
    (!pad_candidates(refused, worked).is_empty() && !mentions(worked, refused))
        .then(|| Example::new(refused, worked))
}

/// The forms `tool` taught, per argument, whose rewrites are still active (a form
/// whose rewritten calls kept failing is left out until the tool teaches a new example).
pub(crate) fn forms_of(store: &Store, tool: &str) -> ToolForms {
    store
        .rewrites()
        .of_tool(tool)
        .inspect_err(|e| tracing::warn!(error = %e, tool, "cannot read the taught forms"))
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, form)| form.active())
        .map(|(argument, form)| (argument, form.examples))
        .collect()
}

/// Arguments of one tool with a form kept, at most: a model may name arguments as it likes,
/// and the store must not grow with them.
const MAX_ARGUMENTS: usize = 8;

/// Longest argument name a form is kept for.
const MAX_ARGUMENT_CHARS: usize = 64;

/// The arguments of `tool` with a form kept (active or not).
fn forms_known(store: &Store, tool: &str) -> Vec<String> {
    store
        .rewrites()
        .of_tool(tool)
        .map(|forms| forms.into_iter().map(|(argument, _)| argument).collect())
        .unwrap_or_default()
}

/// Keeps what a turn taught of its tools' forms (`taught`: tool, argument, example) and how
/// the calls it rewrote went (`rewritten`: tool, argument, worked).
pub(crate) fn keep(
    store: &Store,
    taught: &[(String, String, Example)],
    rewritten: &[(String, String, bool)],
) {
    for (tool, argument, example) in taught {
        let known = forms_known(store, tool);
        let new = !known.iter().any(|a| a == argument);
        if argument.chars().count() > MAX_ARGUMENT_CHARS || new && known.len() >= MAX_ARGUMENTS {
            continue;
        }
        let kept = store.rewrites().update(tool, argument, true, |form| {
            if form.examples.contains(example) {
                return;
            }
            let mut examples = form.examples.clone();
            examples.insert(0, example.clone());
            if teaches(&examples) {
                form.examples = consistent_newest(&examples);
            } else if form.worked > 0 && form.active() {
                // A form the tool took is not pushed out by one example nobody confirmed.
                return;
            } else {
                form.examples = consistent_newest(&examples);
                form.worked = 0;
            }
            form.failed_in_a_row = 0;
        });
        if let Err(e) = kept {
            tracing::warn!(error = %e, tool, "cannot keep a taught form");
        }
    }
    for (tool, argument, worked) in rewritten {
        let kept = store.rewrites().update(tool, argument, false, |form| {
            if *worked {
                form.worked = form.worked.saturating_add(1);
                form.failed_in_a_row = 0;
            } else {
                form.failed_in_a_row = form.failed_in_a_row.saturating_add(1);
            }
        });
        if let Err(e) = kept {
            tracing::warn!(error = %e, tool, "cannot count a rewritten call");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(pairs: &[(&str, &str)]) -> Vec<Example> {
        pairs.iter().map(|(f, t)| Example::new(f, t)).collect()
    }

    #[test]
    fn rewrites_only_what_every_fitting_rule_agrees_on() {
        struct Case {
            name: &'static str,
            taught: &'static [(&'static str, &'static str)],
            value: &'static str,
            want: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "a padded number keeps its width",
                taught: &[("4411", "SKU-004411")],
                value: "982",
                want: Some("SKU-000982"),
            },
            Case {
                name: "the old prefix is dropped with the old padding",
                taught: &[("TCK-5127", "TCK-005127")],
                value: "TCK-98",
                want: Some("TCK-000098"),
            },
            Case {
                name: "a bare number gets the prefix",
                taught: &[("TCK-5127", "TCK-005127")],
                value: "31337",
                want: Some("TCK-031337"),
            },
            Case {
                name: "already in the form, even a wrong number, is the model's",
                taught: &[("4411", "SKU-004411")],
                value: "SKU-009822",
                want: None,
            },
            Case {
                name: "an unpadded example cannot say how short numbers are written",
                taught: &[("5127", "TCK-5127")],
                value: "98",
                want: None,
            },
            Case {
                name: "but longer numbers are the same whatever the width",
                taught: &[("5127", "TCK-5127")],
                value: "98765",
                want: Some("TCK-98765"),
            },
            Case {
                name: "two numbers in a value are not one",
                taught: &[("4411", "SKU-004411")],
                value: "item 98 of 2",
                want: None,
            },
            Case {
                name: "a date's fields reordered with its separators",
                taught: &[("2026-12-14", "14.12.2026")],
                value: "2026-12-21",
                want: Some("21.12.2026"),
            },
            Case {
                name: "a date already in the form is left",
                taught: &[("2026-12-14", "14.12.2026")],
                value: "03.02.2027",
                want: None,
            },
            Case {
                name: "a date whose day and month are equal fits two orders that agree",
                taught: &[("2026-12-12", "12.12.2026")],
                value: "2027-02-02",
                want: Some("02.02.2027"),
            },
            Case {
                name: "but not where they disagree",
                taught: &[("2026-12-12", "12.12.2026")],
                value: "2027-02-03",
                want: None,
            },
            Case {
                name: "a unit's scale",
                taught: &[("0.3", "300")],
                value: "2.5",
                want: Some("2500"),
            },
            Case {
                name: "one decimal place less does not change the factor",
                taught: &[("0.3", "300")],
                value: "0.75",
                want: Some("750"),
            },
            Case {
                name: "a whole number is in the form (4 kg written 4 is the model's)",
                taught: &[("0.3", "300")],
                value: "4",
                want: None,
            },
            Case {
                name: "a unit in the value is not a plain number",
                taught: &[("0.3", "300")],
                value: "2.5 kg",
                want: None,
            },
            Case {
                name: "examples that no one rule fits teach nothing",
                taught: &[("4411", "SKU-004411"), ("15", "ITEM-15")],
                value: "982",
                want: None,
            },
            Case {
                name: "another kind of id with a number is not this tool's",
                taught: &[("TCK-5127", "TCK-005127")],
                value: "INC-98",
                want: None,
            },
            Case {
                name: "nor a number in words",
                taught: &[("4411", "SKU-004411")],
                value: "order 15 red",
                want: None,
            },
            Case {
                name: "a date with other lengths is not the example's kind",
                taught: &[("2026-12-14", "14.12.2026")],
                value: "14-12-26",
                want: None,
            },
            Case {
                name: "a whole number written with a point is whole",
                taught: &[("0.3", "300")],
                value: "800.0",
                want: None,
            },
            Case {
                name: "a decimal of other digits scales alike",
                taught: &[("0.3", "300")],
                value: "12.25",
                want: Some("12250"),
            },
            Case {
                name: "a second example pins the width",
                taught: &[("5127", "TCK-5127"), ("12", "TCK-0012")],
                value: "98",
                want: Some("TCK-0098"),
            },
        ];
        for case in cases {
            assert_eq!(
                rewrite(&ex(case.taught), case.value).as_deref(),
                case.want,
                "{}",
                case.name
            );
        }
    }

    /// The desk's refusals (tests/e2e/support/desk.rs), as the issue's server wrote them.
    #[test]
    fn refusals_state_the_examples_they_end_on() {
        struct Case {
            name: &'static str,
            value: &'static str,
            error: &'static str,
            want: &'static [(&'static str, &'static str)],
        }
        let cases = [
            Case {
                name: "the corrected value of the refused one",
                value: "TCK-5127",
                error: "unknown ticket id 'TCK-5127': ticket ids are written TCK- and six \
                        digits, zero-padded (this one is TCK-005127)",
                want: &[("TCK-5127", "TCK-005127")],
            },
            Case {
                name: "another item's example",
                value: "SKU-15",
                error: "no item 'SKU-15': SKUs are written SKU- followed by the item number \
                        as six digits, zero-padded (item 4411 is SKU-004411)",
                want: &[("4411", "SKU-004411")],
            },
            Case {
                name: "the refused value and the example both lead to the last word",
                value: "SKU-4411",
                error: "no item 'SKU-4411': SKUs are written SKU- followed by the item number \
                        as six digits, zero-padded (item 4411 is SKU-004411)",
                want: &[("SKU-4411", "SKU-004411"), ("4411", "SKU-004411")],
            },
            Case {
                name: "a date",
                value: "2026-12-14",
                error: "cannot read the date '2026-12-14': dates are written DD.MM.YYYY \
                        (this one is 14.12.2026)",
                want: &[("2026-12-14", "14.12.2026")],
            },
            Case {
                name: "a unit",
                value: "1.5",
                error: "cannot quote the weight '1.5': weights are whole grams, digits only, \
                        without a unit (a 0.3 kg parcel is 300)",
                want: &[("0.3", "300")],
            },
            Case {
                name: "a refusal with no example states nothing",
                value: "billing",
                error: "service 'billing' is not locked: call lock with service 'billing' \
                        first, then deploy",
                want: &[],
            },
            Case {
                name: "a path that names the refused value is no form of it",
                value: "SKU-000015",
                error: "GET /items/SKU-000015 returned 404",
                want: &[],
            },
            Case {
                name: "a hostile server's long numbers teach nothing",
                value: "1",
                error: "1111111111111111111111-1-1 is 1-1-1111111111111111111111",
                want: &[],
            },
            Case {
                name: "numbers that are not forms of one another",
                value: "7",
                error: "rate limit: 3 calls per 60 seconds, try again in 12 seconds",
                want: &[],
            },
        ];
        for case in cases {
            assert_eq!(
                stated_pairs(case.value, case.error),
                ex(case.want),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn the_desks_examples_rewrite_the_held_out_calls() {
        let stock = stated_pairs("SKU-15", "no item 'SKU-15': … (item 4411 is SKU-004411)");
        assert_eq!(rewrite(&stock, "SKU-15").as_deref(), Some("SKU-000015"));
        assert_eq!(rewrite(&stock, "982").as_deref(), Some("SKU-000982"));
        let grams = stated_pairs("1.5", "… without a unit (a 0.3 kg parcel is 300)");
        assert_eq!(rewrite(&grams, "1.2").as_deref(), Some("1200"));
    }

    #[test]
    fn newest_examples_win_when_the_form_changed() {
        let newest_first = ex(&[
            ("15", "ITEM-15"),
            ("4411", "SKU-004411"),
            ("98", "SKU-000098"),
        ]);
        assert_eq!(consistent_newest(&newest_first), ex(&[("15", "ITEM-15")]));
        let newest_first = ex(&[("15", "SKU-000015"), ("4411", "SKU-004411")]);
        assert_eq!(consistent_newest(&newest_first).len(), 2);
    }

    const STOCK: &str = "desk__stock_level";

    fn stock_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        (dir, store)
    }

    /// What a turn taught of the stock tool's `sku`.
    fn taught(from: &str, to: &str) -> (String, String, Example) {
        (STOCK.to_string(), "sku".to_string(), Example::new(from, to))
    }

    /// A rewritten call of the stock tool's `sku` that `worked` or not.
    fn call(worked: bool) -> (String, String, bool) {
        (STOCK.to_string(), "sku".to_string(), worked)
    }

    /// Kept per tool and argument; a rewrite whose calls failed twice in a row is left out
    /// until the tool teaches a new example; a call that worked resets the count.
    #[test]
    fn rewrites_that_keep_failing_retire_until_a_new_example() {
        let (_dir, store) = stock_store();
        let tool = STOCK.to_string();
        keep(&store, &[taught("4411", "SKU-004411")], &[]);
        assert_eq!(forms_of(&store, &tool).len(), 1);
        keep(&store, &[], &[call(false), call(true), call(false)]);
        assert_eq!(forms_of(&store, &tool).len(), 1, "not two in a row");
        keep(&store, &[], &[call(false)]);
        assert!(forms_of(&store, &tool).is_empty(), "retired");
        keep(&store, &[taught("4411", "SKU-004411")], &[]);
        assert!(
            forms_of(&store, &tool).is_empty(),
            "an example it had is not new"
        );
        keep(&store, &[taught("15", "SKU-000015")], &[]);
        let forms = forms_of(&store, &tool);
        assert_eq!(
            forms[0].1.len(),
            2,
            "a new example brings it back: {forms:?}"
        );
        assert!(forms_of(&store, "desk__stock").is_empty());
    }

    /// A fix teaches a number's form only: a tool that took a model's date order or scale
    /// does not say it was the right one.
    #[test]
    fn a_fix_is_an_example_only_of_a_numbers_form() {
        assert_eq!(
            fixed_pair("TCK-5127", "TCK-005127"),
            Some(Example::new("TCK-5127", "TCK-005127"))
        );
        assert_eq!(fixed_pair("2026-12-05", "12.05.2026"), None);
        assert_eq!(fixed_pair("1.5", "150"), None);
        assert_eq!(fixed_pair("search", "search-service"), None);
        assert_eq!(fixed_pair("15", "16"), None);
        assert_eq!(fixed_pair("SKU-15", "/items/SKU-15"), None);
    }

    /// A stated example that no rule fits with a form the tool took does not push it out;
    /// once that form is retired, the tool's new examples are followed.
    #[test]
    fn a_form_the_tool_took_is_not_pushed_out_by_an_unconfirmed_example() {
        let (_dir, store) = stock_store();
        let tool = STOCK.to_string();
        keep(&store, &[taught("4411", "SKU-004411")], &[call(true)]);
        keep(&store, &[taught("30s", "30")], &[]);
        assert_eq!(
            forms_of(&store, &tool)[0].1,
            vec![Example::new("4411", "SKU-004411")]
        );
        keep(&store, &[], &[call(false), call(false)]);
        keep(&store, &[taught("15", "ITEM-15")], &[]);
        assert_eq!(
            forms_of(&store, &tool)[0].1,
            vec![Example::new("15", "ITEM-15")]
        );
    }
}
