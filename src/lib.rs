//! Heurist: a self-hosted Telegram AI-agent bot that learns lessons from its own turns.
//!
//! The layers, bottom first. A module imports only from its own layer and the ones below it,
//! and files never import in a cycle; `scripts/modgraph.py` reads this list (it is the one
//! declaration of the order) and fails CI on an import against it, test code included:
//!
//! 1. [`texts`], [`ids`], [`clock`], [`backoff`], [`config`], [`conversation`], [`role`], [`sizes`], [`burst`], [`logging`], [`background`], [`shutdown`], [`memory`], [`provenance`], [`schedule`], [`metrics`]
//! 2. [`llm`], [`store`]
//! 3. [`budget`] (the owner's bill: `[limits]` before a turn and on every LLM call)
//! 4. [`agent`], [`learning`], [`options`], [`cancel`], [`queue`]
//! 5. [`app`] (the services)
//! 6. [`maintenance`] (the store's upkeep: prune, compaction and backups), [`turn`] (the
//!    pipeline of one turn)
//! 7. [`telegram`] (the adapter: schema, handlers, rendering, sending)
//! 8. [`runtime`] (one start-up and one shutdown: the app built, every service started and
//!    stopped in order, the process run until a signal)
//! 9. [`ops`] (the operator's commands: `heurist doctor`, lessons export and import, restore)
//! 10. the binary (`main.rs`)
//!
//! A lower layer that must talk back (the turn showing an answer) does so through a trait it
//! owns ([`turn::Messenger`]), which the adapter implements. This root stands outside the
//! layers: it declares them, and names the entry points of [`runtime`] ([`run`], [`start`]).

// The lints (`unreachable_pub`, `clippy::too_many_lines`) are set for every target in
// Cargo.toml's `[lints]`; a unit test may be longer than a production function.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod agent;
pub mod app;
pub mod background;
pub mod backoff;
pub mod budget;
pub mod burst;
pub mod cancel;
pub mod clock;
pub mod config;
pub mod conversation;
pub mod ids;
pub mod learning;
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
pub mod runtime;
pub mod schedule;
pub mod shutdown;
pub mod sizes;
pub mod store;
pub mod telegram;
pub mod texts;
pub mod turn;

pub use app::App;
pub use config::Config;
pub use runtime::run::run;
pub use runtime::{Running, start, start_with_clock};

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
