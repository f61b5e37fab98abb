//! Ids as types: a chat, a user, an update, a forum topic, a turn.
//!
//! Telegram names everything with a bare integer, and a bare `i64` could be a chat, a user
//! (whose private chat shares their id) or a topic; passing one where another belongs compiles
//! and goes wrong quietly. Each id here is its own type, so the compiler tells them apart. The
//! number inside is public (`ChatId(42)` builds one, `.0` reads it back at the edge, where
//! Telegram or sled wants the bare integer), and every id serializes as that bare integer
//! (`#[serde(transparent)]`), so a record stored before these types reads the same today.
//!
//! [`base36`] is the one base-36 encoder: turn ids (on a ⏹'s callback data) and the store's
//! ticket ids are written with it, which keeps either far under Telegram's 64 bytes.
//!
//! ```
//! use heurist::ids::{ChatId, TurnId, UserId, base36};
//! assert_eq!(ChatId(-100).to_string(), "-100");
//! assert_eq!(UserId(42).private_chat(), Some(ChatId(42)));
//! assert_eq!(UserId(u64::MAX).private_chat(), None);
//! assert_eq!(base36(35), "000000000000z");
//! let id = TurnId(u64::MAX);
//! assert_eq!(id.to_string(), "3w5e11264sgsf");
//! assert_eq!(TurnId::parse(&id.to_string()), Some(id));
//! assert_eq!(TurnId::parse("not an id!"), None);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares an integer id: a newtype that is stored and shown as its bare number.
macro_rules! integer_id {
    ($(#[$doc:meta])* $name:ident($int:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $int);

        /// The bare number, as logs have always shown it.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

integer_id! {
    /// A Telegram chat: a private chat (positive, the user's own id), a group or a channel
    /// (negative).
    ChatId(i64)
}

integer_id! {
    /// A Telegram user (a person or a bot).
    UserId(u64)
}

integer_id! {
    /// A Telegram update, the unit the bot receives; its id orders and de-duplicates them.
    UpdateId(u32)
}

integer_id! {
    /// A forum topic of a chat: the thread id (`message_thread_id`) its messages carry.
    TopicId(i32)
}

impl ChatId {
    /// Whether this is a user's private chat with the bot, where nobody else writes (Telegram
    /// gives those the user's own, positive, id).
    #[must_use]
    pub(crate) const fn is_private(self) -> bool {
        self.0 > 0
    }
}

impl UserId {
    /// The user's private chat with the bot, whose id is the user's own; `None` for an id no
    /// chat can have (past `i64`, which Telegram never gives).
    #[must_use]
    pub fn private_chat(self) -> Option<ChatId> {
        i64::try_from(self.0).ok().map(ChatId)
    }
}

/// How many base-36 digits a `u64` needs (36^13 > 2^64).
pub(crate) const BASE36_CHARS: usize = 13;

/// `n` in lower-case base 36, zero-padded to [`BASE36_CHARS`], so every id has one length.
#[must_use]
pub fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; BASE36_CHARS];
    for digit in out.iter_mut().rev() {
        *digit = DIGITS[(n % 36) as usize];
        n /= 36;
    }
    out.iter().map(|&b| char::from(b)).collect()
}

/// A turn's id: unique within a run, and starting from a random point, so a ⏹ left on screen
/// by an earlier run of the bot names no turn of this one. Shown in base 36 without leading
/// zeros (at most 13 characters), which keeps the ⏹'s callback data far under 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TurnId(pub u64);

impl TurnId {
    /// The id that `text` spells in lower-case base 36; `None` for anything else (forged or
    /// garbled data names no turn).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let canonical = !text.is_empty()
            && text.len() <= BASE36_CHARS
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
        if !canonical {
            return None;
        }
        u64::from_str_radix(text, 36).ok().map(Self)
    }
}

impl fmt::Display for TurnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = base36(self.0);
        let short = digits.trim_start_matches('0');
        f.write_str(if short.is_empty() { "0" } else { short })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the store kept it before the id types, and the same record with them.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Bare {
        chat: i64,
        user: u64,
        update: Option<u32>,
        topic: Option<i32>,
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Typed {
        chat: ChatId,
        user: UserId,
        update: Option<UpdateId>,
        topic: Option<TopicId>,
    }

    #[test]
    fn a_record_with_ids_is_stored_byte_for_byte_as_with_bare_integers() {
        struct Case {
            name: &'static str,
            bare: Bare,
            typed: Typed,
        }
        let cases = [
            Case {
                name: "a forum topic",
                bare: Bare {
                    chat: -1_001_234_567_890,
                    user: 42,
                    update: Some(7),
                    topic: Some(3),
                },
                typed: Typed {
                    chat: ChatId(-1_001_234_567_890),
                    user: UserId(42),
                    update: Some(UpdateId(7)),
                    topic: Some(TopicId(3)),
                },
            },
            Case {
                name: "the extremes, and no topic",
                bare: Bare {
                    chat: i64::MIN,
                    user: u64::MAX,
                    update: None,
                    topic: None,
                },
                typed: Typed {
                    chat: ChatId(i64::MIN),
                    user: UserId(u64::MAX),
                    update: None,
                    topic: None,
                },
            },
        ];
        for case in cases {
            let stored = serde_json::to_vec(&case.bare).unwrap();
            assert_eq!(
                serde_json::to_vec(&case.typed).unwrap(),
                stored,
                "case {}: written",
                case.name
            );
            assert_eq!(
                serde_json::from_slice::<Typed>(&stored).unwrap(),
                case.typed,
                "case {}: read back",
                case.name
            );
        }
    }

    #[test]
    fn ids_are_shown_as_their_bare_number() {
        struct Case {
            name: &'static str,
            shown: String,
            bare: &'static str,
        }
        let cases = [
            Case {
                name: "a group",
                shown: ChatId(-100).to_string(),
                bare: "-100",
            },
            Case {
                name: "a user",
                shown: UserId(42).to_string(),
                bare: "42",
            },
            Case {
                name: "an update",
                shown: UpdateId(7).to_string(),
                bare: "7",
            },
            Case {
                name: "a topic",
                shown: TopicId(3).to_string(),
                bare: "3",
            },
        ];
        for case in cases {
            assert_eq!(case.shown, case.bare, "case {}", case.name);
        }
    }

    #[test]
    fn base36_is_fixed_width_and_covers_u64() {
        struct Case {
            name: &'static str,
            n: u64,
            id: &'static str,
        }
        let cases = [
            Case {
                name: "zero is padded",
                n: 0,
                id: "0000000000000",
            },
            Case {
                name: "one digit",
                n: 35,
                id: "000000000000z",
            },
            Case {
                name: "the largest id still fits",
                n: u64::MAX,
                id: "3w5e11264sgsf",
            },
        ];
        for case in cases {
            assert_eq!(base36(case.n), case.id, "case {}", case.name);
        }
    }

    #[test]
    fn turn_ids_round_trip_and_garbage_names_no_turn() {
        struct Case {
            name: &'static str,
            text: &'static str,
            id: Option<u64>,
        }
        let cases = [
            Case {
                name: "zero",
                text: "0",
                id: Some(0),
            },
            Case {
                name: "the largest",
                text: "3w5e11264sgsf",
                id: Some(u64::MAX),
            },
            Case {
                name: "one past the largest overflows",
                text: "3w5e11264sgsg",
                id: None,
            },
            Case {
                name: "too long",
                text: "00000000000001",
                id: None,
            },
            Case {
                name: "upper case is not how ids are written",
                text: "Z",
                id: None,
            },
            Case {
                name: "a sign",
                text: "+1",
                id: None,
            },
            Case {
                name: "empty",
                text: "",
                id: None,
            },
            Case {
                name: "not ascii",
                text: "é",
                id: None,
            },
        ];
        for case in cases {
            assert_eq!(
                TurnId::parse(case.text).map(|t| t.0),
                case.id,
                "case: {}",
                case.name
            );
        }
        for n in [0, 1, 35, 36, 1_000_000, u64::MAX / 3] {
            let shown = TurnId(n).to_string();
            assert!(!shown.starts_with('0') || shown == "0", "{shown}");
            assert_eq!(TurnId::parse(&shown), Some(TurnId(n)));
        }
    }
}
