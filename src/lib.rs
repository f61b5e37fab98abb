//! Heurist: a self-hosted Telegram AI-agent bot that learns heuristics from its own tasks.
//!
//! The layers, each importing only the ones before it:
//! [`config`], [`conversation`] → [`llm`], [`store`] → [`agent`], [`learning`], [`options`],
//! [`limits`], [`cancel`], [`queue`] → [`app`] (the services) → [`turn`] (the pipeline of one
//! turn) → [`telegram`] (the adapter: schema, handlers, rendering, sending) → the binary. A
//! lower layer that must talk back (the turn showing an answer) does so through a trait it owns
//! ([`turn::Messenger`]), which the adapter implements. `scripts/modgraph.py` prints the
//! file-level import graph and fails on any cycle.

pub mod agent;
pub mod app;
pub mod background;
pub mod cancel;
pub mod config;
pub mod conversation;
pub mod learning;
pub mod limits;
pub mod llm;
pub mod logging;
pub mod options;
pub mod queue;
pub mod store;
pub mod telegram;
pub mod turn;

pub use app::App;
pub use config::Config;
pub use telegram::{Running, start};

/// An error with its causes, one line: "error sending request: connection refused", or
/// "redirect refused: 10.0.0.1 is not a public address" (reqwest keeps the cause in `source`).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Runs the bot until Ctrl-C or SIGTERM, then shuts down gracefully. When the store is due for
/// compaction (see [`store::compaction`]), the bot stops the same way and starts again in
/// place, and that start compacts; Telegram keeps the updates sent meanwhile.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut signal = std::pin::pin!(shutdown_signal());
    let mut running = start(config.clone()).await?;
    loop {
        tokio::select! {
            () = &mut signal => break,
            () = running.compaction_wanted() => {}
        }
        tracing::info!("restarting in place to compact the store");
        running.stop().await;
        running = tokio::select! {
            () = &mut signal => return Ok(()),
            started = restart(&config) => started?,
        };
    }
    tracing::info!("shutting down");
    running.stop().await;
    Ok(())
}

/// Starts the bot again after a stop for compaction. A start that fails (Telegram or the store
/// not reachable for a moment) is tried again every few seconds, for up to five minutes.
async fn restart(config: &Config) -> anyhow::Result<Running> {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(5);
    const FOR: std::time::Duration = std::time::Duration::from_secs(300);
    let deadline = tokio::time::Instant::now() + FOR;
    loop {
        match start(config.clone()).await {
            Ok(running) => return Ok(running),
            Err(e) if tokio::time::Instant::now() + EVERY < deadline => {
                tracing::warn!(error = %format!("{e:#}"), "cannot start again; trying again soon");
                tokio::time::sleep(EVERY).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
