//! Whether a user's message corrects the bot's previous answer ("No, always give temperatures
//! in Celsius"), so that the reflection after it is shown the answer and the correction (see
//! [`super::evidence`]) and can learn the lesson that would have avoided it.
//!
//! The reflection on a turn runs right after it, so the correction of turn N arrives with
//! turn N+1: the message is read against the last answer of the history window the turn
//! read, and only when that window ends with the bot's answer.
//!
//! The detector is conservative: a missed correction costs one lesson, a false one shows the
//! reflection a "correction" that is a new request, so it asks for a lesson nobody needed.
//! It reads the message's first [`CUE_WINDOW_CHARS`] characters, lower-cased, in clauses (cut
//! at `. , ! ? ; : — –` and line breaks), with leading fillers ("actually", "but", "please",
//! "ok", ...) skipped, and counts:
//! - a verdict anywhere: "that's wrong", "that's not what", "not what I asked", "you
//!   misunderstood", "from now on", or a clause starting "next time";
//! - a verdict opening the message: "wrong", "incorrect", "not quite";
//! - "no" or "nope" opening the message, with something after it ("no, ..." or "no I/you/it
//!   ..."), unless that is politeness ("no thanks", "no worries", "no, that's all"), and
//!   unless the answer asked a question, which "no" then answers;
//! - outside a question, a clause that says what the user wants instead: "always ...",
//!   "never ...", "I said", "I meant", "I asked for", "it should be", "answer in ...",
//!   "give it in ...", or ending in "instead".
//!
//! Left out on purpose: "actually" alone ("actually great answer" praises), "should be"
//! without a subject pointing back ("what should be in a first-aid kit?"), and a bare "please
//! give X in Y", which is as often a new request ("please write a poem in French") as a
//! correction; with "always", "it" or "instead" it counts.
//!
//! ```
//! use heurist::agent::correction::corrects;
//! assert!(corrects("It is 68°F.", "No, always give temperatures in Celsius"));
//! assert!(!corrects("It is 68°F.", "and in Paris?"));
//! assert!(!corrects("Shall I convert it?", "No, thanks"));
//! ```

use crate::llm::ChatMessage;

/// Characters of a message searched for cues: a correction says so up front, and a long
/// message is more likely a new request that quotes "that's wrong" than a correction.
pub(crate) const CUE_WINDOW_CHARS: usize = 280;

/// A user's message that corrects the answer before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correction {
    /// The bot's previous answer, as the history holds it.
    pub answer: String,
    /// The user's message.
    pub message: String,
}

/// The correction `message` makes of the answer that ends `history` (the window the turn
/// read, without its new message); `None` when the window does not end with an answer or the
/// message does not read as a correction (see [`corrects`]).
pub(crate) fn correction(history: &[ChatMessage], message: &str) -> Option<Correction> {
    let ChatMessage::Assistant {
        content,
        tool_calls,
    } = history.last()?
    else {
        return None;
    };
    let answer = content.trim();
    (tool_calls.is_empty() && !answer.is_empty() && corrects(answer, message)).then(|| Correction {
        answer: answer.to_string(),
        message: message.trim().to_string(),
    })
}

/// Fillers skipped at a clause's start: they neither make nor unmake a correction ("actually,
/// I meant", "but I asked for", "please always").
const FILLERS: &[&str] = &[
    "actually", "also", "and", "but", "hmm", "just", "oh", "ok", "okay", "please", "so", "wait",
    "well",
];

/// Anywhere in the message, the user says the answer missed.
const VERDICTS: &[&str] = &[
    "that's wrong",
    "that's not right",
    "that's incorrect",
    "that's not correct",
    "that's not what",
    "not what i asked",
    "not what i meant",
    "not what i wanted",
    "not what i said",
    "you got it wrong",
    "you misunderstood",
    "you misread",
    "wrong answer",
    "from now on",
];

/// At a clause's start, even in a question ("next time, could you use Celsius?").
const CLAUSE_VERDICTS: &[&str] = &["next time"];

/// Opening the message, whatever follows ("Wrong.", "Incorrect, it is Tuesday").
const OPENING_VERDICTS: &[&str] = &["wrong", "incorrect", "not quite", "not right"];

/// "No" as an interjection opening the message ("no" before a noun is a determiner: "no
/// school tomorrow, what should we do?").
const NO: &[&str] = &["no", "nope"];

/// Words that may follow "no" without a comma ("no I meant Paris", "no it's Tuesday").
const AFTER_NO: &[&str] = &[
    "i", "you", "you're", "it", "it's", "that", "that's", "the", "this",
];

/// What makes a "no" polite, not a correction: "no thanks", "no worries", "no, that's all".
const POLITE: &[&str] = &[
    "thanks",
    "thank",
    "thx",
    "worries",
    "worry",
    "problem",
    "problems",
    "need",
    "rush",
    "way",
    "idea",
    "nothing",
    "not now",
    "not yet",
    "all good",
    "that's all",
    "that's it",
    "that's fine",
    "that's ok",
    "that's okay",
    "that's great",
    "that's perfect",
    "i'm good",
    "i'm fine",
    "i'm ok",
];

/// At a clause's start, outside a question: what the user wants instead. ("I asked for a
/// raise, how do I follow up?" is a question, and a new request.)
const DIRECTIVES: &[&str] = &[
    "i said",
    "i meant",
    "i asked for",
    "it should be",
    "that should be",
    "this should be",
    "it should have been",
    "that should have been",
    "the answer should be",
    "answer in",
    "reply in",
    "respond in",
    "don't ever",
];

/// After "it should be" (or "have been"): approval ("that should be fine"), not a correction.
const APPROVING: &[&str] = &["fine", "ok", "okay", "good", "great", "enough", "easy"];

/// "always"/"never" open a rule for the future with at least this many words after them
/// ("always give temperatures in Celsius"; "always?" is surprise).
const RULE_MIN_WORDS: usize = 2;

/// A verb and a word pointing back at the answer ("give it in Celsius", "write that as a
/// table"), followed by how it should be.
const REDO_VERBS: &[&str] = &["give", "write", "show", "put", "convert", "make"];
const BACK_REFERENCES: &[&str] = &["it", "that", "this", "them", "those", "these"];
const REDO_HOW: &[&str] = &["in", "as", "to", "into", "instead"];

/// Whether `message` reads as a correction of `answer` (see the module doc for the rules).
pub fn corrects(answer: &str, message: &str) -> bool {
    let head: String = message.chars().take(CUE_WINDOW_CHARS).collect();
    let clauses = clauses(&head);
    let Some(first) = clauses.iter().position(|c| !c.words.is_empty()) else {
        return false;
    };
    let asked = answer.trim_end().ends_with('?');
    clauses.iter().any(|c| {
        VERDICTS.iter().any(|v| contains(&c.words, v))
            || CLAUSE_VERDICTS.iter().any(|v| starts(&c.words, v))
            || (!c.question && directive(&c.words))
    }) || OPENING_VERDICTS
        .iter()
        .any(|v| starts(&clauses[first].words, v))
        || (!asked && says_no(&clauses[first..]))
}

/// "No" opening `clauses` (the message from its first word on), followed by a correction
/// rather than politeness.
fn says_no(clauses: &[Clause]) -> bool {
    let words = &clauses[0].words;
    if !NO.contains(&words[0].as_str())
        || words
            .get(1)
            .is_some_and(|w| !AFTER_NO.contains(&w.as_str()))
    {
        return false;
    }
    let rest: Vec<String> = clauses
        .iter()
        .flat_map(|c| c.words.iter())
        .skip(1)
        .cloned()
        .collect();
    !rest.is_empty() && !POLITE.iter().any(|p| starts(&rest, p))
}

/// A clause that says what the user wants instead: a rule ("always give temperatures in
/// Celsius"), a redo of the answer ("give it in Celsius"), a restatement (see
/// [`DIRECTIVES`]), or an alternative ("use Celsius instead").
fn directive(words: &[String]) -> bool {
    let Some(head) = words.first().map(String::as_str) else {
        return false;
    };
    let rule = matches!(head, "always" | "never")
        && words.len() > RULE_MIN_WORDS
        && !starts(words, "never mind");
    let redo = words.len() > 2
        && REDO_VERBS.contains(&head)
        && BACK_REFERENCES.contains(&words[1].as_str())
        && words[2..].iter().any(|w| REDO_HOW.contains(&w.as_str()));
    let restated = DIRECTIVES.iter().any(|d| {
        let approves = d.contains("should")
            && words
                .get(d.split(' ').count())
                .is_some_and(|w| APPROVING.contains(&w.as_str()));
        starts(words, d) && !approves
    });
    let instead = words.len() > 1 && words.last().is_some_and(|w| w == "instead");
    rule || redo || restated || instead
}

/// One clause of a message: its words, and whether its sentence ends with a question mark.
#[derive(Debug)]
struct Clause {
    words: Vec<String>,
    question: bool,
}

/// `text` in clauses of normalised words: lower-cased, curly apostrophes straight, fillers
/// skipped at the start, and "that is", "it is", "you are", "i am" contracted, so each cue is
/// written once.
fn clauses(text: &str) -> Vec<Clause> {
    let text = text.to_lowercase().replace(['’', '‘'], "'");
    let mut out = Vec::new();
    for sentence in text.split_inclusive(['.', '!', '?', '\n', '…']) {
        let question = sentence.trim_end().ends_with('?');
        for clause in sentence.split([',', ';', ':', '—', '–', '.', '!', '?', '\n', '…']) {
            let words = normalised(clause.split_whitespace());
            out.push(Clause { words, question });
        }
    }
    out
}

/// A clause's `raw` words as [`clauses`] gives them.
fn normalised<'a>(raw: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in raw {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let word = word.trim_matches('\'');
        if word.is_empty() || (words.is_empty() && FILLERS.contains(&word)) {
            continue;
        }
        let contracted = match (words.last().map(String::as_str), word) {
            (Some("that"), "is") => Some("that's"),
            (Some("it"), "is") => Some("it's"),
            (Some("you"), "are") => Some("you're"),
            (Some("i"), "am") => Some("i'm"),
            _ => None,
        };
        match contracted {
            Some(c) => *words.last_mut().expect("a last word") = c.to_string(),
            None => words.push(match word {
                "thats" => "that's".to_string(),
                "youre" => "you're".to_string(),
                "dont" => "don't".to_string(),
                "im" => "i'm".to_string(),
                other => other.to_string(),
            }),
        }
    }
    words
}

/// Whether `words` begin with the words of `phrase`.
fn starts(words: &[String], phrase: &str) -> bool {
    let phrase: Vec<&str> = phrase.split(' ').collect();
    words.len() >= phrase.len() && words.iter().zip(&phrase).all(|(w, p)| w == p)
}

/// Whether the words of `phrase` occur in `words`, in a row.
fn contains(words: &[String], phrase: &str) -> bool {
    (0..words.len()).any(|at| starts(&words[at..], phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer the table's messages follow: a statement, not a question.
    const ANSWER: &str = "It is 68°F in Paris.";

    /// Messages that correct [`ANSWER`]: (name, message).
    const CORRECTIONS: &[(&str, &str)] = &[
        ("no, then a rule", "No, always give temperatures in Celsius"),
        ("says it is wrong", "That's wrong, Paris is in France"),
        (
            "that is, spelled out",
            "That is not right. It is 20 degrees",
        ),
        ("curly apostrophe", "That’s not what I asked"),
        ("not what I asked", "not what i asked for"),
        ("restates", "I said Celsius."),
        ("actually, I meant", "Actually, I meant Paris, Texas"),
        ("actually I meant, no comma", "actually i meant paris texas"),
        ("should be", "It should be 20 °C"),
        ("instead", "use Celsius instead"),
        ("always, alone", "Always answer in English"),
        (
            "please always",
            "please always give temperatures in Celsius",
        ),
        ("please answer in", "Please answer in French."),
        ("give it in", "give it in Celsius please"),
        (
            "next time, in a question",
            "next time, could you use Celsius?",
        ),
        ("from now on", "From now on can you use Celsius?"),
        ("one word", "Wrong."),
        ("nope with a fact", "nope, it is 20 degrees there"),
        ("no I, without a comma", "No I meant Paris in Texas"),
        ("shouted", "NO, I MEANT CELSIUS"),
        ("thanks, but", "Thanks, but I asked for Celsius"),
        (
            "a rule, then a question",
            "Always use Celsius. What about Rome?",
        ),
        (
            "misunderstood",
            "You misunderstood me: I wanted the forecast",
        ),
    ];

    /// Ordinary follow-ups of [`ANSWER`]: (name, message).
    const FOLLOW_UPS: &[(&str, &str)] = &[
        ("thanks", "thanks"),
        ("another city", "and in Paris?"),
        ("another day", "what about tomorrow?"),
        ("no worries", "no worries, thanks"),
        ("actually praises", "actually great answer"),
        ("actually, thanks", "Actually, thanks!"),
        ("a bare no", "No"),
        (
            "no as a determiner",
            "No school tomorrow, what should we do?",
        ),
        ("no, that's all", "No, that's all for today"),
        ("is that wrong? asks", "Is that wrong?"),
        (
            "should be in a question",
            "What should be in a first-aid kit?",
        ),
        ("approves", "That should be fine, thanks"),
        (
            "next time, mid-sentence",
            "When is the next time the bus leaves?",
        ),
        ("never mind", "Never mind, what about Rome?"),
        ("instead, asked", "Can I use butter instead?"),
        ("I asked, asked", "I asked for a raise, how do I follow up?"),
        ("always, surprised", "always?"),
        ("a new request with in", "please write a poem in French"),
        ("a cue after the window", LONG),
    ];

    /// A long new request whose one cue comes after the first 280 characters.
    const LONG: &str = "Here is an essay I wrote for school about the history of the city of \
        Rome, from its founding to the fall of the western empire, with a few notes on its \
        architecture and how people lived there day to day; could you check its grammar, \
        its spelling and the order of its paragraphs for me, and tell me where it drags? \
        My teacher said that's wrong in the third paragraph.";

    #[test]
    fn corrections_and_follow_ups() {
        assert!(LONG.find("that's wrong").unwrap() > CUE_WINDOW_CHARS);
        for (name, message) in CORRECTIONS {
            assert!(corrects(ANSWER, message), "{name}: {message:?}");
        }
        for (name, message) in FOLLOW_UPS {
            assert!(!corrects(ANSWER, message), "{name}: {message:?}");
        }
    }

    /// After the bot's question, "no" answers it; a verdict still corrects.
    #[test]
    fn no_answers_a_question() {
        let asked = "Shall I convert it to Celsius?";
        assert!(!corrects(asked, "No, keep it in Fahrenheit"));
        assert!(!corrects(asked, "no, that's all"));
        assert!(corrects(asked, "That's wrong, I said Celsius"));
        assert!(corrects(asked, "No, always give it in Celsius"), "a rule");
    }

    #[test]
    fn only_a_window_that_ends_with_an_answer_is_corrected() {
        let message = "No, always give temperatures in Celsius";
        let answered = [
            ChatMessage::user("how warm is it in Paris?"),
            ChatMessage::assistant("  It is 68°F.\n"),
        ];
        assert_eq!(
            correction(&answered, message),
            Some(Correction {
                answer: "It is 68°F.".into(),
                message: message.into(),
            })
        );
        assert_eq!(correction(&[], message), None, "a new conversation");
        assert_eq!(
            correction(&answered[..1], message),
            None,
            "no answer to correct"
        );
        let empty = [ChatMessage::user("hi"), ChatMessage::assistant("")];
        assert_eq!(correction(&empty, message), None);
        assert_eq!(correction(&answered, "thanks"), None);
    }
}
