//! One start-up and one shutdown: the composition root. [`start`] builds the app and starts
//! every service in order; [`Running::stop`] ends them in order. Both read top to bottom here.
//!
//! Start-up:
//! 1. the app: the store (compacted first when due), the LLM and tool clients, the MCP
//!    servers' supervisors ([`App::with_clock`]);
//! 2. the metrics port, bound (not served yet), so a taken port fails the start before
//!    anything runs;
//! 3. the MCP servers' first start, so the first turns are offered their tools;
//! 4. Telegram: the token checked, the command menu registered ([`telegram::connect`]);
//! 5. the store's upkeep: prune, compaction check, backups ([`maintenance::start`]), first, so
//!    its start-up prune comes before what recovery resumes;
//! 6. recovery of what the last run left in the inbox ([`turn::recover`]);
//! 7. the scheduler, after recovery, so a run a crash left is resumed before a new one fires;
//! 8. the adapter taking updates ([`telegram::listen`]);
//! 9. the metrics endpoint served.
//!
//! Shutdown ([`Running::stop`]):
//! 1. the app's [`Shutdown`](crate::shutdown::Shutdown) begins, and every loop and server
//!    listens to it: the adapter stops taking updates (the batch in hand is handled), the
//!    metrics server stops, the scheduler and the upkeep loops return;
//! 2. the running and queued turns get the grace period (`shutdown_grace_secs`);
//! 3. the replies, reflections and follow-ups get what is left of it;
//! 4. what is still running is aborted, and the database flushed;
//! 5. the app is released, so the store's lock is free for the next start.
//!
//! Stopping one turn (`/cancel`, ⏹) is not a shutdown: that is [`crate::cancel`]'s, per turn.
//!
//! [`run::run`] is the process's life: start, wait for a signal or a reason to start
//! again in place, stop.

pub mod run;
pub(crate) mod scrape;

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::clock::Clock;
use crate::config::Config;
use crate::maintenance;
use crate::telegram::transport::outbox::Outbox;
use crate::telegram::{self, Listening};
use crate::turn::{self, SharedMessenger};

/// A running bot; [`Running::stop`] shuts it down gracefully.
pub struct Running {
    app: Arc<App>,
    /// The adapter taking updates.
    adapter: Listening,
    /// The Prometheus endpoint, when `[metrics] listen` is set.
    metrics: Option<scrape::MetricsServer>,
}

/// Starts the bot: opens the store, checks the token, registers commands, finishes what a
/// previous run left, starts taking updates.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    start_with_clock(config, Clock::system()).await
}

/// [`start`], with the scheduler reading `clock` (tests move it past a task's time).
pub async fn start_with_clock(config: Config, clock: Clock) -> anyhow::Result<Running> {
    // 1-3: the app, the metrics port, the MCP servers' tools.
    let app = App::with_clock(config, clock)?;
    let metrics = scrape::bind(&app.config().metrics.listen).await?;
    app.agent().tools().ready().await;
    // 4: Telegram, and the outbox every turn shows its answer through.
    let bot = telegram::connect(app.config()).await?;
    let tg = Arc::new(Outbox::new(bot.clone(), &app));
    let out: SharedMessenger = tg.clone();
    // 5-7: upkeep, recovery, the scheduler.
    maintenance::start(&app);
    turn::recover(&app, &out).await;
    turn::scheduled::start(&app, &out);
    // 8-9: updates taken, metrics served.
    let adapter = match telegram::listen(&app, bot, tg).await {
        Ok(adapter) => adapter,
        Err(e) => {
            // Recovery has started turns and loops that hold the app (and the store's lock):
            // end them now, so a start tried again can open the store.
            app.shutdown().begin();
            finish(&app, Duration::ZERO).await;
            return Err(e);
        }
    };
    let metrics = metrics.map(|bound| scrape::serve(bound, app.clone()));
    Ok(Running {
        app,
        adapter,
        metrics,
    })
}

impl Running {
    /// The bot's shared state (tests inspect the store through it).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Where `GET /metrics` is served (`None`: metrics are off); the port the system chose
    /// when `metrics.listen` asked for port 0.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(scrape::MetricsServer::address)
    }

    /// Resolves once the store is due for compaction and the chats are idle: the caller
    /// stops this run and starts a new one, which compacts ([`run::run`] does).
    pub(crate) async fn compaction_wanted(&self) {
        self.app.compaction_wanted().await;
    }

    /// Resolves if the bot stops taking updates by itself (teloxide could not start, or its
    /// task failed): the caller starts it again ([`run::run`] does).
    pub(crate) async fn ended(&self) {
        self.adapter.ended().await;
    }

    /// Stops taking updates, lets running turns finish (up to a grace period), flushes sled,
    /// and returns once the app (and with it the store's lock) is released.
    pub async fn stop(self) {
        // 1: every loop and server ends; the adapter and the metrics server are waited for.
        self.app.shutdown().begin();
        self.adapter.stopped().await;
        if let Some(metrics) = self.metrics {
            metrics.stopped().await;
        }
        // 2-4: turns, then follow-ups, within the grace; the rest aborted; sled flushed.
        let grace = Duration::from_secs(self.app.config().shutdown_grace_secs);
        finish(&self.app, grace).await;
        // 5: aborted tasks let go of the app (and with it sled's lock) as they are cancelled;
        // wait for that, so the database is closed when `stop` returns.
        let released = tokio::time::Instant::now() + Duration::from_secs(2);
        while Arc::strong_count(&self.app) > 1 && tokio::time::Instant::now() < released {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The end of a shutdown: lets running turns finish within `grace`, then the replies,
/// reflections and follow-ups within what is left of it, aborts the rest and flushes the
/// database. Reflections still running stay saved in sled and resume at the next start.
async fn finish(app: &App, grace: Duration) {
    let deadline = tokio::time::Instant::now() + grace;
    if !app.queues().drain(grace).await {
        tracing::warn!(
            chats = app.queues().busy_chats(),
            "turns still running at shutdown were abandoned"
        );
    }
    while !app.follow_ups_done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.abort_remaining().await;
    // Dropped (logged): at shutdown nothing is left to retry with, and what recovery needs
    // (accepted updates, their progress) was flushed when it was written.
    if let Err(e) = app.store().db().flush() {
        tracing::error!(error = %e, "cannot flush the database");
    }
}
