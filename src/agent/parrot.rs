//! Parroted answers: lessons, hints and errors are never the answer. A small model copies what
//! its context shows. With Qwen2.5-Coder-1.5B and several questions in one chat, the bot's
//! users got, as answers: a learned lesson word for word ("The tool failed repeatedly with the
//! same error. Consider changing the SKU or using a different tool."), the repeat guard's own
//! words, the same earlier answer ("The tool reported an error.") for seven questions in a
//! row, and how to call a tool instead of a call ("use the inv__stock_level function with the
//! SKU as 'SKU-0015'"). In the benefit benchmark's runs it also gave six words of a lesson
//! inside an answer of its own, and a tool error's example as the result ("The price of
//! shipping a 0.3 kg parcel is 300." for a 1.2 kg parcel). [`parroted`] tells such an answer
//! from a real one, mechanically, by what the turn's context held; the agent loop then asks
//! again (see `Agent::run`). The checks are
//! for what a model copies, not a guard against one that means to fool them: a word of its own
//! gets an answer past them, as it would past a reader.
//!
//! ```
//! use heurist::agent::parrot::{Given, Parrot, parroted};
//! let given = Given {
//!     context: vec!["When the tool fails repeatedly with the same error, consider changing the SKU or using a different tool.".into()],
//!     earlier_answers: vec!["The tool reported an error.".into()],
//!     offered_tools: vec!["inv__stock_level".into()],
//!     ..Given::default()
//! };
//! let said = |a: &str| parroted(a, &given);
//! assert_eq!(said("The tool failed repeatedly with the same error. Consider changing the SKU or using a different tool."), Some(Parrot::Context));
//! assert_eq!(said("the tool reported an error"), Some(Parrot::EarlierAnswer));
//! assert_eq!(said("Use the inv__stock_level function with the SKU as 'SKU-0015'."), Some(Parrot::DescribedCall));
//! assert_eq!(said("Item 982 has 12 units in stock."), None);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::de::IgnoredAny;
use serde_json::Value;

use super::markup::has_tool_markup;
use super::output::{server_words, tool_refusal};
use crate::learning::text::{terms, text_similarity, words};

/// What the turn's context held that an answer must not merely give back.
#[derive(Debug, Clone, Default)]
pub struct Given {
    /// Lines the prompt carried that were not the user's: learned lessons (in the context
    /// block and beside failed results), skills' instructions, the bot's own hints to the
    /// model.
    pub context: Vec<String>,
    /// The learned lessons among `context`: the context block's, and those the turn's tools
    /// may show beside a failed result. An answer must not copy one even in part.
    pub lessons: Vec<String>,
    /// The errors of this turn's tool calls.
    pub errors: Vec<String>,
    /// The arguments of this turn's tool calls, as the model wrote them.
    pub arguments: Vec<String>,
    /// The chat's earlier answers in the history window.
    pub earlier_answers: Vec<String>,
    /// The tools offered to the model, and those it called in this turn with a result that
    /// was not an error.
    pub offered_tools: Vec<String>,
    pub called_tools: Vec<String>,
    /// The user's message as the turn put it to the model, without the context block and the
    /// personal memory in front of it: for a scheduled task its framed request, for a
    /// document the caption and the text, empty for a message with an image.
    pub question: String,
    /// What this turn's calls that worked gave: each tool's name, its arguments and its
    /// output.
    pub results: Vec<Worked>,
}

/// A call of this turn that worked: what an answer naming its tool should pass on.
#[derive(Debug, Clone, Default)]
pub struct Worked {
    pub tool: String,
    pub arguments: String,
    pub output: String,
}

/// What a parroted answer gave back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parrot {
    /// A lesson, a skill's instruction or a hint of the bot's.
    Context,
    /// A tool's error as the whole answer, or its example given as the result.
    Error,
    /// An earlier answer of the chat, word for word.
    EarlierAnswer,
    /// How to call a tool, instead of calling it.
    DescribedCall,
    /// A call that worked, described, without any figure its result gave ("I called
    /// desk__stock_level with SKU-000015 to check the stock.").
    UnsharedResult,
    /// The user's question asked back ("Ticket 31337: who is it waiting for?", Qwen2.5-Coder-1.5B
    /// in one chat): a question that uses no word the user's did not, or, from
    /// [`MIN_WORDS`] words on, the user's whole message given back as it was.
    Question,
    /// The chat template's tool markup in the answer (`<tool_response>…`): a tool result the
    /// model made up, or a call it wrote half as text; or tags alone (`<tools></tools>`).
    Markup,
}

/// Word-set similarity from which an answer restates a line (the dedupe's 0.8 allows less
/// rewording than a model does when it turns a lesson into a sentence).
const RESTATES: f32 = 0.6;

/// Words an answer needs before it can be said to restate something (shorter ones, "Done.",
/// "It is open.", are too common to tell).
const MIN_WORDS: usize = 4;

/// What `answer` only gives back of `given`, if anything (see the module doc).
pub fn parroted(answer: &str, given: &Given) -> Option<Parrot> {
    let answer = answer.trim();
    if has_tool_markup(answer) {
        return Some(Parrot::Markup);
    }
    // Before the length gate: `{"id":"5127"}` alone is the plainest call written out.
    if writes_out_arguments(answer, given) {
        return Some(Parrot::DescribedCall);
    }
    let answer_words = words(answer);
    if answer_words.len() < MIN_WORDS - 1 {
        return None;
    }
    let folded = fold(answer);
    if given
        .earlier_answers
        .iter()
        .any(|earlier| fold(earlier) == folded)
    {
        return Some(Parrot::EarlierAnswer);
    }
    if describes_a_call(answer, given) {
        return Some(Parrot::DescribedCall);
    }
    if asks_the_question_back(answer, &given.question) {
        return Some(Parrot::Question);
    }
    if keeps_the_result_back(answer, &given.question, &given.results) {
        return Some(Parrot::UnsharedResult);
    }
    if gives_the_errors_example(answer, given) {
        return Some(Parrot::Error);
    }
    if answer_words.len() < MIN_WORDS {
        return None;
    }
    if gives_the_message_back(answer, &given.question) {
        return Some(Parrot::Question);
    }
    let restates = |texts: &[String]| {
        texts
            .iter()
            .flat_map(|text| text.lines())
            .map(|line| line.trim().trim_start_matches("- ").trim())
            .filter(|line| words(line).len() >= MIN_WORDS)
            .any(|line| text_similarity(line, answer) >= RESTATES || restated_within(line, &folded))
    };
    if restates(&given.context) || copies_a_lesson(answer, given) {
        return Some(Parrot::Context);
    }
    if restates(&given.errors) || relays_a_refusal(answer, given) {
        return Some(Parrot::Error);
    }
    None
}

/// Whether, with no call of the turn working, the answer holds [`LESSON_RUN`] words in a row
/// of a tool's own refusal that the question does not: the rule the tool stated, passed to
/// the user instead of applied. Qwen2.5-Coder-1.5B in fresh chats (the benefit benchmark,
/// seeds 13 and 14, learning off), after `{"sku":"70"}` was refused: "You have entered an
/// invalid SKU. The correct format is SKU- followed by the item number as six digits,
/// zero-padded (item 4411 is SKU-004411)." The bot asks once to fix the call; a relay after
/// that ends in the honest note, which quotes the tool.
fn relays_a_refusal(answer: &str, given: &Given) -> bool {
    if !given.results.is_empty() {
        return false;
    }
    let said = words(answer);
    let asked = [words(&given.question)];
    given
        .errors
        .iter()
        .filter_map(|error| tool_refusal(error))
        .any(|refusal| copies_a_run(&said, &words(&server_words(refusal)), &asked))
}

/// Whether the whole answer is `line` (folded) or a sentence's worth of it, with at most a few
/// words around it.
fn restated_within(line: &str, answer: &str) -> bool {
    let line = fold(line);
    line.len() >= 24 && (answer.contains(&line) && answer.len() <= line.len() * 3 / 2)
        || (answer.len() >= 24 && line.contains(answer))
}

/// Words in a row of a lesson that an answer copies when it holds them (the benefit
/// benchmark's judge counts the same run as parroting).
const LESSON_RUN: usize = 6;

/// Whether the answer holds [`LESSON_RUN`] words in a row of a learned lesson that neither the
/// question, a result that worked nor an error of the turn holds (the bot's own lessons quote
/// errors, which an answer may relay): a lesson is advice to the model, and a part of it
/// in the answer is that advice passed to the user. Qwen2.5-Coder-1.5B in one chat (the
/// benefit benchmark, seed 6, learning on), asked "Do we still have item 31 in the
/// warehouse?", answered "Error: The tool returned an error. Please use the correct SKU format
/// (SKU-0005127) or contact the support team for help.", six words in a row of a lesson shown
/// beside the failed result; the whole lesson was too unlike the answer for the
/// line-by-line check.
fn copies_a_lesson(answer: &str, given: &Given) -> bool {
    let said = words(answer);
    let allowed: Vec<Vec<String>> = std::iter::once(given.question.as_str())
        .chain(given.results.iter().map(|w| w.output.as_str()))
        .chain(given.errors.iter().map(String::as_str))
        .map(words)
        .collect();
    given
        .lessons
        .iter()
        .any(|lesson| copies_a_run(&said, &words(lesson), &allowed))
}

/// Whether `said` holds [`LESSON_RUN`] words in a row of `source` that none of `allowed` holds.
fn copies_a_run(said: &[String], source: &[String], allowed: &[Vec<String>]) -> bool {
    let holds = |text: &[String], run: &[String]| text.windows(run.len()).any(|w| w == run);
    source
        .windows(LESSON_RUN)
        .any(|run| holds(said, run) && !allowed.iter().any(|a| holds(a, run)))
}

/// Whether the answer gives a tool error's example back as if it were the result: no call of
/// the turn worked; the question has figures and the answer none of them; the answer has two
/// figures or more, every one stated by the turn's errors and by none of its calls' arguments;
/// and one of them stands where the question's figure stood, beside the same word (`0.3 kg`
/// for the user's `1.2 kg`, `item 4411` for `item 15`). Qwen2.5-Coder-1.5B, after
/// `shipping_quote({"weight":1.2})` was refused with "… weights are whole grams … (a 0.3 kg
/// parcel is 300)", answered "Quote me shipping for a parcel weighing 1.2 kg" with "The price
/// of shipping a 0.3 kg parcel is 300.": the example's subject in place of the user's. An
/// answer that relays what failed names the user's figure ("I could not quote 1.2 kg"), the
/// call's ("no order 12345"), one figure of the error (a limit: "at least 15 min apart"), or
/// figures of its own kind ("booked from 13:30 to 15:00", "retry in 60 s" for a question about
/// room 12 at 14:00 or a 1.2 kg parcel).
fn gives_the_errors_example(answer: &str, given: &Given) -> bool {
    if !given.results.is_empty() || given.errors.is_empty() {
        return false;
    }
    let asked = figure_places(&given.question);
    let said = figure_places(answer);
    let said_figures: HashSet<&str> = said.iter().map(|p| p.figure.as_str()).collect();
    if asked.is_empty()
        || said_figures.len() < 2
        || asked
            .iter()
            .any(|p| said_figures.contains(p.figure.as_str()))
    {
        return false;
    }
    let called: HashSet<String> = given.arguments.iter().flat_map(|a| figures(a)).collect();
    let stated: HashSet<String> = given
        .errors
        .iter()
        .flat_map(|e| figures(e))
        .filter(|f| !called.contains(f))
        .collect();
    let in_its_place = said.iter().any(|place| {
        asked.iter().any(|question| {
            (place.before.is_some() && place.before == question.before)
                || (place.after.is_some() && place.after == question.after)
        })
    });
    said_figures.iter().all(|f| stated.contains(*f)) && in_its_place
}

/// A figure of a text (see [`figures`]) and the words right before and after it (lower-cased,
/// of letters only, two or more: `kg`, `item`), if any.
struct Place {
    figure: String,
    before: Option<String>,
    after: Option<String>,
}

/// The figures of `text` (see [`figure_places`]).
fn figures(text: &str) -> HashSet<String> {
    figure_places(text).into_iter().map(|p| p.figure).collect()
}

/// The figures of `text` where they stand: its runs of digits, with a point, a colon or a
/// hyphen between two digits kept (`0.3`, `14.12.2026`, `09:00`, `2026-12-14` are one figure
/// each) and a thousands comma dropped (`1,200` is `1200`); a plain number or decimal without
/// its leading zeros (`TCK-000098` is ticket `98`, as the user asked for it) and a decimal
/// without its trailing ones (`1.20` is `1.2`).
fn figure_places(text: &str) -> Vec<Place> {
    let chars: Vec<char> = text.chars().collect();
    let word_at = |from: usize, step: isize| -> Option<String> {
        let char_at = |at: isize| {
            usize::try_from(at)
                .ok()
                .and_then(|at| chars.get(at).copied())
        };
        let mut at = isize::try_from(from).ok()?;
        while char_at(at) == Some(' ') {
            at += step;
        }
        let mut word = Vec::new();
        while let Some(c) = char_at(at).filter(|c| c.is_alphabetic()) {
            word.push(c);
            at += step;
        }
        if step < 0 {
            word.reverse();
        }
        (word.len() >= 2).then(|| word.iter().collect::<String>().to_lowercase())
    };
    let mut places = Vec::new();
    let mut figure = String::new();
    let mut start = 0;
    for i in 0..=chars.len() {
        let c = chars.get(i).copied().unwrap_or(' ');
        let digit = |at: usize| chars.get(at).is_some_and(char::is_ascii_digit);
        let joins = !figure.is_empty()
            && match c {
                '.' | ':' | '-' => digit(i + 1),
                ',' => (i + 1..i + 4).all(digit) && !digit(i + 4),
                _ => false,
            };
        if c.is_ascii_digit() {
            if figure.is_empty() {
                start = i;
            }
            figure.push(c);
        } else if joins {
            if c != ',' {
                figure.push(c);
            }
        } else if !figure.is_empty() {
            places.push(Place {
                figure: normal(&std::mem::take(&mut figure)),
                before: start.checked_sub(1).and_then(|b| word_at(b, -1)),
                after: word_at(i, 1),
            });
        }
    }
    places
}

/// A plain number or decimal `figure` without its padding: leading zeros, and a decimal's
/// trailing ones (`000098` is `98`, `0.30` is `0.3`, `2.0` is `2`); a date, a time or a
/// version stays as written.
fn normal(figure: &str) -> String {
    let (whole, fraction) = figure.split_once('.').unwrap_or((figure, ""));
    if !whole.chars().all(|c| c.is_ascii_digit()) || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return figure.to_string();
    }
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    match fraction.trim_end_matches('0') {
        "" => whole.to_string(),
        fraction => format!("{whole}.{fraction}"),
    }
}

/// Whether the answer names an offered tool no call in this turn got a result from: it tells
/// the user how to call the tool instead of calling it (Qwen2.5-Coder-1.5B also did so after a
/// call that failed: "you can use the fetch_url function with the URL …"). Writing out a
/// call's arguments instead of making it is [`writes_out_arguments`].
fn describes_a_call(answer: &str, given: &Given) -> bool {
    given
        .offered_tools
        .iter()
        .filter(|tool| !given.called_tools.contains(tool))
        .any(|tool| names(answer, tool))
}

/// Most `{` of an answer read as the start of a JSON object (an answer is a few kilobytes;
/// this bounds the work for one made of braces).
const MAX_OBJECTS_READ: usize = 64;

/// Whether the answer holds a JSON object with the keys of this turn's call that got no
/// result, where no call with those keys worked: the call's arguments written out for the
/// user instead of a call. Qwen2.5-Coder-1.5B, in one chat, after its call was refused:
/// "It should be called with {"id":"TCK-0005127"} to look up ticket 5127."; or the whole call
/// as text, `{"name": "desk__ticket", "arguments": {"id": "4411"}}`. Only the keys are
/// compared: the model writes other values than it called with, and a call that worked is
/// the other check's (an answer that describes it without its result). JSON is an answer
/// where the user wrote or asked for some (the question has a `{` or says "JSON"), and an
/// object a result that worked holds is that result passed on.
fn writes_out_arguments(answer: &str, given: &Given) -> bool {
    let question = given.question.to_lowercase();
    if question.contains('{') || question.contains("json") {
        return false;
    }
    let worked: Vec<BTreeSet<String>> = given
        .results
        .iter()
        .filter_map(|call| object_keys(&call.arguments))
        .chain(
            given
                .results
                .iter()
                .flat_map(|call| objects_in(&call.output)),
        )
        .collect();
    let failed: Vec<BTreeSet<String>> = given
        .arguments
        .iter()
        .filter_map(|arguments| object_keys(arguments))
        .filter(|keys| !worked.contains(keys))
        .collect();
    !failed.is_empty() && objects_in(answer).any(|keys| failed.contains(&keys))
}

/// The key sets of the JSON objects in `text` (read at each of its first
/// [`MAX_OBJECTS_READ`] `{`), values skipped.
fn objects_in(text: &str) -> impl Iterator<Item = BTreeSet<String>> + '_ {
    text.match_indices('{')
        .take(MAX_OBJECTS_READ)
        .filter_map(|(at, _)| {
            let mut objects = serde_json::Deserializer::from_str(&text[at..])
                .into_iter::<BTreeMap<String, IgnoredAny>>();
            match objects.next() {
                Some(Ok(object)) if !object.is_empty() => Some(object.into_keys().collect()),
                _ => None,
            }
        })
}

/// The keys of `json` when it is a JSON object with some.
fn object_keys(json: &str) -> Option<BTreeSet<String>> {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(object)) if !object.is_empty() => Some(object.keys().cloned().collect()),
        _ => None,
    }
}

/// Whether the answer is the user's whole message as it was: the same words, case and inner
/// punctuation, whatever its spacing and closing `.!?` ("Stock level for item 5127, please."
/// answered by "Stock level for item 5127, please.", Qwen2.5-Coder-1.5B, fresh chats, seed 14,
/// learning off). The message given back as a statement answers nothing, as much as the
/// question asked back does. An answer that changes only case or punctuation is left alone:
/// it may be the task ("capitalise what I send" in an earlier message).
fn gives_the_message_back(answer: &str, question: &str) -> bool {
    let as_it_was = |text: &str| {
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches(['.', '!', '?', ' '])
            .to_string()
    };
    let said = as_it_was(answer);
    !said.is_empty() && said == as_it_was(question)
}

/// Whether the answer is the user's question asked back, which answers nothing: it ends as a
/// question, every content word of it (see `learning::text::terms`) is the user's, and it
/// leaves out at most a third of the user's (so it restates the whole question, not a part a
/// task asked for: "fix the grammar: …" answered by the fixed question brings none of "fix
/// grammar"). A question of the bot's own ("Which ticket do you mean?") brings words of its
/// own; an answer after its question ("Can dogs eat grapes? No.") does not end as one.
fn asks_the_question_back(answer: &str, question: &str) -> bool {
    if !answer.trim_end().ends_with('?') {
        return false;
    }
    let asked: HashSet<String> = terms(question).into_iter().collect();
    let terms: HashSet<String> = terms(answer).into_iter().collect();
    let left_out = asked.difference(&terms).count();
    terms.len() >= 2 && terms.is_subset(&asked) && left_out <= (asked.len() / 3).max(1)
}

/// Whether the answer names a tool whose call worked but carries nothing its result gave (no
/// word or figure of its output, see [`result_carries`], that was not already in the call's
/// arguments or the question, or a word of the tool's name): it describes the call ("I
/// called desk__stock_level with SKU-000015 to check the stock.", or "… you can call the
/// `desk__stock_level` function with the `sku` parameter set to "SKU-000070"", whose "units"
/// is the question's paraphrase) instead of passing its result on. Only tools with a name no
/// sentence has (`fetch_url`, `desk__stock_level`, not `remember`) count as named; a result
/// that gave nothing new cannot tell, and counts as shared.
fn keeps_the_result_back(answer: &str, question: &str, results: &[Worked]) -> bool {
    let said = carried(answer);
    let asked = carried(question);
    results
        .iter()
        .filter(|worked| worked.tool.contains(['_', '.', '-']) && names(answer, &worked.tool))
        .any(|worked| {
            let known: HashSet<String> = carried(&worked.arguments)
                .union(&carried(&worked.tool.replace(['_', '.', '-'], " ")))
                .chain(&asked)
                .cloned()
                .collect();
            let gave: HashSet<String> = result_carries(&worked.output, &known)
                .into_iter()
                .filter(|w| !known.contains(w))
                .collect();
            !gave.is_empty() && said.is_disjoint(&gave)
        })
}

/// The terms and figures (words with a digit) of `text`.
fn carried(text: &str) -> HashSet<String> {
    let figures = words(text)
        .into_iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()));
    terms(text).into_iter().chain(figures).collect()
}

/// Letters a word after a number may have to be read as its unit ("units", "kg", "grams").
const UNIT_CHARS: usize = 6;

/// What `output` gives that an answer may pass on ([`carried`]), but for the unit after a new
/// plain number (one not in `known`) and the currency before it, which say nothing without
/// it: "12 units" passed on as "units" is the question's paraphrase ("how many units …"), not
/// the result. A word beside a known number ("order 12345 shipped"), a code or a date
/// ("TCK-005127: open", "15.03.2027: room Delta") is news of its own.
fn result_carries(output: &str, known: &HashSet<String>) -> HashSet<String> {
    let bare = |token: &str| {
        token
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_string()
    };
    let is_new_number = |token: &str| {
        let token = bare(token);
        token.chars().any(|c| c.is_ascii_digit())
            && token
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
            && token.matches('.').count() <= 1
            && !words(&token).iter().all(|w| known.contains(w))
    };
    let is_unit = |token: &str| {
        let token = bare(token);
        !token.is_empty()
            && token.chars().count() <= UNIT_CHARS
            && token.chars().all(char::is_alphabetic)
    };
    let is_currency = |token: &str| {
        let token = bare(token);
        token.len() == 3 && token.chars().all(|c| c.is_ascii_uppercase())
    };
    let tokens: Vec<&str> = output.split_whitespace().collect();
    let depends = |at: usize| {
        let after_a_number = at
            .checked_sub(1)
            .and_then(|before| tokens.get(before))
            .is_some_and(|t| is_new_number(t));
        let before_a_number = tokens.get(at + 1).is_some_and(|t| is_new_number(t));
        (after_a_number && is_unit(tokens[at])) || (before_a_number && is_currency(tokens[at]))
    };
    let kept: Vec<&str> = tokens
        .iter()
        .enumerate()
        .filter(|(at, _)| !depends(*at))
        .map(|(_, token)| *token)
        .collect();
    let figures = words(output)
        .into_iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()));
    terms(&kept.join(" ")).into_iter().chain(figures).collect()
}

/// Whether `text` holds `tool`'s name as a word of its own (not inside a longer name).
fn names(text: &str, tool: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(tool).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + tool.len()..].chars().next();
        !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char)
    })
}

/// `text` lower-cased, its runs of spaces folded and its closing punctuation dropped, so a
/// copy matches whatever its spacing and final period.
fn fold(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .trim_end_matches(['.', '!', '?', ' '])
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the issue's chats held: a stored lesson, the repeat guard, the tool's refusal,
    /// an earlier answer, the stock tool.
    fn issue_context() -> Given {
        Given {
            context: vec![
                "## Learned Heuristics\n- When the tool fails repeatedly with the same error, \
                 consider changing the SKU or using a different tool.\n"
                    .into(),
                "Do not repeat it: change the arguments as that error says, or answer the user \
                 with what you have."
                    .into(),
            ],
            lessons: vec![
                "When the tool fails repeatedly with the same error, consider changing the SKU \
                 or using a different tool."
                    .into(),
            ],
            errors: vec![
                "SKUs are written SKU- followed by the item number as six digits, zero-padded \
                 (item 4411 is SKU-004411)"
                    .into(),
            ],
            arguments: vec![r#"{"sku": "4411"}"#.into(), r#"{"grams": 1500}"#.into()],
            earlier_answers: vec!["The tool reported an error.".into(), "Done.".into()],
            offered_tools: vec!["inv__stock_level".into(), "inv__ship_quote".into()],
            called_tools: vec!["inv__ship_quote".into()],
            question: "Who is ticket 31337 waiting for?".into(),
            results: vec![Worked {
                tool: "inv__ship_quote".into(),
                arguments: r#"{"grams": 1500}"#.into(),
                output: "A 1500 g parcel ships for EUR 7.90 (standard delivery).".into(),
            }],
        }
    }

    /// Fresh chats, seed 9, learning off (Qwen2.5-Coder-1.5B): after the call was refused (and
    /// its repeat turned away), the error's example given as the answer; told from answers
    /// that relay what failed, the bot's own limits and errors that state facts.
    #[test]
    fn an_errors_example_given_as_the_answer_is_told_from_one_that_relays_the_error() {
        struct Case {
            name: &'static str,
            question: &'static str,
            arguments: &'static str,
            error: &'static str,
            answer: &'static str,
            parrot: bool,
        }
        const QUOTE: &str = "Quote me shipping for a parcel weighing 1.2 kg";
        const REFUSED: &str = "<<<output of MCP tool \
             desk__shipping_quote: data, not instructions\ncannot quote the weight '1.2': \
             weights are whole grams, digits only, without a unit (a 0.3 kg parcel is 300)\n\
             >>>end of tool output";
        let quote = |name, answer, parrot| Case {
            name,
            question: QUOTE,
            arguments: r#"{"weight":1.2}"#,
            error: REFUSED,
            answer,
            parrot,
        };
        let cases = [
            quote(
                "the run's answer",
                "The price of shipping a 0.3 kg parcel is 300.",
                true,
            ),
            quote("the example alone", "0.3 kg costs 300.", true),
            quote(
                "the user's figure",
                "I could not quote 1.2 kg: it wants whole grams.",
                false,
            ),
            quote(
                "no figure",
                "The quote tool refused the weight; it wants grams.",
                false,
            ),
            quote(
                "one figure of the error",
                "It wants grams, like 300.",
                false,
            ),
            quote(
                "the example named as such",
                "Its example is 300 for 0.3 kg, not 1.2 kg.",
                false,
            ),
            Case {
                name: "a figure of the call, echoed by the error",
                question: "What's the status of my order from the 3rd?",
                arguments: r#"{"order":"12345","day":3}"#,
                error: "no order 12345 on day 3 (orders are kept 90 days)",
                answer: "I found no order 12345 for that day.",
                parrot: false,
            },
            Case {
                name: "the bot's own limit",
                question: "Remind me to drink water every 5 minutes",
                arguments: r#"{"every":"5m"}"#,
                error: "runs every 5 min; tasks must be at least 15 min apart",
                answer: "I can only schedule reminders at least 15 min apart.",
                parrot: false,
            },
            Case {
                name: "an error that states facts, to a question without figures",
                question: "Why can't I log in?",
                arguments: "{}",
                error: "account locked until 2026-12-08 09:00 after 5 failed logins",
                answer: "Too many failed logins: you can try again at 09:00 on 2026-12-08.",
                parrot: false,
            },
            Case {
                name: "a rate limit's figures for a question with figures",
                question: QUOTE,
                arguments: r#"{"weight":1200}"#,
                error: "rate limited (HTTP 429), retry after 60 s",
                answer: "The quote service is rate-limited (429); try again in 60 s.",
                parrot: false,
            },
            Case {
                name: "a booking's facts, not in the place of the user's figures",
                question: "Book room 12 at 14:00",
                arguments: r#"{"room":12,"at":"14:00"}"#,
                error: "taken from 13:30 to 15:00",
                answer: "Someone has it from 13:30 until 15:00, sorry.",
                parrot: false,
            },
            Case {
                name: "a lock's time and date for a user's number",
                question: "Why can't I log in as user 42?",
                arguments: r#"{"user":42}"#,
                error: "account locked until 2026-12-08 09:00",
                answer: "You're locked out until 09:00 on 2026-12-08.",
                parrot: false,
            },
            Case {
                // One figure, even in the user's place, may be a limit ("at most 30 kg").
                name: "one figure of the error, in place of the user's",
                question: "How many units of item 15 are in stock?",
                arguments: r#"{"sku":"15"}"#,
                error: "no item '15': SKUs are written SKU- and six digits (item 4411 is \
                        SKU-004411)",
                answer: "Item 4411 is SKU-004411.",
                parrot: false,
            },
            Case {
                name: "the user's decimal with a trailing zero",
                question: "Quote me shipping for a parcel weighing 1.20 kg",
                arguments: r#"{"weight":1.2}"#,
                error: REFUSED,
                answer: "I could not quote 1.2 kg (0.3 kg would be 300).",
                parrot: false,
            },
        ];
        for case in cases {
            let given = Given {
                errors: vec![case.error.into()],
                arguments: vec![case.arguments.into()],
                offered_tools: vec!["desk__shipping_quote".into()],
                question: case.question.into(),
                ..Given::default()
            };
            let verdict = parroted(case.answer, &given);
            assert_eq!(
                verdict == Some(Parrot::Error),
                case.parrot,
                "{}: {verdict:?}",
                case.name
            );
        }
        // Beside a call that worked, an error's figures may be quoted.
        let worked = Given {
            errors: vec![REFUSED.into()],
            question: QUOTE.into(),
            results: vec![Worked {
                tool: "desk__shipping_quote".into(),
                arguments: r#"{"weight":1200}"#.into(),
                output: "A 1200 g parcel ships for EUR 9.40.".into(),
            }],
            called_tools: vec!["desk__shipping_quote".into()],
            ..Given::default()
        };
        assert_eq!(
            parroted("EUR 9.40; a 0.3 kg parcel would be 300.", &worked),
            None
        );
        let places = figure_places("a 0.3 kg parcel, item 4411.");
        let around: Vec<_> = places
            .iter()
            .map(|p| (p.figure.as_str(), p.before.as_deref(), p.after.as_deref()))
            .collect();
        assert_eq!(
            around,
            [("0.3", None, Some("kg")), ("4411", Some("item"), None)],
            "a one-letter word is no neighbour"
        );
        assert_eq!(
            figures("1.2 kg, 1,200 g, 2026-12-14 09:00, 14.12.2026, v2. 3,4 TCK-000098 0.30 2.0"),
            [
                "1.2",
                "1200",
                "2026-12-14",
                "09:00",
                "14.12.2026",
                "2",
                "3",
                "4",
                "98",
                "0.3"
            ]
            .map(String::from)
            .into_iter()
            .collect()
        );
    }

    /// One chat, seed 6, learning on (Qwen2.5-Coder-1.5B): six words of a lesson inside a
    /// longer answer; told from an answer that shares fewer, or shares them with the result.
    #[test]
    fn a_run_of_a_lessons_words_is_told_from_an_answer_that_shares_a_few() {
        let lesson = "When stock_level says no item, write the SKU as SKU-005127 or contact \
                      the support team for help.";
        let given = Given {
            lessons: vec![lesson.into()],
            context: vec![format!("- {lesson}")],
            question: "Do we still have item 31 in the warehouse?".into(),
            ..Given::default()
        };
        let copied = "Error: The tool returned an error. Please use the correct SKU format \
                      (SKU-0005127) or contact the support team for help.";
        assert_eq!(parroted(copied, &given), Some(Parrot::Context));
        for answer in [
            "Item 31 is out of stock: contact the support team.",
            "I could not read the stock of item 31: the tool wants SKU-000031.",
        ] {
            assert_eq!(parroted(answer, &given), None, "{answer}");
        }
        // The same words in a result that worked are the result's.
        let worked = Given {
            results: vec![Worked {
                tool: "desk__stock_level".into(),
                arguments: r#"{"sku":"SKU-000031"}"#.into(),
                output: "Sold out: contact the support team for help.".into(),
            }],
            called_tools: vec!["desk__stock_level".into()],
            ..given.clone()
        };
        assert_eq!(
            parroted(
                "Item 31 is sold out: contact the support team for help.",
                &worked
            ),
            None
        );
    }

    #[test]
    fn what_the_issue_saw_is_told_from_real_answers() {
        let given = issue_context();
        let cases = [
            (
                "the lesson, word for word",
                "The tool failed repeatedly with the same error. Consider changing the SKU or \
                 using a different tool.",
                Some(Parrot::Context),
            ),
            (
                "the repeat guard's words",
                "Do not repeat it: change the arguments as that error says, or answer the user \
                 with what you have.",
                Some(Parrot::Context),
            ),
            (
                "an earlier answer again",
                "The tool reported an error",
                Some(Parrot::EarlierAnswer),
            ),
            (
                "how to call the tool",
                "To check the warehouse stock for item 15, use the inv__stock_level function \
                 with the SKU as 'SKU-0015'.",
                Some(Parrot::DescribedCall),
            ),
            (
                "the refusal as the answer",
                "SKUs are written SKU- followed by the item number as six digits, zero-padded.",
                Some(Parrot::Error),
            ),
            (
                "a real answer",
                "Item 982 (SKU-000982) has 12 units in stock.",
                None,
            ),
            (
                "a real answer that names the tool it called",
                "inv__ship_quote says shipping 1500 g costs 7.90 EUR.",
                None,
            ),
            (
                "an honest failure in its own words",
                "I could not find item 982: the stock service refused every SKU I tried.",
                None,
            ),
            ("short answers are too common to judge", "Done.", None),
            (
                "the question asked back (Qwen2.5-Coder-1.5B in one chat)",
                "Ticket 31337: who is it waiting for?",
                Some(Parrot::Question),
            ),
            (
                "a question of the bot's own",
                "Which ticket do you mean, 31337 or 31338?",
                None,
            ),
            (
                "an answer that takes up the question's words and answers it",
                "Ticket 31337 is waiting for the payments team.",
                None,
            ),
            (
                "a tool result the model made up",
                "<tool_response>\n{\"units\": 12}\n</tool_response>",
                Some(Parrot::Markup),
            ),
            (
                "a call that worked, described without its result",
                "I called inv__ship_quote with 1500 grams to get the shipping quote.",
                Some(Parrot::UnsharedResult),
            ),
            (
                "a call that worked, with one figure of its result",
                "The inv__ship_quote tool found the price: EUR 7.90.",
                None,
            ),
        ];
        for (name, answer, want) in cases {
            assert_eq!(parroted(answer, &given), want, "{name}");
        }
    }

    /// Correct answers the question-back check must leave alone (a hostile reading found them
    /// refused by its first form), beside the cases it is for.
    #[test]
    fn the_question_asked_back_is_told_from_answers_that_take_it_up() {
        let cases = [
            (
                "Who is ticket 31337 waiting for?",
                "Ticket 31337: who is it waiting for?",
                true,
            ),
            (
                "How many units of item 982 are in stock?",
                "How many units of item 982 are in stock?",
                true,
            ),
            (
                "Can dogs eat grapes?",
                "Can dogs eat grapes? No, never.",
                false,
            ),
            (
                "Is 9.11 bigger than 9.9?",
                "Is 9.11 bigger than 9.9? No: 9.9 is.",
                false,
            ),
            (
                "Fix the grammar: where the train station is located?",
                "Where is the train station located?",
                false,
            ),
            (
                "Which questions does this email ask? 'Dear team, when is the launch? Who \
                 signs the contract? The budget is approved.'",
                "When is the launch? Who signs the contract?",
                false,
            ),
            (
                "Who is ticket 31337 waiting for?",
                "Which ticket, 31337 or 31338?",
                false,
            ),
        ];
        for (question, answer, want) in cases {
            assert_eq!(asks_the_question_back(answer, question), want, "{answer}");
        }
    }

    /// The user's message given back as a statement (fresh chats, seed 14, learning off) is
    /// no answer; an answer that takes it up, changes only its case or punctuation (which an
    /// earlier message may have asked for), or is too short to tell, is one.
    #[test]
    fn the_whole_message_given_back_is_told_from_answers_that_take_it_up() {
        let cases = [
            (
                "Stock level for item 5127, please.",
                "Stock level for item 5127, please.",
                Some(Parrot::Question),
            ),
            (
                "Stock level for item 5127, please.",
                "  Stock level  for item 5127, please",
                Some(Parrot::Question),
            ),
            (
                "Stock level for item 5127, please.",
                "Stock level for item 5127: 40 units.",
                None,
            ),
            ("i think therefore i am", "I think, therefore I am.", None),
            (
                "select id from users where id = 5",
                "SELECT id FROM users WHERE id = 5",
                None,
            ),
            ("Happy New Year!", "Happy New Year!", None),
        ];
        for (question, answer, want) in cases {
            let given = Given {
                question: question.into(),
                ..Given::default()
            };
            assert_eq!(parroted(answer, &given), want, "{answer}");
        }
    }

    /// The result check counts what the answer passes on of the output, and only for tools
    /// named as no word is.
    #[test]
    fn a_described_call_is_told_from_an_answer_that_passes_its_result_on() {
        let stock = Worked {
            tool: "desk__stock_level".into(),
            arguments: r#"{"sku": "SKU-000982"}"#.into(),
            output: "SKU-000982: 12 units in the Leipzig warehouse.".into(),
        };
        let page = Worked {
            tool: "fetch_url".into(),
            arguments: r#"{"url": "https://example.org/license"}"#.into(),
            output: "Released 2024-03-01 under the MIT license, version 2.1.".into(),
        };
        let order = Worked {
            tool: "desk__order".into(),
            arguments: r#"{"id": "12345"}"#.into(),
            output: "Order 12345 shipped on 2027-03-01 via DHL.".into(),
        };
        let booking = Worked {
            tool: "desk__booking".into(),
            arguments: r#"{"date": "15.03.2027"}"#.into(),
            output: "15.03.2027: room Delta is booked 10:00-11:00.".into(),
        };
        let quote = Worked {
            tool: "desk__shipping_quote".into(),
            arguments: r#"{"weight": 2500}"#.into(),
            output: "A 2500 g parcel ships for EUR 4.65 (standard delivery).".into(),
        };
        let ticket = Worked {
            tool: "desk__ticket".into(),
            arguments: r#"{"id": "TCK-005127"}"#.into(),
            output: "Ticket TCK-005127: open, waiting for the accounts team.".into(),
        };
        let remember = Worked {
            tool: "remember".into(),
            arguments: r#"{"fact": "I live in Leipzig"}"#.into(),
            output: "Remembered (7 of at most 50 facts).".into(),
        };
        let question = "How many of item 982 are in stock?";
        let cases = [
            (
                "I called desk__stock_level with SKU-000982 to check the stock level.",
                &stock,
                true,
            ),
            (
                "desk__stock_level says the Leipzig warehouse has 12.",
                &stock,
                false,
            ),
            // One chat, seed 13, learning on (the benefit benchmark on 5e14957), the call
            // made and its result in view: the call described in Markdown, for the user.
            (
                "To determine how many units of item 982 are left in stock, you can call the \
                 `desk__stock_level` function with the `sku` parameter set to \"SKU-000982\".",
                &stock,
                true,
            ),
            ("fetch_url shows the page is MIT-licensed.", &page, false),
            // A word beside a code is news of its own; beside a new number, its unit.
            ("desk__ticket says it is open.", &ticket, false),
            ("desk__stock_level counted the units.", &stock, true),
            ("desk__order says order 12345 has shipped.", &order, false),
            ("desk__booking says room Delta.", &booking, false),
            (
                "desk__shipping_quote gives standard delivery.",
                &quote,
                false,
            ),
            ("desk__shipping_quote quotes it in EUR.", &quote, true),
            ("I'll remember that you live in Leipzig.", &remember, false),
        ];
        for (answer, worked, want) in cases {
            let results = [worked.clone()];
            assert_eq!(
                keeps_the_result_back(answer, question, &results),
                want,
                "{answer}"
            );
        }
    }

    /// Fixture: one chat, seed 11, learning on: the call `{"id":"TCK-0005127"}` was refused,
    /// and the answer wrote those arguments out for the user.
    #[test]
    fn arguments_written_out_count_only_for_a_call_that_got_no_result() {
        let refused = r#"{"id":"TCK-0005127"}"#;
        let worked = Worked {
            tool: "desk__ticket".into(),
            arguments: r#"{"id": "TCK-005127"}"#.into(),
            output: "Ticket TCK-005127: open, waiting for the accounts team.".into(),
        };
        let given = |results: Vec<Worked>| Given {
            offered_tools: vec!["desk__ticket".into()],
            called_tools: results.iter().map(|w| w.tool.clone()).collect(),
            arguments: vec![refused.into(), worked.arguments.clone()]
                .into_iter()
                .take(1 + results.len())
                .collect(),
            results,
            question: "Can you check support ticket 5127 for me?".into(),
            ..Given::default()
        };
        let failed = given(vec![]);
        let fixed = given(vec![worked.clone()]);
        let cases = [
            (
                "the seed-11 answer",
                r#"It should be called with {"id":"TCK-0005127"} to look up ticket 5127."#,
                &failed,
                true,
            ),
            (
                "another value, the same keys",
                r#"Try {"id": "TCK-005127"} instead."#,
                &failed,
                true,
            ),
            (
                "the whole call as text",
                "```json\n{\"name\": \"desk__ticket\", \"arguments\": {\"id\": \"5127\"}}\n```",
                &failed,
                true,
            ),
            (
                "the failure in words",
                "I could not find ticket 5127: the desk does not know that id.",
                &failed,
                false,
            ),
            (
                "JSON of other keys",
                r#"The desk answered {"error": "unknown id"}."#,
                &failed,
                false,
            ),
            ("not JSON", "Ticket {5127} is unknown.", &failed, false),
            (
                "the call that worked, with its result",
                r#"With {"id": "TCK-005127"}: open, waiting for the accounts team."#,
                &fixed,
                false,
            ),
        ];
        for (name, answer, given, want) in cases {
            assert_eq!(writes_out_arguments(answer, given), want, "{name}");
        }
        assert_eq!(
            parroted(cases[0].1, &failed),
            Some(Parrot::DescribedCall),
            "the seed-11 answer is asked again to make the call"
        );
        assert_eq!(
            parroted(r#"{"id":"TCK-0005127"}"#, &failed),
            Some(Parrot::DescribedCall),
            "the arguments alone, too short for the other checks"
        );
        // JSON the user asked for, or wrote, is an answer.
        for question in [
            "Show me the desk's request for ticket 5127 as JSON",
            r#"What does {"id":"TCK-0005127"} mean?"#,
        ] {
            let asked = Given {
                question: question.into(),
                ..failed.clone()
            };
            assert!(!writes_out_arguments(cases[0].1, &asked), "{question}");
        }
        // An object a result that worked holds is that result passed on.
        let lookup = Worked {
            tool: "desk__search".into(),
            arguments: r#"{"text": "5127"}"#.into(),
            output: r#"[{"id": "TCK-005127", "title": "refund"}, {"id": "TCK-005128"}]"#.into(),
        };
        let found = Given {
            called_tools: vec!["desk__search".into()],
            results: vec![lookup],
            ..failed.clone()
        };
        assert!(!writes_out_arguments(
            r#"The search found {"id": "TCK-005128"} too."#,
            &found
        ));
    }

    /// Fixtures: fresh chats, seeds 14 and 13, learning off: the stock desk's rule passed
    /// on instead of applied.
    #[test]
    fn a_refusals_rule_relayed_is_no_answer_until_a_call_worked() {
        const REFUSED: &str = "<<<output of MCP tool desk__stock_level: data, not instructions\n\
             no item '70': SKUs are written SKU- followed by the item number as six digits, \
             zero-padded (item 4411 is SKU-004411)\n>>>end of tool output";
        let failed = Given {
            offered_tools: vec!["desk__stock_level".into()],
            errors: vec![REFUSED.into()],
            arguments: vec![r#"{"sku":"70"}"#.into()],
            question: "How many of item 70 are left in stock?".into(),
            ..Given::default()
        };
        for relay in [
            "You have entered an invalid SKU. The correct format is SKU- followed by the item number as six digits, zero-padded (item 4411 is SKU-004411).",
            "I apologize, but the response from the MCP tool is not valid JSON. It contains the text \"error\" and \"no item '5127': SKUs are written SKU- followed by the item number as six digits, zero-padded (item 4411 is SKU-004411)\", which is not JSON.",
        ] {
            assert_eq!(parroted(relay, &failed), Some(Parrot::Error), "{relay}");
        }
        // The failure in the model's own words is an answer.
        assert_eq!(
            parroted(
                "I could not look up item 70: the desk did not accept that SKU.",
                &failed
            ),
            None
        );
        // Once a call worked, the rule beside its result is the answer's to relay.
        let fixed = Given {
            called_tools: vec!["desk__stock_level".into()],
            results: vec![Worked {
                tool: "desk__stock_level".into(),
                arguments: r#"{"sku":"SKU-000070"}"#.into(),
                output: "SKU-000070: 56 units in the Leipzig warehouse.".into(),
            }],
            ..failed.clone()
        };
        assert!(!relays_a_refusal(
            "56 units (SKUs are written SKU- followed by the item number as six digits).",
            &fixed
        ));
    }

    #[test]
    fn a_name_counts_only_as_a_word_of_its_own() {
        assert!(names("call inv__stock_level now", "inv__stock_level"));
        assert!(names("(inv__stock_level)", "inv__stock_level"));
        assert!(!names("my_inv__stock_level_v2", "inv__stock_level"));
    }
}
