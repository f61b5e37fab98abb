//! Live replies: the answer grows in place while the model streams it.
//!
//! A turn with streaming on hands its [`AgentEvent`]s to a [`LiveDisplay`]. The first text (or tool
//! progress line) is sent at the chat's first free slot, unless the answer is complete by then
//! (it is then sent once, rendered, with its keyboard); after that the display is edited at most once per
//! `chat_interval_ms` (every send and edit also goes through the per-chat limiter, so flood
//! control never triggers). Past 4096 UTF-16 units the display moves on to a new message. The
//! last message carries a Stop button that names the turn. When the turn is done, [`finish`]
//! edits the messages into the properly rendered answer (tool progress removed) with its
//! keyboard; if the turn was stopped instead, the display says so.
//!
//! In a private chat the display is a native draft instead ([`super::drafts`]): the same
//! frames at the same pace, shown by Telegram as a growing draft (one message long: the last
//! part of the answer being written), refreshed before it fades while a tool runs; no message
//! is live, so [`finish`] sends the answer once. A draft refused mid-answer hands over to the
//! edits with the same frame, so nothing is lost (the draft goes as the first message comes).
//! A draft has no Stop button; it carries the client's own stop control instead, whose press
//! finds the turn through the draft's id (tracked while the display lives). A draft stopped by
//! `/cancel` is left as it is: the stop's confirmation (`/cancel`'s reply, a message) takes it
//! away.

use std::sync::Arc;
use std::time::Duration;

use teloxide::prelude::*;
use teloxide::types::{InlineKeyboardMarkup, MessageId};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::drafts::{Drafted, Drafts};
use super::send::{Destination, SendPolicy, edit_html, edit_keyboard, send_html, with_retry};
use crate::agent::AgentEvent;
use crate::cancel::TurnId;
use crate::conversation::Conversation;
use crate::telegram::keyboards;
use crate::telegram::render::{render_partial, render_parts};
use crate::texts::telegram::STOPPED;
use crate::turn::{Live, OnVisible};

/// A draft fades this long after its last update unless shown again (Telegram keeps one for
/// about 30 s): a tool that runs longer does not leave the chat without it.
const DRAFT_REFRESH: Duration = Duration::from_secs(20);

/// The draft on screen: what it shows, and since when.
#[derive(Debug, Clone)]
struct Draft {
    html: String,
    at: Instant,
}

/// One message of the live display.
#[derive(Debug, Clone)]
struct LiveMessage {
    id: MessageId,
    html: String,
    stop: bool,
}

/// The conversations whose live display has a message on screen: there, stopping a turn is
/// confirmed by that message, and `/cancel` adds no second confirmation.
pub(crate) type OnScreen =
    std::sync::Arc<std::sync::Mutex<std::collections::HashSet<Conversation>>>;

/// Locks `on_screen` (a poisoned lock still holds a valid set).
pub(crate) fn on_screen(
    on_screen: &OnScreen,
) -> std::sync::MutexGuard<'_, std::collections::HashSet<Conversation>> {
    on_screen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The live display of one turn in one conversation.
pub(crate) struct LiveDisplay {
    bot: Bot,
    policy: SendPolicy,
    /// Where its messages go; the reply is dropped once the first is sent.
    to: Destination,
    /// Spacing of edits (the chat's pacing interval).
    interval: Duration,
    /// The turn shown, which its Stop button names.
    turn: TurnId,
    shown: Vec<LiveMessage>,
    on_screen: OnScreen,
    /// Told around the first send, so a crash after it edits this display, not a new one.
    on_visible: OnVisible,
    /// Set while this display streams as a draft (from [`LiveDisplay::with_drafts`]); dropped
    /// when drafts are refused, and the display goes on with edits.
    drafts: Option<Arc<Drafts>>,
    /// This answer's draft id, and the draft on screen.
    draft_id: u32,
    draft: Option<Draft>,
    /// Keeps the draft's turn findable by a stop of it while this display lives.
    _tracked: Option<Tracked>,
}

/// A draft id registered with [`Drafts::track`], forgotten when dropped (the display ended,
/// however it ended).
struct Tracked {
    drafts: Arc<Drafts>,
    id: u32,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drafts.ended(self.id);
    }
}

impl LiveDisplay {
    pub(crate) fn new(
        bot: Bot,
        policy: SendPolicy,
        to: Destination,
        interval: Duration,
        turn: TurnId,
        on_screen: OnScreen,
        on_visible: OnVisible,
    ) -> Self {
        Self {
            bot,
            policy,
            to,
            interval,
            turn,
            shown: Vec::new(),
            on_screen,
            on_visible,
            drafts: None,
            draft_id: 0,
            draft: None,
            _tracked: None,
        }
    }

    /// Streams as a draft where `drafts` offers one in this conversation (a private chat that
    /// has not refused them), else as edits.
    pub(crate) fn with_drafts(mut self, drafts: &Arc<Drafts>) -> Self {
        if drafts.offered(self.to.conversation()) {
            self.draft_id = drafts.next_id();
            self.drafts = Some(drafts.clone());
            drafts.track(self.draft_id, self.to.conversation(), self.turn);
            self._tracked = Some(Tracked {
                drafts: drafts.clone(),
                id: self.draft_id,
            });
        }
        self
    }

    /// Shows the turn's events until [`AgentEvent::Finished`] (then: the messages on screen)
    /// or until the sender is dropped because the turn was stopped (then: `None`, and the
    /// display says so).
    pub(crate) async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<AgentEvent>,
    ) -> Option<Live> {
        let mut text = String::new();
        let mut progress: Option<String> = None;
        let mut dirty = false;
        let mut next_flush = Instant::now();
        // The first send waits for the chat's first slot once: an answer complete by then is
        // not shown live at all, [`finish`] sends it once in its final form.
        let mut waited_for_slot = false;
        let finished = loop {
            // A frame to flush, or else a draft to show again before it fades.
            let wake = if dirty {
                Some(next_flush)
            } else {
                self.draft_fades_at()
            };
            let event = match wake {
                Some(at) => tokio::select! {
                    // Events already there first: a flush never shows text that is outdated.
                    biased;
                    event = events.recv() => event,
                    () = tokio::time::sleep_until(at) => {
                        if dirty && self.nothing_shown() && !waited_for_slot {
                            waited_for_slot = true;
                            next_flush = next_flush.max(self.policy.limiter.ready_at(crate::ids::ChatId::from(self.to.chat)));
                            continue;
                        }
                        if !dirty {
                            // The same frame again, so the draft stays up.
                            self.draft = None;
                        }
                        self.show(&display(&text, progress.as_deref())).await;
                        next_flush = Instant::now() + self.interval;
                        dirty = false;
                        continue;
                    }
                },
                None => events.recv().await,
            };
            match event {
                Some(AgentEvent::CallStarted) => text.clear(),
                Some(AgentEvent::Text(piece)) => {
                    text.push_str(&piece);
                    progress = None;
                    dirty = true;
                }
                Some(AgentEvent::Progress(line)) => {
                    progress = Some(line);
                    dirty = true;
                }
                Some(AgentEvent::Finished) => break true,
                None => break false,
            }
        };
        on_screen(&self.on_screen).remove(&self.to.conversation());
        if finished {
            return Some(Live {
                messages: self.shown.iter().map(|s| s.id.0).collect(),
            });
        }
        // The turn was stopped (its future dropped) before its answer was complete, so before
        // anything of it was stored: say so where the user is looking, once.
        if let Some(last) = self.shown.last() {
            let html = format!("{}\n\n{STOPPED}", last.html);
            let to = self.to.without_reply();
            if edit_html(&self.bot, &self.policy, to, last.id, &html, None)
                .await
                .is_err()
            {
                // The text could not take the line (too long, or Telegram refused): at least
                // the ⏹ goes, so no dead button stays under a stopped answer.
                let none = InlineKeyboardMarkup::default();
                edit_keyboard(&self.bot, &self.policy, to.chat, last.id, none, "stopped").await;
            }
        }
        None
    }

    /// Brings the screen up to date with `markdown`: changed parts edited, new parts sent,
    /// the Stop button on the last one only.
    async fn show(&mut self, markdown: &str) {
        if self.show_draft(markdown).await {
            return;
        }
        let (bot, policy, turn) = (&self.bot, &self.policy, self.turn);
        // Edits keep the topic (a message that is gone is sent anew there), never the reply.
        let chat = self.to.without_reply();
        let parts = render_partial(markdown);
        let last = parts.len().saturating_sub(1);
        for (i, html) in parts.into_iter().enumerate() {
            let stop = i == last;
            let markup = stop.then(|| keyboards::stop(turn));
            match self.shown.get_mut(i) {
                Some(shown) if shown.html == html && shown.stop == stop => {}
                Some(shown) => match edit_html(bot, policy, chat, shown.id, &html, markup).await {
                    Ok(id) => *shown = LiveMessage { id, html, stop },
                    Err(e) => tracing::debug!(chat = chat.chat.0, error = %e, "live edit failed"),
                },
                None => {
                    // On screen from the moment the send starts (it may wait for the chat's
                    // slot): a `/cancel` meanwhile leaves the one confirmation to this message.
                    on_screen(&self.on_screen).insert(chat.conversation());
                    // The first message of the answer: recorded before it may be seen.
                    let first = i == 0;
                    if first {
                        (self.on_visible)(None).await;
                    }
                    match send_html(bot, policy, self.to, &html, markup).await {
                        Ok(message) => {
                            self.to = chat;
                            self.shown.push(LiveMessage {
                                id: message.id,
                                html,
                                stop,
                            });
                            // Every part's id: a resumed answer is edited into all of them.
                            (self.on_visible)(Some(message.id.0)).await;
                        }
                        Err(e) => {
                            if self.shown.is_empty() {
                                on_screen(&self.on_screen).remove(&chat.conversation());
                            }
                            tracing::debug!(chat = chat.chat.0, error = %e, "live send failed");
                        }
                    }
                }
            }
        }
    }

    /// Nothing of the answer on screen yet: no message, no draft.
    fn nothing_shown(&self) -> bool {
        self.shown.is_empty() && self.draft.is_none()
    }

    /// When the draft on screen is to be shown again, if this display shows one.
    fn draft_fades_at(&self) -> Option<Instant> {
        self.drafts.as_ref()?;
        Some(self.draft.as_ref()?.at + DRAFT_REFRESH)
    }

    /// Shows `markdown` as this answer's draft: its last part, the words being written (a
    /// draft is one message long). `false` when this display does not draft (any more): the
    /// caller shows it with edits.
    async fn show_draft(&mut self, markdown: &str) -> bool {
        let Some(drafts) = self.drafts.clone() else {
            return false;
        };
        // Refused meanwhile by another answer (the server has no drafts): edits from here.
        if !drafts.offered(self.to.conversation()) {
            self.drafts = None;
            return false;
        }
        let Some(html) = render_partial(markdown).pop() else {
            return true;
        };
        if self.draft.as_ref().is_some_and(|draft| draft.html == html) {
            return true;
        }
        let to = self.to.without_reply();
        match drafts
            .show(&self.bot, &self.policy, to, self.draft_id, &html)
            .await
        {
            Drafted::Shown => {
                let at = Instant::now();
                self.draft = Some(Draft { html, at });
                true
            }
            Drafted::Missed => true,
            Drafted::Refused => {
                self.drafts = None;
                false
            }
        }
    }
}

/// The streamed text with the current tool's progress line under it.
fn display(text: &str, progress: Option<&str>) -> String {
    match progress {
        Some(line) if text.trim().is_empty() => line.to_string(),
        Some(line) => format!("{text}\n\n_{line}_"),
        None => text.to_string(),
    }
}

/// Turns the live display into the final answer: each part of the rendered `markdown` edited
/// into place (or sent), the keyboard on the last, leftover live messages deleted. The first
/// message sent is a reply to `to`'s message if nothing was live (else the live one was).
/// Returns the ids of the messages that show the answer. With no live message, `on_visible`
/// is told before the first send; it is told each sent message's id.
pub(crate) async fn finish(
    bot: &Bot,
    policy: &SendPolicy,
    to: Destination,
    live: &Live,
    markdown: &str,
    markup: Option<InlineKeyboardMarkup>,
    on_visible: &OnVisible,
) -> Vec<MessageId> {
    let mut parts = render_parts(markdown);
    if parts.is_empty() {
        parts.push("…".to_string());
    }
    let last = parts.len() - 1;
    let chat = to.chat;
    let mut next = if live.messages.is_empty() {
        to
    } else {
        to.without_reply()
    };
    let mut ids = Vec::with_capacity(parts.len());
    for (i, html) in parts.iter().enumerate() {
        let markup = if i == last { markup.clone() } else { None };
        let shown = match live.messages.get(i) {
            Some(&id) => {
                let to = to.without_reply();
                edit_html(bot, policy, to, MessageId(id), html, markup).await
            }
            None => {
                if i == 0 {
                    on_visible(None).await;
                }
                let sent = send_html(bot, policy, next, html, markup).await;
                next = next.without_reply();
                if let Ok(message) = &sent {
                    on_visible(Some(message.id.0)).await;
                }
                sent.map(|m| m.id)
            }
        };
        match shown {
            Ok(id) => ids.push(id),
            Err(e) => tracing::error!(chat = chat.0, error = %e, "cannot show the answer"),
        }
    }
    for &extra in live.messages.iter().skip(parts.len()) {
        let deleted = with_retry(policy, chat, "deleteMessage", || {
            bot.delete_message(chat, MessageId(extra)).send()
        })
        .await;
        if let Err(e) = deleted {
            tracing::debug!(chat = chat.0, error = %e, "cannot delete a leftover live message");
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_sits_under_the_text() {
        assert_eq!(display("", Some("🔎 fetching a…")), "🔎 fetching a…");
        assert_eq!(display("Hi", Some("🔎 x")), "Hi\n\n_🔎 x_");
        assert_eq!(display("Hi", None), "Hi");
    }
}
