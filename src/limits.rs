//! Budgets that protect the owner's bill: turns per minute and tokens per day, per user.
//!
//! Checked before a turn is accepted, so a limited message costs no LLM call. The rate window
//! lives in memory (it is about bursts); the daily token count lives in sled (it must survive
//! restarts). Admins are exempt unless configured otherwise.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::{LimitsConfig, Role};
use crate::store::Store;

const WINDOW: Duration = Duration::from_secs(60);

/// Whether a user may start a turn now.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Over the turn rate; a turn is possible again after this long.
    TooFast(Duration),
    /// Today's token budget (this many tokens) is used up.
    OverBudget(u64),
}

impl Verdict {
    /// What the user is told when a turn is refused.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Allowed => None,
            Self::TooFast(wait) => Some(format!(
                "You are sending messages faster than I can answer them. Please wait {} seconds \
                 and try again.",
                wait.as_secs().max(1)
            )),
            Self::OverBudget(budget) => Some(format!(
                "You have used today's budget of {budget} tokens. It renews at midnight UTC."
            )),
        }
    }
}

pub struct Limits {
    config: LimitsConfig,
    /// Start times of each user's recent turns.
    recent: Mutex<HashMap<u64, VecDeque<Instant>>>,
}

impl Limits {
    pub fn new(config: LimitsConfig) -> Self {
        Self {
            config,
            recent: Mutex::default(),
        }
    }

    /// Checks `user`'s limits and, if allowed, counts a turn for them.
    pub fn check(&self, user: u64, role: Role, store: &Store) -> Verdict {
        self.check_at(user, role, store, Instant::now())
    }

    fn check_at(&self, user: u64, role: Role, store: &Store, now: Instant) -> Verdict {
        if role == Role::Admin && self.config.exempt_admins {
            return Verdict::Allowed;
        }
        let budget = self.config.daily_tokens;
        if budget > 0 && store.user_tokens_today(user) >= budget {
            return Verdict::OverBudget(budget);
        }
        let limit = self.config.turns_per_minute;
        if limit == 0 {
            return Verdict::Allowed;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        // Forget users with no turn in the window, so the map stays as small as the active set.
        recent.retain(|_, starts| {
            while starts
                .front()
                .is_some_and(|&t| now.duration_since(t) >= WINDOW)
            {
                starts.pop_front();
            }
            !starts.is_empty()
        });
        let starts = recent.entry(user).or_default();
        if starts.len() >= limit {
            let oldest = starts.front().copied().unwrap_or(now);
            return Verdict::TooFast(WINDOW.saturating_sub(now.duration_since(oldest)));
        }
        starts.push_back(now);
        Verdict::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(turns_per_minute: usize, daily_tokens: u64) -> Limits {
        Limits::new(LimitsConfig {
            turns_per_minute,
            daily_tokens,
            exempt_admins: true,
        })
    }

    #[test]
    fn the_rate_window_slides() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let limits = limits(2, 0);
        let t0 = Instant::now();
        assert_eq!(limits.check_at(1, Role::User, &store, t0), Verdict::Allowed);
        assert_eq!(
            limits.check_at(1, Role::User, &store, t0 + Duration::from_secs(10)),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(1, Role::User, &store, t0 + Duration::from_secs(20)),
            Verdict::TooFast(Duration::from_secs(40))
        );
        assert_eq!(
            limits.check_at(2, Role::User, &store, t0 + Duration::from_secs(20)),
            Verdict::Allowed,
            "per user"
        );
        assert_eq!(
            limits.check_at(9, Role::Admin, &store, t0),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(1, Role::User, &store, t0 + Duration::from_secs(61)),
            Verdict::Allowed
        );
    }

    #[test]
    fn the_daily_budget_counts_stored_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let limits = limits(0, 100);
        assert_eq!(limits.check(1, Role::User, &store), Verdict::Allowed);
        let usage = crate::llm::Usage {
            prompt_tokens: 90,
            completion_tokens: 10,
            cached_tokens: 0,
        };
        store.record_user_tokens(1, usage).unwrap();
        assert_eq!(
            limits.check(1, Role::User, &store),
            Verdict::OverBudget(100)
        );
        assert_eq!(limits.check(1, Role::Admin, &store), Verdict::Allowed);
    }
}
