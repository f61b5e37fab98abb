//! The process's life: the bot started, run until Ctrl-C or SIGTERM, and started again in place
//! when the store is due for compaction or the adapter stopped by itself.

use std::time::Duration;

use super::{Running, start};
use crate::backoff::Backoff;
use crate::config::Config;

/// Runs the bot until Ctrl-C or SIGTERM, then shuts down gracefully. When the store is due for
/// compaction (see [`crate::store::compaction`]), the bot stops the same way and starts again
/// in place, and that start compacts; Telegram keeps the updates sent meanwhile. A bot that
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
    const BACKOFF: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
    let mut failures = 0;
    loop {
        match start(config.clone()).await {
            Ok(running) => return running,
            Err(e) => {
                failures += 1;
                let wait = BACKOFF.after(failures);
                tracing::warn!(error = %format!("{e:#}"), retry_in_secs = wait.as_secs(), "cannot start again");
                tokio::time::sleep(wait).await;
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
