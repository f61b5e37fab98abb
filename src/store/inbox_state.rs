//! An accepted update's way to its answer, as one pure state machine: [`step`].
//!
//! An update is accepted `Pending` (see `inbox.rs` for how its arrival is decided). Its turn
//! stores its history (`Stored`), then, before its answer's first send, it is recorded
//! `Visible` without a message (a crash from here on must not send a second answer), and
//! again with the message's id once that is known; the later messages of a long answer join
//! as its parts. It ends `Answered` (also when cancelled or refused) or `Failed` (its turn
//! panicked: never replayed). After a restart, each update not yet done is resumed as
//! [`Resume`] says: a turn not stored runs again, a stored answer is sent or finished in the
//! message that shows it, and one that may be on screen in a message nobody can name gets a
//! notice instead of a second answer.
//!
//! # Poison updates
//! An update whose turn crashes the process (a stack overflow, an abort: nothing a
//! `catch_unwind` sees) would crash it again at every start. So every start is counted on disk
//! before it runs: the record written and flushed at accept stands for the first, and each
//! start recovery makes ([`InboxEvent::Start`]: a rerun as it is dequeued, a stored answer
//! before it is sent) adds one to `restarts` before it runs. An update that has started `max_starts`
//! times without being done is not started again: [`Resume::Quarantine`] finishes it with one
//! apology. What this costs an innocent turn is told in `turn::quarantine`.
//!
//! [`step`] decides; [`super::Inbox`] applies its verdict to the record atomically.
//!
//! ```
//! use heurist::store::InboxState;
//! use heurist::store::inbox_state::{InboxEvent, Progress, Resume, InboxVerdict, step};
//! let pending = Progress { state: InboxState::Pending, parts: vec![], restarts: 0 };
//! let (stored, verdict) = step(&pending, InboxEvent::Store);
//! assert_eq!((stored.state, verdict), (InboxState::Stored, InboxVerdict::Write));
//! let (_, verdict) = step(&stored, InboxEvent::Restart { stored: true, max_starts: 2 });
//! assert_eq!(verdict, InboxVerdict::Resume(Resume::Send));
//! let (started, _) = step(&stored, InboxEvent::Start);
//! let (_, verdict) = step(&started, InboxEvent::Restart { stored: true, max_starts: 2 });
//! assert_eq!(verdict, InboxVerdict::Resume(Resume::Quarantine));
//! ```

use serde::{Deserialize, Serialize};

/// Where an accepted update is on its way to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InboxState {
    /// Accepted; its turn has not been stored yet.
    Pending,
    /// Its turn is in the history; the answer may not have been sent.
    Stored,
    /// Its answer may be on screen: recorded (and flushed) before the turn's first send, and
    /// again with the id of the message that shows it once that is known. After a crash the
    /// answer goes into that message, never into a second one.
    Visible { message: Option<i32> },
    /// Answered (or cancelled, or refused): nothing left to do.
    Answered,
    /// Its turn panicked and the user was told: never replayed, so a message that crashes
    /// its turn cannot do so again at every start.
    Failed,
}

impl InboxState {
    /// Nothing is left to do for the update: it is not resumed, and may be pruned.
    pub(crate) fn is_done(self) -> bool {
        matches!(self, Self::Answered | Self::Failed)
    }
}

/// An update's state, the later messages of its visible answer (the first is in the state)
/// and its restarts: the part of its record that [`step`] changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub state: InboxState,
    pub parts: Vec<i32>,
    /// How many times recovery started it again ([`InboxEvent::Start`]).
    pub restarts: u32,
}

impl Progress {
    /// How many times the update has started: once when it was accepted (its record, flushed
    /// before its turn runs, stands for that start), and once for each restart.
    pub(crate) fn starts(&self) -> u32 {
        self.restarts.saturating_add(1)
    }

    /// Every message that shows the answer, first to last; empty unless it is visible in a
    /// known message.
    pub(crate) fn shown_in(&self) -> Vec<i32> {
        match self.state {
            InboxState::Visible {
                message: Some(first),
            } => std::iter::once(first)
                .chain(self.parts.iter().copied())
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// What happens to an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxEvent {
    /// Taken in (again) as new: waiting for its turn.
    Accept,
    /// Its turn's history was written.
    Store,
    /// Its answer is about to be sent (`None`) or is shown in a message (`Some`).
    Show(Option<i32>),
    /// A later message of its answer was sent.
    ShowPart(i32),
    /// Answered, cancelled or refused.
    Answer,
    /// Its turn panicked.
    Fail,
    /// The bot started again with the update not done; `stored`: its turn's answer is in the
    /// history; `max_starts`: how many starts an update may have (`max_turn_attempts`).
    Restart { stored: bool, max_starts: u32 },
    /// Recovery starts it again, just before the start runs: its turn is dequeued to run
    /// again, or its stored answer (or a notice) is about to be sent.
    Start,
}

/// What recovery does with an update a restart found not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Its answer may be on screen in a message nobody can name: tell the chat, never send
    /// a second answer; then it is answered.
    Notice,
    /// Edit the stored answer into the messages that show it; then it is answered.
    Finish,
    /// Send the stored answer, which never reached the screen; then it is answered.
    Send,
    /// Not stored: run its turn again (into the message that shows it, if any).
    Rerun,
    /// Stored, but the chat was cleared since: nothing to send; it is answered.
    Close,
    /// Started `max_starts` times and never done: likely the cause of the crashes, so it is
    /// never started again; it is answered, then its sender gets one apology.
    Quarantine,
}

/// What an [`InboxEvent`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxVerdict {
    /// The record becomes the progress [`step`] returned.
    Write,
    /// Nothing changes (a stored mark on an answer already visible, a part already recorded,
    /// or a restart of an update already done).
    Keep,
    /// A restart's decision; the record is changed later, by the events of what it does.
    Resume(Resume),
}

/// The state machine of an accepted update: what `event` does to `now`, and what it is after.
#[must_use]
pub fn step(now: &Progress, event: InboxEvent) -> (Progress, InboxVerdict) {
    use {InboxEvent as E, InboxState as S, InboxVerdict as V};
    let to = |state| {
        let next = Progress {
            state,
            ..now.clone()
        };
        (next, V::Write)
    };
    let keep = |verdict| (now.clone(), verdict);
    match (now.state, event) {
        // A new update under the id: it has not started again yet.
        (_, E::Accept) => {
            let next = Progress {
                state: S::Pending,
                restarts: 0,
                ..now.clone()
            };
            (next, V::Write)
        }
        (S::Pending, E::Store) => to(S::Stored),
        // A visible answer says more than a stored one; a done update stays done.
        (_, E::Store) => keep(V::Keep),
        (_, E::Show(message)) => to(S::Visible { message }),
        (
            S::Visible {
                message: Some(first),
            },
            E::ShowPart(part),
        ) if first == part => keep(V::Keep),
        (_, E::ShowPart(part)) if now.parts.contains(&part) => keep(V::Keep),
        (_, E::ShowPart(part)) => {
            let mut parts = now.parts.clone();
            parts.push(part);
            let next = Progress {
                parts,
                ..now.clone()
            };
            (next, V::Write)
        }
        (_, E::Answer) => to(S::Answered),
        (_, E::Fail) => to(S::Failed),
        (S::Answered | S::Failed, E::Restart { .. } | E::Start) => keep(V::Keep),
        (_, E::Start) => {
            let next = Progress {
                restarts: now.restarts.saturating_add(1),
                ..now.clone()
            };
            (next, V::Write)
        }
        // Nothing is started for it: it needs no count.
        (S::Stored, E::Restart { stored: false, .. }) => keep(V::Resume(Resume::Close)),
        (_, E::Restart { max_starts, .. }) if now.starts() >= max_starts => {
            keep(V::Resume(Resume::Quarantine))
        }
        (S::Visible { message: None }, E::Restart { .. }) => keep(V::Resume(Resume::Notice)),
        (S::Visible { message: Some(_) }, E::Restart { stored: true, .. }) => {
            keep(V::Resume(Resume::Finish))
        }
        (S::Pending | S::Stored, E::Restart { stored: true, .. }) => keep(V::Resume(Resume::Send)),
        (S::Pending | S::Visible { .. }, E::Restart { stored: false, .. }) => {
            keep(V::Resume(Resume::Rerun))
        }
    }
}

/// What recovery does with an update at `now` (see [`Resume`]), when an update may start
/// `max_starts` times; an update already done needs nothing more than [`Resume::Close`].
#[must_use]
pub(crate) fn resume(now: &Progress, stored: bool, max_starts: u32) -> Resume {
    match step(now, InboxEvent::Restart { stored, max_starts }).1 {
        InboxVerdict::Resume(resume) => resume,
        InboxVerdict::Write | InboxVerdict::Keep => Resume::Close,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_machine() {
        struct Case {
            name: &'static str,
            state: InboxState,
            parts: &'static [i32],
            event: InboxEvent,
            next: InboxState,
            next_parts: &'static [i32],
            verdict: InboxVerdict,
        }
        use {InboxEvent as E, InboxState as S, InboxVerdict as V, Resume as R};
        const SHOWN: S = S::Visible { message: Some(7) };
        const SHOWING: S = S::Visible { message: None };
        let case = |name, state, parts, event, next, next_parts, verdict| Case {
            name,
            state,
            parts,
            event,
            next,
            next_parts,
            verdict,
        };
        let cases = [
            case(
                "a pending update is stored",
                S::Pending,
                &[],
                E::Store,
                S::Stored,
                &[],
                V::Write,
            ),
            case(
                "a visible answer is not downgraded to stored",
                SHOWN,
                &[8],
                E::Store,
                SHOWN,
                &[8],
                V::Keep,
            ),
            case(
                "storing twice changes nothing",
                S::Stored,
                &[],
                E::Store,
                S::Stored,
                &[],
                V::Keep,
            ),
            case(
                "a done update is not stored again",
                S::Answered,
                &[],
                E::Store,
                S::Answered,
                &[],
                V::Keep,
            ),
            case(
                "before the first send",
                S::Stored,
                &[],
                E::Show(None),
                SHOWING,
                &[],
                V::Write,
            ),
            case(
                "the first message is known",
                SHOWING,
                &[],
                E::Show(Some(7)),
                SHOWN,
                &[],
                V::Write,
            ),
            case(
                "a rerun shows again, keeping its parts",
                SHOWN,
                &[8],
                E::Show(None),
                SHOWING,
                &[8],
                V::Write,
            ),
            case(
                "a later part joins",
                SHOWN,
                &[],
                E::ShowPart(8),
                SHOWN,
                &[8],
                V::Write,
            ),
            case(
                "parts keep their order",
                SHOWN,
                &[8],
                E::ShowPart(9),
                SHOWN,
                &[8, 9],
                V::Write,
            ),
            case(
                "the first message is not its own part",
                SHOWN,
                &[],
                E::ShowPart(7),
                SHOWN,
                &[],
                V::Keep,
            ),
            case(
                "a part joins once",
                SHOWN,
                &[8],
                E::ShowPart(8),
                SHOWN,
                &[8],
                V::Keep,
            ),
            case(
                "answered from pending (refused, cancelled)",
                S::Pending,
                &[],
                E::Answer,
                S::Answered,
                &[],
                V::Write,
            ),
            case(
                "answered once shown",
                SHOWN,
                &[8],
                E::Answer,
                S::Answered,
                &[8],
                V::Write,
            ),
            case(
                "a panic fails it",
                S::Pending,
                &[],
                E::Fail,
                S::Failed,
                &[],
                V::Write,
            ),
            case(
                "accepted again",
                S::Answered,
                &[],
                E::Accept,
                S::Pending,
                &[],
                V::Write,
            ),
            case(
                "restarted while a message nobody can name may show it",
                SHOWING,
                &[],
                E::Restart {
                    stored: true,
                    max_starts: 2,
                },
                SHOWING,
                &[],
                V::Resume(R::Notice),
            ),
            case(
                "restarted mid-send, not stored",
                SHOWING,
                &[],
                E::Restart {
                    stored: false,
                    max_starts: 2,
                },
                SHOWING,
                &[],
                V::Resume(R::Notice),
            ),
            case(
                "restarted with the answer shown in a known message",
                SHOWN,
                &[8],
                E::Restart {
                    stored: true,
                    max_starts: 2,
                },
                SHOWN,
                &[8],
                V::Resume(R::Finish),
            ),
            case(
                "restarted before the answer was sent",
                S::Stored,
                &[],
                E::Restart {
                    stored: true,
                    max_starts: 2,
                },
                S::Stored,
                &[],
                V::Resume(R::Send),
            ),
            case(
                "restarted with a stored answer still pending",
                S::Pending,
                &[],
                E::Restart {
                    stored: true,
                    max_starts: 2,
                },
                S::Pending,
                &[],
                V::Resume(R::Send),
            ),
            case(
                "restarted before the turn was stored",
                S::Pending,
                &[],
                E::Restart {
                    stored: false,
                    max_starts: 2,
                },
                S::Pending,
                &[],
                V::Resume(R::Rerun),
            ),
            case(
                "restarted while a rerun showed, not stored",
                SHOWN,
                &[],
                E::Restart {
                    stored: false,
                    max_starts: 2,
                },
                SHOWN,
                &[],
                V::Resume(R::Rerun),
            ),
            case(
                "restarted, stored, then cleared",
                S::Stored,
                &[],
                E::Restart {
                    stored: false,
                    max_starts: 2,
                },
                S::Stored,
                &[],
                V::Resume(R::Close),
            ),
            case(
                "a done update is not resumed",
                S::Failed,
                &[],
                E::Restart {
                    stored: true,
                    max_starts: 2,
                },
                S::Failed,
                &[],
                V::Keep,
            ),
        ];
        for case in cases {
            let now = Progress {
                state: case.state,
                parts: case.parts.to_vec(),
                restarts: 0,
            };
            let next = Progress {
                state: case.next,
                parts: case.next_parts.to_vec(),
                restarts: 0,
            };
            assert_eq!(
                step(&now, case.event),
                (next, case.verdict),
                "case: {}",
                case.name
            );
        }
    }

    /// Every start recovery makes is counted before it runs, and an update that started
    /// `max_starts` times without being done is quarantined, whatever it was going to do.
    #[test]
    fn starts_are_counted_and_an_update_started_too_often_is_quarantined() {
        struct Case {
            name: &'static str,
            state: InboxState,
            restarts: u32,
            event: InboxEvent,
            /// The restarts after the event, and its verdict.
            next: u32,
            verdict: InboxVerdict,
        }
        use {InboxEvent as E, InboxState as S, InboxVerdict as V, Resume as R};
        const SHOWN: S = S::Visible { message: Some(7) };
        const SHOWING: S = S::Visible { message: None };
        let restart = |stored, max_starts| E::Restart { stored, max_starts };
        let case = |name, state, restarts, event, next, verdict| Case {
            name,
            state,
            restarts,
            event,
            next,
            verdict,
        };
        let cases = [
            case("a rerun is counted", S::Pending, 0, E::Start, 1, V::Write),
            case("counted again", SHOWN, 1, E::Start, 2, V::Write),
            case(
                "a done update is not started",
                S::Answered,
                1,
                E::Start,
                1,
                V::Keep,
            ),
            case("a failed one neither", S::Failed, 0, E::Start, 0, V::Keep),
            case(
                "a new update under the id",
                S::Answered,
                3,
                E::Accept,
                0,
                V::Write,
            ),
            case(
                "progress keeps the count",
                S::Pending,
                1,
                E::Store,
                1,
                V::Write,
            ),
            case(
                "started once (at accept): run again",
                S::Pending,
                0,
                restart(false, 2),
                0,
                V::Resume(R::Rerun),
            ),
            case(
                "started twice: never again",
                S::Pending,
                1,
                restart(false, 2),
                1,
                V::Resume(R::Quarantine),
            ),
            case(
                "a stored answer whose sending crashed twice",
                S::Stored,
                1,
                restart(true, 2),
                1,
                V::Resume(R::Quarantine),
            ),
            case(
                "a rerun into a shown message, twice",
                SHOWN,
                1,
                restart(false, 2),
                1,
                V::Resume(R::Quarantine),
            ),
            case(
                "a finish in a shown message, twice",
                SHOWN,
                1,
                restart(true, 2),
                1,
                V::Resume(R::Quarantine),
            ),
            case(
                "a notice, twice",
                SHOWING,
                1,
                restart(true, 2),
                1,
                V::Resume(R::Quarantine),
            ),
            case(
                "a higher limit runs it again",
                S::Pending,
                1,
                restart(false, 3),
                1,
                V::Resume(R::Rerun),
            ),
            case(
                "a limit of one never runs a turn a crash interrupted",
                S::Pending,
                0,
                restart(false, 1),
                0,
                V::Resume(R::Quarantine),
            ),
            case(
                "a stored turn of a cleared chat starts nothing: closed",
                S::Stored,
                5,
                restart(false, 2),
                5,
                V::Resume(R::Close),
            ),
            case(
                "a done update is not quarantined",
                S::Answered,
                5,
                restart(false, 2),
                5,
                V::Keep,
            ),
            case(
                "the count does not wrap",
                S::Pending,
                u32::MAX,
                E::Start,
                u32::MAX,
                V::Write,
            ),
        ];
        for case in cases {
            let now = Progress {
                state: case.state,
                parts: vec![8],
                restarts: case.restarts,
            };
            let (next, verdict) = step(&now, case.event);
            assert_eq!(verdict, case.verdict, "case: {}", case.name);
            assert_eq!(next.restarts, case.next, "case: {}", case.name);
            assert_eq!(next.parts, [8], "case: {}: parts kept", case.name);
        }
    }

    #[test]
    fn an_answer_is_shown_in_its_known_messages_only() {
        let progress = |state, parts: &[i32]| Progress {
            state,
            parts: parts.to_vec(),
            restarts: 0,
        };
        let shown = InboxState::Visible { message: Some(7) };
        assert_eq!(progress(shown, &[8, 9]).shown_in(), [7, 8, 9]);
        let showing = InboxState::Visible { message: None };
        assert!(progress(showing, &[8]).shown_in().is_empty());
        assert!(progress(InboxState::Stored, &[]).shown_in().is_empty());
    }
}
