//! The `usage` tree: token and call totals per chat and model and for the whole bot (what
//! `/stats` shows), each user's tokens per UTC day (what the daily budget checks; days older
//! than `retention_days` are pruned) and each user's tokens of all time (what `/stats` ranks
//! admins' top users by). Counters saturate: a provider's usage is outside input, and a
//! wrapped count would read as a budget barely touched.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::Result;
use super::records::{decode_count, decode_json, read};
use crate::ids::{ChatId, UserId};
use crate::llm::Usage;

const TREE: &str = db::USAGE;

/// The key of a user's token count of all time. Not under `user:`, so a scan of the days
/// never meets it.
fn user_total_key(user: UserId) -> String {
    format!("user_total:{user}")
}

/// Usage counters for one model (in one chat, or bot-wide).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub turns: u64,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

impl UsageTotals {
    /// These totals with `turns` turns of `calls` calls that used `usage` added, saturating:
    /// the arithmetic of [`UsageLedger::charge`].
    #[must_use]
    pub(crate) fn charged(mut self, turns: u64, calls: u32, usage: Usage) -> Self {
        self.add(&UsageTotals {
            turns,
            calls: u64::from(calls),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens,
        });
        self
    }

    /// Adds `other` to these totals, saturating.
    pub(crate) fn add(&mut self, other: &UsageTotals) {
        self.turns = self.turns.saturating_add(other.turns);
        self.calls = self.calls.saturating_add(other.calls);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
    }
}

/// The key of a user's token count on one UTC day.
pub(super) fn user_day_key(user: UserId, day: chrono::NaiveDate) -> String {
    format!("user:{user}:{day}")
}

/// The day of a [`user_day_key`].
fn day_of(key: &[u8]) -> Option<chrono::NaiveDate> {
    let (_, day) = std::str::from_utf8(key).ok()?.rsplit_once(':')?;
    day.parse().ok()
}

/// Token and call counters (tree `usage`): [`Store::usage`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct UsageLedger<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Token and call counters.
    pub fn usage(&self) -> UsageLedger<'_> {
        UsageLedger { store: self }
    }
}

impl UsageLedger<'_> {
    /// Charges what a turn, or a follow-up of one (an options extraction, a reflection),
    /// used of `model` in `chat` to the chat's and the bot's totals: the one place usage is
    /// counted per chat. `turns` is 1 for an agent turn and 0 for a follow-up; `calls` 0 (no
    /// call was made) charges nothing. An unreadable total is kept as it is (and logged),
    /// never reset: nothing is added to it.
    pub fn charge(
        &self,
        chat: ChatId,
        model: &str,
        turns: u64,
        calls: u32,
        usage: Usage,
    ) -> Result<()> {
        if calls == 0 {
            return Ok(());
        }
        for key in [format!("chat:{chat}:{model}"), format!("all:{model}")] {
            self.store.usage.fetch_and_update(key.as_bytes(), |old| {
                let totals: UsageTotals = match old {
                    None => UsageTotals::default(),
                    Some(bytes) => match decode_json(TREE, key.as_bytes(), bytes) {
                        Some(totals) => totals,
                        None => return Some(bytes.to_vec()),
                    },
                };
                serde_json::to_vec(&totals.charged(turns, calls, usage)).ok()
            })?;
        }
        Ok(())
    }

    /// Adds a turn's tokens to the user's count for today (UTC), for the daily budget, and
    /// to the user's count of all time. An unreadable count is kept as it is (it reads as 0,
    /// logged), never reset.
    pub fn record_user_tokens(&self, user: UserId, usage: Usage) -> Result<()> {
        let today = user_day_key(user, chrono::Utc::now().date_naive());
        let tokens = usage.tokens();
        for key in [today, user_total_key(user)] {
            self.store
                .usage
                .fetch_and_update(key.as_bytes(), |old| match old {
                    Some(bytes) if bytes.len() != 8 => {
                        tracing::warn!(key, "an unreadable token count is kept as it is");
                        Some(bytes.to_vec())
                    }
                    _ => {
                        let count = decode_count(TREE, key.as_bytes(), old);
                        Some(count.saturating_add(tokens).to_be_bytes().to_vec())
                    }
                })?;
        }
        Ok(())
    }

    /// The `limit` users with the most tokens today (UTC), most first: `(user, tokens)`.
    pub(crate) fn top_users_today(&self, limit: usize) -> Vec<(UserId, u64)> {
        let suffix = format!(":{}", chrono::Utc::now().date_naive());
        self.top_counts("user:", limit, |rest| {
            rest.strip_suffix(suffix.as_str())?.parse().ok().map(UserId)
        })
    }

    /// The `limit` users with the most tokens of all time, most first: `(user, tokens)`.
    pub(crate) fn top_users_all_time(&self, limit: usize) -> Vec<(UserId, u64)> {
        self.top_counts("user_total:", limit, |rest| rest.parse().ok().map(UserId))
    }

    /// The largest counters under `prefix` whose rest of the key `user_of` maps to a user id.
    fn top_counts(
        &self,
        prefix: &str,
        limit: usize,
        user_of: impl Fn(&str) -> Option<UserId>,
    ) -> Vec<(UserId, u64)> {
        let mut counts: Vec<(UserId, u64)> = self
            .store
            .usage
            .scan_prefix(prefix.as_bytes())
            .filter_map(Result::ok)
            .filter_map(|(key, value)| {
                let rest = std::str::from_utf8(key.get(prefix.len()..)?).ok()?;
                let user = user_of(rest)?;
                Some((user, decode_count(TREE, &key, Some(&value))))
            })
            .filter(|&(_, tokens)| tokens > 0)
            .collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        counts.truncate(limit);
        counts
    }

    /// Removes the users' per-day counts of days before the day of `older_than_unix` (the
    /// all-time counts stay). A key whose day cannot be read is left alone and logged.
    pub(super) fn prune_days(&self, older_than_unix: i64) -> Result<usize> {
        let Some(cutoff) = chrono::DateTime::from_timestamp(older_than_unix, 0) else {
            return Ok(0);
        };
        let cutoff = cutoff.date_naive();
        let mut removed = 0;
        for key in self.store.usage.scan_prefix(b"user:").keys() {
            let key = key?;
            match day_of(&key) {
                Some(day) if day < cutoff => {
                    self.store.usage.remove(&key)?;
                    removed += 1;
                }
                Some(_) => {}
                None => tracing::warn!(
                    key = %String::from_utf8_lossy(&key),
                    "an unreadable usage key; left as it is"
                ),
            }
        }
        Ok(removed)
    }

    /// Tokens the user's turns used today (UTC).
    pub fn user_tokens_today(&self, user: UserId) -> u64 {
        let key = user_day_key(user, chrono::Utc::now().date_naive());
        let bytes = read(&self.store.usage, TREE, key.as_bytes());
        decode_count(TREE, key.as_bytes(), bytes.as_deref())
    }

    /// Usage per model of one chat (`Some(chat)`) or of the whole bot (`None`).
    pub(crate) fn totals(&self, chat: Option<ChatId>) -> Vec<(String, UsageTotals)> {
        let prefix = match chat {
            Some(chat) => format!("chat:{chat}:"),
            None => "all:".to_string(),
        };
        self.store
            .usage
            .scan_prefix(prefix.as_bytes())
            .filter_map(Result::ok)
            .filter_map(|(key, value)| {
                let model = String::from_utf8_lossy(key.get(prefix.len()..)?).into_owned();
                let totals = decode_json(TREE, &key, &value)?;
                Some((model, totals))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UserId};

    /// `rows` with bare user ids, as the cases spell them.
    fn ids(rows: Vec<(UserId, u64)>) -> Vec<(u64, u64)> {
        rows.into_iter()
            .map(|(user, tokens)| (user.0, tokens))
            .collect()
    }

    #[test]
    fn a_charge_adds_turns_calls_and_tokens_saturating() {
        struct Case {
            name: &'static str,
            before: UsageTotals,
            turns: u64,
            calls: u32,
            usage: Usage,
            after: UsageTotals,
        }
        let usage = |prompt_tokens, completion_tokens, cached_tokens| Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        };
        let totals = |turns, calls, prompt_tokens, completion_tokens, cached_tokens| UsageTotals {
            turns,
            calls,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        };
        let cases = [
            Case {
                name: "a turn of two calls",
                before: UsageTotals::default(),
                turns: 1,
                calls: 2,
                usage: usage(10, 2, 5),
                after: totals(1, 2, 10, 2, 5),
            },
            Case {
                name: "a follow-up adds calls, not turns",
                before: totals(1, 2, 10, 2, 5),
                turns: 0,
                calls: 1,
                usage: usage(3, 1, 0),
                after: totals(1, 3, 13, 3, 5),
            },
            Case {
                name: "saturating, never wrapping",
                before: totals(u64::MAX, u64::MAX, u64::MAX - 1, 0, 0),
                turns: 1,
                calls: 1,
                usage: usage(5, 0, 0),
                after: totals(u64::MAX, u64::MAX, u64::MAX, 0, 0),
            },
        ];
        for case in cases {
            assert_eq!(
                case.before.charged(case.turns, case.calls, case.usage),
                case.after,
                "case: {}",
                case.name
            );
        }
    }

    #[test]
    fn no_call_charges_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let used = Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: 0,
        };
        store.usage().charge(ChatId(1), "m", 0, 0, used).unwrap();
        assert!(store.usage().totals(Some(ChatId(1))).is_empty());
        assert!(store.usage().totals(None).is_empty());
    }

    #[test]
    fn usage_is_summed_per_chat_and_bot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let u = Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: 5,
        };
        store.usage().charge(ChatId(1), "m", 1, 2, u).unwrap();
        store.usage().charge(ChatId(2), "m", 1, 1, u).unwrap();
        let chat = store.usage().totals(Some(ChatId(1)));
        assert_eq!(
            chat,
            vec![(
                "m".to_string(),
                UsageTotals {
                    turns: 1,
                    calls: 2,
                    prompt_tokens: 10,
                    completion_tokens: 2,
                    cached_tokens: 5
                }
            )]
        );
        assert_eq!(store.usage().totals(None)[0].1.turns, 2);
    }

    #[test]
    fn unreadable_totals_are_skipped_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let u = Usage {
            prompt_tokens: 3,
            completion_tokens: 1,
            cached_tokens: 0,
        };
        store.usage.insert("chat:1:bad", "{").unwrap();
        store.usage().charge(ChatId(1), "good", 1, 1, u).unwrap();
        assert_eq!(
            store.usage().totals(Some(ChatId(1))).len(),
            1,
            "the unreadable total is skipped"
        );
        store.usage().charge(ChatId(1), "bad", 1, 1, u).unwrap();
        assert_eq!(
            store.usage().totals(Some(ChatId(1))).len(),
            1,
            "still skipped"
        );
        assert_eq!(
            store.usage.get("chat:1:bad").unwrap().as_deref(),
            Some(&b"{"[..])
        );

        let today = user_day_key(UserId(7), chrono::Utc::now().date_naive());
        store.usage.insert(today.as_bytes(), "x").unwrap();
        assert_eq!(store.usage().user_tokens_today(UserId(7)), 0);
        store.usage().record_user_tokens(UserId(7), u).unwrap();
        assert_eq!(store.usage().user_tokens_today(UserId(7)), 0);
        assert_eq!(
            store.usage.get(today.as_bytes()).unwrap().as_deref(),
            Some(&b"x"[..])
        );
        // The all-time count, readable, still counts.
        assert_eq!(store.usage().top_users_all_time(1), [(UserId(7), 4)]);
    }

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let huge = Usage {
            prompt_tokens: u64::MAX - 1,
            completion_tokens: 5,
            cached_tokens: u64::MAX,
        };
        let mut sum = huge;
        sum += huge;
        assert_eq!(sum.prompt_tokens, u64::MAX, "Usage adds saturating");
        assert_eq!(huge.tokens(), u64::MAX);
        for _ in 0..2 {
            store
                .usage()
                .charge(ChatId(1), "m", 1, u32::MAX, huge)
                .unwrap();
            store.usage().record_user_tokens(UserId(7), huge).unwrap();
        }
        let totals = store.usage().totals(Some(ChatId(1)))[0].1;
        assert_eq!(totals.prompt_tokens, u64::MAX);
        assert_eq!(totals.cached_tokens, u64::MAX);
        assert_eq!(totals.completion_tokens, 10);
        assert_eq!(totals.calls, 2 * u64::from(u32::MAX));
        assert_eq!(store.usage().user_tokens_today(UserId(7)), u64::MAX);
        assert_eq!(
            store.usage().top_users_all_time(1),
            vec![(UserId(7), u64::MAX)]
        );
    }

    #[test]
    fn per_day_counts_older_than_the_cutoff_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let day = |d: u32| chrono::NaiveDate::from_ymd_opt(2026, 3, d).unwrap();
        for (user, d) in [(1, 1), (1, 9), (2, 10), (1, 11)] {
            store
                .usage
                .insert(user_day_key(UserId(user), day(d)), &5u64.to_be_bytes())
                .unwrap();
        }
        store.usage.insert("user:3:garbage", "x").unwrap();
        store
            .usage
            .insert(user_total_key(UserId(1)), &15u64.to_be_bytes())
            .unwrap();
        store
            .usage()
            .charge(ChatId(1), "m", 1, 1, Usage::default())
            .unwrap();
        let cutoff = day(10).and_hms_opt(12, 0, 0).unwrap().and_utc().timestamp();
        assert_eq!(
            store.usage().prune_days(cutoff).unwrap(),
            2,
            "the days before the cutoff's day"
        );
        let left: Vec<String> = store
            .usage
            .iter()
            .keys()
            .map(|k| String::from_utf8(k.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(
            left,
            [
                "all:m",
                "chat:1:m",
                "user:1:2026-03-11",
                "user:2:2026-03-10",
                "user:3:garbage",
                "user_total:1",
            ],
            "the cutoff's day and later, totals and unreadable keys stay"
        );
        assert_eq!(store.usage().prune_days(cutoff).unwrap(), 0);
    }

    #[test]
    fn top_users_rank_by_tokens_today_and_of_all_time() {
        struct Case {
            name: &'static str,
            /// (user, prompt tokens) recorded today.
            today: &'static [(u64, u64)],
            /// (user, tokens) already counted on an earlier day.
            earlier: &'static [(u64, u64)],
            limit: usize,
            top_today: &'static [(u64, u64)],
            top_all_time: &'static [(u64, u64)],
        }
        let cases = [
            Case {
                name: "nobody yet",
                today: &[],
                earlier: &[],
                limit: 3,
                top_today: &[],
                top_all_time: &[],
            },
            Case {
                name: "most first, summed per user, cut at the limit",
                today: &[(1, 10), (2, 30), (1, 25), (3, 5)],
                earlier: &[],
                limit: 2,
                top_today: &[(1, 35), (2, 30)],
                top_all_time: &[(1, 35), (2, 30)],
            },
            Case {
                name: "earlier days count for all time only",
                today: &[(1, 10)],
                earlier: &[(2, 500)],
                limit: 5,
                top_today: &[(1, 10)],
                top_all_time: &[(2, 500), (1, 10)],
            },
            Case {
                name: "ties by user id",
                today: &[(9, 7), (4, 7)],
                earlier: &[],
                limit: 5,
                top_today: &[(4, 7), (9, 7)],
                top_all_time: &[(4, 7), (9, 7)],
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            for &(user, tokens) in case.today {
                let usage = Usage {
                    prompt_tokens: tokens,
                    completion_tokens: 0,
                    cached_tokens: 0,
                };
                store
                    .usage()
                    .record_user_tokens(UserId(user), usage)
                    .unwrap();
            }
            for &(user, tokens) in case.earlier {
                let day = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
                store
                    .usage
                    .insert(user_day_key(UserId(user), day), &tokens.to_be_bytes())
                    .unwrap();
                store
                    .usage
                    .insert(user_total_key(UserId(user)), &tokens.to_be_bytes())
                    .unwrap();
            }
            // An unreadable key is skipped.
            store
                .usage
                .insert("user_total:x", &1u64.to_be_bytes())
                .unwrap();
            assert_eq!(
                ids(store.usage().top_users_today(case.limit)),
                case.top_today,
                "{}",
                case.name
            );
            assert_eq!(
                ids(store.usage().top_users_all_time(case.limit)),
                case.top_all_time,
                "{}",
                case.name
            );
        }
    }
}
