//! Text to speech through an OpenAI-compatible `POST {tts_url}/audio/speech` (`[speech]
//! tts_url`): OpenAI's `tts-1`, Kokoro-FastAPI and openedai-speech all take
//! `{"model", "voice", "input", "response_format"}` and answer the audio's bytes. The answer
//! is asked for as `opus`, which these servers give as Opus in Ogg: what Telegram plays as a
//! voice note.
//!
//! The bytes are checked to be Ogg Opus (an `OggS` page whose first packet is `OpusHead`)
//! before anything is sent: a server that answers another format is refused with an error,
//! never passed off as a voice note. (Encoding it in-process would need libopus, a C library
//! built from source by the Rust crates that wrap it; not done here.) Like the transcription
//! endpoint, the server's URL is kept out of what the error says beyond its host and path.

use super::client::{describe_transport_error, read_up_to};
use super::transcription::{speech_http, without_credentials};
use crate::config::SpeechConfig;

/// Longest answer read: a spoken answer of `max_spoken_chars` is a few hundred kilobytes of
/// Opus; Telegram takes voice notes up to 50 MB.
const MAX_AUDIO_BYTES: usize = 20 << 20;

/// Longest error body quoted in the log.
const MAX_ERROR_CHARS: usize = 300;

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

    /// `text` spoken, as Ogg Opus bytes; the error says where and what went wrong (for the
    /// log: no user reads it).
    pub(crate) async fn speak(&self, text: &str) -> anyhow::Result<Vec<u8>> {
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
        if !is_ogg_opus(&bytes) {
            anyhow::bail!(
                "POST {at}: the answer is not Ogg Opus (asked for response_format \"opus\"; \
                 its first bytes: {:?})",
                String::from_utf8_lossy(&bytes[..bytes.len().min(8)])
            );
        }
        Ok(bytes)
    }
}

/// Whether `bytes` start as an Ogg Opus file does: an `OggS` page (version 0) whose body
/// starts with the `OpusHead` identification header (RFC 7845).
pub(crate) fn is_ogg_opus(bytes: &[u8]) -> bool {
    let Some(header) = bytes.get(..27) else {
        return false;
    };
    if &header[..4] != b"OggS" || header[4] != 0 {
        return false;
    }
    let body = 27 + usize::from(header[26]);
    bytes
        .get(body..)
        .is_some_and(|rest| rest.starts_with(b"OpusHead"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ogg page of one segment carrying `packet`.
    fn page(packet: &[u8]) -> Vec<u8> {
        let mut page = b"OggS\0\x02".to_vec();
        page.extend_from_slice(&[0; 20]);
        page.push(1);
        page.push(u8::try_from(packet.len()).unwrap());
        page.extend_from_slice(packet);
        page
    }

    #[test]
    fn only_ogg_opus_passes() {
        let cases = [
            ("ogg opus", page(b"OpusHead\x01\x01"), true),
            ("ogg vorbis", page(b"\x01vorbis"), false),
            (
                "mp3",
                b"ID3\x04\0\0\0\0\0\0 mp3 bytes, long enough to be looked at".to_vec(),
                false,
            ),
            ("a torn page", b"OggS\0\x02".to_vec(), false),
            ("nothing", Vec::new(), false),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(is_ogg_opus(&bytes), want, "{name}");
        }
    }
}
