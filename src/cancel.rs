//! Honest cancel: every running turn has an id and a phase, and a stop request is decided
//! against that phase in one atomic step.
//!
//! A turn goes `RegisteredTurn` → `Storing` (its history write has begun: from here its answer is
//! kept) → `Shown` (its answer is on screen). A stop while `RegisteredTurn` moves it to `Stopped`,
//! which the turn notices at its next safe point (its LLM and tool calls are dropped at once);
//! a turn that is `Stopped` never stores. A stop that comes later stops nothing and says why:
//! the answer was kept, or is already complete. [`step`] is the whole state machine, pure;
//! [`TurnControl`] holds one turn's phase in a `watch` channel, whose lock makes each
//! transition atomic and whose receivers wake the turn when it is stopped.
//!
//! [`Turns`] knows the turn running in each conversation (a chat or a forum topic: one at a
//! time, as its queue runs them in order), so `/cancel` finds it, and a ⏹ whose data names another turn finds that it is over.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::conversation::Conversation;
/// Turn ids live with the other ids; named here too, where the adapter and the turn have
/// always found them.
pub use crate::ids::TurnId;

/// Where a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Preparing or asking the model: nothing of it is stored yet, so it may stop.
    RegisteredTurn,
    /// A stop was asked while it was running: it ends at its next safe point, storing nothing.
    Stopped,
    /// Its history write has begun: the answer is kept and will be shown.
    Storing,
    /// Its answer is on screen (its follow-ups may still run).
    Shown,
}

/// What happens to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// `/cancel` or its ⏹ was pressed.
    Stop,
    /// The turn is about to write its history.
    Store,
    /// The turn's answer was shown.
    Show,
}

/// What an [`Event`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopOutcome {
    /// The turn stops: nothing of it is kept.
    Stopped,
    /// A stop was already asked; the turn is ending.
    AlreadyStopped,
    /// Too late to stop: the answer is stored (or being stored) and will be shown.
    Kept,
    /// Too late to stop: the answer is already on screen.
    Complete,
    /// The turn may go on (to its history write, or past it).
    Proceed,
    /// The turn was stopped: it must not store anything.
    Refused,
}

/// The state machine of a turn: what `event` does in `phase`, and the phase after it.
#[must_use]
pub(crate) fn step(phase: Phase, event: Event) -> (Phase, StopOutcome) {
    use {Event as E, Phase as P, StopOutcome as V};
    match (phase, event) {
        (P::RegisteredTurn, E::Stop) => (P::Stopped, V::Stopped),
        (P::Stopped, E::Stop) => (P::Stopped, V::AlreadyStopped),
        (P::Storing, E::Stop) => (P::Storing, V::Kept),
        (P::Shown, E::Stop) => (P::Shown, V::Complete),
        (P::RegisteredTurn, E::Store) => (P::Storing, V::Proceed),
        (P::Stopped, E::Store | E::Show) => (P::Stopped, V::Refused),
        (P::Storing | P::Shown, E::Store) => (phase, V::Proceed),
        (P::RegisteredTurn | P::Storing | P::Shown, E::Show) => (P::Shown, V::Proceed),
    }
}

/// One turn's id and phase, shared by the turn and whoever wants to stop it.
#[derive(Debug)]
pub struct TurnControl {
    id: TurnId,
    phase: watch::Sender<Phase>,
}

impl TurnControl {
    fn new(id: TurnId) -> Self {
        Self {
            id,
            phase: watch::Sender::new(Phase::RegisteredTurn),
        }
    }

    pub(crate) fn id(&self) -> TurnId {
        self.id
    }

    /// Applies `event` atomically (under the channel's lock) and wakes
    /// [`Self::until_store`] when the turn was stopped.
    pub(crate) fn apply(&self, event: Event) -> StopOutcome {
        let mut verdict = StopOutcome::Refused;
        self.phase.send_if_modified(|phase| {
            let (next, said) = step(*phase, event);
            verdict = said;
            let changed = next != *phase;
            *phase = next;
            changed
        });
        verdict
    }

    /// Runs `work` unless or until the turn is stopped, then moves it to [`Phase::Storing`];
    /// `None` if it was stopped first (`work` is dropped: its LLM or tool call ends there).
    pub(crate) async fn until_store<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let mut phase = self.phase.subscribe();
        let output = tokio::select! {
            // A stop that is already decided wins over work that finished at the same moment.
            biased;
            _ = phase.wait_for(|p| *p == Phase::Stopped) => None,
            output = work => Some(output),
        }?;
        (self.apply(Event::Store) == StopOutcome::Proceed).then_some(output)
    }
}

/// The turns running now, one per chat, and the source of new turn ids.
#[derive(Debug)]
pub(crate) struct Turns {
    running: Mutex<HashMap<Conversation, Arc<TurnControl>>>,
    next: AtomicU64,
}

impl Default for Turns {
    fn default() -> Self {
        // A random start, so ids differ between runs; a clock is as good if the OS has none.
        let start = getrandom::u64().unwrap_or_else(|_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        Self {
            running: Mutex::new(HashMap::new()),
            next: AtomicU64::new(start),
        }
    }
}

/// What a stop request found in a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The chat's running turn, and what the stop did to it.
    Turn(StopOutcome),
    /// The request named a turn that is not the one running (it is over).
    Other,
    /// No turn runs in the chat.
    Nothing,
}

impl Turns {
    fn running(&self) -> MutexGuard<'_, HashMap<Conversation, Arc<TurnControl>>> {
        // Every critical section is one insert, lookup or remove: a poisoned map is whole.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new turn as `chat`'s running one, until the returned guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>, chat: Conversation) -> RegisteredTurn {
        let id = TurnId(self.next.fetch_add(1, Ordering::Relaxed));
        let control = Arc::new(TurnControl::new(id));
        self.running().insert(chat, control.clone());
        RegisteredTurn {
            turns: self.clone(),
            chat,
            control,
        }
    }

    /// Asks `chat`'s running turn to stop: any turn (`/cancel`), or only turn `only` (its ⏹).
    pub(crate) fn stop(&self, chat: Conversation, only: Option<TurnId>) -> Found {
        let Some(control) = self.running().get(&chat).cloned() else {
            return Found::Nothing;
        };
        if only.is_some_and(|id| id != control.id) {
            return Found::Other;
        }
        Found::Turn(control.apply(Event::Stop))
    }
}

/// A registered running turn; dropping it (the turn ended, however) unregisters it.
#[derive(Debug)]
pub struct RegisteredTurn {
    turns: Arc<Turns>,
    chat: Conversation,
    control: Arc<TurnControl>,
}

impl std::ops::Deref for RegisteredTurn {
    type Target = TurnControl;

    fn deref(&self) -> &TurnControl {
        &self.control
    }
}

impl Drop for RegisteredTurn {
    fn drop(&mut self) {
        let mut running = self.turns.running();
        // Only this turn's own entry: a later turn of the chat may have registered already.
        if running
            .get(&self.chat)
            .is_some_and(|c| Arc::ptr_eq(c, &self.control))
        {
            running.remove(&self.chat);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    #[test]
    fn the_state_machine() {
        struct Case {
            name: &'static str,
            phase: Phase,
            event: Event,
            next: Phase,
            verdict: StopOutcome,
        }
        use {Event as E, Phase as P, StopOutcome as V};
        let cases = [
            Case {
                name: "a stop while running stops it",
                phase: P::RegisteredTurn,
                event: E::Stop,
                next: P::Stopped,
                verdict: V::Stopped,
            },
            Case {
                name: "a second stop changes nothing",
                phase: P::Stopped,
                event: E::Stop,
                next: P::Stopped,
                verdict: V::AlreadyStopped,
            },
            Case {
                name: "a stop once storing keeps the answer",
                phase: P::Storing,
                event: E::Stop,
                next: P::Storing,
                verdict: V::Kept,
            },
            Case {
                name: "a stop once shown says it is complete",
                phase: P::Shown,
                event: E::Stop,
                next: P::Shown,
                verdict: V::Complete,
            },
            Case {
                name: "a running turn may store",
                phase: P::RegisteredTurn,
                event: E::Store,
                next: P::Storing,
                verdict: V::Proceed,
            },
            Case {
                name: "a stopped turn may not store",
                phase: P::Stopped,
                event: E::Store,
                next: P::Stopped,
                verdict: V::Refused,
            },
            Case {
                name: "storing twice is still storing",
                phase: P::Storing,
                event: E::Store,
                next: P::Storing,
                verdict: V::Proceed,
            },
            Case {
                name: "a stored answer is shown",
                phase: P::Storing,
                event: E::Show,
                next: P::Shown,
                verdict: V::Proceed,
            },
            Case {
                name: "a stopped turn shows no answer",
                phase: P::Stopped,
                event: E::Show,
                next: P::Stopped,
                verdict: V::Refused,
            },
            Case {
                name: "shown stays shown",
                phase: P::Shown,
                event: E::Store,
                next: P::Shown,
                verdict: V::Proceed,
            },
        ];
        for case in cases {
            assert_eq!(
                step(case.phase, case.event),
                (case.next, case.verdict),
                "case: {}",
                case.name
            );
        }
    }

    #[test]
    fn a_stop_finds_only_the_turn_it_names_and_only_while_it_runs() {
        let turns = Arc::new(Turns::default());
        assert_eq!(
            turns.stop(Conversation::new(ChatId(1), None), None),
            Found::Nothing
        );
        let first = turns.begin(Conversation::new(ChatId(1), None));
        let old = first.id();
        drop(first);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(1), None), Some(old)),
            Found::Nothing,
            "it ended"
        );
        let second = turns.begin(Conversation::new(ChatId(1), None));
        assert_ne!(second.id(), old);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(1), None), Some(old)),
            Found::Other,
            "an old ⏹"
        );
        assert_eq!(
            turns.stop(Conversation::new(ChatId(2), None), Some(second.id())),
            Found::Nothing
        );
        assert_eq!(second.apply(Event::Store), StopOutcome::Proceed);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(1), None), Some(second.id())),
            Found::Turn(StopOutcome::Kept)
        );
        assert_eq!(second.apply(Event::Show), StopOutcome::Proceed);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(1), None), None),
            Found::Turn(StopOutcome::Complete)
        );
    }

    /// A stop and a finishing turn racing: exactly one wins, and both sides agree which.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_racing_the_store_step_has_one_winner() {
        let turns = Arc::new(Turns::default());
        let mut outcomes = std::collections::HashSet::new();
        // Until both outcomes were seen (a loaded machine can favour one for hundreds of runs).
        for _ in 0..20_000 {
            if outcomes.len() == 2 {
                break;
            }
            let turn = turns.begin(Conversation::new(ChatId(1), None));
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let (stopper, gate) = (turns.clone(), barrier.clone());
            let stop = tokio::spawn(async move {
                gate.wait().await;
                stopper.stop(Conversation::new(ChatId(1), None), None)
            });
            let stored = turn
                .until_store(async {
                    barrier.wait().await;
                })
                .await
                .is_some();
            let found = stop.await.unwrap();
            match found {
                Found::Turn(StopOutcome::Stopped) => assert!(!stored, "stopped, yet stored"),
                Found::Turn(StopOutcome::Kept) => assert!(stored, "kept, yet not stored"),
                other => panic!("unexpected {other:?}"),
            }
            outcomes.insert(stored);
        }
        assert!(outcomes.contains(&true), "the store step never won");
    }

    #[tokio::test]
    async fn a_stopped_turn_drops_its_work_and_never_stores() {
        let turns = Arc::new(Turns::default());
        let turn = turns.begin(Conversation::new(ChatId(7), None));
        let stopper = turns.clone();
        let work = async {
            assert_eq!(
                stopper.stop(Conversation::new(ChatId(7), None), None),
                Found::Turn(StopOutcome::Stopped)
            );
            std::future::pending::<()>().await;
        };
        assert_eq!(turn.until_store(work).await, None);
        assert_eq!(turn.apply(Event::Store), StopOutcome::Refused);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(7), None), None),
            Found::Turn(StopOutcome::AlreadyStopped)
        );

        let next = turns.begin(Conversation::new(ChatId(7), None));
        assert_eq!(next.until_store(async { 5 }).await, Some(5));
        assert_eq!(
            turns.stop(Conversation::new(ChatId(7), None), None),
            Found::Turn(StopOutcome::Kept)
        );
        drop(turn);
        assert_eq!(
            turns.stop(Conversation::new(ChatId(7), None), Some(next.id())),
            Found::Turn(StopOutcome::Kept),
            "an earlier turn's guard does not unregister a later one"
        );
    }
}
