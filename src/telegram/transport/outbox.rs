//! The Telegram side of [`Messenger`]: how a turn's answer, buttons and notices reach a chat.
//!
//! One [`Outbox`] per bot holds the client, the pacing and retry policy, and the settings of
//! live display and photos. It is the only way the adapter sends: handlers use its methods for
//! their own replies and answers to presses, and never see the client, so every request to
//! Telegram goes through one [`SendPolicy`] (paced, 429s waited out).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::{InlineKeyboardMarkup, MessageId};
use tokio::sync::mpsc;

use super::drafts::Drafts;
use super::send::{self, Destination, SendPolicy, notify, typing};
use super::{media, reactions, stream};
use crate::agent::AgentEvent;
use crate::app::App;
use crate::cancel::TurnId;
use crate::conversation::Conversation;
use crate::telegram::{keyboards, render};
use crate::texts::media::transcript_html;
use crate::turn::{Keyboard, Live, Messenger, OnVisible};

/// The bot's one way to Telegram; see the module doc.
pub(crate) struct Outbox {
    bot: Bot,
    policy: SendPolicy,
    /// Spacing of live edits in one chat.
    live_interval: Duration,
    typing_interval: Duration,
    max_image_bytes: u32,
    /// Chats with a live display on screen.
    on_screen: stream::OnScreen,
    /// Where live answers stream as native drafts, and what refused them.
    drafts: Arc<Drafts>,
}

impl Outbox {
    /// Where live answers stream as drafts, and which turn each live draft shows.
    pub(crate) fn drafts(&self) -> &Arc<Drafts> {
        &self.drafts
    }

    /// The outbox of `app`'s bot: paced by its `[telegram]`, counted in its metrics.
    pub(crate) fn new(bot: Bot, app: &App) -> Self {
        let config = &app.config().telegram;
        Self {
            bot,
            policy: SendPolicy::new(config, app.metrics().clone()),
            live_interval: Duration::from_millis(config.chat_interval_ms),
            typing_interval: Duration::from_secs(config.typing_interval_secs.max(1)),
            max_image_bytes: config.max_image_bytes,
            on_screen: stream::OnScreen::default(),
            drafts: Arc::new(Drafts::new(config)),
        }
    }

    /// Sends an HTML message to `to` (its plain text if Telegram cannot parse the HTML),
    /// paced and retried.
    pub(crate) async fn send_html(
        &self,
        to: impl Into<Destination>,
        html: &str,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<Message, RequestError> {
        send::send_html(&self.bot, &self.policy, to, html, markup).await
    }

    /// Edits message `id` into `html` with `markup` (see [`send::edit_html`]); returns the id
    /// of the message that now shows it (a new one if the old is gone).
    pub(crate) async fn edit_html(
        &self,
        to: impl Into<Destination>,
        id: MessageId,
        html: &str,
        markup: Option<InlineKeyboardMarkup>,
    ) -> Result<MessageId, RequestError> {
        send::edit_html(&self.bot, &self.policy, to, id, html, markup).await
    }

    /// Replaces the keyboard of message `id` in `chat`; failures are logged with `what`.
    pub(crate) async fn edit_keyboard(
        &self,
        chat: ChatId,
        id: MessageId,
        markup: InlineKeyboardMarkup,
        what: &str,
    ) {
        send::edit_keyboard(&self.bot, &self.policy, chat, id, markup, what).await;
    }

    /// Answers a button press, with `toast` unless it is empty. Not paced: Telegram counts
    /// answers to callback queries apart from messages, and the client waits for one.
    pub(crate) async fn answer_press(
        &self,
        query: &CallbackQuery,
        toast: &str,
    ) -> Result<(), RequestError> {
        let answer = self.bot.answer_callback_query(query.id.clone());
        if toast.is_empty() {
            answer.await?;
        } else {
            answer.text(toast).await?;
        }
        Ok(())
    }

    /// Resolves once nothing else of `chat` waits for its paced slot (a burst's edit yields
    /// to the chat's other messages this way).
    pub(crate) async fn quiet(&self, chat: crate::ids::ChatId) {
        self.policy.limiter.quiet(chat).await;
    }

    /// Whether a turn's live display has a message on screen in `chat` (which then confirms
    /// a stop itself).
    pub(crate) fn shows_live(&self, chat: Conversation) -> bool {
        stream::on_screen(&self.on_screen).contains(&chat)
    }
}

impl Messenger for Outbox {
    fn typing(&self, chat: Conversation) -> BoxFuture<'static, ()> {
        let to = Destination::from(chat);
        typing(self.bot.clone(), to, self.typing_interval).boxed()
    }

    fn live(
        &self,
        chat: Conversation,
        reply_to: Option<i32>,
        turn: TurnId,
        events: mpsc::UnboundedReceiver<AgentEvent>,
        on_visible: OnVisible,
    ) -> BoxFuture<'static, Option<Live>> {
        let display = stream::LiveDisplay::new(
            self.bot.clone(),
            self.policy.clone(),
            Destination::new(chat, reply_to),
            self.live_interval,
            turn,
            self.on_screen.clone(),
            on_visible,
        )
        .with_drafts(&self.drafts);
        display.run(events).boxed()
    }

    fn answer<'a>(
        &'a self,
        chat: Conversation,
        reply_to: Option<i32>,
        live: Live,
        markdown: &'a str,
        keyboard: Keyboard,
        on_visible: OnVisible,
    ) -> BoxFuture<'a, Vec<i32>> {
        let markup = keyboards::markup(&keyboard);
        let markup = (keyboard != Keyboard::None).then_some(markup);
        async move {
            stream::finish(
                &self.bot,
                &self.policy,
                Destination::new(chat, reply_to),
                &live,
                markdown,
                markup,
                &on_visible,
            )
            .await
            .into_iter()
            .map(|id| id.0)
            .collect()
        }
        .boxed()
    }

    fn set_keyboard(
        &self,
        chat: crate::ids::ChatId,
        message: i32,
        keyboard: Keyboard,
    ) -> BoxFuture<'_, ()> {
        let markup = keyboards::markup(&keyboard);
        async move {
            let (chat, id) = (ChatId::from(chat), MessageId(message));
            self.edit_keyboard(chat, id, markup, "update the keyboard")
                .await;
        }
        .boxed()
    }

    fn notice<'a>(&'a self, chat: Conversation, text: &'a str) -> BoxFuture<'a, ()> {
        notify(&self.bot, &self.policy, chat, text).boxed()
    }

    fn ask<'a>(
        &'a self,
        chat: Conversation,
        text: &'a str,
        keyboard: Keyboard,
    ) -> BoxFuture<'a, ()> {
        let html = render::escape_html(text);
        async move {
            let markup = Some(keyboards::markup(&keyboard));
            if let Err(e) = self.send_html(chat, &html, markup).await {
                tracing::warn!(%chat, error = %e, "cannot ask the user");
            }
        }
        .boxed()
    }

    fn image<'a>(&'a self, file_id: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        media::download_image(&self.bot, &self.policy, file_id, self.max_image_bytes).boxed()
    }

    fn file<'a>(
        &'a self,
        file_id: &'a str,
        max_bytes: u32,
    ) -> BoxFuture<'a, anyhow::Result<Vec<u8>>> {
        media::download(&self.bot, &self.policy, file_id, max_bytes).boxed()
    }

    fn transcript<'a>(
        &'a self,
        chat: Conversation,
        reply_to: Option<i32>,
        transcript: &'a str,
    ) -> BoxFuture<'a, ()> {
        let html = transcript_html(&render::escape_html(transcript));
        async move {
            if let Err(e) = self
                .send_html(Destination::new(chat, reply_to), &html, None)
                .await
            {
                tracing::warn!(%chat, error = %e, "cannot show a transcript");
            }
        }
        .boxed()
    }

    fn voice<'a>(
        &'a self,
        chat: Conversation,
        reply_to: Option<i32>,
        audio: Vec<u8>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let to = Destination::new(chat, reply_to);
        async move {
            send::send_voice(&self.bot, &self.policy, to, audio).await?;
            Ok(())
        }
        .boxed()
    }

    fn react(
        &self,
        chat: crate::ids::ChatId,
        message: i32,
        emoji: Option<String>,
    ) -> BoxFuture<'static, bool> {
        let (chat, id) = (ChatId::from(chat), MessageId(message));
        reactions::set(self.bot.clone(), self.policy.clone(), chat, id, emoji).boxed()
    }
}
