//! Scheduled tasks at their time: the scheduler loop. (What a turn's `schedule_task` calls
//! act for is `task_scheduler`'s; how a reminder is shown, `reminder`'s.)
//!
//! The loop reads the time from the app's [`crate::clock::Clock`] and sleeps until the
//! soonest task is due (or the `tasks` tree changes, or the clock is moved, or a minute
//! passes, so a changed system clock is noticed), then fires every due task: the run is recorded in
//! the inbox in the same transaction that moves the task on (see `store::tasks`), flushed,
//! and queued like a typed message. So it passes the same gate (the owner still allowed,
//! within budget), waits in the same queue of its conversation (its chat and topic), and a
//! crash at any point neither loses nor repeats it: recovery resumes the inbox record. A run
//! due before this start of the bot was missed while it was down: it runs once, and says it
//! is late. A reminder is sent as it is; a task's request runs as the owner's turn.

use std::sync::Arc;
use std::time::Duration;

use super::accept::enqueue;
use super::input::TurnInput;
use super::messenger::SharedMessenger;
use super::quarantine::Start;
use crate::app::App;
use crate::role::Role;
use crate::schedule::{self, DailyRuns, TaskKind};
use crate::store::{Task, TaskRun, TurnRequest};
use crate::texts::tasks as texts;

/// Starts the scheduler, which ends at the app's shutdown. Started after recovery, so a run a crash
/// left in the inbox is resumed before any new one fires.
pub(crate) fn start(app: &Arc<App>, out: &SharedMessenger) {
    let started = app.clock().now();
    app.spawn_loop(schedule_forever(app.clone(), out.clone(), started));
}

/// Fires due tasks and sleeps until the next, until the shutdown; `started`: when this run of the bot
/// began (unix seconds), before which a due run was missed.
async fn schedule_forever(app: Arc<App>, out: SharedMessenger, started: i64) {
    loop {
        // Watched before the scan, so a task added during it wakes the next sleep.
        let changed = app.store().tasks().changed();
        let moved = app.clock().moved();
        let now_ms = app.clock().now_ms();
        let now = now_ms.div_euclid(1000);
        let mut soonest: Option<i64> = None;
        let mut failed = false;
        for task in app.store().tasks().all() {
            if task.next_run <= now {
                failed |= !fire(&app, &out, &task, now, started).await;
            } else {
                soonest = Some(soonest.map_or(task.next_run, |s| s.min(task.next_run)));
            }
        }
        let wait_ms = soonest.map_or(60_000, |at| (at * 1000 - now_ms).clamp(0, 60_000));
        // A store that fails is tried again in a while, not in a busy loop.
        let wait_ms = if failed { wait_ms.max(5_000) } else { wait_ms };
        app.clock().scanned(now_ms);
        let sleep = tokio::time::sleep(Duration::from_millis(wait_ms.unsigned_abs()));
        let woken = app.shutdown().until(async {
            match changed {
                Ok(changed) if !failed => {
                    tokio::select! {
                        () = sleep => {}
                        _ = changed => {}
                        () = moved => {}
                    }
                }
                _ => {
                    tokio::select! {
                        () = sleep => {}
                        () = moved => {}
                    }
                }
            }
        });
        if woken.await.is_none() {
            return;
        }
    }
}

/// Fires `task`'s due run at `now` and queues its turn; `false` if the store failed.
async fn fire(app: &Arc<App>, out: &SharedMessenger, task: &Task, now: i64, started: i64) -> bool {
    let firing = schedule::fire(&task.timing, task.next_run, now, started);
    let zone: chrono_tz::Tz = task.zone.parse().unwrap_or(chrono_tz::UTC);
    let due = format!("{} ({})", schedule::local(task.next_run, zone), zone.name());
    let late = firing.late.then_some(due.as_str());
    let allowed = app.config().role_of(task.user) != Role::Stranger;
    let max = app.config().tasks.max_runs_per_day;
    let make = |nth: u32| {
        if !allowed {
            return None;
        }
        let (text, reminder) = match (schedule::within_daily_runs(nth, max), task.kind) {
            (DailyRuns::Run, TaskKind::Reminder) => (texts::reminder(&task.request, late), true),
            (DailyRuns::Run, TaskKind::Task) => (texts::task_turn(&task.request, late), false),
            (DailyRuns::Tell, _) => (texts::daily_runs_spent(max), true),
            (DailyRuns::Quiet, _) => return None,
        };
        Some(TurnRequest {
            topic: task.topic,
            reminder,
            // Not the owner's live message: its provenance goes with the run.
            task_run: Some(TaskRun {
                task: task.id,
                tainted: task.tainted,
            }),
            ..TurnRequest::new(task.chat, task.user, text)
        })
    };
    let day = schedule::day_of(now);
    match app.store().tasks().fire(task, firing.next, day, make) {
        Ok(Some(fired)) => {
            tracing::info!(id = task.id, user = %task.user, update = %fired.update, late = firing.late, "a scheduled task runs");
            // Dropped (logged): the run is recorded, and sled's own flush follows within
            // moments; only a crash before that fires it once more at the next start.
            if let Err(e) = app.store().db().flush_async().await {
                tracing::error!(error = %e, "cannot flush a scheduled run");
            }
            let input = TurnInput::new(fired.request, fired.update);
            enqueue(app, out, input, Start::Durable);
            true
        }
        Ok(None) => {
            tracing::info!(id = task.id, user = %task.user, allowed, "a scheduled run was skipped");
            true
        }
        Err(e) => {
            tracing::error!(id = task.id, error = %e, "cannot fire a scheduled task");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::testing::{NO_LLM, Recorder, app};

    /// The scheduler's loop returns by itself once the app's shutdown begins, while it sleeps
    /// until its next wake (a minute away: no task is due): nothing has to abort it.
    #[tokio::test]
    async fn the_scheduler_ends_at_the_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path(), NO_LLM);
        let out: SharedMessenger = Recorder::new();
        let scheduler = tokio::spawn(schedule_forever(app.clone(), out, app.clock().now()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!scheduler.is_finished(), "it sleeps until a task is due");
        app.shutdown().begin();
        tokio::time::timeout(Duration::from_secs(5), scheduler)
            .await
            .expect("the scheduler ended at the shutdown")
            .unwrap();
    }
}
