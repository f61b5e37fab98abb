//! `[speech]` (voice notes in, spoken answers out) and `[documents]` (documents read into a
//! turn, and the limits of the child process a PDF is parsed in).

use std::path::PathBuf;

use serde::Deserialize;

/// Voice notes and audio files: the OpenAI-compatible transcription endpoint and the caps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeechConfig {
    /// Base URL of `POST {base_url}/audio/transcriptions` (`HEURIST_SPEECH_URL`); empty: voice
    /// notes get a note saying what to configure.
    pub base_url: String,
    pub model: String,
    /// ISO-639-1 language hint; empty: the server detects it.
    pub language: String,
    /// Longer recordings are refused before they are downloaded.
    pub max_audio_secs: u32,
    /// Larger files are refused before they are downloaded (Telegram's bots get up to 20 MB).
    pub max_audio_bytes: u32,
    pub timeout_secs: u64,
    /// `HEURIST_SPEECH_API_KEY`; environment only, never logged.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// Base URL of `POST {tts_url}/audio/speech` (`HEURIST_TTS_URL`), which speaks answers to
    /// voice notes; empty: answers are text only.
    pub tts_url: String,
    pub tts_model: String,
    pub tts_voice: String,
    /// Whether an answer to a voice or video note is also spoken (on by default: it takes
    /// effect wherever `tts_url` is set). Each user can turn it off for themselves
    /// (`/voice off`).
    pub reply_with_voice: bool,
    /// The most characters of an answer spoken (the text message always has all of it).
    pub max_spoken_chars: usize,
    /// `HEURIST_TTS_API_KEY`; environment only, never logged.
    #[serde(skip)]
    pub tts_api_key: Option<String>,
}

impl SpeechConfig {
    /// Whether answers to voice notes are spoken at all (before each user's `/voice`).
    pub(crate) fn speaks(&self) -> bool {
        !self.tts_url.is_empty() && self.reply_with_voice
    }
}

/// Documents read into a turn: how much is downloaded, how much of the text the model gets,
/// and the limits of the child process a PDF is parsed in (see [`crate::agent::jail`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentsConfig {
    pub max_document_chars: usize,
    pub max_document_bytes: u32,
    /// Wall-clock seconds a parser child may take before it is killed.
    pub parser_timeout_secs: u64,
    /// A parser child's address space (RLIMIT_AS), in MiB.
    pub parser_memory_mb: u64,
    /// A parser child's CPU time (RLIMIT_CPU), in seconds.
    pub parser_cpu_secs: u64,
    /// The program run as the parser child; `None`: this very binary. Not a setting: the
    /// in-process tests run inside a test binary, so they name the real `heurist` here.
    #[serde(skip)]
    pub parser_program: Option<PathBuf>,
}
