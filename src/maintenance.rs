//! The store's upkeep while the bot runs: records older than `retention_days` are pruned at
//! start-up and then every `prune_interval_secs`, and a store grown enough to be due for
//! compaction asks for a restart in place (the new start compacts, see
//! [`crate::store::compaction`]). The adapter starts it once per start, beside recovery.

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;

/// Starts the prune and compaction schedule, ended by the shutdown.
pub fn start(app: &Arc<App>) {
    let interval = Duration::from_secs(app.config().prune_interval_secs);
    app.spawn_loop(prune_forever(app.clone(), interval));
}

/// Prunes records older than `retention_days` now and then every `interval` (at least a
/// second), until the shutdown aborts it. It holds the app, not a bare store handle, so a
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
    loop {
        ticks.tick().await;
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
