//! Heurist: a self-hosted Telegram AI-agent bot that learns heuristics from its own tasks.
//!
//! How a turn flows, one module per arrow: Telegram update → [`telegram`] (one dptree schema,
//! access check) → [`queue`] (one turn at a time per chat) → [`turn`] → [`agent`] (LLM ↔ tools
//! via [`llm`]) → [`store`] (sled) → [`telegram::send`] (Markdown → Telegram HTML, split, sent).

pub mod agent;
pub mod app;
pub mod config;
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

/// Runs the bot until Ctrl-C or SIGTERM, then shuts down gracefully.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let running = start(config).await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.stop().await;
    Ok(())
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
