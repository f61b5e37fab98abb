//! Speech to text through an OpenAI-compatible `POST {base_url}/audio/transcriptions`
//! (`[speech]`): OpenAI's `whisper-1`, whisper.cpp's server, faster-whisper-server and the
//! like all take the same multipart form (`file`, `model`, `language`, `response_format`) and
//! answer `{"text": ...}`. One attempt per recording: a failure is told to the user, who can
//! send it again.
//!
//! The server is the operator's, its answer is not trusted: it is read up to a bound (as the
//! LLM client reads its answers, with the same reader), and a failure is told to the sender
//! without the server's URL or words ([`TranscriptionError`]): the URL may hold credentials,
//! query keys or an internal host name, and an error page may quote it. The operator's log
//! gets the whole story, with the URL's credentials and query left out.

use std::fmt;
use std::time::Duration;

use super::client::{MAX_ERROR_BODY_BYTES, describe_transport_error, read_up_to};
use crate::config::SpeechConfig;
use crate::texts::media as texts;

/// Longest error body quoted in the log (a server's HTML error page is not worth more).
const MAX_ERROR_CHARS: usize = 300;

/// Longest answer read: `{"text": ...}` of the longest recording is a few tens of kilobytes.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// The configured transcription endpoint.
pub(crate) struct Transcriber {
    http: reqwest::Client,
    /// `{base_url}/audio/transcriptions`.
    url: String,
    model: String,
    language: String,
    api_key: Option<String>,
}

/// Why a recording was not transcribed, told two ways.
#[derive(Debug)]
pub(crate) struct TranscriptionError {
    /// For the sender: what went wrong, without the server's URL or words.
    said: String,
    /// For the operator (the log, `heurist doctor`): the endpoint (without credentials or
    /// query) and the error or the server's answer, cut.
    detail: String,
}

impl TranscriptionError {
    /// What the operator reads: where, and what the server said.
    pub(crate) fn detail(&self) -> &str {
        &self.detail
    }
}

/// What the sender may read.
impl fmt::Display for TranscriptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said)
    }
}

impl std::error::Error for TranscriptionError {}

impl Transcriber {
    /// The endpoint of `config`; `None` when none is configured (`speech.base_url` empty).
    pub(crate) fn new(config: &SpeechConfig) -> anyhow::Result<Option<Self>> {
        if config.base_url.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            http: speech_http(config)?,
            url: format!(
                "{}/audio/transcriptions",
                config.base_url.trim_end_matches('/')
            ),
            model: config.model.clone(),
            language: config.language.clone(),
            api_key: config.api_key.clone(),
        }))
    }

    /// The model named in each request (what `/stats` counts the calls under).
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// The text spoken in `audio` (a file named `file_name`, whose ending tells the server
    /// its format: Telegram's voice notes are `.oga`, Opus in Ogg).
    pub(crate) async fn transcribe(
        &self,
        audio: Vec<u8>,
        file_name: &str,
    ) -> Result<String, TranscriptionError> {
        let file = reqwest::multipart::Part::bytes(audio).file_name(file_name.to_string());
        let mut form = reqwest::multipart::Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        if !self.language.is_empty() {
            form = form.text("language", self.language.clone());
        }
        let mut request = self.http.post(&self.url).multipart(form);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let transport = |e: reqwest::Error| {
            let error = describe_transport_error(e);
            self.failed(texts::transcription_unreachable(&error), &error)
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let cap = if status.is_success() {
            MAX_ANSWER_BYTES
        } else {
            MAX_ERROR_BODY_BYTES
        };
        let (body, cut) = read_up_to(response, cap).await.map_err(transport)?;
        let body = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let quoted: String = body.chars().take(MAX_ERROR_CHARS).collect();
            let said = texts::transcription_answered(status.as_u16());
            return Err(self.failed(said, &format!("HTTP {status}: {quoted}")));
        }
        if cut {
            let said = texts::transcription_too_long(MAX_ANSWER_BYTES >> 20);
            return Err(self.failed(said.clone(), &said));
        }
        transcript(&body).map_err(|e| {
            let said = texts::TRANSCRIPTION_UNREADABLE.to_string();
            self.failed(said, &e.to_string())
        })
    }

    /// The error of a failed request: `said` for the sender, `error` for the log beside the
    /// endpoint's address.
    fn failed(&self, said: String, error: &str) -> TranscriptionError {
        TranscriptionError {
            said,
            detail: format!("POST {}: {error}", without_credentials(&self.url)),
        }
    }
}

/// The HTTP client of the speech endpoints (transcription and synthesis): one request may
/// take `speech.timeout_secs`, a connection 10 s.
pub(super) fn speech_http(config: &SpeechConfig) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(config.timeout_secs.max(1)))
        .connect_timeout(Duration::from_secs(10))
        .build()
}

/// `url` without user name, password and query, which may hold credentials.
pub(super) fn without_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut url) => {
            url.set_query(None);
            // Only a URL that cannot be a base (no host) refuses these; it has neither.
            let _ = url.set_password(None);
            let _ = url.set_username("");
            url.to_string()
        }
        Err(_) => "the configured speech.base_url".to_string(),
    }
}

/// The text of a transcription server's JSON answer.
fn transcript(body: &str) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct TranscriptionAnswer {
        text: String,
    }
    let answer: TranscriptionAnswer = serde_json::from_str(body).map_err(|e| {
        anyhow::anyhow!("the transcription server's answer is not {{\"text\": ...}}: {e}")
    })?;
    Ok(answer.text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logged_address_has_no_credentials() {
        let cases = [
            (
                "user and password",
                "http://u:p4ss@speech.internal:8080/v1/audio/transcriptions",
                "http://speech.internal:8080/v1/audio/transcriptions",
            ),
            (
                "a query key",
                "https://asr.example/v1/audio/transcriptions?key=abc",
                "https://asr.example/v1/audio/transcriptions",
            ),
            ("not a URL", "::", "the configured speech.base_url"),
        ];
        for (name, url, want) in cases {
            assert_eq!(without_credentials(url), want, "{name}");
        }
    }

    #[test]
    fn the_transcript_is_the_text_field() {
        let cases = [
            (
                "openai",
                r#"{"text":" Hello there. "}"#,
                Some("Hello there."),
            ),
            (
                "extra fields",
                r#"{"text":"hi","language":"en","duration":1.5}"#,
                Some("hi"),
            ),
            ("no text", r#"{"error":"nope"}"#, None),
            ("not json", "Internal Server Error", None),
        ];
        for (name, body, want) in cases {
            assert_eq!(transcript(body).ok().as_deref(), want, "{name}");
        }
    }
}
