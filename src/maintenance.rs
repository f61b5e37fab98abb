//! The store's upkeep while the bot runs: records older than `retention_days` are pruned at
//! start-up and then every `prune_interval_secs`, a store grown enough to be due for
//! compaction asks for a restart in place (the new start compacts, see
//! [`crate::store::compaction`]), and a backup is written every `backup.every_hours` (see
//! [`crate::store::backup`]). The runtime starts it once per start, before recovery; the loops
//! end at the app's shutdown (a backup or a prune being written then is finished first, and
//! waited for a moment; one the exit cuts off is left as a temporary file, which the next
//! backup removes, and the earlier backups are untouched).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::app::App;
use crate::store::backup::{self, Written};

/// Starts the prune, compaction and backup schedules, which end at the app's shutdown.
pub fn start(app: &Arc<App>) {
    let interval = Duration::from_secs(app.config().prune_interval_secs);
    app.spawn_loop(prune_forever(app.clone(), interval));
    let newest = backup::list(&app.config().backup_dir()).into_iter().next();
    if let Some((_, written)) = &newest {
        app.metrics().backup_seen(unix_secs(*written));
    }
    if let Some(every) = app.config().backup_interval() {
        let age = newest.and_then(|(_, written)| written.elapsed().ok());
        app.spawn_loop(back_up_forever(app.clone(), every, age));
    }
}

/// Writes a backup every `every`, the first when the newest one (`age` old; `None`: there is
/// none) is due, until the shutdown.
async fn back_up_forever(app: Arc<App>, every: Duration, age: Option<Duration>) {
    let first = age.map_or(Duration::ZERO, |age| every.saturating_sub(age));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + first, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while app.shutdown().until(ticks.tick()).await.is_some() {
        // Logged and counted by `back_up`; the next one comes at the next tick.
        let _ = back_up(&app).await;
    }
}

/// Writes a backup of the store now into `backup.dir` and prunes the old ones past
/// `backup.keep`, off the async threads; logged and counted in the metrics. The schedule and
/// `/backup` both come here.
pub async fn back_up(app: &Arc<App>) -> anyhow::Result<Written> {
    let app2 = app.clone();
    let written = tokio::task::spawn_blocking(move || {
        let dir = app2.config().backup_dir();
        let started = std::time::Instant::now();
        let written = app2.store().write_backup(&dir, chrono::Utc::now())?;
        let pruned = backup::prune(&dir, app2.config().backup.keep, &written.path);
        tracing::info!(
            file = %written.path.display(),
            bytes = written.bytes,
            records = written.records,
            secs = started.elapsed().as_secs_f64(),
            pruned,
            "wrote a backup"
        );
        anyhow::Ok(written)
    })
    .await
    .map_err(anyhow::Error::from)
    .and_then(|written| written);
    match &written {
        Ok(_) => app.metrics().backup(Some(chrono::Utc::now().timestamp())),
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "cannot write a backup");
            app.metrics().backup(None);
        }
    }
    written
}

/// `time` as Unix seconds (0 before 1970).
fn unix_secs(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Prunes records older than `retention_days` now and then every `interval` (at least a
/// second), until the shutdown. It holds the app, not a bare store handle, so a
/// shutdown that waits for the app to be released also waits for a prune in progress.
///
/// After a prune, a store due for compaction asks for a restart in place
/// ([`App::compaction_wanted`]) once nothing is running: no turn, no reflection, no follow-up.
/// It waits up to a minute for such a moment after each prune; a bot never idle that long asks
/// anyway after a day (its running turns then get the shutdown's grace period, and what is
/// left resumes after the restart).
async fn prune_forever(app: Arc<App>, interval: Duration) {
    const AT_MOST: Duration = Duration::from_secs(24 * 3600);
    let mut ticks = tokio::time::interval(interval.max(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut due_since = None;
    while app.shutdown().until(ticks.tick()).await.is_some() {
        prune(&app).await;
        if !app.data_dir().compaction_due() {
            continue;
        }
        let since = *due_since.get_or_insert_with(tokio::time::Instant::now);
        if wait_until_idle(&app).await || since.elapsed() >= AT_MOST {
            tracing::info!(
                mb = app.data_dir().size() >> 20,
                "the store is due for compaction: restarting in place"
            );
            app.want_compaction();
            return;
        }
        tracing::debug!("the store is due for compaction; waiting for a quiet moment");
    }
}

/// Prunes the records older than `retention_days`, off the async threads.
async fn prune(app: &Arc<App>) {
    let now = chrono::Utc::now().timestamp();
    let before = crate::store::retention::cutoff(now, app.config().retention_days);
    let app2 = app.clone();
    // Dropped (logged): what was not pruned now is pruned at the next interval.
    match tokio::task::spawn_blocking(move || app2.store().db().prune(before)).await {
        Ok(Ok(report)) => tracing::debug!(?report, "pruned old records"),
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot prune old records"),
        Err(e) => tracing::warn!(error = %e, "the prune task failed"),
    }
}

/// Waits up to a minute for the app to be idle; whether it is.
async fn wait_until_idle(app: &App) -> bool {
    const IDLE_WAIT: Duration = Duration::from_secs(60);
    let deadline = tokio::time::Instant::now() + IDLE_WAIT;
    while !app.idle() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.idle()
}
