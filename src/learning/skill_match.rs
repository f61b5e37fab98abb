//! Which skills a message asks for: the evidence a message gives that it needs what a skill
//! does, summed from the words and phrases it shares with the skill.
//!
//! A skill's *subject* is its name and description. In the Agent Skills format the description
//! says what the skill does and when to use it: it is written for this choice (and it is what
//! embeddings compare). The body is instructions to the model, in ordinary prose ("call
//! `current_time` first", "double-check month lengths"), so its words say little about which
//! messages need them; they only back up the subject.
//!
//! The evidence a message gives for a skill adds up:
//! - [`SUBJECT`] (1) for each term of the skill's subject that the message uses;
//! - [`PHRASE`] (½) for each phrase, two adjacent words, of the skill's text that the message
//!   uses ("what time", "days until", "key points"; one of the two must not be a stopword);
//! - [`INSTRUCTIONS`] (¼) for each term only the skill's body uses.
//!
//! A term or phrase that n skills share counts 1/n of that for each: it says less about which
//! one fits. A skill fits at `min_skill_score`, by default 2: two words of its subject, or one
//! with phrases or instructions around it. One shared word is not enough: "time" in "time
//! complexity" or "page" in "page numbers" is a coincidence, two rarely are; and stopwords
//! ("how many", "what is") carry nothing at all. Measured on the labelled messages in
//! `tests/data/skill_labels.tsv` (see `skill_precision`).
//!
//! Terms are [`terms`] without numbers: a date in a skill's instructions is an example, not its
//! subject. A link is the word of its scheme ("https"), not the words of its address.
//!
//! ```
//! use heurist::learning::skill_match::SkillIndex;
//! use heurist::learning::skills::Skill;
//! let skill = |name: &str, description: &str, body: &str| Skill {
//!     name: name.into(),
//!     description: description.into(),
//!     body: body.into(),
//!     path: Default::default(),
//! };
//! let index = SkillIndex::new(&[
//!     skill("date-time", "What time is it, time zones, how many days until a date.", "Call current_time first."),
//!     skill("writing-help", "Proofread or rewrite emails and posts.", "Keep the user's voice."),
//! ]);
//! let fit = |message: &str| index.evidence(message);
//! assert!(fit("How many days until Christmas?")[0] >= 2.0);
//! assert!(fit("What time is it in Tokyo?")[0] >= 2.0);
//! assert_eq!(fit("How many units are in stock?"), [0.0, 0.0]);
//! assert!(fit("What is the time complexity of quicksort?")[0] < 2.0);
//! assert!(fit("please proofread my email")[1] >= 2.0);
//! ```

use std::collections::HashMap;

use super::skills::Skill;
use super::text::{STOPWORDS, stem, terms, words};

/// Evidence from a term of a skill's name or description.
pub(crate) const SUBJECT: f32 = 1.0;
/// Evidence from a phrase (two adjacent words) of a skill's text.
pub(crate) const PHRASE: f32 = 0.5;
/// Evidence from a term that only a skill's instructions (its body) use.
pub(crate) const INSTRUCTIONS: f32 = 0.25;

/// What each skill's terms and phrases are worth as evidence for it.
pub struct SkillIndex {
    skills: Vec<Weights>,
}

#[derive(Default)]
struct Weights {
    terms: HashMap<String, f32>,
    phrases: HashMap<(String, String), f32>,
}

impl SkillIndex {
    pub fn new(skills: &[Skill]) -> Self {
        let subjects: Vec<Vec<String>> = skills
            .iter()
            .map(|s| skill_terms(&format!("{} {}", s.name, s.description)))
            .collect();
        let instructions: Vec<Vec<String>> = skills
            .iter()
            .zip(&subjects)
            .map(|(s, subject)| {
                let mut only = skill_terms(&s.body);
                only.retain(|t| !subject.contains(t));
                only
            })
            .collect();
        let phrases: Vec<Vec<(String, String)>> = skills
            .iter()
            .map(|s| phrases(&format!("{} {}\n{}", s.name, s.description, s.body)))
            .collect();
        let mut index = Self {
            skills: skills.iter().map(|_| Weights::default()).collect(),
        };
        for (weight, lists) in [(SUBJECT, &subjects), (INSTRUCTIONS, &instructions)] {
            let shares = sharing(lists);
            for (skill, list) in index.skills.iter_mut().zip(lists) {
                for term in list {
                    skill
                        .terms
                        .insert(term.clone(), weight / share(&shares, term));
                }
            }
        }
        let shares = sharing(&phrases);
        for (skill, list) in index.skills.iter_mut().zip(&phrases) {
            for phrase in list {
                skill
                    .phrases
                    .insert(phrase.clone(), PHRASE / share(&shares, phrase));
            }
        }
        index
    }

    /// The evidence `message` gives for each skill, in skill order (see the module doc).
    pub fn evidence(&self, message: &str) -> Vec<f32> {
        let terms = skill_terms(message);
        let phrases = phrases(message);
        self.skills
            .iter()
            .map(|skill| {
                let from_terms: f32 = terms.iter().filter_map(|t| skill.terms.get(t)).sum();
                let from_phrases: f32 = phrases.iter().filter_map(|p| skill.phrases.get(p)).sum();
                from_terms + from_phrases
            })
            .collect()
    }
}

/// How many of the lists hold each item.
fn sharing<T: Clone + Eq + std::hash::Hash>(lists: &[Vec<T>]) -> HashMap<T, usize> {
    let mut shares = HashMap::new();
    for list in lists {
        for item in list {
            *shares.entry(item.clone()).or_insert(0) += 1;
        }
    }
    shares
}

#[allow(clippy::cast_precision_loss)]
fn share<T: Eq + std::hash::Hash>(shares: &HashMap<T, usize>, item: &T) -> f32 {
    shares.get(item).copied().unwrap_or(1).max(1) as f32
}

/// `text` with each link replaced by its scheme, so `https://www.bbc.com/news/x` is one word
/// of evidence ("https"), not "bbc" and "news".
fn without_addresses(text: &str) -> String {
    text.split_whitespace()
        .map(|token| {
            let link = token.trim_start_matches(['(', '<', '[', '"', '\'']);
            match ["https://", "http://"]
                .iter()
                .find(|s| link.starts_with(*s))
            {
                Some(scheme) => scheme.trim_end_matches("://"),
                None => token,
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn number(word: &str) -> bool {
    word.chars().all(|c| c.is_ascii_digit())
}

/// The distinct [`terms`] of `text` without numbers.
fn skill_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = terms(&without_addresses(text))
        .into_iter()
        .filter(|t| !number(t))
        .collect();
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// The distinct pairs of adjacent words of `text` (stemmed; single letters skipped, as in
/// [`terms`]) of which at least one is not a stopword and neither is a number.
fn phrases(text: &str) -> Vec<(String, String)> {
    let words: Vec<String> = words(&without_addresses(text))
        .into_iter()
        .filter(|w| w.chars().nth(1).is_some())
        .collect();
    let stop = |w: &String| STOPWORDS.contains(&w.as_str());
    let mut phrases: Vec<(String, String)> = words
        .windows(2)
        .filter(|pair| !(stop(&pair[0]) && stop(&pair[1])))
        .filter(|pair| !number(&pair[0]) && !number(&pair[1]))
        .map(|pair| (stem(&pair[0]), stem(&pair[1])))
        .collect();
    phrases.sort_unstable();
    phrases.dedup();
    phrases
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, description: &str, body: &str) -> Skill {
        Skill {
            name: name.into(),
            description: description.into(),
            body: body.into(),
            path: Default::default(),
        }
    }

    #[test]
    fn evidence_adds_up_by_where_the_words_are() {
        let index = SkillIndex::new(&[
            skill(
                "date-time",
                "Time zones and deadlines.",
                "Call current_time first; mind daylight saving.",
            ),
            skill(
                "web-research",
                "Search the web; cite sources.",
                "Call fetch_url.",
            ),
        ]);
        struct Case {
            name: &'static str,
            message: &'static str,
            evidence: [f32; 2],
        }
        let cases = [
            Case {
                name: "two subject words",
                message: "which time zone is Lima in",
                // time, zone, and the phrase "time zone".
                evidence: [2.5, 0.0],
            },
            Case {
                name: "a word only the instructions use counts a quarter",
                message: "daylight",
                evidence: [0.25, 0.0],
            },
            Case {
                name: "instruction words two skills share count an eighth each",
                message: "call",
                evidence: [0.125, 0.125],
            },
            Case {
                name: "stopwords and numbers count nothing",
                message: "how many of them are there in 2028?",
                evidence: [0.0, 0.0],
            },
            Case {
                name: "a link is its scheme, not its address",
                message: "https://example.com/time/zones/deadlines",
                evidence: [0.0, 0.0],
            },
        ];
        for case in cases {
            assert_eq!(index.evidence(case.message), case.evidence, "{}", case.name);
        }
    }

    #[test]
    fn phrases_need_a_word_that_is_not_a_stopword() {
        assert_eq!(
            phrases("How many days until it is 2030?"),
            [
                ("day".to_string(), "until".to_string()),
                ("many".into(), "day".into())
            ]
        );
        assert_eq!(
            without_addresses("see (https://a.b/c) now"),
            "see https now"
        );
    }
}
