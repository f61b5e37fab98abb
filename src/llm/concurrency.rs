//! How many requests one endpoint serves at once, and who goes first when it is full.
//!
//! A local server (llama.cpp's `llama-server`, Ollama) shares one context among its parallel
//! slots: every extra request in flight takes room from the others, and past the room they all
//! fail. So the client caps its requests in flight per endpoint (`llm.max_concurrent`) with a
//! small fair semaphore that has two waiter queues: a user's agent call
//! ([`Priority::Interactive`]) is served before any waiting background call
//! ([`Priority::Background`]: options extraction, reflection), and within one queue callers are
//! served in arrival order.
//!
//! A waiter that gives up (its future dropped, e.g. a cancelled turn) loses nothing for the
//! others: a permit handed to it on its way out is passed on to the next waiter.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Who is waiting for the LLM: a user, or the bot's own follow-up work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// A user waits for this call (the agent's turn, the message's embedding).
    Interactive,
    /// Nobody waits for this call right now (options extraction, reflection).
    Background,
}

/// A semaphore whose interactive waiters are served before its background ones.
#[derive(Clone)]
pub(crate) struct PrioritySemaphore {
    inner: Arc<Mutex<SemaphoreState>>,
}

struct SemaphoreState {
    available: usize,
    interactive: VecDeque<oneshot::Sender<()>>,
    background: VecDeque<oneshot::Sender<()>>,
}

/// A request slot; dropping it hands the slot to the next waiter.
pub(crate) struct Permit {
    semaphore: PrioritySemaphore,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.semaphore.release();
    }
}

/// A waiter's end of the hand-over; if it is dropped before it took the permit handed to it,
/// the permit goes on to the next waiter instead of being lost.
struct Waiter {
    receiver: oneshot::Receiver<()>,
    semaphore: PrioritySemaphore,
    served: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.served {
            return;
        }
        self.receiver.close();
        if self.receiver.try_recv().is_ok() {
            self.semaphore.release();
        }
    }
}

impl PrioritySemaphore {
    /// A semaphore with `permits` slots (at least one, so every caller is served eventually).
    pub(crate) fn new(permits: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(SemaphoreState {
                available: permits.max(1),
                interactive: VecDeque::new(),
                background: VecDeque::new(),
            })),
        }
    }

    /// Waits for a slot. An interactive caller only waits behind interactive callers; a
    /// background caller waits behind everyone.
    pub(crate) async fn acquire(&self, priority: Priority) -> Permit {
        loop {
            let receiver = {
                let mut state = self.lock();
                let ahead = match priority {
                    Priority::Interactive => state.interactive.len(),
                    Priority::Background => state.interactive.len() + state.background.len(),
                };
                if state.available > 0 && ahead == 0 {
                    state.available -= 1;
                    return self.permit();
                }
                let (sender, receiver) = oneshot::channel();
                match priority {
                    Priority::Interactive => state.interactive.push_back(sender),
                    Priority::Background => state.background.push_back(sender),
                }
                receiver
            };
            let mut waiting = Waiter {
                receiver,
                semaphore: self.clone(),
                served: false,
            };
            // A sender only goes away unsent if the queue is dropped, which cannot happen while
            // this clone of the semaphore lives; should it happen anyway, queue again.
            if (&mut waiting.receiver).await.is_ok() {
                waiting.served = true;
                return self.permit();
            }
        }
    }

    /// Slots free right now (for tests and logs).
    #[cfg(test)]
    fn available(&self) -> usize {
        self.lock().available
    }

    fn permit(&self) -> Permit {
        Permit {
            semaphore: self.clone(),
        }
    }

    /// Hands a freed slot to the first live waiter, interactive ones first, or keeps it.
    fn release(&self) {
        let mut state = self.lock();
        loop {
            let next = match state.interactive.pop_front() {
                Some(sender) => Some(sender),
                None => state.background.pop_front(),
            };
            match next {
                Some(sender) => {
                    if sender.send(()).is_ok() {
                        return;
                    }
                }
                None => {
                    state.available += 1;
                    return;
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SemaphoreState> {
        // The state is consistent after every statement, so a panic elsewhere cannot leave
        // it half-updated: a poisoned lock is still good.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Lets spawned tasks run until they block.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn interactive_waiters_are_served_before_background_ones_in_arrival_order() {
        let semaphore = PrioritySemaphore::new(1);
        let held = semaphore.acquire(Priority::Background).await;
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (name, priority) in [
            ("background 1", Priority::Background),
            ("background 2", Priority::Background),
            ("interactive 1", Priority::Interactive),
            ("interactive 2", Priority::Interactive),
        ] {
            let semaphore = semaphore.clone();
            let order = order_tx.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = semaphore.acquire(priority).await;
                order.send(name).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            // Queued in this order.
            settle().await;
        }
        drop(order_tx);
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        let mut order = Vec::new();
        while let Some(name) = order_rx.recv().await {
            order.push(name);
        }
        assert_eq!(
            order,
            [
                "interactive 1",
                "interactive 2",
                "background 1",
                "background 2"
            ]
        );
        assert_eq!(semaphore.available(), 1, "every permit came back");
    }

    #[tokio::test]
    async fn never_more_than_the_cap_in_flight() {
        struct Case {
            name: &'static str,
            permits: usize,
            expect_max: usize,
        }
        let cases = [
            Case {
                name: "one queues everyone",
                permits: 1,
                expect_max: 1,
            },
            Case {
                name: "four at once",
                permits: 4,
                expect_max: 4,
            },
            Case {
                name: "zero is treated as one",
                permits: 0,
                expect_max: 1,
            },
        ];
        for case in cases {
            let semaphore = PrioritySemaphore::new(case.permits);
            let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let max = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let tasks: Vec<_> = (0..12)
                .map(|i| {
                    let semaphore = semaphore.clone();
                    let (in_flight, max) = (in_flight.clone(), max.clone());
                    let priority = if i % 3 == 0 {
                        Priority::Interactive
                    } else {
                        Priority::Background
                    };
                    tokio::spawn(async move {
                        let _permit = semaphore.acquire(priority).await;
                        let now = in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        max.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(
                max.load(std::sync::atomic::Ordering::SeqCst),
                case.expect_max,
                "case {}",
                case.name
            );
            assert_eq!(
                semaphore.available(),
                case.permits.max(1),
                "case {}",
                case.name
            );
        }
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_passes_its_permit_on() {
        let semaphore = PrioritySemaphore::new(1);
        let held = semaphore.acquire(Priority::Interactive).await;
        let quitter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move {
                let _permit = semaphore.acquire(Priority::Interactive).await;
                unreachable!("aborted before it was served");
            })
        };
        settle().await;
        let patient = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { drop(semaphore.acquire(Priority::Background).await) })
        };
        settle().await;
        quitter.abort();
        let _ = quitter.await;
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), patient)
            .await
            .expect("the background waiter was served")
            .unwrap();
        assert_eq!(semaphore.available(), 1);
    }
}
