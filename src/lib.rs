//! Heurist: a self-hosted Telegram AI-agent bot that learns heuristics from its own tasks.
//!
//! The layers, bottom first. A module imports only from its own layer and the ones below it,
//! and files never import in a cycle; `scripts/modgraph.py` reads this list (it is the one
//! declaration of the order) and fails CI on an import against it, test code included:
//!
//! 1. [`texts`], [`ids`], [`clock`], [`config`], [`conversation`], [`role`], [`burst`], [`logging`], [`background`], [`memory`], [`provenance`], [`schedule`], [`metrics`]
//! 2. [`llm`], [`store`]
//! 3. [`budget`]
//! 4. [`agent`], [`learning`], [`options`], [`limits`], [`cancel`], [`queue`]
//! 5. [`app`] (the services)
//! 6. [`maintenance`] (the store's upkeep: prune, compaction and backups), [`turn`] (the
//!    pipeline of one turn)
//! 7. [`telegram`] (the adapter: schema, handlers, rendering, sending)
//! 8. [`ops`] (the operator's commands: `heurist doctor`, lessons export and import, restore)
//! 9. the binary (`main.rs`)
//!
//! A lower layer that must talk back (the turn showing an answer) does so through a trait it
//! owns ([`turn::Messenger`]), which the adapter implements. This root stands outside the
//! layers: it declares them, and its [`run`] starts the adapter.

// The lints (`unreachable_pub`, `clippy::too_many_lines`) are set for every target in
// Cargo.toml's `[lints]`; a unit test may be longer than a production function.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod agent;
pub mod app;
pub mod background;
pub mod budget;
pub mod burst;
pub mod cancel;
pub mod clock;
pub mod config;
pub mod conversation;
pub mod ids;
pub mod learning;
pub mod limits;
pub mod llm;
pub mod logging;
pub mod maintenance;
pub mod memory;
pub mod metrics;
pub mod ops;
pub mod options;
pub mod provenance;
pub mod queue;
pub mod role;
pub mod schedule;
pub mod store;
pub mod telegram;
pub mod texts;
pub mod turn;

pub use app::App;
pub use config::Config;
pub use telegram::{Running, start, start_with_clock};

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
/// place, and that start compacts; Telegram keeps the updates sent meanwhile. A bot that
/// stopped taking updates by itself (Telegram unreachable as it began) is started again too.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut signal = std::pin::pin!(shutdown_signal());
    let mut running = tokio::select! {
        biased;
        () = &mut signal => return Ok(()),
        running = start(config.clone()) => running?,
    };
    loop {
        tokio::select! {
            biased;
            () = &mut signal => break,
            () = running.compaction_wanted() => {
                tracing::info!("restarting in place to compact the store");
            }
            () = running.ended() => {
                tracing::warn!("the bot stopped taking updates; starting again");
            }
        }
        running.stop().await;
        running = tokio::select! {
            biased;
            () = &mut signal => return Ok(()),
            running = restart(&config) => running,
        };
    }
    tracing::info!("shutting down");
    running.stop().await;
    Ok(())
}

/// Starts the bot again after a stop in place. A running bot rides out an outage, and so
/// does this: a start that fails (Telegram or the network down for a while) is tried again,
/// after 5 s and then up to a minute apart, until it succeeds or the bot is stopped.
async fn restart(config: &Config) -> Running {
    let mut wait = std::time::Duration::from_secs(5);
    loop {
        match start(config.clone()).await {
            Ok(running) => return running,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), retry_in_secs = wait.as_secs(), "cannot start again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(std::time::Duration::from_secs(60));
            }
        }
    }
}

/// Resolves at Ctrl-C or SIGTERM. The handlers are installed when this is called, not when it
/// is first polled, so a signal that comes while the bot is still starting is not lost (nor
/// does it kill the process unhandled).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let interrupt = signal(SignalKind::interrupt());
        async move {
            match (term, interrupt) {
                (Ok(mut term), Ok(mut interrupt)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = interrupt.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
