//! End-to-end tests: the real dispatcher, HTTP clients and sled, against fake Telegram and LLM
//! servers on 127.0.0.1. One test binary, so the dependency tree links once.

mod support;

mod answers;
mod budgets;
mod cancel;
mod commands;
mod compaction;
mod crashes;
mod durability;
mod hostile;
mod learning;
mod limits;
mod local_models;
mod mcp;
mod media;
mod options;
mod pacing;
mod refusals;
mod retry;
mod search;
mod skeleton;
mod streaming;
mod topics;
