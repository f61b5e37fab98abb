//! End-to-end tests: the real dispatcher, HTTP clients and sled, against fake Telegram and LLM
//! servers on 127.0.0.1. One test binary, so the dependency tree links once.

// A test may read longer than a production function (Cargo.toml's `[lints]` hold
// `clippy::too_many_lines` for production code; unit tests are exempt alike in src/lib.rs).
#![allow(clippy::too_many_lines)]

mod support;

mod answers;
mod backups;
mod budgets;
mod cancel;
mod commands;
mod compaction;
mod container;
mod crashes;
mod doctor;
mod drafts;
mod durability;
mod fallback;
mod hostile;
mod jail;
mod learning;
mod lessons;
mod limits;
mod local_models;
mod mcp;
mod media;
mod memory;
mod metrics;
mod options;
mod pacing;
mod parroting;
mod provenance;
mod quarantine;
mod reactions;
mod refusals;
mod retry;
mod rewrites;
mod search;
mod skeleton;
mod streaming;
mod tasks;
mod topics;
mod voice;
