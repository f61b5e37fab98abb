//! Spoken replies: the answer to a voice or video note is also sent as a voice note, made by
//! the speech synthesis endpoint (`[speech] tts_url`, see [`crate::llm::synthesis`]) from the
//! answer as a person says it ([`crate::agent::spoken`]), after the text answer is shown.
//!
//! Exactly once, crashes included: the reply is recorded as owed in the store (flushed)
//! before the text is shown ([`owe`]); it is sent in the background ([`start`]), never in the
//! chat's queue, so the chat's next turn does not wait for it; just before the send it is
//! marked as being sent (flushed), and it is removed once sent. At start-up ([`resume`]) a
//! reply owed for an update whose answer is done is sent; one whose turn runs again is sent by
//! that turn; one marked as being sent may be in the chat already and is given up (a crash in
//! that moment loses one voice note rather than send it twice).
//!
//! Each synthesis is counted on disk before it begins, and a reply whose synthesis was begun
//! twice (a crash during it, then another) is given up, so it cannot bring every start down.
//! A user whose Telegram refuses voice notes (`VOICE_MESSAGES_FORBIDDEN`) gets spoken replies
//! turned off. A synthesis that fails is one line in the log; the text answer stands. The characters
//! spoken are charged to the user's daily budget, [`CHARS_PER_TOKEN`] a token (reserved
//! before the synthesis, like a transcription, and charged only once `sendVoice` succeeded),
//! and the chat's usage counts one call of the speech model.

use std::collections::HashSet;
use std::sync::Arc;

use super::messenger::SharedMessenger;
use super::state::Turn;
use crate::agent::TurnStatus;
use crate::agent::spoken::spoken;
use crate::app::App;
use crate::ids::UpdateId;
use crate::llm::Usage;
use crate::store::OwedVoice;

/// Syntheses a spoken reply gets: the second covers a shutdown or crash during the first; a
/// reply whose synthesis or encoding keeps bringing the process down is then given up.
const MAX_SYNTHESES: u8 = 2;

/// Characters of spoken text charged as one token: speech is billed by the character, and a
/// token of English text is about four.
const CHARS_PER_TOKEN: u64 = 4;

/// Records, flushed, the spoken reply `turn` owes for `answer`, if one is owed: the user
/// spoke the request, spoken replies are on and the user did not turn them off, the answer is
/// the model's own and has something to say. Returns the update it is owed for.
pub(super) async fn owe(turn: &Turn, status: &TurnStatus, answer: &str) -> Option<UpdateId> {
    let app = &turn.app;
    let request = &turn.input.request;
    let update = turn.input.update?;
    let wanted = request.spoken
        && matches!(status, TurnStatus::Answered)
        && app.voice().is_some()
        && app.store().voices().wanted_by(request.user);
    if !wanted {
        return None;
    }
    let text = spoken(answer, app.config().speech.max_spoken_chars);
    if text.is_empty() {
        return None;
    }
    let voice = OwedVoice {
        chat: request.chat,
        topic: request.topic,
        user: request.user,
        reply_to: request.message,
        text,
        sending: false,
        syntheses: 0,
    };
    let store = app.store();
    let kept = match store.voices().owe(update, &voice) {
        Ok(()) => store.db().flush_async().await,
        Err(e) => Err(e),
    };
    match kept {
        Ok(()) => Some(update),
        Err(e) => {
            tracing::warn!(%update, error = %e, "cannot record a spoken reply: the answer is text only");
            None
        }
    }
}

/// Sends the spoken reply owed for `update` in the background.
pub(super) fn start(app: &Arc<App>, out: &SharedMessenger, update: UpdateId) {
    let Some((_, voice)) = app
        .store()
        .voices()
        .owed()
        .into_iter()
        .find(|(owed, _)| *owed == update)
    else {
        return;
    };
    let (task_app, out) = (app.clone(), out.clone());
    app.spawn(async move { send(&task_app, &out, update, voice).await });
}

/// At start-up: sends each spoken reply owed for an answer that is done, and gives up each
/// one that may have been sent (see the module docs). Replies of turns that run again are
/// left to them.
pub(super) fn resume(app: &Arc<App>, out: &SharedMessenger) {
    let running: HashSet<UpdateId> = app
        .store()
        .inbox()
        .unfinished()
        .into_iter()
        .map(|(update, _)| update)
        .collect();
    for (update, voice) in app.store().voices().owed() {
        if voice.sending {
            tracing::warn!(%update, "a crash came as a spoken reply was being sent: not sent again");
            settle(app, update);
            continue;
        }
        if !running.contains(&update) {
            tracing::info!(%update, "sending a spoken reply a crash held back");
            let (task_app, out) = (app.clone(), out.clone());
            app.spawn(async move { send(&task_app, &out, update, voice).await });
        }
    }
}

/// Synthesises `voice`'s text and sends it once, charged to its user once Telegram took it
/// (the reservation is released if the synthesis or the send fails); every failure is one
/// line in the log.
async fn send(app: &Arc<App>, out: &SharedMessenger, update: UpdateId, voice: OwedVoice) {
    let Some(synthesizer) = app.voice() else {
        settle(app, update);
        return;
    };
    let chat = voice.conversation();
    if !may_synthesise(app, update).await {
        settle(app, update);
        return;
    }
    let chars = voice.text.chars().count() as u64;
    let tokens = chars.div_ceil(CHARS_PER_TOKEN);
    let payer = app.ledger().payer(Some(voice.user), Some(chat));
    let Ok(hold) = payer.reserve(tokens).await else {
        tracing::info!(%update, %chat, "the user's budget is spent: the answer is not spoken");
        settle(app, update);
        return;
    };
    let audio = match synthesizer.speak(&voice.text).await {
        Ok(speech) => speech.ogg_opus,
        Err(e) => {
            hold.release();
            tracing::warn!(%update, %chat, error = %format!("{e:#}"), "cannot speak an answer: it stays text only");
            settle(app, update);
            return;
        }
    };
    let began = app.store().voices().begin_sending(update);
    let began = match began {
        Ok(true) => app.store().db().flush_async().await.map(|()| true),
        other => other,
    };
    if !matches!(began, Ok(true)) {
        hold.release();
        return;
    }
    if let Err(e) = out.voice(chat, voice.reply_to, audio).await {
        hold.release();
        let error = format!("{e:#}");
        tracing::warn!(%update, %chat, error, "cannot send a spoken reply: not charged");
        if error.contains(VOICES_FORBIDDEN) {
            refused_by_privacy(app, &voice);
        }
        settle(app, update);
        return;
    }
    let usage = Usage {
        completion_tokens: tokens,
        ..Usage::default()
    };
    hold.settle(usage);
    if let Err(e) = app
        .store()
        .usage()
        .charge(voice.chat, synthesizer.model(), 0, 1, usage)
    {
        tracing::warn!(%chat, error = %e, "cannot record a spoken reply's usage");
    }
    settle(app, update);
}

/// What Telegram answers a voice note to a user whose privacy settings refuse voice messages
/// (a lasting setting of Telegram Premium users).
const VOICES_FORBIDDEN: &str = "VOICE_MESSAGES_FORBIDDEN";

/// Whether the reply owed for `update` may be synthesised now: its synthesis is counted on
/// disk first, and one begun [`MAX_SYNTHESES`] times already is given up.
async fn may_synthesise(app: &App, update: UpdateId) -> bool {
    let counted = match app.store().voices().begin_synthesis(update) {
        Ok(Some(before)) => app.store().db().flush_async().await.map(|()| before),
        Ok(None) => return false,
        Err(e) => Err(e),
    };
    match counted {
        Ok(before) if before < MAX_SYNTHESES => true,
        Ok(before) => {
            tracing::warn!(%update, syntheses = before, "a spoken reply whose synthesis never finished: given up");
            false
        }
        Err(e) => {
            tracing::warn!(%update, error = %e, "cannot count a spoken reply's synthesis: not spoken");
            false
        }
    }
}

/// The user's Telegram refuses voice notes: their spoken replies are turned off (as `/voice
/// off` does; `/voice on` turns them back on), so none is synthesised for nothing again.
fn refused_by_privacy(app: &App, voice: &OwedVoice) {
    tracing::info!(user = %voice.user, "the user's privacy settings refuse voice notes: spoken replies turned off for them");
    if let Err(e) = app.store().voices().set_wanted(voice.user, false) {
        tracing::warn!(user = %voice.user, error = %e, "cannot turn spoken replies off");
    }
}

/// Forgets the reply owed for `update` (logged if the store refuses).
pub(super) fn settle(app: &App, update: UpdateId) {
    if let Err(e) = app.store().voices().settle(update) {
        tracing::warn!(%update, error = %e, "cannot forget a spoken reply");
    }
}
