//! Speech to text through an OpenAI-compatible `POST {base_url}/audio/transcriptions`
//! (`[speech]`): OpenAI's `whisper-1`, whisper.cpp's server, faster-whisper-server and the
//! like all take the same multipart form (`file`, `model`, `language`, `response_format`) and
//! answer `{"text": ...}`. One attempt per recording: a failure is told to the user, who can
//! send it again.

use std::time::Duration;

use crate::config::SpeechConfig;

/// Longest error body quoted in a failure (a server's HTML error page is not worth more).
const MAX_ERROR_CHARS: usize = 300;

/// The configured transcription endpoint.
pub(crate) struct Transcriber {
    http: reqwest::Client,
    /// `{base_url}/audio/transcriptions`.
    url: String,
    model: String,
    language: String,
    api_key: Option<String>,
}

impl Transcriber {
    /// The endpoint of `config`; `None` when none is configured (`speech.base_url` empty).
    pub(crate) fn new(config: &SpeechConfig) -> anyhow::Result<Option<Self>> {
        if config.base_url.is_empty() {
            return Ok(None);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Some(Self {
            http,
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
    ) -> anyhow::Result<String> {
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
        let response = request.send().await?;
        let status = response.status();
        let body = response.text().await?;
        if !status.is_success() {
            let said: String = body.chars().take(MAX_ERROR_CHARS).collect();
            anyhow::bail!("the transcription server answered {status}: {said}");
        }
        transcript(&body)
    }
}

/// The text of a transcription server's JSON answer.
fn transcript(body: &str) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        text: String,
    }
    let answer: Answer = serde_json::from_str(body).map_err(|e| {
        anyhow::anyhow!("the transcription server's answer is not {{\"text\": ...}}: {e}")
    })?;
    Ok(answer.text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
