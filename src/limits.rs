//! Budgets that protect the owner's bill: turns per minute and tokens per day, per user.
//!
//! Checked before a turn is accepted, so a limited message costs no LLM call. The rate window
//! lives in memory (it is about bursts); the daily token count lives in sled (it must survive
//! restarts). Admins are exempt unless configured otherwise.
//!
//! # One refusal per burst
//! A burst is the run of a user's messages in one conversation (a chat, or a forum topic of
//! one) that the turn rate refuses, from the first one until the rate window frees (the wait
//! the latest refusal named has passed). The first refused message of a burst gets a refusal
//! message in its conversation; every further one there edits that message to count the
//! unanswered messages and say the wait as it is now, so six fast messages over the limit cost
//! one message on the user's screen, not six. A refused message is not kept: the refusal asks
//! the user to send it again.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::{LimitsConfig, Role};
use crate::conversation::Conversation;
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
            Self::TooFast(wait) => Some(too_fast_text(1, *wait)),
            Self::OverBudget(budget) => Some(crate::budget::spent_text(*budget)),
        }
    }
}

/// What to do with a message the turn rate refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The first of a burst: send a refusal (then report its id with [`Limits::refusal_sent`]).
    Send(String),
    /// A later one: edit the burst's refusal message `message` to this text.
    Edit { message: i32, text: String },
}

/// An open burst of refused messages (see the module docs).
struct Burst {
    /// The refusal message on screen; `None` until its send returned.
    message: Option<i32>,
    refused: u32,
    /// When the rate window frees and the burst ends.
    until: Instant,
}

pub struct Limits {
    config: LimitsConfig,
    /// Start times of each user's recent turns.
    recent: Mutex<HashMap<u64, VecDeque<Instant>>>,
    /// Open bursts per (chat, user).
    bursts: Mutex<HashMap<(Conversation, u64), Burst>>,
}

/// The refusal of a burst of `refused` messages, with `wait` until a turn is possible again.
pub(crate) fn too_fast_text(refused: u32, wait: Duration) -> String {
    let seconds = wait.as_secs().max(1);
    let unit = if seconds == 1 { "second" } else { "seconds" };
    if refused <= 1 {
        return format!(
            "You are sending messages faster than I can answer them. Please wait {seconds} \
             {unit} and try again."
        );
    }
    format!(
        "You are sending messages faster than I can answer them. I did not answer your last \
         {refused} messages. Please wait {seconds} {unit}, then send them again."
    )
}

impl Limits {
    pub fn new(config: LimitsConfig) -> Self {
        Self {
            config,
            recent: Mutex::default(),
            bursts: Mutex::default(),
        }
    }

    /// Counts a message the turn rate refused (with `wait` until the window frees) into its
    /// burst, and says whether to send a refusal or edit the burst's one.
    pub fn refusal(&self, chat: impl Into<Conversation>, user: u64, wait: Duration) -> Refusal {
        self.refusal_at(chat.into(), user, wait, Instant::now())
    }

    fn refusal_at(&self, chat: Conversation, user: u64, wait: Duration, now: Instant) -> Refusal {
        let mut bursts = self.bursts.lock().unwrap_or_else(|e| e.into_inner());
        bursts.retain(|_, burst| burst.until > now);
        let burst = bursts.entry((chat, user)).or_insert(Burst {
            message: None,
            refused: 0,
            until: now,
        });
        burst.refused += 1;
        burst.until = now + wait;
        match burst.message {
            Some(message) => Refusal::Edit {
                message,
                text: too_fast_text(burst.refused, wait),
            },
            // A burst whose refusal is not on screen (yet, or its send failed) sends one.
            None => Refusal::Send(too_fast_text(burst.refused, wait)),
        }
    }

    /// The burst's refusal is (now) message `message`: later refusals of the burst edit it.
    pub fn refusal_sent(&self, chat: impl Into<Conversation>, user: u64, message: i32) {
        let chat = chat.into();
        let mut bursts = self.bursts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(burst) = bursts.get_mut(&(chat, user)) {
            burst.message = Some(message);
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
    fn a_burst_of_refusals_sends_once_then_edits_until_the_window_frees() {
        struct Step {
            name: &'static str,
            chat: i64,
            at_secs: u64,
            wait_secs: u64,
            /// The message id the send (if any) returned.
            sent: Option<i32>,
            expected: Refusal,
        }
        let send = |refused, wait| Refusal::Send(too_fast_text(refused, Duration::from_secs(wait)));
        let edit = |message, refused, wait| Refusal::Edit {
            message,
            text: too_fast_text(refused, Duration::from_secs(wait)),
        };
        let steps = [
            Step {
                name: "the first refusal is sent",
                chat: 1,
                at_secs: 0,
                wait_secs: 40,
                sent: Some(10),
                expected: send(1, 40),
            },
            Step {
                name: "the second edits it",
                chat: 1,
                at_secs: 5,
                wait_secs: 35,
                sent: None,
                expected: edit(10, 2, 35),
            },
            Step {
                name: "another chat has its own burst",
                chat: 2,
                at_secs: 6,
                wait_secs: 34,
                sent: None,
                expected: send(1, 34),
            },
            Step {
                name: "a chat whose send did not return yet sends again",
                chat: 2,
                at_secs: 7,
                wait_secs: 33,
                sent: Some(20),
                expected: send(2, 33),
            },
            Step {
                name: "the third edits with the wait as it is now",
                chat: 1,
                at_secs: 39,
                wait_secs: 1,
                sent: None,
                expected: edit(10, 3, 1),
            },
            Step {
                name: "after the window freed, a new burst",
                chat: 1,
                at_secs: 41,
                wait_secs: 50,
                sent: Some(11),
                expected: send(1, 50),
            },
        ];
        let limits = limits(2, 0);
        let t0 = Instant::now();
        for step in steps {
            let now = t0 + Duration::from_secs(step.at_secs);
            let wait = Duration::from_secs(step.wait_secs);
            assert_eq!(
                limits.refusal_at(step.chat.into(), 7, wait, now),
                step.expected,
                "{}",
                step.name
            );
            if let Some(message) = step.sent {
                limits.refusal_sent(step.chat, 7, message);
            }
        }
    }

    #[test]
    fn refusals_say_the_count_and_the_wait_in_plain_words() {
        let cases = [
            (
                "one message",
                1,
                40,
                "Please wait 40 seconds and try again.",
            ),
            (
                "under a second",
                1,
                0,
                "Please wait 1 second and try again.",
            ),
            (
                "a burst",
                6,
                12,
                "I did not answer your last 6 messages. Please wait 12 seconds, then send \
                 them again.",
            ),
        ];
        for (name, refused, wait, ending) in cases {
            let text = too_fast_text(refused, Duration::from_secs(wait));
            assert!(
                text.starts_with("You are sending messages faster than I can answer them."),
                "{name}: {text}"
            );
            assert!(text.ends_with(ending), "{name}: {text}");
        }
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

    #[test]
    fn each_forum_topic_has_its_own_burst() {
        let limits = limits(1, 0);
        let wait = Duration::from_secs(30);
        let (a, b) = (
            Conversation::new(-5, Some(1)),
            Conversation::new(-5, Some(2)),
        );
        assert!(matches!(limits.refusal(a, 7, wait), Refusal::Send(_)));
        limits.refusal_sent(a, 7, 10);
        assert!(
            matches!(limits.refusal(b, 7, wait), Refusal::Send(_)),
            "another topic's refusal is a message of its own"
        );
        assert!(matches!(
            limits.refusal(a, 7, wait),
            Refusal::Edit { message: 10, .. }
        ));
    }
}
