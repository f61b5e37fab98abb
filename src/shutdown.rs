//! The shutdown of one run of the bot: one signal that every loop and server listens to.
//!
//! One [`Shutdown`] is made with the app ([`crate::app::App::shutdown`]); the runtime begins it
//! when the bot stops (Ctrl-C, SIGTERM, a restart in place), and everything that would otherwise
//! run forever ends by itself at its next wait: the adapter stops taking updates, the metrics
//! server stops serving, the scheduler and the store's upkeep loops return. A clone is a
//! listener like any other: the state is a `watch` channel, so a listener that starts waiting
//! after the shutdown began returns at once (mini-redis' `shutdown.rs` keeps a flag for that).
//!
//! What has no loop to end (a turn, a reflection, an answer's follow-up) is not told: the
//! runtime's stop lets it finish within the grace period and then aborts what is left (see
//! `runtime::Running::stop`). Stopping one turn (`/cancel`, ⏹) is [`crate::cancel`]'s.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use heurist::shutdown::Shutdown;
//! let shutdown = Shutdown::new();
//! let listener = shutdown.clone();
//! let ticks = tokio::spawn(async move {
//!     let mut ticks = 0;
//!     while listener.until(tokio::task::yield_now()).await.is_some() {
//!         ticks += 1;
//!     }
//!     ticks
//! });
//! shutdown.begin();
//! assert!(shutdown.is_begun());
//! let _ticks = ticks.await.unwrap(); // the loop ended by itself
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

/// One run's shutdown: cloned into every loop, begun once by the runtime.
#[derive(Clone, Debug)]
pub struct Shutdown {
    begun: Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A shutdown not begun yet.
    pub fn new() -> Self {
        Self {
            begun: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Begins the shutdown: every listener's wait ends. Beginning it again does nothing.
    pub fn begin(&self) {
        self.begun.send_replace(true);
    }

    /// Whether the shutdown has begun.
    pub fn is_begun(&self) -> bool {
        *self.begun.borrow()
    }

    /// Resolves once the shutdown has begun (at once if it already has).
    pub async fn begun(&self) {
        let mut begun = self.begun.subscribe();
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = begun.wait_for(|begun| *begun).await;
    }

    /// Runs `work` until the shutdown begins: its output, or `None` if the shutdown came first
    /// (then `work` is dropped where it waited). A loop waits through this at each of its waits.
    pub async fn until<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.begun() => None,
            out = work => Some(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every clone hears it, those waiting and those that come later; work that ends first
    /// keeps its output.
    #[tokio::test]
    async fn every_listener_hears_the_shutdown_once_begun() {
        let shutdown = Shutdown::new();
        assert_eq!(shutdown.until(async { 7 }).await, Some(7));
        let waiting: Vec<_> = (0..3)
            .map(|_| {
                let listener = shutdown.clone();
                tokio::spawn(async move { listener.until(std::future::pending::<()>()).await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!shutdown.is_begun());
        shutdown.begin();
        for listener in waiting {
            let ended = tokio::time::timeout(Duration::from_secs(5), listener).await;
            assert_eq!(ended.unwrap().unwrap(), None);
        }
        let late = shutdown.clone();
        assert_eq!(late.until(std::future::pending::<()>()).await, None);
        assert!(late.is_begun());
        shutdown.begin();
        assert!(shutdown.is_begun(), "begun twice: still begun");
    }
}
