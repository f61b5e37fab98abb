//! Text to speech through an OpenAI-compatible `POST {tts_url}/audio/speech` (`[speech]
//! tts_url`): OpenAI's `tts-1`, Kokoro-FastAPI and openedai-speech all take
//! `{"model", "voice", "input", "response_format"}` and answer the audio's bytes. The answer
//! is asked for as `opus`, which these servers give as Opus in Ogg: what Telegram plays as a
//! voice note.
//!
//! What comes back is made a voice note by [`super::voice_note`] on a blocking thread: Ogg
//! Opus passes as it is, WAV (what a server that ignores `response_format` gives most often)
//! is encoded here by libopus, anything else is refused with an error naming its format,
//! never passed off as a voice note. Like the transcription endpoint, the server's URL is kept
//! out of what the error says beyond its host and path.

use super::client::{describe_transport_error, read_up_to};
use super::transcription::{speech_http, without_credentials};
use super::voice_note::{Format, voice_note};
use crate::config::SpeechConfig;

/// Longest answer read: a spoken answer of `max_spoken_chars` is a few hundred kilobytes of
/// Opus, or a few megabytes of WAV; Telegram takes voice notes up to 50 MB.
const MAX_AUDIO_BYTES: usize = 20 << 20;

/// Longest error body quoted in the log.
const MAX_ERROR_CHARS: usize = 300;

/// Spoken text, ready to send as a voice note.
pub(crate) struct Speech {
    /// Ogg Opus bytes.
    pub(crate) ogg_opus: Vec<u8>,
    /// The format the endpoint answered in (Ogg Opus, or what was encoded here).
    pub(crate) from: Format,
}

/// The configured speech synthesis endpoint.
pub(crate) struct Synthesizer {
    http: reqwest::Client,
    /// `{tts_url}/audio/speech`.
    url: String,
    model: String,
    voice: String,
    api_key: Option<String>,
}

impl Synthesizer {
    /// The endpoint of `config`; `None` when spoken replies are off (`tts_url` empty, or
    /// `reply_with_voice = false`).
    pub(crate) fn new(config: &SpeechConfig) -> anyhow::Result<Option<Self>> {
        if !config.speaks() {
            return Ok(None);
        }
        Ok(Some(Self {
            http: speech_http(config)?,
            url: format!("{}/audio/speech", config.tts_url.trim_end_matches('/')),
            model: config.tts_model.clone(),
            voice: config.tts_voice.clone(),
            api_key: config.tts_api_key.clone(),
        }))
    }

    /// The model named in each request (what `/stats` counts the calls under).
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// `text` spoken, as Ogg Opus; the error says where and what went wrong (for the log: no
    /// user reads it).
    pub(crate) async fn speak(&self, text: &str) -> anyhow::Result<Speech> {
        let body = serde_json::json!({
            "model": self.model,
            "voice": self.voice,
            "input": text,
            "response_format": "opus",
        });
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let at = without_credentials(&self.url);
        let transport =
            |e: reqwest::Error| anyhow::anyhow!("POST {at}: {}", describe_transport_error(e));
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let (bytes, cut) = read_up_to(response, MAX_AUDIO_BYTES)
            .await
            .map_err(transport)?;
        if !status.is_success() {
            let quoted: String = String::from_utf8_lossy(&bytes)
                .chars()
                .take(MAX_ERROR_CHARS)
                .collect();
            anyhow::bail!("POST {at}: HTTP {status}: {quoted}");
        }
        if cut {
            anyhow::bail!("POST {at}: the audio is over {} MB", MAX_AUDIO_BYTES >> 20);
        }
        let made = tokio::task::spawn_blocking(move || voice_note(bytes)).await?;
        let (ogg_opus, from) = made
            .map_err(|e| anyhow::anyhow!("POST {at}: asked for response_format \"opus\": {e}"))?;
        Ok(Speech { ogg_opus, from })
    }
}
