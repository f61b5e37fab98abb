//! What a turn shows in a chat, as a trait the chat adapter (Telegram) implements.
//!
//! The turn layer decides *what* to show (an answer, its buttons, a notice); the adapter
//! decides *how* (HTML, message splitting, pacing, retries). Keyboards are described here in
//! the domain's terms ([`Keyboard`]) and turned into inline keyboards by the adapter, so no
//! layer below the adapter sees a Telegram type.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use crate::agent::AgentEvent;
use crate::cancel::TurnId;
use crate::conversation::Conversation;
use crate::ids::ChatId;

/// The chat a turn answers in, as the turn layer holds it: the adapter's [`Messenger`], shared.
pub type SharedMessenger = Arc<dyn Messenger>;

/// The buttons under a message.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Keyboard {
    /// No buttons (an existing keyboard is removed).
    #[default]
    None,
    /// Under an answer: its options, and the 👍/👎 of its feedback ticket with the vote
    /// given so far (shown as `👍 ✓`), so an edit of the options keeps what the user sees.
    Answer {
        options: Options,
        feedback: Option<String>,
        vote: Option<bool>,
    },
    /// A one-tap way out of a conversation too long for the model.
    Clear,
    /// Under a failed answer: 🔁 Retry runs the message of retry ticket `ticket` again, once.
    Retry(String),
    /// The configured models, one per button, `current` marked.
    Models {
        models: Vec<String>,
        current: String,
    },
    /// ✅ / ✖ under a change the provenance gate holds: proposal `id` (see `turn::confirm`).
    Confirm(String),
}

/// The option buttons of an answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Options {
    #[default]
    None,
    /// Offered: the ticket's id and its full labels, in button order.
    Offered { ticket: String, labels: Vec<String> },
    /// Chosen: only the label pressed stays, as a mark.
    Chosen(String),
}

impl Keyboard {
    /// The keyboard of an answer with feedback ticket `feedback` and no options yet.
    pub(crate) fn answer(feedback: Option<String>) -> Self {
        Self::Answer {
            options: Options::None,
            feedback,
            vote: None,
        }
    }
}

/// The messages a live display left on screen when its turn finished, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    pub messages: Vec<i32>,
}

/// Called, and awaited, as a turn's answer becomes visible: with `None` just before the first
/// message that shows it is sent, with `Some(id)` once each of its messages exists (the first,
/// then the later parts of a long answer). The turn records them durably, so after a crash it
/// edits those messages instead of sending a second answer.
pub type OnVisible = Arc<dyn Fn(Option<i32>) -> BoxFuture<'static, ()> + Send + Sync>;

/// An [`OnVisible`] for answers whose visibility is not recorded (nothing would resume them).
pub fn unrecorded() -> OnVisible {
    Arc::new(|_| Box::pin(async {}))
}

/// A chat as a turn sees it. Every method logs its own failures: a turn goes on whatever
/// the chat did with what it was shown. New messages go to the conversation's forum topic,
/// if it has one; `reply_to` (a message in that chat) makes an answer's first new message a
/// reply to it.
pub trait Messenger: Send + Sync {
    /// Shows that an answer is being worked on, for as long as the returned future runs.
    fn typing(&self, chat: Conversation) -> BoxFuture<'static, ()>;

    /// Shows a turn's progress as it happens (streamed text, tool progress, a Stop button
    /// that names turn `turn`). Resolves when `events` ends: to what is on screen after
    /// [`AgentEvent::Finished`] (sent only once the turn's answer is kept, so [`Self::answer`]
    /// always finishes those messages), or to `None` when the turn was stopped (the sender
    /// dropped first), in which case the display already says so and shows no Stop button.
    /// `on_visible` is awaited before its first send and after each send.
    fn live(
        &self,
        chat: Conversation,
        reply_to: Option<i32>,
        turn: TurnId,
        events: mpsc::UnboundedReceiver<AgentEvent>,
        on_visible: OnVisible,
    ) -> BoxFuture<'static, Option<Live>>;

    /// Shows a Markdown answer with `keyboard` under its last part: the `live` messages are
    /// edited into it (leftovers removed), missing parts are sent. Returns the ids of the
    /// messages that show it. A reply is sent only when `live` shows nothing yet (else the
    /// live display's first message was the reply). `on_visible` is awaited before the first
    /// send when `live` shows nothing yet, and after each send.
    fn answer<'a>(
        &'a self,
        chat: Conversation,
        reply_to: Option<i32>,
        live: Live,
        markdown: &'a str,
        keyboard: Keyboard,
        on_visible: OnVisible,
    ) -> BoxFuture<'a, Vec<i32>>;

    /// Replaces the keyboard of message `message`.
    fn set_keyboard(&self, chat: ChatId, message: i32, keyboard: Keyboard) -> BoxFuture<'_, ()>;

    /// Sends a short plain notice.
    fn notice<'a>(&'a self, chat: Conversation, text: &'a str) -> BoxFuture<'a, ()>;

    /// Sends plain `text` (nothing in it is formatting) with `keyboard` under it: a question
    /// for the user, such as a confirmation. By default nothing is shown (a test double's).
    fn ask<'a>(
        &'a self,
        chat: Conversation,
        text: &'a str,
        keyboard: Keyboard,
    ) -> BoxFuture<'a, ()> {
        let _ = (chat, text, keyboard);
        Box::pin(async {})
    }

    /// Fetches a photo the user sent (by the chat's file id) as a `data:` URL for the model.
    fn image<'a>(&'a self, file_id: &'a str) -> BoxFuture<'a, anyhow::Result<String>>;

    /// Fetches a file the user sent (a recording, a document) by its file id, refusing one of
    /// more than `max_bytes`. By default a chat has no files to fetch (a test double's).
    fn file<'a>(
        &'a self,
        _file_id: &'a str,
        _max_bytes: u32,
    ) -> BoxFuture<'a, anyhow::Result<Vec<u8>>> {
        Box::pin(async { anyhow::bail!("this chat has no files to fetch") })
    }

    /// Shows what a recording was heard to say (`transcript`, cut short by the caller), as a
    /// quote replying to `reply_to`. By default it is not shown (a test double's).
    fn transcript<'a>(
        &'a self,
        _chat: Conversation,
        _reply_to: Option<i32>,
        _transcript: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Sends `audio` (Ogg Opus) as a voice note replying to `reply_to`. By default a chat
    /// takes none (a test double's).
    fn voice<'a>(
        &'a self,
        _chat: Conversation,
        _reply_to: Option<i32>,
        _audio: Vec<u8>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { anyhow::bail!("this chat takes no voice notes") })
    }

    /// Puts reaction `emoji` on message `message` of `chat` in place of the bot's earlier one,
    /// or (`None`) takes the bot's reaction off; whether a reaction was put on. A chat that has
    /// no reactions shows nothing, and a bot whose Telegram calls are backed up puts none on
    /// (the calls are the answers'): a reaction is never worth a failed or later answer.
    fn react(&self, chat: ChatId, message: i32, emoji: Option<String>) -> BoxFuture<'static, bool> {
        let _ = (chat, message, emoji);
        Box::pin(async { false })
    }
}
