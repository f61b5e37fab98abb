//! Pacing of everything Heurist sends or edits, so Telegram's flood control never triggers and
//! no chat waits for another.
//!
//! Telegram allows about one message per second in a private chat, about twenty per minute in
//! a group, and about thirty per second per bot, and counts edits like sends. teloxide's
//! `Throttle` adaptor queues sends but lets edits through, which a streamed answer (one edit a
//! second) would turn into 429s; so every send and edit takes a slot here instead.
//!
//! A call first waits for its chat's turn (calls of one chat go in call order) and for the
//! chat's next slot, and only *then* takes the next global slot. The global cursor therefore
//! only ever holds calls that are due now: a chat whose next slot lies seconds ahead (a long
//! answer in parts, a group's three-second spacing, a `retry_after` penalty) does not push
//! back any other chat. A penalty applies to the scope Telegram refused: a 429 on a chat's
//! request delays that chat only, a 429 on a call without a chat pauses every call.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use heurist::telegram::transport::limiter::{Limiter, Pacing, Scope};
//! let limiter = Limiter::new(Pacing {
//!     private: Duration::from_secs(1),
//!     group: Duration::from_secs(3),
//!     global_per_second: 30,
//! });
//! let turn = limiter.acquire(Scope::Chat(heurist::ids::ChatId(42))).await; // chat 42 may call now
//! drop(turn); // the chat's next call may queue up behind this one's slot
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use crate::ids::ChatId;

/// The map of chats is swept for idle entries only when it has grown to twice its size after
/// the last sweep, and never below this: sweeps cost O(1) per call on average.
const MIN_SWEEP_AT: usize = 256;

/// No wait is longer than a year, whatever Telegram's `retry_after` or the config say, so the
/// clock arithmetic can never overflow.
const LONGEST_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// How often [`Limiter::quiet`] looks again while a chat's calls are in line.
const QUIET_POLL: Duration = Duration::from_millis(100);

/// Whose budget a call spends, and whom a 429 on it slows down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A call to one chat (send, edit, delete): paced per chat and globally.
    Chat(ChatId),
    /// A call to no chat (e.g. `getFile`): paced globally only.
    Bot,
}

/// Telegram's pacing rules, from `[telegram]` in the config.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Spacing of calls within one private chat (positive chat id).
    pub private: Duration,
    /// Spacing of calls within one group, supergroup or channel (negative chat id).
    pub group: Duration,
    /// All calls of the bot together, per second.
    pub global_per_second: u32,
}

/// The one pacer of a bot's Telegram calls; shared by every task that sends or edits.
pub struct Limiter {
    pacing: Pacing,
    /// Spacing of global slots.
    global: Duration,
    state: Mutex<Slots>,
}

struct Slots {
    chats: HashMap<ChatId, Chat>,
    /// The next free global slot; in the past when the bot is idle.
    global_next: Instant,
    /// `chats.len()` at which the next sweep runs.
    sweep_at: usize,
}

struct Chat {
    /// Held by the chat's call being paced; tokio's mutex is fair, so calls go in call order.
    line: Arc<tokio::sync::Mutex<()>>,
    /// The chat's next call may go no earlier (spacing after the last call, or a penalty).
    next: Instant,
}

impl Chat {
    /// Nobody is in line and nothing is owed: the entry says nothing an absent one would not.
    fn is_idle(&self, now: Instant) -> bool {
        Arc::strong_count(&self.line) == 1 && self.next <= now
    }
}

/// A call's place in its chat's line, from [`Limiter::acquire`]: the chat's later calls wait
/// until it is dropped, so a call that is retried keeps its place.
pub struct PlaceInLine<'a> {
    limiter: &'a Limiter,
    scope: Scope,
    _line: Option<OwnedMutexGuard<()>>,
}

impl PlaceInLine<'_> {
    /// Waits for another slot of the same scope, for a retry of the call.
    pub(crate) async fn next_slot(&mut self) {
        self.limiter.slot(self.scope).await;
    }
}

impl Limiter {
    pub fn new(pacing: Pacing) -> Self {
        let pacing = Pacing {
            private: pacing.private.min(LONGEST_WAIT),
            group: pacing.group.min(LONGEST_WAIT),
            ..pacing
        };
        Self {
            pacing,
            global: Duration::from_secs(1) / pacing.global_per_second.max(1),
            state: Mutex::new(Slots {
                chats: HashMap::new(),
                global_next: Instant::now(),
                sweep_at: MIN_SWEEP_AT,
            }),
        }
    }

    /// Waits for the call's turn in its chat and then for a slot; the call may go when this
    /// returns, and the chat's next call waits until the returned [`PlaceInLine`] is dropped.
    pub async fn acquire(&self, scope: Scope) -> PlaceInLine<'_> {
        let line = match scope {
            Scope::Chat(chat) => {
                let line = self.with_state(|state, now| {
                    state.sweep(now);
                    let entry = state.chats.entry(chat).or_insert_with(|| Chat {
                        line: Arc::default(),
                        next: now,
                    });
                    entry.line.clone()
                });
                Some(line.lock_owned().await)
            }
            Scope::Bot => None,
        };
        self.slot(scope).await;
        PlaceInLine {
            limiter: self,
            scope,
            _line: line,
        }
    }

    /// Telegram said "retry after": nothing more in `scope` until then (for [`Scope::Bot`],
    /// nothing more at all).
    pub(crate) fn penalize(&self, scope: Scope, retry_after: Duration) {
        self.with_state(|state, now| {
            let until = now + retry_after.min(LONGEST_WAIT);
            match scope {
                Scope::Chat(chat) => {
                    let entry = state.chats.entry(chat).or_insert_with(|| Chat {
                        line: Arc::default(),
                        next: until,
                    });
                    entry.next = entry.next.max(until);
                }
                Scope::Bot => state.global_next = state.global_next.max(until),
            }
        });
    }

    /// Waits until the chat's next slot has come, then reserves the next global slot of that
    /// moment and waits for it.
    async fn slot(&self, scope: Scope) {
        loop {
            let wait = self.with_state(|state, now| {
                if let Scope::Chat(chat) = scope
                    && let Some(entry) = state.chats.get(&chat)
                    && entry.next > now
                {
                    // Not yet due; a penalty may still move the slot while we sleep.
                    return Err(entry.next);
                }
                let slot = state.global_next.max(now);
                state.global_next = slot + self.global;
                if let Scope::Chat(chat) = scope {
                    let spacing = self.spacing(chat);
                    let entry = state.chats.entry(chat).or_insert_with(|| Chat {
                        line: Arc::default(),
                        next: now,
                    });
                    entry.next = entry.next.max(slot + spacing);
                }
                // A slot due now goes at once (`None`): tokio's timer rounds a deadline up to
                // its next millisecond tick, so even `sleep_until(now)` would cost up to a
                // millisecond of every call made while the bot is not backed up.
                Ok((slot > now).then_some(slot))
            });
            match wait {
                Ok(None) => return,
                Ok(Some(slot)) => return tokio::time::sleep_until(slot).await,
                Err(due) => tokio::time::sleep_until(due).await,
            }
        }
    }

    /// The earliest a call to `chat` made now could go: its chat's next slot or the next
    /// global one, whichever is later. A live display waits for it before its first send, so
    /// an answer that is complete by then goes out once, in its final form.
    pub(crate) fn ready_at(&self, chat: ChatId) -> Instant {
        self.with_state(|state, now| {
            let chat_next = state.chats.get(&chat).map_or(now, |entry| entry.next);
            chat_next.max(state.global_next).max(now)
        })
    }

    /// How far ahead the bot's next global slot is: how long a call made now waits for its
    /// share of the global pace (zero when the bot is not backed up).
    pub(crate) fn global_backlog(&self) -> Duration {
        self.with_state(|state, now| state.global_next.saturating_duration_since(now))
    }

    /// Waits until no call of `chat` is in line and the chat's next slot has come: a call
    /// made then (a burst's edit) takes a slot no other call of the chat was waiting for.
    pub(crate) async fn quiet(&self, chat: ChatId) {
        loop {
            let busy = self.with_state(|state, now| {
                let entry = state.chats.get(&chat)?;
                if Arc::strong_count(&entry.line) > 1 {
                    // Calls in line: they go first.
                    Some(now + QUIET_POLL)
                } else {
                    (entry.next > now).then_some(entry.next)
                }
            });
            match busy {
                Some(at) => tokio::time::sleep_until(at).await,
                None => return,
            }
        }
    }

    /// Groups, supergroups and channels have negative ids and a slower pace than private chats.
    fn spacing(&self, chat: ChatId) -> Duration {
        if chat.0 < 0 {
            self.pacing.group
        } else {
            self.pacing.private
        }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut Slots, Instant) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state, Instant::now())
    }

    /// How many chats the limiter remembers (tests check that it forgets idle ones).
    #[cfg(test)]
    fn remembered_chats(&self) -> usize {
        self.with_state(|state, _| state.chats.len())
    }
}

impl Slots {
    /// Forgets idle chats once the map has doubled since the last sweep.
    fn sweep(&mut self, now: Instant) {
        if self.chats.len() < self.sweep_at {
            return;
        }
        self.chats.retain(|_, chat| !chat.is_idle(now));
        self.sweep_at = (self.chats.len() * 2).max(MIN_SWEEP_AT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIVATE: Duration = Duration::from_secs(1);
    const GROUP: Duration = Duration::from_secs(3);
    /// The paused clock wakes sleepers on whole milliseconds, so a slot may go this much late.
    const TICK: Duration = Duration::from_millis(1);

    fn limiter(global_per_second: u32) -> Arc<Limiter> {
        Arc::new(Limiter::new(Pacing {
            private: PRIVATE,
            group: GROUP,
            global_per_second,
        }))
    }

    /// A call whose slot is due goes on its first poll: no timer, which would round the wait
    /// up to its next millisecond tick and add that to every call of a bot that is not backed
    /// up. Its next call, due a second later (one call a second in all), waits. On the real
    /// clock: under a paused one, `sleep_until(now)` fires at once and this would pass without
    /// the fix.
    #[tokio::test]
    async fn a_call_whose_slot_is_due_goes_at_once() {
        use futures_util::FutureExt;
        for scope in [Scope::Chat(ChatId(1)), Scope::Chat(ChatId(-3)), Scope::Bot] {
            let limiter = limiter(1);
            let at_once = limiter.acquire(scope).now_or_never();
            assert!(at_once.is_some(), "{scope:?}: the call waited for a timer");
            drop(at_once);
            let next = limiter.acquire(scope).now_or_never();
            assert!(
                next.is_none(),
                "{scope:?}: the next call must wait for its slot"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_waits_for_the_chats_calls_in_line_and_then_its_next_slot() {
        let limiter = limiter(30);
        let start = Instant::now();
        drop(limiter.acquire(Scope::Chat(ChatId(-1))).await);
        let in_line = limiter.clone();
        let answer = tokio::spawn(async move {
            let _turn = in_line.acquire(Scope::Chat(ChatId(-1))).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        });
        tokio::task::yield_now().await;
        limiter.quiet(ChatId(-1)).await;
        // The call in line went at 3 s; the slot after it comes 3 s later.
        assert!(start.elapsed() >= GROUP * 2, "{:?}", start.elapsed());
        assert!(answer.is_finished());
        limiter.quiet(ChatId(7)).await;
        assert!(
            start.elapsed() < GROUP * 2 + QUIET_POLL,
            "a chat never called is quiet"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn ready_at_is_the_later_of_the_chat_and_global_slot() {
        struct Case {
            name: &'static str,
            /// Calls made (at once) before asking, and the chat asked about.
            before: &'static [i64],
            chat: i64,
            ready_in: Duration,
        }
        let global = Duration::from_secs(1) / 10;
        let cases = [
            Case {
                name: "an idle bot: at once",
                before: &[],
                chat: 1,
                ready_in: Duration::ZERO,
            },
            Case {
                name: "the chat just sent: its spacing",
                before: &[1],
                chat: 1,
                ready_in: PRIVATE,
            },
            Case {
                name: "a group just sent: the group spacing",
                before: &[-1],
                chat: -1,
                ready_in: GROUP,
            },
            Case {
                name: "other chats took the next global slots",
                before: &[2, 3, 4],
                chat: 1,
                ready_in: global * 3,
            },
        ];
        for case in cases {
            let limiter = limiter(10);
            let start = Instant::now();
            for &chat in case.before {
                drop(limiter.acquire(Scope::Chat(ChatId(chat))).await);
            }
            assert_eq!(
                limiter.ready_at(ChatId(case.chat)),
                start + case.ready_in,
                "case {}",
                case.name
            );
        }
    }

    /// Starts one call per entry of `scopes`, in that order, each recording when it got its
    /// slot; lets them all queue up before returning.
    async fn queue_calls(
        limiter: &Arc<Limiter>,
        scopes: &[Scope],
    ) -> Vec<tokio::task::JoinHandle<Instant>> {
        let handles = scopes
            .iter()
            .map(|&scope| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let _turn = limiter.acquire(scope).await;
                    Instant::now()
                })
            })
            .collect();
        tokio::task::yield_now().await;
        handles
    }

    async fn times(handles: Vec<tokio::task::JoinHandle<Instant>>) -> Vec<Instant> {
        let mut times = Vec::with_capacity(handles.len());
        for handle in handles {
            times.push(handle.await.expect("a call panicked"));
        }
        times
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_chat_does_not_delay_other_chats() {
        struct Case {
            name: &'static str,
            busy: i64,
            other: i64,
        }
        let cases = [
            Case {
                name: "private chat in parts, another private chat",
                busy: 1,
                other: 2,
            },
            Case {
                name: "group in parts, a private chat",
                busy: -100,
                other: 2,
            },
            Case {
                name: "private chat in parts, a group",
                busy: 1,
                other: -200,
            },
        ];
        for case in cases {
            let limiter = limiter(30);
            let start = Instant::now();
            let busy = queue_calls(&limiter, &[Scope::Chat(ChatId(case.busy)); 10]).await;
            let _other = limiter.acquire(Scope::Chat(ChatId(case.other))).await;
            assert!(
                start.elapsed() <= limiter.global + TICK,
                "{}: the other chat waited {:?}",
                case.name,
                start.elapsed()
            );
            let busy = times(busy).await;
            assert!(
                busy[9] - start >= limiter.spacing(ChatId(case.busy)) * 9,
                "{}: the busy chat kept its own pace",
                case.name
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_in_one_chat_are_spaced_by_the_kind_of_chat() {
        struct Case {
            name: &'static str,
            chat: i64,
            spacing: Duration,
        }
        let cases = [
            Case {
                name: "private chat",
                chat: 7,
                spacing: PRIVATE,
            },
            Case {
                name: "group",
                chat: -4_321,
                spacing: GROUP,
            },
            Case {
                name: "supergroup",
                chat: -1_001_234_567_890,
                spacing: GROUP,
            },
        ];
        for case in cases {
            let limiter = limiter(30);
            let handles = queue_calls(&limiter, &[Scope::Chat(ChatId(case.chat)); 4]).await;
            let times = times(handles).await;
            for pair in times.windows(2) {
                assert_eq!(pair[1] - pair[0], case.spacing, "{}", case.name);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn all_chats_together_stay_within_the_global_rate() {
        struct Case {
            name: &'static str,
            per_second: u32,
            chats: i64,
        }
        let cases = [
            Case {
                name: "30 per second, 100 chats",
                per_second: 30,
                chats: 100,
            },
            Case {
                name: "10 per second, 35 chats and groups",
                per_second: 10,
                chats: 35,
            },
        ];
        for case in cases {
            let limiter = limiter(case.per_second);
            let scopes: Vec<Scope> = (0..case.chats)
                .map(|i| Scope::Chat(ChatId(if i % 2 == 0 { i + 1 } else { -i })))
                .collect();
            let start = Instant::now();
            let mut times = times(queue_calls(&limiter, &scopes).await).await;
            times.sort();
            for (i, at) in times.iter().enumerate() {
                let within_a_second = times[i..]
                    .iter()
                    .take_while(|t| **t - *at < Duration::from_secs(1))
                    .count();
                assert!(
                    within_a_second <= case.per_second as usize,
                    "{}: {within_a_second} calls in one second",
                    case.name
                );
            }
            let span = times[times.len() - 1] - start;
            let floor = limiter.global * (case.chats as u32 - 1);
            assert!(
                span >= floor && span <= floor + TICK,
                "{}: {span:?}, not at the rate either",
                case.name
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_chats_penalty_delays_that_chat_only() {
        let limiter = limiter(30);
        let penalty = Duration::from_secs(8);
        let start = Instant::now();
        limiter.penalize(Scope::Chat(ChatId(1)), penalty);
        // The penalised chat has a call waiting while the others come.
        let penalised = queue_calls(&limiter, &[Scope::Chat(ChatId(1))]).await;
        for other in [Scope::Chat(ChatId(2)), Scope::Chat(ChatId(-3)), Scope::Bot] {
            let before = Instant::now();
            drop(limiter.acquire(other).await);
            assert!(
                before.elapsed() <= limiter.global + TICK,
                "{other:?} waited"
            );
        }
        assert!(start.elapsed() < Duration::from_secs(1));
        let penalised = times(penalised).await;
        assert!(penalised[0] - start >= penalty, "the penalised chat waited");
    }

    #[tokio::test(start_paused = true)]
    async fn a_global_penalty_delays_every_call() {
        struct Case {
            name: &'static str,
            scope: Scope,
        }
        let cases = [
            Case {
                name: "private chat",
                scope: Scope::Chat(ChatId(5)),
            },
            Case {
                name: "group",
                scope: Scope::Chat(ChatId(-5)),
            },
            Case {
                name: "call without a chat",
                scope: Scope::Bot,
            },
        ];
        for case in cases {
            let limiter = limiter(30);
            let start = Instant::now();
            limiter.penalize(Scope::Bot, Duration::from_secs(5));
            drop(limiter.acquire(case.scope).await);
            assert!(
                start.elapsed() >= Duration::from_secs(5),
                "{}: went during the pause",
                case.name
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_in_one_chat_keep_their_order() {
        struct Case {
            name: &'static str,
            private: Duration,
            penalty: Option<Duration>,
        }
        let cases = [
            Case {
                name: "paced",
                private: PRIVATE,
                penalty: None,
            },
            Case {
                name: "unpaced: every call is due at once",
                private: Duration::ZERO,
                penalty: None,
            },
            Case {
                name: "all waiting out a penalty that ends at one instant",
                private: Duration::ZERO,
                penalty: Some(Duration::from_secs(2)),
            },
        ];
        for case in cases {
            let limiter = Arc::new(Limiter::new(Pacing {
                private: case.private,
                group: GROUP,
                global_per_second: 1_000_000,
            }));
            if let Some(penalty) = case.penalty {
                limiter.penalize(Scope::Chat(ChatId(1)), penalty);
            }
            let order = Arc::new(Mutex::new(Vec::new()));
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    let limiter = limiter.clone();
                    let order = order.clone();
                    tokio::spawn(async move {
                        // Other chats' calls are interleaved with chat 1's.
                        let chat = if i % 3 == 0 { 2 } else { 1 };
                        let _turn = limiter.acquire(Scope::Chat(ChatId(chat))).await;
                        if chat == 1 {
                            order.lock().unwrap().push(i);
                        }
                        tokio::task::yield_now().await;
                    })
                })
                .collect();
            for handle in handles {
                handle.await.unwrap();
            }
            let expected: Vec<i32> = (0..20).filter(|i| i % 3 != 0).collect();
            assert_eq!(*order.lock().unwrap(), expected, "{}", case.name);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_retried_call_keeps_its_place_in_line() {
        struct Case {
            name: &'static str,
            penalty: Option<Duration>,
            backoff: Duration,
        }
        let cases = [
            Case {
                name: "retry after a connection failure, backing off past the chat's next slot",
                penalty: None,
                backoff: PRIVATE * 2,
            },
            Case {
                name: "retry after a 429",
                penalty: Some(Duration::from_secs(4)),
                backoff: Duration::from_secs(4),
            },
        ];
        for case in cases {
            let limiter = limiter(30);
            let mut first = limiter.acquire(Scope::Chat(ChatId(1))).await;
            let later = queue_calls(&limiter, &[Scope::Chat(ChatId(1))]).await;
            if let Some(penalty) = case.penalty {
                limiter.penalize(Scope::Chat(ChatId(1)), penalty);
            }
            tokio::time::sleep(case.backoff).await;
            first.next_slot().await;
            let retried_at = Instant::now();
            drop(first);
            let later = times(later).await;
            assert!(
                later[0] >= retried_at + PRIVATE,
                "{}: the later call went {:?} after the retry",
                case.name,
                later[0].checked_duration_since(retried_at)
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn absurd_waits_are_capped_and_never_panic() {
        let limiter = Limiter::new(Pacing {
            private: Duration::MAX,
            group: Duration::MAX,
            global_per_second: 0,
        });
        let start = Instant::now();
        drop(limiter.acquire(Scope::Chat(ChatId(1))).await);
        limiter.penalize(Scope::Chat(ChatId(1)), Duration::MAX);
        limiter.penalize(Scope::Bot, Duration::MAX);
        drop(limiter.acquire(Scope::Chat(ChatId(1))).await);
        drop(limiter.acquire(Scope::Bot).await);
        let waited = start.elapsed();
        assert!(
            waited >= LONGEST_WAIT && waited <= LONGEST_WAIT * 2 + TICK,
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_chats_are_forgotten() {
        let limiter = limiter(100);
        for chat in 0..20_000 {
            drop(limiter.acquire(Scope::Chat(ChatId(chat))).await);
            limiter.penalize(Scope::Chat(ChatId(-chat)), Duration::from_millis(1));
            assert!(
                limiter.remembered_chats() <= 2 * MIN_SWEEP_AT,
                "{} chats remembered after {chat}",
                limiter.remembered_chats()
            );
        }
        // Chats still owed a pause or in line are remembered through a sweep.
        let penalised = 20_001;
        limiter.penalize(Scope::Chat(ChatId(penalised)), Duration::from_secs(60));
        let turn = limiter.acquire(Scope::Chat(ChatId(penalised + 1))).await;
        for chat in 0..2 * MIN_SWEEP_AT as i64 {
            drop(limiter.acquire(Scope::Chat(ChatId(chat))).await);
        }
        limiter.with_state(|state, _| {
            assert!(state.chats.contains_key(&ChatId(penalised)));
            assert!(state.chats.contains_key(&ChatId(penalised + 1)));
        });
        drop(turn);
    }
}
