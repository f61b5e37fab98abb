//! One turn at a time per conversation (a chat, or a forum topic of one), conversations in
//! parallel.
//!
//! Each chat or topic with work has a lane: an unbounded FIFO and one worker task that runs the
//! lane's jobs in order, each as its own task, so a shutdown can abort it without touching the
//! lane.
//! A lane's worker exits when the lane is empty, so idle chats cost nothing. Handlers only
//! enqueue and return, which keeps the dispatcher free for `/cancel` and callback presses while
//! a turn runs. `/cancel` does not abort a job here: the turn stops itself at a safe point
//! (see [`crate::cancel`]).
//!
//! A job that panics is reported: the lane runs the job's `on_panic` future (given with the
//! job, so it knows the job's tag and chat), then goes on with the chat's next job.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::conversation::Conversation;
use crate::ids::UpdateId;

type BoxedJob = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A queued job, its tag (the update it answers, if any), and what to do if it panics.
type Job = (BoxedJob, Option<UpdateId>, BoxedJob);

struct ChatLane {
    jobs: mpsc::UnboundedSender<Job>,
    /// The running job.
    running: Option<AbortHandle>,
    worker: Option<AbortHandle>,
}

/// The per-chat lanes. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct ChatQueues {
    lanes: Arc<Mutex<HashMap<Conversation, ChatLane>>>,
    /// Jobs queued or running, over all lanes (what the metrics show as the backlog).
    jobs: Arc<AtomicUsize>,
}

impl ChatQueues {
    fn lanes(&self) -> MutexGuard<'_, HashMap<Conversation, ChatLane>> {
        // A panic while holding this lock cannot leave the map inconsistent (every critical
        // section is a single insert, remove or field update), so poisoning is ignored.
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a job behind the chat's earlier ones; `tag` (the update it answers) names it
    /// in the log if it panics.
    /// `on_panic` runs (in the lane, before the next job) only if the job panics.
    pub(crate) fn enqueue(
        &self,
        chat: Conversation,
        tag: Option<UpdateId>,
        job: impl Future<Output = ()> + Send + 'static,
        on_panic: impl Future<Output = ()> + Send + 'static,
    ) {
        let mut job: Job = (Box::pin(job), tag, Box::pin(on_panic));
        self.jobs.fetch_add(1, Ordering::Relaxed);
        let mut lanes = self.lanes();
        if let Some(lane) = lanes.get(&chat) {
            match lane.jobs.send(job) {
                Ok(()) => return,
                // The worker is gone (it panicked): start a fresh lane with the job.
                Err(mpsc::error::SendError(returned)) => job = returned,
            }
        }
        let (tx, rx) = mpsc::unbounded_channel::<Job>();
        // The receiver is alive (we hold it), so this send cannot fail.
        let _ = tx.send(job);
        let worker = tokio::spawn(self.clone().work(chat, rx)).abort_handle();
        lanes.insert(
            chat,
            ChatLane {
                jobs: tx,
                running: None,
                worker: Some(worker),
            },
        );
    }

    async fn work(self, chat: Conversation, mut rx: mpsc::UnboundedReceiver<Job>) {
        loop {
            let (job, tag, on_panic) = {
                let mut lanes = self.lanes();
                match rx.try_recv() {
                    Ok(job) => job,
                    Err(_) => {
                        // Removing under the lock that `enqueue` sends under: no job is lost.
                        lanes.remove(&chat);
                        return;
                    }
                }
            };
            let task = tokio::spawn(job);
            if let Some(lane) = self.lanes().get_mut(&chat) {
                lane.running = Some(task.abort_handle());
            }
            if let Err(e) = task.await
                && e.is_panic()
            {
                tracing::error!(
                    %chat,
                    tag = tag.map(|tag| tag.0),
                    "a turn panicked; the chat goes on with its next message"
                );
                // Its own task: a panicking report cannot take the lane down with it.
                let _ = tokio::spawn(on_panic).await;
            }
            if let Some(lane) = self.lanes().get_mut(&chat) {
                lane.running = None;
            }
            self.jobs.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Aborts every running and queued job (the end of a shutdown's grace period).
    pub(crate) fn abort_all(&self) {
        for (_, lane) in self.lanes().drain() {
            lane.running
                .iter()
                .chain(&lane.worker)
                .for_each(AbortHandle::abort);
        }
        self.jobs.store(0, Ordering::Relaxed);
    }

    /// Chats with queued or running work.
    pub(crate) fn busy_chats(&self) -> usize {
        self.lanes().len()
    }

    /// Jobs queued or running, over all chats.
    pub(crate) fn jobs(&self) -> usize {
        self.jobs.load(Ordering::Relaxed)
    }

    /// Waits until every lane is empty, or the deadline passes; says whether all finished.
    pub(crate) async fn drain(&self, deadline: Duration) -> bool {
        let until = tokio::time::Instant::now() + deadline;
        while self.busy_chats() > 0 {
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, TopicId, UpdateId};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn one_chat_in_order_chats_in_parallel_and_abort_all() {
        let queues = ChatQueues::default();
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..5 {
            let log = log.clone();
            queues.enqueue(
                Conversation::new(ChatId(1), None),
                None,
                async move {
                    tokio::time::sleep(Duration::from_millis(5 * (5 - i))).await;
                    log.lock().unwrap().push(i);
                },
                async {},
            );
        }
        // Another chat is not stuck behind chat 1.
        let other = Arc::new(AtomicUsize::new(0));
        let flag = other.clone();
        queues.enqueue(
            Conversation::new(ChatId(2), None),
            None,
            async move {
                flag.store(1, Ordering::SeqCst);
            },
            async {},
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
        assert_eq!(other.load(Ordering::SeqCst), 1);
        assert!(queues.drain(Duration::from_secs(5)).await);
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);

        // A running job is dropped by `abort_all` (its future's guard runs), not waited for.
        struct Dropped(Arc<AtomicUsize>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let guard = Dropped(dropped.clone());
        queues.enqueue(
            Conversation::new(ChatId(3), None),
            Some(UpdateId(42)),
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(30)).await;
            },
            async {},
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(queues.busy_chats(), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "still running");
        queues.abort_all();
        assert_eq!(queues.busy_chats(), 0);
        let until = tokio::time::Instant::now() + Duration::from_secs(5);
        while dropped.load(Ordering::SeqCst) == 0 {
            assert!(
                tokio::time::Instant::now() < until,
                "the job was not aborted"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The topics of one forum are lanes of their own: a long turn in one topic does not hold
    /// up the next topic, while each topic's jobs still run in order.
    #[tokio::test]
    async fn topics_of_one_chat_run_in_parallel() {
        let queues = ChatQueues::default();
        let (slow, fast) = (
            Conversation::new(ChatId(-5), Some(TopicId(1))),
            Conversation::new(ChatId(-5), Some(TopicId(2))),
        );
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        queues.enqueue(
            slow,
            Some(UpdateId(1)),
            async move {
                let _ = wait.await;
            },
            async {},
        );
        let done = Arc::new(AtomicUsize::new(0));
        let flag = done.clone();
        queues.enqueue(
            fast,
            Some(UpdateId(2)),
            async move {
                flag.store(1, Ordering::SeqCst);
            },
            async {},
        );
        tokio::time::timeout(Duration::from_secs(5), async {
            while done.load(Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("the other topic's job ran while the first topic's was still running");
        assert_eq!(queues.busy_chats(), 1, "only the slow topic's lane is left");
        let _ = release.send(());
        assert!(queues.drain(Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_panicking_job_is_reported_with_its_tag_and_the_lane_goes_on() {
        let queues = ChatQueues::default();
        let reported = Arc::new(Mutex::new(Vec::new()));
        let log = reported.clone();
        queues.enqueue(
            Conversation::new(ChatId(7), None),
            Some(UpdateId(5)),
            async { panic!("a bug in a turn") },
            async move { log.lock().unwrap().push(5) },
        );
        let after = Arc::new(AtomicUsize::new(0));
        let (flag, log) = (after.clone(), reported.clone());
        queues.enqueue(
            Conversation::new(ChatId(7), None),
            Some(UpdateId(6)),
            async move {
                flag.store(1, Ordering::SeqCst);
            },
            async move { log.lock().unwrap().push(6) },
        );
        assert!(queues.drain(Duration::from_secs(5)).await);
        assert_eq!(*reported.lock().unwrap(), vec![5], "only the panicking job");
        assert_eq!(after.load(Ordering::SeqCst), 1, "the next job still ran");
    }
}
