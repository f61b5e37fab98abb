//! The daily token budget (`limits.daily_tokens`), enforced per LLM call: the one path every
//! call a user's turn causes is charged through — the agent's calls, option extractions,
//! reflections (a 👎's too) and embeddings.
//!
//! Before a call, its [`Payer`] reserves an estimate (the prompt's estimated tokens plus the
//! completion cap); after it, the [`Hold`] settles with the usage the provider reported, which
//! is what the day's count in the store keeps. Reservations live in memory: they are about
//! calls in flight, which a restart ends. [`admit`] decides:
//!
//! - a call alone (no other reservation of the user's) goes ahead while anything is left of
//!   the budget: it may end over it by what that one call used;
//! - beside other calls in flight, a call goes ahead only if its estimate fits beside theirs;
//!   otherwise it waits for them to settle and is decided again.
//!
//! So queued and parallel turns of one user end at most one call over the budget (as long as
//! estimates are not below what a call really uses; the completion cap makes that so for the
//! answer, and the prompt estimate errs high).
//!
//! A spent budget is told once a day per conversation ([`Payer::first_refusal`]): a user whose
//! queued turns are stopped reads one message, not one per turn.
//!
//! ```
//! use heurist::budget::{Admission, admit};
//! assert_eq!(admit(100, 0, 500, 150), Admission::Now, "alone, while something is left");
//! assert_eq!(admit(100, 500, 500, 150), Admission::Wait, "beside a call that may use it all");
//! assert_eq!(admit(150, 0, 500, 150), Admission::Spent);
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::conversation::Conversation;
use crate::ids::UserId;
use futures_util::future::BoxFuture;

use crate::llm::extraction::{Meter, Settle};
use crate::llm::{ChatRequest, LlmError, Usage, estimate_request_tokens};
use crate::store::Store;

/// Whether a call may go ahead, given what the user `used` today (settled), what their calls
/// in flight `held`, this call's `estimate` and the daily `budget` (see the module docs).
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Now,
    /// Not beside the calls in flight: decide again once one settles.
    Wait,
    /// The budget is used up.
    Spent,
}

/// Decides one call (see the module docs).
pub fn admit(used: u64, held: u64, estimate: u64, budget: u64) -> Admission {
    if used >= budget {
        Admission::Spent
    } else if held == 0 || used.saturating_add(held).saturating_add(estimate) <= budget {
        Admission::Now
    } else {
        Admission::Wait
    }
}

/// A call's estimate: its prompt's estimated tokens plus its completion cap.
pub(crate) fn estimate(request: &ChatRequest) -> u64 {
    let prompt = u64::try_from(estimate_request_tokens(request)).unwrap_or(u64::MAX);
    prompt.saturating_add(request.completion_cap().map_or(0, u64::from))
}

/// Today's budget is used up (an error, so the caller branches: the call is not made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("today's token budget of {0} tokens is used up")]
pub(crate) struct OverBudget(pub u64);

impl From<OverBudget> for LlmError {
    fn from(OverBudget(budget): OverBudget) -> Self {
        LlmError::OverBudget { budget }
    }
}

/// The bot's budgets: the day's counts (in the store) and the calls in flight (here). One per
/// bot; cheap to clone.
#[derive(Clone)]
pub struct Ledger(Arc<LedgerState>);

struct LedgerState {
    store: Store,
    /// 0: no budget.
    daily_tokens: u64,
    /// Users without a budget (admins, when `limits.exempt_admins`).
    exempt: HashSet<UserId>,
    /// Tokens reserved by each user's calls in flight.
    held: Mutex<HashMap<UserId, u64>>,
    /// Told whenever a reservation is released, so waiting calls decide again.
    released: tokio::sync::Notify,
    /// The day each (user, conversation) was last told its budget is spent.
    told: Mutex<HashMap<(UserId, Conversation), chrono::NaiveDate>>,
}

impl Ledger {
    pub fn new(config: &Config, store: Store) -> Self {
        let exempt = if config.limits.exempt_admins {
            config.access.admins.iter().copied().collect()
        } else {
            HashSet::new()
        };
        Self(Arc::new(LedgerState {
            store,
            daily_tokens: config.limits.daily_tokens,
            exempt,
            held: Mutex::default(),
            released: tokio::sync::Notify::new(),
            told: Mutex::default(),
        }))
    }

    /// The payer of calls that serve `user`'s turn; `shown_in` is the conversation where a
    /// refusal reaches the user (the agent's answer), `None` for background calls.
    pub(crate) fn payer(&self, user: Option<UserId>, shown_in: Option<Conversation>) -> Payer {
        Payer {
            ledger: self.clone(),
            user,
            shown_in,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<UserId, u64>> {
        self.0.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Who pays for a call: the user whose turn it serves (`None`: the bot itself, as for the
/// skills' embeddings, which every user shares).
#[derive(Clone)]
pub(crate) struct Payer {
    ledger: Ledger,
    user: Option<UserId>,
    shown_in: Option<Conversation>,
}

impl Payer {
    /// The budget this payer is held to, if any.
    fn budget(&self) -> Option<(UserId, u64)> {
        let inner = &self.ledger.0;
        let user = self.user?;
        (inner.daily_tokens > 0 && !inner.exempt.contains(&user))
            .then_some((user, inner.daily_tokens))
    }

    /// Whether the tokens settled today already use up the budget.
    pub(crate) fn spent(&self) -> Option<OverBudget> {
        let (user, budget) = self.budget()?;
        (self.ledger.0.store.usage().user_tokens_today(user) >= budget)
            .then_some(OverBudget(budget))
    }

    /// `true` the first time today a spent budget is told in `chat` (see the module docs).
    pub(crate) fn first_refusal(&self, chat: Conversation) -> bool {
        let Some(user) = self.user else {
            return false;
        };
        let today = chrono::Utc::now().date_naive();
        let mut told = self.ledger.0.told.lock().unwrap_or_else(|e| e.into_inner());
        told.retain(|_, day| *day == today);
        told.insert((user, chat), today).is_none()
    }

    /// Reserves `estimate` tokens for one call, waiting while calls in flight may leave no room
    /// for it (see [`admit`]); `Err` when the budget is used up.
    pub(crate) async fn reserve(&self, estimate: u64) -> Result<Hold, OverBudget> {
        let Some((user, budget)) = self.budget() else {
            return Ok(Hold {
                payer: self.clone(),
                tokens: 0,
                in_flight: true,
            });
        };
        let inner = &self.ledger.0;
        loop {
            // Registered before the decision, so a release between the two is not missed.
            let released = inner.released.notified();
            let mut released = std::pin::pin!(released);
            released.as_mut().enable();
            {
                let used = inner.store.usage().user_tokens_today(user);
                let mut held = self.ledger.held();
                let in_flight = held.get(&user).copied().unwrap_or(0);
                match admit(used, in_flight, estimate, budget) {
                    Admission::Now => {
                        *held.entry(user).or_default() += estimate;
                        return Ok(Hold {
                            payer: self.clone(),
                            tokens: estimate,
                            in_flight: true,
                        });
                    }
                    Admission::Spent => {
                        drop(held);
                        // The refusal reaches the user (as the agent's answer): told for today.
                        if let Some(chat) = self.shown_in {
                            self.first_refusal(chat);
                        }
                        return Err(OverBudget(budget));
                    }
                    Admission::Wait => {}
                }
            }
            released.await;
        }
    }
}

impl Meter for Payer {
    fn reserve(&self, request: &ChatRequest) -> BoxFuture<'_, Result<Settle, LlmError>> {
        let estimate = estimate(request);
        Box::pin(async move {
            let hold = Payer::reserve(self, estimate).await?;
            Ok(Box::new(move |usage| hold.settle(usage)) as Settle)
        })
    }
}

/// A reservation for one call in flight: [`Hold::settle`] charges what the call used, and
/// [`Hold::release`] nothing (the call failed: the provider bills no failed request). Dropped
/// with its call still in flight (the turn was stopped, an extraction timed out), it charges
/// the whole estimate: the provider may have billed it all, and a ⏹ pressed just before each
/// answer ends must not make answers free.
pub(crate) struct Hold {
    payer: Payer,
    tokens: u64,
    in_flight: bool,
}

impl Hold {
    /// The call failed: nothing is charged, and the reservation is released.
    pub(crate) fn release(mut self) {
        self.in_flight = false;
    }

    /// Charges `usage` to the user's day and all-time counts, then releases the reservation.
    pub(crate) fn settle(mut self, usage: Usage) {
        self.in_flight = false;
        self.charge(usage);
    }

    fn charge(&self, usage: Usage) {
        let Some(user) = self.payer.user else {
            return;
        };
        if usage == Usage::default() {
            return;
        }
        // Dropped (logged): the call is made and answered; the budget only undercounts it.
        if let Err(e) = self
            .payer
            .ledger
            .0
            .store
            .usage()
            .record_user_tokens(user, usage)
        {
            tracing::warn!(user = user.0, error = %e, "cannot record the user's token use");
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.in_flight {
            self.charge(Usage {
                prompt_tokens: self.tokens,
                completion_tokens: 0,
                cached_tokens: 0,
            });
        }
        let Some(user) = self.payer.user.filter(|_| self.tokens > 0) else {
            return;
        };
        let mut held = self.payer.ledger.held();
        if let Some(tokens) = held.get_mut(&user) {
            *tokens = tokens.saturating_sub(self.tokens);
            if *tokens == 0 {
                held.remove(&user);
            }
        }
        drop(held);
        self.payer.ledger.0.released.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UserId};

    #[test]
    fn calls_are_admitted_alone_while_anything_is_left_and_together_only_if_they_fit() {
        struct Case {
            name: &'static str,
            used: u64,
            held: u64,
            estimate: u64,
            expected: Admission,
        }
        let cases = [
            Case {
                name: "a fresh day",
                used: 0,
                held: 0,
                estimate: 90,
                expected: Admission::Now,
            },
            Case {
                name: "alone, a call may end over the budget",
                used: 90,
                held: 0,
                estimate: 5_000,
                expected: Admission::Now,
            },
            Case {
                name: "used up exactly",
                used: 100,
                held: 0,
                estimate: 1,
                expected: Admission::Spent,
            },
            Case {
                name: "used up, whatever is in flight",
                used: 120,
                held: 40,
                estimate: 1,
                expected: Admission::Spent,
            },
            Case {
                name: "beside a call in flight, when both fit",
                used: 10,
                held: 40,
                estimate: 50,
                expected: Admission::Now,
            },
            Case {
                name: "beside a call in flight that may leave no room",
                used: 10,
                held: 40,
                estimate: 51,
                expected: Admission::Wait,
            },
            Case {
                name: "huge numbers do not wrap",
                used: 10,
                held: u64::MAX,
                estimate: u64::MAX,
                expected: Admission::Wait,
            },
        ];
        for case in cases {
            assert_eq!(
                admit(case.used, case.held, case.estimate, 100),
                case.expected,
                "{}",
                case.name
            );
        }
    }

    fn ledger(daily_tokens: u64) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut config = Config::from_toml(None, std::path::Path::new("config/heurist.toml"))
            .expect("the shipped config");
        config.limits.daily_tokens = daily_tokens;
        config.access.admins = vec![UserId(9)];
        (dir, Ledger::new(&config, store))
    }

    fn usage(tokens: u64) -> Usage {
        Usage {
            prompt_tokens: tokens,
            completion_tokens: 0,
            cached_tokens: 0,
        }
    }

    #[tokio::test]
    async fn a_parallel_call_waits_for_the_one_in_flight_then_is_refused() {
        let (_dir, ledger) = ledger(150);
        let payer = ledger.payer(Some(UserId(1)), None);
        let first = payer.reserve(1_000).await.unwrap();
        let second = tokio::spawn({
            let payer = payer.clone();
            async move { payer.reserve(1_000).await.map(|_| ()) }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "it waits for the call in flight");
        first.settle(usage(160));
        assert_eq!(second.await.unwrap(), Err(OverBudget(150)));
        assert_eq!(payer.spent(), Some(OverBudget(150)));
    }

    #[tokio::test]
    async fn a_failed_call_charges_nothing_and_one_cut_off_in_flight_its_estimate() {
        let (_dir, ledger) = ledger(150);
        let payer = ledger.payer(Some(UserId(1)), None);
        payer.reserve(1_000).await.unwrap().release();
        let hold = payer.reserve(1_000).await.unwrap();
        hold.settle(usage(20));
        assert_eq!(ledger.0.store.usage().user_tokens_today(UserId(1)), 20);
        assert!(ledger.held().is_empty());
        // Dropped with its call in flight (a stop, a timeout): the whole estimate.
        drop(payer.reserve(100).await.unwrap());
        assert_eq!(ledger.0.store.usage().user_tokens_today(UserId(1)), 120);
        assert!(ledger.held().is_empty());
    }

    #[tokio::test]
    async fn exempt_users_and_the_bot_have_no_budget_but_users_are_still_counted() {
        let (_dir, ledger) = ledger(10);
        for _ in 0..2 {
            ledger
                .payer(Some(UserId(9)), None)
                .reserve(1_000)
                .await
                .unwrap()
                .settle(usage(50));
        }
        assert_eq!(ledger.0.store.usage().user_tokens_today(UserId(9)), 100);
        assert!(ledger.payer(None, None).reserve(1_000).await.is_ok());
        assert!(ledger.held().is_empty());
    }

    #[test]
    fn a_spent_budget_is_told_once_a_day_per_conversation() {
        let (_dir, ledger) = ledger(10);
        let (a, b) = (
            Conversation::new(ChatId(1), None),
            Conversation::new(ChatId(-5), None),
        );
        let payer = ledger.payer(Some(UserId(1)), Some(a));
        assert!(payer.first_refusal(a));
        assert!(!payer.first_refusal(a));
        assert!(payer.first_refusal(b), "another conversation is told too");
        assert!(
            ledger.payer(Some(UserId(2)), None).first_refusal(a),
            "another user is told too"
        );
    }
}
