//! The adapter's transport: how updates come in and how everything goes out to Telegram.
//!
//! - In: [`listener`] (long polling, and the webhook's middleware: an update is confirmed only
//!   once the inbox holds it), [`webhook`] (the webhook's server and its registration),
//!   [`draft_stop`] (the stop control of a native draft, taken out before the dispatcher).
//! - Out: [`outbox`] (the only way to send; the adapter's side of [`crate::turn::Messenger`]),
//!   [`send`] (one Bot API call, paced and retried), [`limiter`] (Telegram's pace per chat and
//!   overall), [`stream`] (a live reply edited as it grows), [`drafts`] (native drafts in
//!   private chats), [`replies`] (replies that are not turns, posted off the dispatcher),
//!   [`media`] (file downloads and voice notes), [`reactions`] (setting the bot's, reading
//!   users').

pub(crate) mod draft_stop;
pub(crate) mod drafts;
pub mod limiter;
pub(crate) mod listener;
pub(crate) mod media;
pub(crate) mod outbox;
pub(crate) mod reactions;
pub(crate) mod replies;
pub(crate) mod send;
pub(crate) mod stream;
pub(crate) mod webhook;
