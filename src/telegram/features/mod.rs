//! The features' rooms: each user-facing feature's adapter side in one place, its commands,
//! its button actions and its views side by side. A feature with several parts is a folder:
//! its commands in `mod.rs` (whose doc also names where the rest of the feature sits in the
//! lower layers), the presses of its action family in `presses.rs` (who may, what changes,
//! the message edited in place), what it shows in `view.rs`. A small one is one file.
//!
//! A button's data is still parsed in one place, [`super::callback_data`] (the route table
//! the schema matches on, read by the listener and the keyboards too): a feature's
//! `presses.rs` cannot own its parse without an import cycle between files, which the layer
//! check refuses. Every sentence stays in [`crate::texts`] (the lower layers speak too).
//!
//! - [`tasks`]: scheduled tasks and reminders (`/tasks`, `/timezone`);
//! - [`memory`]: personal memory (`/memory`);
//! - [`lessons`]: the lessons review (`/heuristics`, `/skills`);
//! - [`model`]: the model switch (`/model`);
//! - [`stats`]: usage and cost (`/stats`);
//! - [`voice`]: spoken replies to voice notes (`/voice`);
//! - [`tools`]: the tools and MCP servers (`/tools`);
//! - [`backup`]: a backup now (`/backup`).

pub(crate) mod backup;
pub(crate) mod lessons;
pub(crate) mod memory;
pub(crate) mod model;
pub(crate) mod stats;
pub(crate) mod tasks;
pub(crate) mod tools;
pub(crate) mod voice;
