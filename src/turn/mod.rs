//! One user turn, from the chat's queue to the reply: [`run`](pipeline::run) is a pipeline of stages over one
//! turn, each in a file of its own. It is admitted (`gate`: the user allowed and within budget
//! now) → prepare (the history window, skills and lessons, the prompt) → think (the agent,
//! shown live; a failure explained) → persist (the history, usage, the lessons' scores) →
//! show (the answer) → follow up (option buttons, then reflection, in the background; the
//! options go with the answer when they are ready within `options.attach_wait_ms`, else they
//! follow by one edit).
//!
//! The history is written before the reply is shown, so a reply the user saw is always in the
//! history, and a failed send never loses the turn. A turn whose LLM failed still stores the
//! user's message (with a short assistant note), so nothing the user said is lost.
//!
//! The turn talks to the chat only through [`Messenger`], which the Telegram adapter
//! implements; [`accept`](mod@accept) is its way in (the inbox, then the chat's queue); [`actions`] holds
//! the chat-level decisions (clear, model switch, stop, feedback) that commands and buttons
//! share, [`reactions`] a reaction on an answer as its vote, `working` the reaction a user's
//! message carries while its turn runs, and `retry` the 🔁 Retry of a failed turn. [`recover`] finishes at start-up what a
//! crash interrupted, with what the `visibility` protocol recorded, and `quarantine` counts
//! every start so that a turn that crashes the bot is given up rather than run at every start; `alerts` tells the admins
//! of a broken setup. [`scheduled`] fires users' scheduled tasks at their time, into this same
//! path (the inbox, then the queue); `reminder` shows a reminder's text as its answer, and
//! `task_scheduler` is what a turn's `schedule_task` calls act for. The store's upkeep (prune,
//! compaction) is [`crate::maintenance`]'s.

mod accept;
pub(crate) mod actions;
mod alerts;
mod attachment;
pub(crate) mod confirm;
mod follow_up;
mod gate;
mod input;
mod measure;
mod memory;
pub(crate) mod messenger;
mod offers;
mod persist;
mod pipeline;
mod prepare;
mod quarantine;
pub mod reactions;
mod recovery;
mod reflect;
mod reminder;
pub(crate) mod retry;
pub(crate) mod scheduled;
mod show;
mod speak;
mod state;
pub(crate) mod task_scheduler;
#[cfg(test)]
mod testing;
mod think;
mod visibility;
mod working;

pub use accept::accept;
pub use input::TurnInput;
pub use messenger::{Keyboard, Live, Messenger, OnVisible, Options, SharedMessenger, unrecorded};
pub(crate) use offers::retire_options;
pub(crate) use offers::vote_on;
pub use recovery::recover;
