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
//! A recording's length is measured from its bytes once downloaded (the sender's client may
//! claim any length): one longer than `speech.max_audio_secs` is refused, and its transcript
//! is cut at 40 characters a second of that cap. The transcription is charged to the user's
//! daily budget like an LLM call: its estimate (a generous 10 tokens a second of audio, the
//! longer of the claimed and the measured length) is reserved first, and what is settled is
//! the transcript's estimated tokens (a byte-based count, as prompts are estimated); the
//! chat's usage counts it as one call of the speech model. A failure is told to the user, and
//! the turn ends with its update finished: the user sends the file again.

use super::state::Turn;
use super::visibility::set_state;
use crate::agent::audio::measured_seconds;
use crate::agent::document::{
    DocumentKind, Unreadable, document_kind, document_message, non_empty, text_file,
};
use crate::agent::jail::{JailFailure, Parser};
use crate::agent::output::cut;
use crate::llm::Usage;
use crate::store::{Attachment, AttachmentKind, InboxState};
use crate::texts::agent::budget_spent;
use crate::texts::media as texts;

/// Tokens a second of audio is estimated at before its transcription (speech runs at about 3).
const TOKENS_PER_SECOND: u64 = 10;

/// Characters of transcript a second of audio may give: twice what the fastest speakers say
/// (about 20 a second), so only a transcript no recording could hold is cut.
const TRANSCRIPT_CHARS_PER_SECOND: u64 = 40;

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
/// (once it is kept), `Err` what the user is told. The length the sender's client claims was
/// checked before the download (`handlers::files`); here the recording's bytes are measured
/// too (see [`crate::agent::audio`]): a recording longer than `speech.max_audio_secs` is
/// refused, and the budget is reserved for the longer of the two lengths.
async fn transcribe(turn: &mut Turn, attachment: &Attachment) -> Result<String, String> {
    let app = turn.app.clone();
    let Some(speech) = app.speech() else {
        return Err(texts::SPEECH_NOT_CONFIGURED.to_string());
    };
    let caps = &app.config().speech;
    let audio = turn
        .out
        .file(&attachment.file_id, caps.max_audio_bytes)
        .await
        .map_err(|e| texts::transcription_failed(&said(turn, &e)))?;
    // Off the runtime's threads: up to 20 MB are scanned.
    // A round video's MP4 is measured by its tables; any other file by its audio.
    let video = attachment.voice && attachment.name.ends_with(".mp4");
    let (audio, measured) = tokio::task::spawn_blocking(move || {
        let seconds = measured_seconds(&audio, video);
        (audio, seconds)
    })
    .await
    .map_err(|_| texts::transcription_failed("the recording could not be read"))?;
    if measured > caps.max_audio_secs {
        return Err(texts::audio_measured_too_long(
            measured,
            caps.max_audio_secs,
        ));
    }
    let hold = turn
        .payer
        .reserve(reserved_tokens(attachment.seconds, measured))
        .await
        .map_err(|spent| budget_spent(spent.0))?;
    let text = match speech.transcribe(audio, &file_name(attachment)).await {
        Ok(text) => text,
        Err(e) => {
            hold.release();
            // The log gets where and what the server said; the sender only what went wrong.
            tracing::warn!(chat = %turn.at(), error = %e.detail(), "cannot transcribe a recording");
            return Err(texts::transcription_failed(&e.to_string()));
        }
    };
    let text = capped_transcript(&text, caps.max_audio_secs);
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
    // An audio file is a recording of anyone's speech, not the user's own voice note: its
    // words are someone else's (see `crate::provenance`).
    request.forwarded |= !attachment.voice;
    // A forwarded voice note is someone else's recording: answered in text only.
    request.spoken = attachment.voice && !request.forwarded;
    Ok(shown)
}

/// The tokens reserved before a transcription: [`TOKENS_PER_SECOND`] for each second of the
/// longer of the length the sender's client `claimed` and the one `measured` from the bytes
/// (at least one second).
fn reserved_tokens(claimed: u32, measured: u32) -> u64 {
    u64::from(claimed.max(measured).max(1)) * TOKENS_PER_SECOND
}

/// `text` as the conversation gets it: at most [`TRANSCRIPT_CHARS_PER_SECOND`] characters for
/// each second a recording may last (`max_secs`), the rest cut with a note saying so. Nobody
/// speaks that fast: a longer transcript is a server's fault (or worse), and must not fill
/// the context.
fn capped_transcript(text: &str, max_secs: u32) -> String {
    let max = usize::try_from(u64::from(max_secs.max(1)) * TRANSCRIPT_CHARS_PER_SECOND)
        .unwrap_or(usize::MAX);
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => {
            let total = text.chars().count();
            format!("{}\n{}", &text[..at], texts::transcript_cut(max, total))
        }
    }
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
    let (text, whole) = match kind {
        DocumentKind::Text => {
            let text = tokio::task::spawn_blocking(move || text_file(&bytes))
                .await
                .map_err(|_| unreadable("the file is malformed".into()))?
                .map_err(|e| unreadable(e.to_string()))?;
            (text, true)
        }
        DocumentKind::Pdf => read_pdf(turn, bytes).await?,
    };
    let request = &mut turn.input.request;
    let question = match request.text.trim() {
        "" => texts::DOCUMENT_QUESTION,
        caption => caption,
    };
    request.text = document_message(question, &attachment.name, &text, max_chars, whole);
    request.forwarded = true;
    Ok(())
}

/// A PDF's text, read in the jail's child process, and whether it is all of it; `Err` is what
/// the user is told: the parser's reason, or, whatever broke, that the file is malformed or
/// too complex.
async fn read_pdf(turn: &Turn, bytes: Vec<u8>) -> Result<(String, bool), String> {
    let unreadable = |why: Unreadable| texts::document_unreadable(&why.to_string());
    match turn.app.jail().read(Parser::Pdf, bytes).await {
        Ok(parsed) => Ok((non_empty(parsed.text).map_err(unreadable)?, parsed.whole)),
        Err(JailFailure::Refused(why)) => Err(unreadable(Unreadable::Pdf(why))),
        Err(JailFailure::Broke(_)) => Err(texts::PDF_TOO_COMPLEX.to_string()),
        Err(JailFailure::NotStarted(_)) => Err(texts::PDF_READER_DOWN.to_string()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_reserved_for_the_longer_length() {
        let cases = [
            ("as claimed", 12, 12, 120),
            ("longer than claimed", 5, 600, 6_000),
            ("shorter than claimed (rounded down)", 4, 3, 40),
            ("no length at all: one second", 0, 0, 10),
        ];
        for (name, claimed, measured, want) in cases {
            assert_eq!(reserved_tokens(claimed, measured), want, "{name}");
        }
    }

    #[test]
    fn a_transcript_is_cut_at_what_the_cap_allows() {
        let cases = [
            ("short", "Hello there.", 10, "Hello there."),
            ("a cap of 0 s counts as one second", "ab", 0, "ab"),
            (
                "over: cut with a note",
                "abcdefghijklmnopqrstuvwxyzabcdefghijklmn!",
                1,
                "abcdefghijklmnopqrstuvwxyzabcdefghijklmn\n\
                 [the transcript was cut: 40 of its 41 characters are above]",
            ),
            (
                "cut between characters, not bytes",
                &"é".repeat(41),
                1,
                &format!(
                    "{}\n[the transcript was cut: 40 of its 41 characters are above]",
                    "é".repeat(40)
                ),
            ),
        ];
        for (name, text, max_secs, want) in cases {
            assert_eq!(capped_transcript(text, max_secs), want, "{name}");
        }
    }
}
