//! Budgets that protect the owner's bill: turns per minute and tokens per day, per user.
//!
//! Checked before a turn is accepted, so a limited message costs no LLM call. The rate window
//! lives in memory (it is about bursts); the daily token count lives in sled (it must survive
//! restarts). Admins are exempt unless configured otherwise.
//!
//! # One refusal per burst
//! A burst is the run of a user's messages in one conversation (a chat, or a forum topic of
//! one) that the rate refuses, from the first one until the rate window frees (the wait the
//! latest refusal named has passed). The first refused message of a burst gets a refusal
//! message in its conversation; later ones edit that message to count the unanswered messages
//! and say the wait as it is now (see [`crate::burst`]: refusals that come while the refusal is
//! on its way are counted in one edit), so six fast messages over the limit cost one message
//! on the user's screen, not six. A refused message is not kept: the refusal asks the user to
//! send it again.
//!
//! Commands have a rate of their own (`commands_per_minute`): they cost no LLM call, but each
//! reply is a paced message, and a flood of them refused is one refusal, like turns.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::burst::Bursts;
use crate::config::LimitsConfig;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::role::Role;
use crate::store::Store;

const WINDOW: Duration = Duration::from_secs(60);

/// Whether a user may start a turn now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// Over the turn rate; a turn is possible again after this long.
    TooFast(Duration),
    /// Today's token budget (this many tokens) is used up.
    OverBudget(u64),
}

impl Verdict {
    /// What the user is told when a turn is refused.
    pub(crate) fn message(&self) -> Option<String> {
        match self {
            Self::Allowed => None,
            Self::TooFast(wait) => Some(too_fast_text(1, *wait)),
            Self::OverBudget(budget) => Some(crate::texts::agent::budget_spent(*budget)),
        }
    }
}

/// What a burst's refusal says: how many messages it refused, and the wait the latest named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Refused {
    pub count: u32,
    pub wait: Duration,
}

impl Refused {
    /// The refusal's text.
    pub(crate) fn text(&self) -> String {
        too_fast_text(self.count, self.wait)
    }
}

/// Where a burst of refusals shows: the conversation and the user refused.
pub(crate) type BurstKey = (Conversation, UserId);

pub(crate) struct Limits {
    config: LimitsConfig,
    /// Start times of each user's recent turns.
    recent: Mutex<HashMap<UserId, VecDeque<Instant>>>,
    /// Times of each user's recent commands.
    commands: Mutex<HashMap<UserId, VecDeque<Instant>>>,
    /// Open bursts of refusals.
    bursts: Bursts<BurstKey, Refused>,
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
    pub(crate) fn new(config: LimitsConfig) -> Self {
        Self {
            config,
            recent: Mutex::default(),
            commands: Mutex::default(),
            bursts: Bursts::default(),
        }
    }

    /// Counts a message the rate refused (with `wait` until the window frees) into its burst;
    /// `true` if the caller must start the burst's poster (see [`crate::burst`]).
    pub(crate) fn refusal(&self, chat: Conversation, user: UserId, wait: Duration) -> bool {
        self.bursts
            .add((chat, user), wait, Instant::now(), |refused| {
                refused.count += 1;
                refused.wait = wait;
            })
    }

    /// The open bursts of refusals, for their posters.
    pub(crate) fn bursts(&self) -> &Bursts<BurstKey, Refused> {
        &self.bursts
    }

    /// Checks `user`'s limits and, if allowed, counts a turn for them.
    pub(crate) fn check(&self, user: UserId, role: Role, store: &Store) -> Verdict {
        self.check_at(user, role, store, Instant::now())
    }

    fn check_at(&self, user: UserId, role: Role, store: &Store, now: Instant) -> Verdict {
        if role == Role::Admin && self.config.exempt_admins {
            return Verdict::Allowed;
        }
        let budget = self.config.daily_tokens;
        if budget > 0 && store.usage().user_tokens_today(user) >= budget {
            return Verdict::OverBudget(budget);
        }
        admit(&self.recent, user, self.config.turns_per_minute, now)
    }

    /// Checks `user`'s command rate and, if allowed, counts a command for them.
    pub(crate) fn check_command(&self, user: UserId, role: Role) -> Verdict {
        self.check_command_at(user, role, Instant::now())
    }

    fn check_command_at(&self, user: UserId, role: Role, now: Instant) -> Verdict {
        if role == Role::Admin && self.config.exempt_admins {
            return Verdict::Allowed;
        }
        admit(&self.commands, user, self.config.commands_per_minute, now)
    }
}

/// The sliding window of one rate: `user` may go if fewer than `limit` of their starts lie in
/// the last minute (0: no limit), and then this one is counted.
fn admit(
    recent: &Mutex<HashMap<UserId, VecDeque<Instant>>>,
    user: UserId,
    limit: usize,
    now: Instant,
) -> Verdict {
    if limit == 0 {
        return Verdict::Allowed;
    }
    let mut recent = recent.lock().unwrap_or_else(|e| e.into_inner());
    // Forget users with nothing in the window, so the map stays as small as the active set.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, TopicId, UserId};

    fn limits(turns_per_minute: usize, daily_tokens: u64) -> Limits {
        Limits::new(LimitsConfig {
            turns_per_minute,
            commands_per_minute: 3,
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
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, t0),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, t0 + Duration::from_secs(10)),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, t0 + Duration::from_secs(20)),
            Verdict::TooFast(Duration::from_secs(40))
        );
        assert_eq!(
            limits.check_at(UserId(2), Role::User, &store, t0 + Duration::from_secs(20)),
            Verdict::Allowed,
            "per user"
        );
        assert_eq!(
            limits.check_at(UserId(9), Role::Admin, &store, t0),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, t0 + Duration::from_secs(61)),
            Verdict::Allowed
        );
    }

    #[test]
    fn a_burst_counts_its_refusals_and_says_the_latest_wait() {
        let limits = limits(2, 0);
        let key = (Conversation::new(ChatId(1), None), UserId(7));
        assert!(
            limits.refusal(key.0, key.1, Duration::from_secs(40)),
            "starts a poster"
        );
        let post = limits.bursts().next(&key).unwrap();
        assert_eq!(post.state.text(), too_fast_text(1, Duration::from_secs(40)));
        assert!(
            !limits.refusal(key.0, key.1, Duration::from_secs(35)),
            "its poster runs"
        );
        limits.bursts().shown(&key, post.revision, Some(10));
        let post = limits.bursts().next(&key).unwrap();
        assert_eq!(post.message, Some(10));
        assert_eq!(post.state.text(), too_fast_text(2, Duration::from_secs(35)));
    }

    #[test]
    fn commands_have_a_rate_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let limits = limits(1, 0);
        let t0 = Instant::now();
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, t0),
            Verdict::Allowed
        );
        for i in 0..3 {
            let at = t0 + Duration::from_secs(i);
            let verdict = limits.check_command_at(UserId(1), Role::User, at);
            assert_eq!(verdict, Verdict::Allowed, "command {i}: turns do not count");
        }
        let at = t0 + Duration::from_secs(10);
        assert_eq!(
            limits.check_command_at(UserId(1), Role::User, at),
            Verdict::TooFast(Duration::from_secs(50))
        );
        assert_eq!(
            limits.check_command_at(UserId(2), Role::User, at),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_command_at(UserId(9), Role::Admin, at),
            Verdict::Allowed
        );
        assert_eq!(
            limits.check_at(UserId(1), Role::User, &store, at),
            Verdict::TooFast(Duration::from_secs(50)),
            "nor do commands count as turns"
        );
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
        assert_eq!(
            limits.check(UserId(1), Role::User, &store),
            Verdict::Allowed
        );
        let usage = crate::llm::Usage {
            prompt_tokens: 90,
            completion_tokens: 10,
            cached_tokens: 0,
        };
        store.usage().record_user_tokens(UserId(1), usage).unwrap();
        assert_eq!(
            limits.check(UserId(1), Role::User, &store),
            Verdict::OverBudget(100)
        );
        assert_eq!(
            limits.check(UserId(1), Role::Admin, &store),
            Verdict::Allowed
        );
    }

    #[test]
    fn each_forum_topic_has_its_own_burst() {
        let limits = limits(1, 0);
        let wait = Duration::from_secs(30);
        let (a, b) = (
            Conversation::new(ChatId(-5), Some(TopicId(1))),
            Conversation::new(ChatId(-5), Some(TopicId(2))),
        );
        assert!(limits.refusal(a, UserId(7), wait));
        assert!(
            limits.refusal(b, UserId(7), wait),
            "another topic's refusal is a message of its own"
        );
        assert!(!limits.refusal(a, UserId(7), wait));
    }
}
