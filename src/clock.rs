//! The time the scheduler reads: the system's, or in tests the system's moved forward at will.
//!
//! The scheduled tasks' loop (`turn::scheduled`) asks a [`Clock`] for "now" and sleeps until
//! the soonest task is due or the clock is moved, so a test that must show nothing happened
//! at a task's time (a cancelled task, a done one, a user no longer allowed) moves the clock
//! past it in a moment instead of sleeping through it; the bot's own is never moved.
//! A moved clock only runs ahead: what else reads the time (the `schedule_task` tool, the
//! inbox) keeps the system's, so a task made "in 2 s" is due once the clock is moved 2 s on.
//!
//! ```
//! use heurist::clock::Clock;
//! let clock = Clock::system();
//! let before = clock.now_ms();
//! clock.advance(std::time::Duration::from_secs(60));
//! assert!(clock.now_ms() >= before + 60_000);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// The scheduler's "now": the system's time plus an offset only a test moves.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<Inner>,
}

struct Inner {
    /// Milliseconds added to the system's time.
    offset_ms: AtomicI64,
    /// Bumped when the clock is moved, so a loop sleeping on it wakes.
    moved: watch::Sender<u64>,
    /// The latest "now" (unix ms) a scheduler pass finished at, for tests to wait on.
    scanned_ms: watch::Sender<i64>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The system's time (until a test moves it with [`Clock::advance`]).
    pub fn system() -> Self {
        Self {
            inner: Arc::new(Inner {
                offset_ms: AtomicI64::new(0),
                moved: watch::Sender::new(0),
                scanned_ms: watch::Sender::new(i64::MIN),
            }),
        }
    }

    /// Now, in unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis() + self.inner.offset_ms.load(Ordering::SeqCst)
    }

    /// Now, in unix seconds.
    pub fn now(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// Moves the clock `by` forward and wakes whoever waits in [`Clock::moved`].
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.inner.offset_ms.fetch_add(ms, Ordering::SeqCst);
        self.inner.moved.send_modify(|n| *n += 1);
    }

    /// A future that resolves the next time the clock is moved (never, for the system's).
    pub(crate) fn moved(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut moved = self.inner.moved.subscribe();
        moved.mark_unchanged();
        async move {
            if moved.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Records that a scheduler pass looked at every task as of `now_ms`.
    pub(crate) fn scanned(&self, now_ms: i64) {
        self.inner
            .scanned_ms
            .send_modify(|at| *at = (*at).max(now_ms));
    }

    /// Waits until a scheduler pass has looked at every task as of this clock's now or later:
    /// whatever was due by then has fired (its run recorded and queued) or been skipped.
    pub async fn scheduler_caught_up(&self) {
        let now = self.now_ms();
        let mut scanned = self.inner.scanned_ms.subscribe();
        // The sender lives as long as `self`, so this only returns once a pass is done.
        let _ = scanned.wait_for(|at| *at >= now).await;
    }
}
