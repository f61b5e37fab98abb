//! A file a message carries that the turn reads itself: a voice note or audio file (to be
//! transcribed) or a document (to be read). Only the Telegram `file_id` and what the handler
//! knew of the file are kept, in the turn's request: the turn downloads and reads it, so a
//! turn resumed after a crash does it again instead of losing the message.

use serde::{Deserialize, Serialize};

/// What kind of file, and so how the turn reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentKind {
    /// A voice note or an audio file: transcribed, then answered as the user's words.
    Audio,
    /// A text-like file or a PDF: its text read into the turn as third-party content.
    Document,
}

/// A file of the message, as the turn fetches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: AttachmentKind,
    /// Telegram's `file_id`, for `getFile`.
    pub file_id: String,
    /// The file's name as sent ("" for a voice note, which has none).
    #[serde(default)]
    pub name: String,
    /// The MIME type Telegram reported ("" if none).
    #[serde(default)]
    pub mime: String,
    /// A recording's length in seconds (0 for documents): what its transcription is
    /// estimated to cost before it runs.
    #[serde(default)]
    pub seconds: u32,
    /// A voice note: the user speaking, their own words. An audio file (named or not) is
    /// anyone's recording, third-party words (see `crate::provenance`). Written only when set;
    /// a record without it reads as an audio file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
}
