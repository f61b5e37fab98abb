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
//! [`step`] decides; [`super::Inbox`] applies its verdict to the record atomically.
//!
//! ```
//! use heurist::store::InboxState;
//! use heurist::store::inbox_state::{Event, Progress, Resume, Verdict, step};
//! let pending = Progress { state: InboxState::Pending, parts: vec![] };
//! let (stored, verdict) = step(&pending, Event::Store);
//! assert_eq!((stored.state, verdict), (InboxState::Stored, Verdict::Write));
//! let (_, verdict) = step(&stored, Event::Restart { stored: true });
//! assert_eq!(verdict, Verdict::Resume(Resume::Send));
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

/// An update's state and the later messages of its visible answer (the first is in the
/// state): the part of its record that [`step`] changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub state: InboxState,
    pub parts: Vec<i32>,
}

impl Progress {
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
pub enum Event {
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
    /// history.
    Restart { stored: bool },
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
}

/// What an [`Event`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
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
pub fn step(now: &Progress, event: Event) -> (Progress, Verdict) {
    use {Event as E, InboxState as S, Verdict as V};
    let to = |state| {
        let next = Progress {
            state,
            parts: now.parts.clone(),
        };
        (next, V::Write)
    };
    let keep = |verdict| (now.clone(), verdict);
    match (now.state, event) {
        (_, E::Accept) => to(S::Pending),
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
                state: now.state,
                parts,
            };
            (next, V::Write)
        }
        (_, E::Answer) => to(S::Answered),
        (_, E::Fail) => to(S::Failed),
        (S::Answered | S::Failed, E::Restart { .. }) => keep(V::Keep),
        (S::Visible { message: None }, E::Restart { .. }) => keep(V::Resume(Resume::Notice)),
        (S::Visible { message: Some(_) }, E::Restart { stored: true }) => {
            keep(V::Resume(Resume::Finish))
        }
        (S::Pending | S::Stored, E::Restart { stored: true }) => keep(V::Resume(Resume::Send)),
        (S::Pending | S::Visible { .. }, E::Restart { stored: false }) => {
            keep(V::Resume(Resume::Rerun))
        }
        (S::Stored, E::Restart { stored: false }) => keep(V::Resume(Resume::Close)),
    }
}

/// What recovery does with an update in `state` (see [`Resume`]); an update already done
/// needs nothing more than [`Resume::Close`].
#[must_use]
pub(crate) fn resume(state: InboxState, stored: bool) -> Resume {
    let now = Progress {
        state,
        parts: Vec::new(),
    };
    match step(&now, Event::Restart { stored }).1 {
        Verdict::Resume(resume) => resume,
        Verdict::Write | Verdict::Keep => Resume::Close,
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
            event: Event,
            next: InboxState,
            next_parts: &'static [i32],
            verdict: Verdict,
        }
        use {Event as E, InboxState as S, Resume as R, Verdict as V};
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
                E::Restart { stored: true },
                SHOWING,
                &[],
                V::Resume(R::Notice),
            ),
            case(
                "restarted mid-send, not stored",
                SHOWING,
                &[],
                E::Restart { stored: false },
                SHOWING,
                &[],
                V::Resume(R::Notice),
            ),
            case(
                "restarted with the answer shown in a known message",
                SHOWN,
                &[8],
                E::Restart { stored: true },
                SHOWN,
                &[8],
                V::Resume(R::Finish),
            ),
            case(
                "restarted before the answer was sent",
                S::Stored,
                &[],
                E::Restart { stored: true },
                S::Stored,
                &[],
                V::Resume(R::Send),
            ),
            case(
                "restarted with a stored answer still pending",
                S::Pending,
                &[],
                E::Restart { stored: true },
                S::Pending,
                &[],
                V::Resume(R::Send),
            ),
            case(
                "restarted before the turn was stored",
                S::Pending,
                &[],
                E::Restart { stored: false },
                S::Pending,
                &[],
                V::Resume(R::Rerun),
            ),
            case(
                "restarted while a rerun showed, not stored",
                SHOWN,
                &[],
                E::Restart { stored: false },
                SHOWN,
                &[],
                V::Resume(R::Rerun),
            ),
            case(
                "restarted, stored, then cleared",
                S::Stored,
                &[],
                E::Restart { stored: false },
                S::Stored,
                &[],
                V::Resume(R::Close),
            ),
            case(
                "a done update is not resumed",
                S::Failed,
                &[],
                E::Restart { stored: true },
                S::Failed,
                &[],
                V::Keep,
            ),
        ];
        for case in cases {
            let now = Progress {
                state: case.state,
                parts: case.parts.to_vec(),
            };
            let next = Progress {
                state: case.next,
                parts: case.next_parts.to_vec(),
            };
            assert_eq!(
                step(&now, case.event),
                (next, case.verdict),
                "case: {}",
                case.name
            );
        }
    }

    #[test]
    fn an_answer_is_shown_in_its_known_messages_only() {
        let progress = |state, parts: &[i32]| Progress {
            state,
            parts: parts.to_vec(),
        };
        let shown = InboxState::Visible { message: Some(7) };
        assert_eq!(progress(shown, &[8, 9]).shown_in(), [7, 8, 9]);
        let showing = InboxState::Visible { message: None };
        assert!(progress(showing, &[8]).shown_in().is_empty());
        assert!(progress(InboxState::Stored, &[]).shown_in().is_empty());
    }
}
