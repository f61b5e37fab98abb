//! User-facing texts of voice notes, audio files and documents (see [`crate::texts`]): what
//! a refused or unreadable file is answered, the note when no transcription endpoint is
//! configured, how a transcript is shown, and what a document without a caption asks.

use crate::sizes::{Unit, size};

/// The kinds of document that can be read, as users are told.
const READABLE_DOCUMENTS: &str =
    "text files (txt, md, csv, json, yaml, toml, source code) and PDFs";

/// The request of a document sent without a caption.
pub(crate) const DOCUMENT_QUESTION: &str = "Summarise this document.";

/// The one note a voice note gets while no transcription endpoint is configured.
pub(crate) const SPEECH_NOT_CONFIGURED: &str = "🎤 I cannot listen to voice notes here yet: the bot's owner has to set HEURIST_SPEECH_URL (or [speech] base_url) to an OpenAI-compatible transcription endpoint, such as OpenAI's whisper-1 or a local whisper.cpp server. Please send your request as text meanwhile.";

/// A recording over the length cap (`seconds` long, `max` allowed).
pub(crate) fn audio_too_long(seconds: u32, max: u32) -> String {
    format!(
        "🎤 This recording is {} long; I can transcribe up to {}. Please send a shorter one or type your request.",
        minutes(seconds),
        minutes(max)
    )
}

/// A recording whose bytes show it lasts at least `seconds`, over the `max` allowed (whatever
/// the sender's client claimed).
pub(crate) fn audio_measured_too_long(seconds: u32, max: u32) -> String {
    format!(
        "🎤 This recording lasts at least {}; I can transcribe up to {}. Please send a shorter one or type your request.",
        minutes(seconds),
        minutes(max)
    )
}

/// The note after a transcript cut at `kept` of its `total` characters (the model reads it).
pub(crate) fn transcript_cut(kept: usize, total: usize) -> String {
    format!("[the transcript was cut: {kept} of its {total} characters are above]")
}

/// A file over a size cap (`bytes` big, `max` allowed; `what` names it: "recording",
/// "document").
pub(crate) fn file_too_big(what: &str, bytes: u64, max: u64) -> String {
    format!(
        "This {what} is {}; I can read up to {}. Please send a smaller one.",
        size(bytes, Unit::Decimal),
        size(max, Unit::Decimal)
    )
}

/// A document of a kind that cannot be read (`name` as sent).
pub(crate) fn unsupported_document(name: &str) -> String {
    let name = if name.is_empty() {
        "this file".to_string()
    } else {
        format!("“{name}”")
    };
    format!(
        "Sorry, I cannot read {name}. I can read {READABLE_DOCUMENTS}; send one of those, or paste the text."
    )
}

/// A recording that could not be transcribed (`error` says why, already redacted).
pub(crate) fn transcription_failed(error: &str) -> String {
    format!(
        "🎤 Sorry, I could not transcribe this recording ({error}). Please try again or type your request."
    )
}

/// Why a transcription failed, as the sender reads it (never the server's URL or words): the
/// server could not be reached (`error`: the kind of failure, without its URL).
pub(crate) fn transcription_unreachable(error: &str) -> String {
    format!("the transcription server could not be reached: {error}")
}

/// The transcription server answered with an error `status`.
pub(crate) fn transcription_answered(status: u16) -> String {
    format!("the transcription server answered HTTP {status}")
}

/// The transcription server's answer was longer than anything a transcript needs.
pub(crate) fn transcription_too_long(megabytes: usize) -> String {
    format!("the transcription server's answer is over {megabytes} MB")
}

/// The transcription server's answer is not `{"text": ...}`.
pub(crate) const TRANSCRIPTION_UNREADABLE: &str =
    "the transcription server's answer could not be read";

/// A recording whose transcript is empty.
pub(crate) const NOTHING_HEARD: &str =
    "🎤 I could not make out any words in this recording. Please try again or type your request.";

/// A document that could not be fetched or read (`error` says why).
pub(crate) fn document_unreadable(error: &str) -> String {
    format!("📄 Sorry, I could not read this document: {error}. I can read {READABLE_DOCUMENTS}.")
}

/// A PDF whose parser crashed, ran out of time or memory, or broke another of its limits
/// (see `agent::jail`): one answer whatever went wrong, since the file is the cause.
pub(crate) const PDF_TOO_COMPLEX: &str = "📄 Sorry, I could not read this PDF: it is malformed or too complex. Please send a simpler file, or paste the text.";

/// A PDF that could not be read because the parser's process did not start (logged for the
/// bot's owner).
pub(crate) const PDF_READER_DOWN: &str = "📄 Sorry, I cannot read PDFs right now: my PDF reader did not start (the bot's owner can see why in its log). Please paste the text meanwhile.";

/// Longest part of a transcript shown back to the user.
pub(crate) const SHOWN_TRANSCRIPT_CHARS: usize = 200;

/// How a transcript is shown (HTML; `escaped` is the transcript, HTML-escaped and cut by the
/// caller): quoted under a microphone, so the user sees what the bot heard.
pub(crate) fn transcript_html(escaped: &str) -> String {
    format!("🎤 <blockquote>{escaped}</blockquote>")
}

/// `seconds` as "45 s" or "5 min 30 s".
fn minutes(seconds: u32) -> String {
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

/// `/voice` where no speech synthesis endpoint is configured.
pub(crate) const VOICE_NOT_SET_UP: &str = "🔇 I cannot speak here yet: the bot's owner has to set HEURIST_TTS_URL (or [speech] tts_url) to an OpenAI-compatible speech endpoint. Your voice notes are answered in text.";

/// `/voice` with something other than on or off.
pub(crate) const VOICE_USAGE: &str = "Say /voice on to get answers to your voice notes as a voice note too, or /voice off for text only.";

/// `/voice` alone: the sender's choice now.
pub(crate) fn voice_now(on: bool) -> String {
    if on {
        "🔊 Answers to your voice notes come as a voice note too (/voice off for text only).".into()
    } else {
        "🔇 Answers to your voice notes are text only (/voice on to hear them too).".into()
    }
}

/// `/voice on|off` done.
pub(crate) fn voice_set(on: bool) -> String {
    if on {
        "🔊 From now on I answer your voice notes with a voice note too, after the text.".into()
    } else {
        "🔇 From now on I answer your voice notes in text only.".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_are_told_in_plain_units() {
        let cases = [
            (
                "seconds",
                audio_too_long(45, 30),
                "45 s long; I can transcribe up to 30 s",
            ),
            (
                "minutes",
                audio_too_long(330, 300),
                "5 min 30 s long; I can transcribe up to 5 min",
            ),
            (
                "megabytes",
                file_too_big("document", 12_345_678, 10_000_000),
                "is 12.3 MB; I can read up to 10.0 MB",
            ),
            (
                "kilobytes",
                file_too_big("document", 5_000, 1_000),
                "is 5 kB; I can read up to 1 kB",
            ),
        ];
        for (name, text, want) in cases {
            assert!(text.contains(want), "{name}: {text}");
        }
    }
}
