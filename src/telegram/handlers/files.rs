//! Voice notes, video notes, audio files and documents: what the update says of the file decides, before
//! anything is downloaded, whether it becomes a turn (whose first stage reads it, see
//! `turn::attachment`) or gets an answer saying why not: no transcription endpoint, a recording
//! too long or too big, a document too big or of a kind that cannot be read. The update's
//! duration is what the sender's client claims: this is a first filter only, and the turn
//! measures the recording's bytes again once they are downloaded.

use teloxide::prelude::*;

use crate::agent::document::document_kind;
use crate::config::Config;
use crate::store::{Attachment, AttachmentKind};
use crate::texts::media as texts;

/// The file name a video note is sent to the transcription server under (it has none of its
/// own; Telegram records them as MP4).
const VIDEO_NOTE_NAME: &str = "video_note.mp4";

/// What to do with a message's file.
#[derive(Debug, PartialEq)]
pub(super) enum Incoming {
    /// A turn reads it.
    Turn(Attachment),
    /// It is refused with this answer.
    Refused(String),
}

/// What the message's voice note, audio file or document becomes; `None` when it carries
/// none of them.
pub(super) fn incoming(msg: &Message, config: &Config, speech: bool) -> Option<Incoming> {
    let (kind, file, name, mime, seconds) = if let Some(voice) = msg.voice() {
        let mime = voice.mime_type.as_ref().map(ToString::to_string);
        let seconds = voice.duration.seconds();
        (AttachmentKind::Audio, &voice.file, None, mime, seconds)
    } else if let Some(note) = msg.video_note() {
        // A round video: its audio track is the user speaking, like a voice note's. The
        // transcription server reads the MP4 as it is (its name tells the format).
        let name = Some(VIDEO_NOTE_NAME.to_string());
        let mime = Some("video/mp4".to_string());
        let seconds = note.duration.seconds();
        (AttachmentKind::Audio, &note.file, name, mime, seconds)
    } else if let Some(audio) = msg.audio() {
        let mime = audio.mime_type.as_ref().map(ToString::to_string);
        let seconds = audio.duration.seconds();
        let name = audio.file_name.clone();
        (AttachmentKind::Audio, &audio.file, name, mime, seconds)
    } else if let Some(document) = msg.document() {
        let mime = document.mime_type.as_ref().map(ToString::to_string);
        let name = document.file_name.clone();
        (AttachmentKind::Document, &document.file, name, mime, 0)
    } else {
        return None;
    };
    let attachment = Attachment {
        kind,
        file_id: file.id.0.clone(),
        name: name.unwrap_or_default(),
        mime: mime.unwrap_or_default(),
        seconds,
        voice: msg.voice().is_some() || msg.video_note().is_some(),
    };
    Some(match refusal(&attachment, file.size, config, speech) {
        Some(answer) => Incoming::Refused(answer),
        None => Incoming::Turn(attachment),
    })
}

/// Why `attachment` (of `bytes` as Telegram reports) is refused, or `None` when a turn may
/// read it. `speech`: a transcription endpoint is configured.
fn refusal(attachment: &Attachment, bytes: u32, config: &Config, speech: bool) -> Option<String> {
    match attachment.kind {
        AttachmentKind::Audio => {
            let caps = &config.speech;
            if !speech {
                Some(texts::SPEECH_NOT_CONFIGURED.to_string())
            } else if attachment.seconds > caps.max_audio_secs {
                Some(texts::audio_too_long(
                    attachment.seconds,
                    caps.max_audio_secs,
                ))
            } else if bytes > caps.max_audio_bytes {
                let (bytes, max) = (bytes.into(), caps.max_audio_bytes.into());
                Some(texts::file_too_big("recording", bytes, max))
            } else {
                None
            }
        }
        AttachmentKind::Document => {
            let max = config.documents.max_document_bytes;
            if document_kind(&attachment.name, &attachment.mime).is_none() {
                Some(texts::unsupported_document(&attachment.name))
            } else if bytes > max {
                Some(texts::file_too_big("document", bytes.into(), max.into()))
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn files_over_a_cap_or_of_unknown_kinds_are_refused_before_download() {
        struct Case {
            name: &'static str,
            kind: AttachmentKind,
            file: &'static str,
            seconds: u32,
            bytes: u32,
            speech: bool,
            refused: Option<&'static str>,
        }
        let audio = |name, seconds, bytes, speech, refused| Case {
            name,
            kind: AttachmentKind::Audio,
            file: "",
            seconds,
            bytes,
            speech,
            refused,
        };
        let document = |name, file, bytes, refused| Case {
            name,
            kind: AttachmentKind::Document,
            file,
            seconds: 0,
            bytes,
            speech: false,
            refused,
        };
        let cases = [
            audio("a short voice note", 12, 40_000, true, None),
            audio("no endpoint", 12, 40_000, false, Some("HEURIST_SPEECH_URL")),
            audio("just at the length cap", 300, 40_000, true, None),
            audio("too long", 301, 40_000, true, Some("5 min 1 s long")),
            audio(
                "too big",
                60,
                20_000_001,
                true,
                Some("recording is 20.0 MB"),
            ),
            document("a csv", "data.csv", 1_000, None),
            document("a pdf at the cap", "a.pdf", 10_000_000, None),
            document(
                "a pdf too big",
                "a.pdf",
                10_000_001,
                Some("document is 10.0 MB"),
            ),
            document("a zip", "src.zip", 1_000, Some("cannot read “src.zip”")),
        ];
        let config = Config::from_toml(None, Path::new("config/heurist.toml")).unwrap();
        for case in cases {
            let attachment = Attachment {
                kind: case.kind,
                file_id: "f".into(),
                name: case.file.into(),
                mime: String::new(),
                seconds: case.seconds,
                voice: false,
            };
            let got = refusal(&attachment, case.bytes, &config, case.speech);
            match (got, case.refused) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{}: {got}", case.name),
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
            }
        }
    }
}
