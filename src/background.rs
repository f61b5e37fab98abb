//! Work that runs after a reply and must not delay it (option buttons, reflections), tracked
//! so that a shutdown can end it.
//!
//! One [`Background`] per bot, shared by the layers that start such work. Finished tasks are
//! reaped whenever a new one starts, so the set does not grow with the bot's uptime.

use std::future::Future;
use std::sync::Mutex;

use tokio::task::JoinSet;

#[derive(Default)]
pub struct Background {
    /// Follow-ups, which end by themselves.
    tasks: Mutex<JoinSet<()>>,
    /// Loops that run until the shutdown ends them (the prune loop).
    loops: Mutex<JoinSet<()>>,
}

impl Background {
    /// Runs `work` in the background, tracked so a shutdown can end it.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(work);
    }

    /// Runs `work`, a loop that never ends by itself, until the shutdown aborts it. It is not
    /// counted by [`Self::running`].
    pub fn spawn_loop(&self, work: impl Future<Output = ()> + Send + 'static) {
        let mut loops = self.loops.lock().unwrap_or_else(|e| e.into_inner());
        while loops.try_join_next().is_some() {}
        loops.spawn(work);
    }

    /// How many follow-ups are still running (loops not counted).
    pub fn running(&self) -> usize {
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.len()
    }

    /// Aborts all background work (at the end of a shutdown's grace period) and waits until
    /// every task has let go of what it held (the app, and with it the store).
    pub async fn abort_all(&self) {
        for set in [&self.tasks, &self.loops] {
            let mut tasks = std::mem::take(&mut *set.lock().unwrap_or_else(|e| e.into_inner()));
            tasks.shutdown().await;
        }
    }
}
