//! One message per burst: a run of notices to one place (a user's refusals over the rate in a
//! conversation, the strangers refused in a group) shows as one message, sent once and then
//! edited to say what the burst is now.
//!
//! Whoever adds to a burst only changes its state ([`Bursts::add`]); one poster at a time
//! (started when `add` says so) brings the screen up to date: [`Bursts::next`] says what to
//! send or edit, [`Bursts::shown`] records what it did, and `next` says `None` (and the poster
//! stops) once the screen shows the burst's latest state. Additions made while a send or edit
//! is on its way are folded into the next edit, so a flood of a hundred refusals costs a send
//! and a few edits, not a hundred paced calls. A burst ends once `window` has passed since its
//! last addition (never while its poster runs); the next addition starts a new one, with a
//! message of its own.
//!
//! Pure state: no clock of its own (callers pass `now`), no I/O.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a burst's poster does next: `message` is the burst's message on screen, if any.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Post<S> {
    /// `None`: send a new message; `Some`: edit this one.
    pub message: Option<i32>,
    /// The burst's state to show.
    pub state: S,
    /// The revision shown, for [`Bursts::shown`].
    pub revision: u64,
}

struct Burst<S> {
    state: S,
    /// Bumped by every addition.
    revision: u64,
    /// The revision the screen shows (or that the poster gave up on).
    shown: u64,
    message: Option<i32>,
    /// Whether a poster is bringing the screen up to date.
    posting: bool,
    /// When the burst ends, unless added to first.
    until: Instant,
}

/// The open bursts, by where they show (e.g. a conversation and a user).
pub(crate) struct Bursts<K, S> {
    open: Mutex<HashMap<K, Burst<S>>>,
}

impl<K, S> Default for Bursts<K, S> {
    fn default() -> Self {
        Self {
            open: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, S: Clone + Default> Bursts<K, S> {
    /// Adds to `key`'s burst (opening one if none is open) with `add`, keeps it open for
    /// `window` more, and returns `true` if the caller must start a poster for it.
    pub(crate) fn add(
        &self,
        key: K,
        window: Duration,
        now: Instant,
        add: impl FnOnce(&mut S),
    ) -> bool {
        let mut open = self.open();
        open.retain(|_, burst| burst.until > now || burst.posting);
        let burst = open.entry(key).or_insert_with(|| Burst {
            state: S::default(),
            revision: 0,
            shown: 0,
            message: None,
            posting: false,
            until: now,
        });
        add(&mut burst.state);
        burst.revision += 1;
        burst.until = now + window;
        let start = !burst.posting;
        burst.posting = true;
        start
    }

    /// What the poster of `key`'s burst shows next; `None` once the screen is up to date,
    /// and then the poster is done (the next addition starts another).
    pub(crate) fn next(&self, key: &K) -> Option<Post<S>> {
        let mut open = self.open();
        let burst = open.get_mut(key)?;
        if burst.shown == burst.revision {
            burst.posting = false;
            return None;
        }
        Some(Post {
            message: burst.message,
            state: burst.state.clone(),
            revision: burst.revision,
        })
    }

    /// The poster showed `revision` in `message`, or (`None`) could not show it: then the
    /// burst waits for its next addition rather than retrying for ever.
    pub(crate) fn shown(&self, key: &K, revision: u64, message: Option<i32>) {
        let mut open = self.open();
        if let Some(burst) = open.get_mut(key) {
            burst.shown = burst.shown.max(revision);
            if message.is_some() {
                burst.message = message;
            }
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<K, Burst<S>>> {
        // Every critical section leaves the map consistent, so poisoning is ignored.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a poster's life: an addition (`add` of that many) or a post.
    enum Step {
        /// Adds one to the count; whether a poster must start.
        Add { at_secs: u64, starts: bool },
        /// The poster asks what to show: the message it edits and the count, or nothing.
        Next(Option<(Option<i32>, u32)>),
        /// The poster showed the last `Next` in this message (or failed: `None`).
        Shown(Option<i32>),
    }

    #[test]
    fn a_burst_is_sent_once_then_edited_with_what_came_meanwhile() {
        use Step::*;
        let cases: [(&str, Vec<Step>); 4] = [
            (
                "one addition: one send",
                vec![
                    Add {
                        at_secs: 0,
                        starts: true,
                    },
                    Next(Some((None, 1))),
                    Shown(Some(10)),
                    Next(None),
                ],
            ),
            (
                "additions during the send fold into one edit",
                vec![
                    Add {
                        at_secs: 0,
                        starts: true,
                    },
                    Next(Some((None, 1))),
                    Add {
                        at_secs: 0,
                        starts: false,
                    },
                    Add {
                        at_secs: 1,
                        starts: false,
                    },
                    Shown(Some(10)),
                    Next(Some((Some(10), 3))),
                    Shown(Some(10)),
                    Next(None),
                    Add {
                        at_secs: 2,
                        starts: true,
                    },
                    Next(Some((Some(10), 4))),
                ],
            ),
            (
                "a failed send is not retried until the next addition",
                vec![
                    Add {
                        at_secs: 0,
                        starts: true,
                    },
                    Next(Some((None, 1))),
                    Shown(None),
                    Next(None),
                    Add {
                        at_secs: 1,
                        starts: true,
                    },
                    Next(Some((None, 2))),
                ],
            ),
            (
                "after the window a new burst has a message of its own",
                vec![
                    Add {
                        at_secs: 0,
                        starts: true,
                    },
                    Next(Some((None, 1))),
                    Shown(Some(10)),
                    Next(None),
                    Add {
                        at_secs: 61,
                        starts: true,
                    },
                    Next(Some((None, 1))),
                ],
            ),
        ];
        let t0 = Instant::now();
        for (name, steps) in cases {
            let bursts: Bursts<i64, u32> = Bursts::default();
            let mut last = 0;
            for (i, step) in steps.into_iter().enumerate() {
                match step {
                    Add { at_secs, starts } => {
                        let now = t0 + Duration::from_secs(at_secs);
                        let started = bursts.add(7, Duration::from_secs(60), now, |n| *n += 1);
                        assert_eq!(started, starts, "{name}, step {i}");
                    }
                    Next(expected) => {
                        let post = bursts.next(&7);
                        if let Some(post) = &post {
                            last = post.revision;
                        }
                        let got = post.map(|p| (p.message, p.state));
                        assert_eq!(got, expected, "{name}, step {i}");
                    }
                    Shown(message) => bursts.shown(&7, last, message),
                }
            }
        }
    }

    #[test]
    fn a_burst_being_posted_outlives_its_window() {
        let bursts: Bursts<i64, u32> = Bursts::default();
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        assert!(bursts.add(1, Duration::from_secs(1), t0, |n| *n += 1));
        let post = bursts.next(&1).unwrap();
        // Another key's addition sweeps ended bursts, long after this one's window.
        bursts.add(2, Duration::from_secs(1), later, |n| *n += 1);
        bursts.shown(&1, post.revision, Some(10));
        assert!(
            !bursts.add(1, Duration::from_secs(1), later, |n| *n += 1),
            "its poster still runs"
        );
        let post = bursts.next(&1).unwrap();
        assert_eq!((post.message, post.state), (Some(10), 2), "the same burst");
    }
}
