//! Work that runs after a reply and must not delay it (option buttons, reflections), tracked
//! so that a shutdown can end it.
//!
//! One [`Background`] per bot, shared by the layers that start such work. Finished tasks are
//! reaped whenever a new one starts, so the set does not grow with the bot's uptime.
//!
//! # Bounded follow-ups
//! The follow-ups of answers ([`Lane::Options`]: extracting an answer's option buttons;
//! [`Lane::Reflection`]: a reflection, with the embeddings of what it learns) can come faster
//! than the model serves them. Each lane runs a few at a time; the rest wait in one queue of
//! at most `max_queued_follow_ups`, and when it is full the oldest waiting follow-up is dropped
//! (logged, and its `dropped` hook run: a dropped reflection forgets its saved job). What runs
//! is never dropped, and a shutdown ends the waiting ones without their hooks, so a reflection
//! interrupted by a shutdown still resumes at the next start. Small follow-ups that only record
//! or edit what a turn did ([`Background::spawn`]) are not queued.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, JoinSet};

/// What kind of follow-up: each kind runs its own few at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// An answer's option buttons.
    Options,
    /// A reflection (a turn's, a 👎's or one resumed at start), with its embeddings.
    Reflection,
}

pub(crate) struct Background {
    /// Follow-ups, which end by themselves (the queued ones too, while they wait).
    tasks: Mutex<JoinSet<()>>,
    /// Loops that run until the shutdown ends them (the prune loop).
    loops: Mutex<JoinSet<()>>,
    queue: Arc<Queue>,
    /// Set by [`Self::abort_all`]: nothing starts after it (a turn the shutdown aborted may
    /// still queue its reflection as it unwinds; the saved job resumes at the next start).
    closed: AtomicBool,
}

/// The follow-ups waiting for their lane, oldest first.
struct Queue {
    options: Semaphore,
    reflections: Semaphore,
    waiting: Mutex<VecDeque<Waiting>>,
    max_waiting: usize,
    next_id: AtomicU64,
}

struct Waiting {
    id: u64,
    lane: Lane,
    abort: AbortHandle,
    dropped: Box<dyn FnOnce() + Send>,
}

impl Queue {
    fn lane(&self, lane: Lane) -> &Semaphore {
        match lane {
            Lane::Options => &self.options,
            Lane::Reflection => &self.reflections,
        }
    }

    fn waiting(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Background {
    /// Follow-ups run at most `options` option extractions and `reflections` reflections at a
    /// time, and at most `max_waiting` wait (each at least 1).
    pub(crate) fn new(options: usize, reflections: usize, max_waiting: usize) -> Self {
        Self {
            tasks: Mutex::default(),
            loops: Mutex::default(),
            closed: AtomicBool::new(false),
            queue: Arc::new(Queue {
                options: Semaphore::new(options.max(1)),
                reflections: Semaphore::new(reflections.max(1)),
                waiting: Mutex::default(),
                max_waiting: max_waiting.max(1),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// `set`, locked and with its finished tasks reaped, to start a task in; `None` after
    /// [`Self::abort_all`]. Checked under the lock that `abort_all` takes the set under: a task
    /// is either in the set it ends, or never starts.
    fn open<'a>(&self, set: &'a Mutex<JoinSet<()>>) -> Option<MutexGuard<'a, JoinSet<()>>> {
        let mut tasks = set.lock().unwrap_or_else(PoisonError::into_inner);
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        while tasks.try_join_next().is_some() {}
        Some(tasks)
    }

    /// Runs `work` in the background, tracked so a shutdown can end it.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        if let Some(mut tasks) = self.open(&self.tasks) {
            tasks.spawn(work);
        }
    }

    /// Queues `work` in `lane` (see the module doc): it runs once the lane has room, unless
    /// the queue overflows first, and then `dropped` runs instead.
    pub(crate) fn follow_up(
        &self,
        lane: Lane,
        work: impl Future<Output = ()> + Send + 'static,
        dropped: impl FnOnce() + Send + 'static,
    ) {
        let queue = self.queue.clone();
        let id = queue.next_id.fetch_add(1, Ordering::Relaxed);
        let Some(mut tasks) = self.open(&self.tasks) else {
            return;
        };
        // Held while the task is spawned and listed, so it cannot start before it is listed.
        let mut waiting = self.queue.waiting();
        let abort = tasks.spawn(async move {
            let Ok(_room) = queue.lane(lane).acquire().await else {
                return;
            };
            // Taking itself off the list starts it; not being on it any more means that it
            // was dropped meanwhile.
            let listed = {
                let mut waiting = queue.waiting();
                let at = waiting.iter().position(|w| w.id == id);
                at.and_then(|at| waiting.remove(at))
            };
            if listed.is_some() {
                work.await;
            }
        });
        waiting.push_back(Waiting {
            id,
            lane,
            abort,
            dropped: Box::new(dropped),
        });
        while waiting.len() > self.queue.max_waiting {
            let Some(oldest) = waiting.pop_front() else {
                break;
            };
            tracing::warn!(
                lane = ?oldest.lane,
                waiting = waiting.len(),
                "too many follow-ups waiting: dropping the oldest"
            );
            oldest.abort.abort();
            (oldest.dropped)();
        }
    }

    /// Runs `work`, a loop that never ends by itself, until the shutdown aborts it. It is not
    /// counted by [`Self::running`].
    pub(crate) fn spawn_loop(&self, work: impl Future<Output = ()> + Send + 'static) {
        if let Some(mut loops) = self.open(&self.loops) {
            loops.spawn(work);
        }
    }

    /// How many follow-ups are still running or waiting (loops not counted).
    pub(crate) fn running(&self) -> usize {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.len()
    }

    /// Aborts all background work (at the end of a shutdown's grace period) and waits until
    /// every task has let go of what it held (the app, and with it the store). Waiting
    /// follow-ups end without their `dropped` hooks: what they would have done resumes at the
    /// next start where it can (saved reflections). Nothing started after it runs.
    pub(crate) async fn abort_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.queue.waiting().clear();
        for set in [&self.tasks, &self.loops] {
            let mut tasks = std::mem::take(&mut *set.lock().unwrap_or_else(|e| e.into_inner()));
            tasks.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// One reflection at a time and two waiting at most: of four queued behind a running one,
    /// the two oldest waiting are dropped (their hooks run), the two newest run, in order.
    #[tokio::test]
    async fn the_oldest_waiting_follow_up_is_dropped_when_the_queue_is_full() {
        let background = Background::new(1, 1, 2);
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let dropped = Arc::new(Mutex::new(Vec::new()));
        let first = ran.clone();
        background.follow_up(
            Lane::Reflection,
            async move {
                let _ = hold.await;
                first.lock().unwrap().push(0);
            },
            || panic!("a running follow-up is never dropped"),
        );
        tokio::task::yield_now().await;
        for i in 1..=4 {
            let (ran, dropped) = (ran.clone(), dropped.clone());
            background.follow_up(
                Lane::Reflection,
                async move { ran.lock().unwrap().push(i) },
                move || dropped.lock().unwrap().push(i),
            );
        }
        assert_eq!(*dropped.lock().unwrap(), [1, 2]);
        // The options lane is not held up by the reflections.
        let options = Arc::new(AtomicUsize::new(0));
        let counted = options.clone();
        background.follow_up(
            Lane::Options,
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            },
            || {},
        );
        assert_eq!(
            *dropped.lock().unwrap(),
            [1, 2, 3],
            "the oldest, of any lane"
        );
        while options.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        while background.running() > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*ran.lock().unwrap(), [0, 4]);
        assert_eq!(*dropped.lock().unwrap(), [1, 2, 3]);
    }

    /// A shutdown ends waiting follow-ups without their hooks (a saved reflection stays saved).
    #[tokio::test]
    async fn a_shutdown_drops_no_hook() {
        let background = Background::new(1, 1, 8);
        let hooks = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let hooks = hooks.clone();
            background.follow_up(Lane::Reflection, std::future::pending(), move || {
                hooks.fetch_add(1, Ordering::SeqCst);
            });
        }
        background.abort_all().await;
        assert_eq!(hooks.load(Ordering::SeqCst), 0);
        assert_eq!(background.running(), 0);
    }

    /// After a shutdown's abort, work started late (a turn the abort unwound queuing its
    /// reflection) never runs, so nothing holds the app (and the store) past the shutdown;
    /// its hook does not run either (the saved job resumes at the next start).
    #[tokio::test]
    async fn nothing_starts_after_a_shutdown() {
        let background = Background::new(1, 1, 8);
        background.abort_all().await;
        let ran = Arc::new(AtomicUsize::new(0));
        let (a, b, c) = (ran.clone(), ran.clone(), ran.clone());
        background.spawn(async move {
            a.fetch_add(1, Ordering::SeqCst);
        });
        background.spawn_loop(async move {
            b.fetch_add(1, Ordering::SeqCst);
        });
        background.follow_up(
            Lane::Reflection,
            async move {
                c.fetch_add(1, Ordering::SeqCst);
            },
            || panic!("no hook after a shutdown"),
        );
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(background.running(), 0);
    }
}
