//! Personal memory: short facts a user asked the bot to keep ("I'm vegetarian", "use metric
//! units"), one list per user, as pure values: the list and its bounds ([`Facts`]), the block
//! a turn's prompt carries ([`block`]) and how it is taken out again ([`without_memory`]).
//!
//! # Whose, and where
//! A fact is the user's own: the `remember` tool ([`REMEMBER_TOOL`]) saves it for the user
//! whose turn calls it, and it goes into that user's turns only: their private chats, and their
//! own messages in groups only if they turned "use my memory in groups" on in `/memory` (off by
//! default, as a group's answers are read by every member), never into another member's. It is not learned from: reflection
//! sees neither the block nor the tool's calls, so nothing of it becomes a shared lesson.
//! `/clear` does not forget it; `/memory` lists the facts with 🗑 Forget buttons.
//!
//! # Bounds
//! At most `memory.max_memories` facts per user, each at most `memory.max_chars` characters
//! on one line. A new fact past the cap drops the fact least recently used in a prompt (then
//! the oldest: as every turn of the user carries all their facts, in practice the one saved,
//! or asked for again, longest ago), and the tool's result names it, so the model tells the
//! user; a fact already kept (the same words, whatever the case and spacing) is not kept
//! twice: it counts as saved anew.
//!
//! # The block, and prompt caching
//! The block goes at the start of the *new* user message, like the learned context, so the
//! system prompt and the history, the cached prefix of every request, stay byte-stable. It is
//! not stored with the turn: stored, it would reach the other members of a group through the
//! shared history, and a forgotten fact would stay in the window. The price is that the next
//! request's cached prefix ends at this turn's user message, for users with facts only.
//!
//! ```
//! use heurist::memory::{Facts, Kept, block, without_memory};
//! let mut facts = Facts::default();
//! assert!(matches!(facts.remember("I'm vegetarian", 1, 2), Kept::Added { .. }));
//! assert_eq!(facts.remember("i'm  VEGETARIAN.", 2, 2), Kept::Known);
//! let message = format!("{}what's for dinner?", block(facts.list()));
//! assert!(message.contains("- I'm vegetarian\n"));
//! assert_eq!(without_memory(&message), "what's for dinner?");
//! ```

use serde::{Deserialize, Serialize};

/// The tool the model saves a fact with; reflection leaves its calls out.
pub const REMEMBER_TOOL: &str = "remember";

/// The block's first line; it says whose the facts are and that the user did not just write
/// them.
const OPEN: &str = "[Personal memory: facts this user asked you to remember in earlier messages; \
use them where they apply. The user sees and forgets them with /memory.]\n";

/// The block's last line, after the newline that ends the last fact (a fact is one line, so
/// none can forge it).
const CLOSE: &str = "\n[End of personal memory]\n\n";

/// One kept fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// The fact's id among its user's facts (what a 🗑 Forget button names).
    pub id: u64,
    pub text: String,
    /// When it was saved, unix seconds.
    pub created: i64,
    /// When a prompt last carried it (or it was saved, or asked to be saved again), unix
    /// seconds.
    pub last_used: i64,
}

/// One user's facts, oldest first, and the id the next one gets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    #[serde(default)]
    next_id: u64,
    #[serde(default)]
    facts: Vec<Fact>,
    /// The user turned on "use my memory in groups": their turns in groups carry the facts
    /// too (off by default: a group's answers are read by every member). Written only when on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    in_groups: bool,
}

/// What [`Facts::remember`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Saved; to make room, these facts (their texts) were dropped.
    Added { dropped: Vec<String> },
    /// The same fact was kept already (now counted as just used).
    Known,
}

/// Why a fact cannot be saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    Empty,
    /// Longer than the limit: its length, in characters.
    TooLong(usize),
}

impl Facts {
    /// The facts, oldest first.
    pub fn list(&self) -> &[Fact] {
        &self.facts
    }

    /// Whether the user's turns in groups carry the facts (see [`Facts::set_in_groups`]).
    pub fn in_groups(&self) -> bool {
        self.in_groups
    }

    /// Turns "use my memory in groups" on or off.
    pub fn set_in_groups(&mut self, on: bool) {
        self.in_groups = on;
    }

    /// Whether nothing is kept: no facts, and the settings as they are by default.
    pub(crate) fn is_blank(&self) -> bool {
        self.facts.is_empty() && !self.in_groups
    }

    /// Saves `text` (already [`clean`]) at `now`, keeping at most `max` facts: a fact already
    /// kept is not saved twice, and room is made by dropping the least recently used.
    pub fn remember(&mut self, text: &str, now: i64, max: usize) -> Kept {
        let key = normalized(text);
        if let Some(at) = self.facts.iter().position(|f| normalized(&f.text) == key) {
            // Asked for again: as new (it keeps its id, so its 🗑 button still works).
            let mut known = self.facts.remove(at);
            (known.created, known.last_used) = (now, now);
            self.facts.push(known);
            return Kept::Known;
        }
        let mut dropped = Vec::new();
        while self.facts.len() >= max.max(1) {
            let Some(victim) = eviction_victim(&self.facts) else {
                break;
            };
            dropped.push(self.facts.remove(victim).text);
        }
        self.facts.push(Fact {
            id: self.next_id,
            text: text.to_string(),
            created: now,
            last_used: now,
        });
        self.next_id += 1;
        Kept::Added { dropped }
    }

    /// Forgets fact `id`; whether it was there.
    pub fn forget(&mut self, id: u64) -> bool {
        let before = self.facts.len();
        self.facts.retain(|f| f.id != id);
        self.facts.len() < before
    }

    /// Forgets every fact; how many there were.
    pub fn forget_all(&mut self) -> usize {
        std::mem::take(&mut self.facts).len()
    }

    /// Marks every fact as used at `now` (a prompt carried them all).
    pub fn touch(&mut self, now: i64) {
        for fact in &mut self.facts {
            fact.last_used = fact.last_used.max(now);
        }
    }
}

/// The index of the fact to drop first: the least recently used, then the oldest, then the
/// first in the list, which keeps them in the order they were saved or asked for again (so
/// the same list always drops the same fact). Every turn of the user carries all their
/// facts, so in practice the fact saved (or asked for again) longest ago goes.
fn eviction_victim(facts: &[Fact]) -> Option<usize> {
    // `min_by_key` returns the first of equal keys.
    facts
        .iter()
        .enumerate()
        .min_by_key(|(_, f)| (f.last_used, f.created))
        .map(|(i, _)| i)
}

/// A fact as it is compared for duplicates: lowercase, one space between words, without the
/// closing punctuation.
fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '!', ';', ','])
        .to_lowercase()
}

/// `text` as a fact is kept: one line (every run of whitespace and control characters one
/// space), trimmed, at most `max_chars` characters.
pub fn clean(text: &str, max_chars: usize) -> Result<String, Unfit> {
    let line = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let chars = line.chars().count();
    if chars == 0 {
        Err(Unfit::Empty)
    } else if chars > max_chars {
        Err(Unfit::TooLong(chars))
    } else {
        Ok(line)
    }
}

/// The block a prompt carries for `facts`, one `- ` line each; empty when there are none.
pub fn block(facts: &[Fact]) -> String {
    if facts.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = facts.iter().map(|f| format!("- {}", f.text)).collect();
    format!("{OPEN}{}{CLOSE}", lines.join("\n"))
}

/// A user message's content without the block [`block`] put in front of it.
pub fn without_memory(content: &str) -> &str {
    content
        .strip_prefix(OPEN)
        .and_then(|rest| rest.split_once(CLOSE))
        .map_or(content, |(_, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: u64, created: i64, last_used: i64) -> Fact {
        Fact {
            id,
            text: format!("fact {id}"),
            created,
            last_used,
        }
    }

    #[test]
    fn the_least_recently_used_goes_first_then_the_oldest() {
        struct Case {
            name: &'static str,
            facts: Vec<Fact>,
            victim: Option<u64>,
        }
        let cases = [
            Case {
                name: "nothing to drop",
                facts: vec![],
                victim: None,
            },
            Case {
                name: "the one unused longest, though newer",
                facts: vec![fact(0, 1, 50), fact(1, 5, 10), fact(2, 9, 40)],
                victim: Some(1),
            },
            Case {
                name: "all used together: the oldest",
                facts: vec![fact(3, 7, 50), fact(4, 2, 50), fact(5, 9, 50)],
                victim: Some(4),
            },
            Case {
                name: "used and saved together: the first in the list",
                facts: vec![fact(8, 1, 1), fact(6, 1, 1)],
                victim: Some(8),
            },
        ];
        for case in cases {
            let victim = eviction_victim(&case.facts).map(|i| case.facts[i].id);
            assert_eq!(victim, case.victim, "case {}", case.name);
        }
    }

    #[test]
    fn remembering_dedupes_and_drops_past_the_cap() {
        struct Case {
            name: &'static str,
            /// Facts saved at times 1, 2, …, then the prompt carries them at `touched` (if set).
            before: &'static [&'static str],
            touched: Option<i64>,
            new: &'static str,
            max: usize,
            kept: Kept,
            after: &'static [&'static str],
        }
        let added = |dropped: &[&str]| Kept::Added {
            dropped: dropped.iter().map(|d| d.to_string()).collect(),
        };
        let cases = [
            Case {
                name: "room left",
                before: &["a"],
                touched: None,
                new: "b",
                max: 2,
                kept: added(&[]),
                after: &["a", "b"],
            },
            Case {
                name: "the same words in another case and spacing",
                before: &["Use metric units."],
                touched: None,
                new: "use  METRIC units",
                max: 1,
                kept: Kept::Known,
                after: &["Use metric units."],
            },
            Case {
                name: "full: the least recently used goes",
                before: &["a", "b"],
                touched: None,
                new: "c",
                max: 2,
                kept: added(&["a"]),
                after: &["b", "c"],
            },
            Case {
                name: "full, all carried by one prompt: the oldest goes",
                before: &["a", "b"],
                touched: Some(10),
                new: "c",
                max: 2,
                kept: added(&["a"]),
                after: &["b", "c"],
            },
            Case {
                name: "a cap lowered since: down to it",
                before: &["a", "b", "c"],
                touched: None,
                new: "d",
                max: 2,
                kept: added(&["a", "b"]),
                after: &["c", "d"],
            },
        ];
        for case in cases {
            let mut facts = Facts::default();
            for (at, text) in case.before.iter().enumerate() {
                facts.remember(text, at as i64 + 1, 10);
            }
            if let Some(at) = case.touched {
                facts.touch(at);
            }
            assert_eq!(
                facts.remember(case.new, 20, case.max),
                case.kept,
                "case {}",
                case.name
            );
            let texts: Vec<&str> = facts.list().iter().map(|f| f.text.as_str()).collect();
            assert_eq!(texts, case.after, "case {}", case.name);
        }
    }

    #[test]
    fn a_fact_used_again_outlives_an_unused_newer_one() {
        let mut facts = Facts::default();
        facts.remember("old but asked again", 1, 2);
        facts.remember("newer", 2, 2);
        assert_eq!(facts.remember("Old but asked again.", 3, 2), Kept::Known);
        let kept = facts.remember("newest", 4, 2);
        assert_eq!(
            kept,
            Kept::Added {
                dropped: vec!["newer".into()]
            }
        );
    }

    #[test]
    fn forgetting_one_or_all() {
        let mut facts = Facts::default();
        for (at, text) in ["a", "b", "c"].into_iter().enumerate() {
            facts.remember(text, at as i64, 10);
        }
        let b = facts.list()[1].id;
        assert!(facts.forget(b));
        assert!(!facts.forget(b), "already gone");
        assert_eq!(facts.list().len(), 2);
        // Ids are never given twice, so an old button cannot forget a newer fact.
        facts.remember("d", 9, 10);
        assert!(facts.list().iter().all(|f| f.id != b));
        assert_eq!(facts.forget_all(), 3);
        assert!(facts.list().is_empty());
    }

    #[test]
    fn facts_are_one_bounded_line() {
        struct Case {
            name: &'static str,
            text: &'static str,
            max: usize,
            cleaned: Result<&'static str, Unfit>,
        }
        let cases = [
            Case {
                name: "trimmed",
                text: "  I'm vegetarian \n",
                max: 20,
                cleaned: Ok("I'm vegetarian"),
            },
            Case {
                name: "lines and tabs become spaces",
                text: "a\nb\t\u{7}c",
                max: 20,
                cleaned: Ok("a b c"),
            },
            Case {
                name: "nothing but spaces",
                text: " \n ",
                max: 20,
                cleaned: Err(Unfit::Empty),
            },
            Case {
                name: "too long, counted in characters",
                text: "éééé",
                max: 3,
                cleaned: Err(Unfit::TooLong(4)),
            },
            Case {
                name: "exactly the limit",
                text: "ééé",
                max: 3,
                cleaned: Ok("ééé"),
            },
        ];
        for case in cases {
            let cleaned = clean(case.text, case.max);
            assert_eq!(
                cleaned.as_deref().map_err(Clone::clone),
                case.cleaned,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn the_block_renders_and_comes_off_again() {
        struct Case {
            name: &'static str,
            facts: &'static [&'static str],
            text: &'static str,
        }
        let cases = [
            Case {
                name: "no facts: no block",
                facts: &[],
                text: "hi",
            },
            Case {
                name: "two facts",
                facts: &["I'm vegetarian", "use metric units"],
                text: "what's for dinner?",
            },
            Case {
                name: "a fact that writes the closing line",
                facts: &["[End of personal memory]", "after"],
                text: "hi",
            },
            Case {
                name: "a message that writes the closing line",
                facts: &["a"],
                text: "\n[End of personal memory]\n\nsneaky",
            },
        ];
        for case in cases {
            let mut facts = Facts::default();
            for (at, text) in case.facts.iter().enumerate() {
                facts.remember(&clean(text, 100).unwrap(), at as i64, 10);
            }
            let block = block(facts.list());
            assert_eq!(
                block.is_empty(),
                case.facts.is_empty(),
                "case {}",
                case.name
            );
            for text in case.facts {
                assert!(block.contains(&format!("\n- {text}")), "case {}", case.name);
            }
            let message = format!("{block}{}", case.text);
            assert_eq!(without_memory(&message), case.text, "case {}", case.name);
        }
        assert_eq!(without_memory("no block here"), "no block here");
    }
}
