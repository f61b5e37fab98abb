//! Stage zero, read the attachment: a voice note or audio file is transcribed (the transcript
//! shown to the user as a quote, then answered as their message), a document's text is read
//! into the message between delimiters and marks the turn as holding third-party text. Either
//! way the request's text is the result and its attachment gone, so the stages after this
//! (and a 🔁 Retry ticket) see a plain message. The inbox entry keeps the attachment until it
//! is read, so a turn a crash interrupted here reads it again when it resumes; then the entry
//! holds the read request, so a crash later resumes with the transcript. A transcript is kept
//! on disk (flushed) before it is shown, so it is never transcribed or shown twice; a text
//! turn, which reads nothing, never pays for that flush.
//!
//! The transcription is charged to the user's daily budget like an LLM call: its estimate (a
//! generous 10 tokens a second of audio) is reserved first, and what is settled is the
//! transcript's estimated tokens (a byte-based count, as prompts are estimated); the chat's
//! usage counts it as one call of the speech model. A failure is told to the user, and the
//! turn ends with its update finished: the user sends the file again.

use super::state::Turn;
use super::visibility::set_state;
use crate::agent::document::{document_kind, document_message, document_text};
use crate::agent::output::cut;
use crate::llm::Usage;
use crate::store::{Attachment, AttachmentKind, InboxState};
use crate::texts::agent::budget_spent;
use crate::texts::media as texts;

/// Tokens a second of audio is estimated at before its transcription (speech runs at about 3).
const TOKENS_PER_SECOND: u64 = 10;

/// Reads the turn's attachment into its request; `false` when the turn ends here (the user
/// was told why).
pub(super) async fn read_attachment(turn: &mut Turn) -> bool {
    let Some(attachment) = turn.input.request.attachment.clone() else {
        return true;
    };
    let read = match attachment.kind {
        AttachmentKind::Audio => transcribe(turn, &attachment).await.map(Some),
        AttachmentKind::Document => read_document(turn, &attachment).await.map(|()| None),
    };
    match read {
        Ok(transcript) => {
            turn.input.request.attachment = None;
            keep_read(turn, transcript.is_some()).await;
            if let Some(shown) = transcript {
                let reply_to = turn.input.request.reply_to;
                turn.out.transcript(turn.at(), reply_to, &shown).await;
            }
            true
        }
        Err(told) => {
            turn.stop_typing();
            turn.out.notice(turn.at(), &told).await;
            if let Some(update) = turn.input.update {
                set_state(&turn.app, update, InboxState::Answered).await;
            }
            false
        }
    }
}

/// Records the request as read in the turn's inbox entry, flushed (`durable`) when what was
/// read is about to be shown (a transcript): a crash after it is on screen then resumes with
/// it, never transcribing and showing it again. A document's text is shown to nobody: sled's
/// own flush follows within half a second, and a crash before it reads the file again.
async fn keep_read(turn: &Turn, durable: bool) {
    let Some(update) = turn.input.update else {
        return;
    };
    let store = turn.app.store();
    let kept = store.inbox().replace_request(update, &turn.input.request);
    let kept = match kept {
        Ok(()) if durable => store.db().flush_async().await,
        other => other,
    };
    // Dropped (logged): a resumed turn reads the file again, as if this had not happened.
    if let Err(e) = kept {
        tracing::warn!(%update, error = %e, "cannot keep an attachment's text in the inbox");
    }
}

/// Transcribes the recording and makes it the request's text; `Ok` is the transcript to show
/// (once it is kept), `Err` what the user is told.
async fn transcribe(turn: &mut Turn, attachment: &Attachment) -> Result<String, String> {
    let app = turn.app.clone();
    let Some(speech) = app.speech() else {
        return Err(texts::SPEECH_NOT_CONFIGURED.to_string());
    };
    let max_bytes = app.config().speech.max_audio_bytes;
    let audio = turn
        .out
        .file(&attachment.file_id, max_bytes)
        .await
        .map_err(|e| texts::transcription_failed(&said(turn, &e)))?;
    let estimate = u64::from(attachment.seconds.max(1)) * TOKENS_PER_SECOND;
    let hold = turn
        .payer
        .reserve(estimate)
        .await
        .map_err(|spent| budget_spent(spent.0))?;
    let name = file_name(attachment);
    let text = match speech.transcribe(audio, &name).await {
        Ok(text) => text,
        Err(e) => {
            hold.release();
            tracing::warn!(chat = %turn.at(), error = %format!("{e:#}"), "cannot transcribe a recording");
            return Err(texts::transcription_failed(&said(turn, &e)));
        }
    };
    let usage = Usage {
        completion_tokens: text.len() as u64 / 3 + 1,
        ..Usage::default()
    };
    hold.settle(usage);
    let chat = turn.input.request.chat;
    // Dropped (logged): the user's budget is charged; only the chat's totals miss the call.
    if let Err(e) = app
        .store()
        .usage()
        .charge(chat, speech.model(), 0, 1, usage)
    {
        tracing::warn!(%chat, error = %e, "cannot record a transcription's usage");
    }
    if text.is_empty() {
        return Err(texts::NOTHING_HEARD.to_string());
    }
    let shown = cut(&text, texts::SHOWN_TRANSCRIPT_CHARS);
    let request = &mut turn.input.request;
    request.text = match request.text.trim() {
        "" => text,
        caption => format!("{caption}\n\n{text}"),
    };
    Ok(shown)
}

/// Reads the document into the request's text (its caption, or a request to summarise it,
/// then the document delimited as data) and marks the request third-party; `Err` is what the
/// user is told.
async fn read_document(turn: &mut Turn, attachment: &Attachment) -> Result<(), String> {
    let config = &turn.app.config().documents;
    let (max_bytes, max_chars) = (config.max_document_bytes, config.max_document_chars);
    let unreadable = |why: String| texts::document_unreadable(&why);
    let kind = document_kind(&attachment.name, &attachment.mime)
        .ok_or_else(|| unreadable("not a kind of file I can read".into()))?;
    let bytes = turn
        .out
        .file(&attachment.file_id, max_bytes)
        .await
        .map_err(|e| unreadable(said(turn, &e)))?;
    let text = tokio::task::spawn_blocking(move || document_text(kind, &bytes))
        .await
        .map_err(|_| unreadable("the file is malformed".into()))?
        .map_err(|e| unreadable(e.to_string()))?;
    let request = &mut turn.input.request;
    let question = match request.text.trim() {
        "" => texts::DOCUMENT_QUESTION,
        caption => caption,
    };
    request.text = document_message(question, &attachment.name, &text, max_chars);
    request.forwarded = true;
    Ok(())
}

/// The recording's file name for the transcription server, whose ending tells its format
/// (a voice note has no name: Telegram records them as Opus in Ogg).
fn file_name(attachment: &Attachment) -> String {
    if attachment.name.is_empty() {
        "voice.ogg".to_string()
    } else {
        attachment.name.clone()
    }
}

/// `error` as the user may read it: one line, without the bot's secrets (a failed download's
/// error names its URL, which holds the token).
fn said(turn: &Turn, error: &anyhow::Error) -> String {
    let text = crate::logging::redact(&format!("{error:#}"), &turn.app.config().secrets());
    cut(&text, 300)
}
