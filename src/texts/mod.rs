//! Every sentence a user reads, in one place, so wording is reviewed (and later translated)
//! together instead of beside the logic that sends it. One file per subject: [`turn`] (answers,
//! notices and failures of a turn), [`telegram`] (commands, buttons, access and limits),
//! [`agent`] (what the agent loop tells the user or the model in plain words), [`media`]
//! (voice notes and documents), [`tasks`] (scheduled tasks, `/tasks`, `/timezone`),
//! [`confirm`] (the ✅ / ✖ the provenance gate asks for) and [`ops`] (what the operator reads
//! on the command line).
//!
//! This module sits at the bottom of the layers: it imports nothing from the crate, so any
//! layer may use it. A text with a placeholder is a function (or a `const` with the
//! placeholder named in its doc), never a `format!` at the call site.

pub(crate) mod agent;
pub(crate) mod confirm;
pub(crate) mod media;
pub mod ops;
pub(crate) mod tasks;
pub mod telegram;
pub mod turn;
