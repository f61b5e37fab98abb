//! The doctor's checks of what the tools use: SearXNG answers a query in JSON (a 403 is the
//! instance without the `json` format), each MCP server starts and lists its tools, through
//! the bot's own MCP client, so what works here works for the bot, and the speech endpoint
//! transcribes a tenth of a second of silence, through the bot's own transcriber, and the
//! speech synthesis endpoint speaks one short sentence as Ogg Opus, through its own client.

use super::context::{Checked, Context};
use super::report::Line;
use crate::agent::mcp::{Mcp, ServerStatus};
use crate::llm::synthesis::Synthesizer;
use crate::llm::transcription::Transcriber;
use crate::texts::ops as texts;

/// A query as `web_search` sends it, read as SearXNG's JSON.
pub(super) fn searxng<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let url = &context.config.tools.searxng_url;
        if url.is_empty() {
            return vec![Line::skipped(texts::SEARXNG, texts::NOT_CONFIGURED)];
        }
        // Config validation already refused a `searxng_url` that is not an http(s) URL.
        let Ok(mut endpoint) = reqwest::Url::parse(url) else {
            return vec![Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(url),
                texts::SEARXNG_FIX,
            )];
        };
        let path = format!("{}/search", endpoint.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        let response = context
            .http
            .get(endpoint)
            .query(&[("q", "heurist"), ("format", "json")])
            .send()
            .await;
        let line = match response {
            Ok(response) if response.status() == reqwest::StatusCode::FORBIDDEN => Line::warn(
                texts::SEARXNG,
                texts::SEARXNG_NO_JSON,
                texts::SEARXNG_NO_JSON_FIX,
            ),
            Ok(response) if !response.status().is_success() => Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(&format!("HTTP {}", response.status())),
                texts::SEARXNG_FIX,
            ),
            Ok(response) => match response.json::<serde_json::Value>().await {
                Ok(answer) if answer["results"].is_array() => Line::ok(
                    texts::SEARXNG,
                    texts::searxng_ok(answer["results"].as_array().map_or(0, Vec::len)),
                ),
                Ok(_) => Line::warn(
                    texts::SEARXNG,
                    texts::searxng_failed("the answer has no results list"),
                    texts::SEARXNG_FIX,
                ),
                Err(e) => Line::warn(
                    texts::SEARXNG,
                    texts::searxng_failed(&crate::error_chain(&e.without_url())),
                    texts::SEARXNG_FIX,
                ),
            },
            Err(e) => Line::warn(
                texts::SEARXNG,
                texts::searxng_failed(&crate::error_chain(&e.without_url())),
                texts::SEARXNG_FIX,
            ),
        };
        vec![line]
    })
}

/// A test recording: 0.1 s of silence, 16 kHz mono 16-bit PCM, as a WAV file.
fn silence_wav() -> Vec<u8> {
    const RATE: u32 = 16_000;
    let data_len: u32 = RATE / 10 * 2;
    let mut wav = Vec::with_capacity(44 + data_len as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // the format chunk's size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes());
    wav.extend_from_slice(&(RATE * 2).to_le_bytes()); // bytes per second
    wav.extend_from_slice(&2u16.to_le_bytes()); // bytes per frame
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.resize(44 + data_len as usize, 0);
    wav
}

/// The speech endpoint, when one is configured, transcribes a test recording (optional: the
/// bot answers without it, voice notes with an error).
pub(super) fn speech<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let transcriber = match Transcriber::new(&context.config.speech) {
            Ok(Some(transcriber)) => transcriber,
            Ok(None) => return vec![Line::skipped(texts::SPEECH, texts::NOT_CONFIGURED)],
            Err(e) => {
                let found = texts::speech_failed(&format!("{e:#}"));
                return vec![Line::warn(texts::SPEECH, found, texts::SPEECH_FIX)];
            }
        };
        let line = match transcriber.transcribe(silence_wav(), "doctor.wav").await {
            Ok(_) => Line::ok(texts::SPEECH, texts::speech_ok(transcriber.model())),
            Err(e) => Line::warn(
                texts::SPEECH,
                texts::speech_failed(e.detail()),
                texts::SPEECH_FIX,
            ),
        };
        vec![line]
    })
}

/// The sentence the speech synthesis check has spoken.
const TEST_SENTENCE: &str = "Hello from Heurist.";

/// The speech synthesis endpoint, when spoken replies are on, speaks one short sentence as Ogg
/// Opus, or as WAV encoded here (optional: without it, answers are text only).
pub(super) fn voice<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let synthesizer = match Synthesizer::new(&context.config.speech) {
            Ok(Some(synthesizer)) => synthesizer,
            Ok(None) => return vec![Line::skipped(texts::VOICE, texts::NOT_CONFIGURED)],
            Err(e) => {
                let found = texts::voice_failed(&format!("{e:#}"));
                return vec![Line::warn(texts::VOICE, found, texts::VOICE_FIX)];
            }
        };
        let line = match synthesizer.speak(TEST_SENTENCE).await {
            Ok(speech) => Line::ok(
                texts::VOICE,
                texts::voice_ok(
                    synthesizer.model(),
                    speech.ogg_opus.len(),
                    speech.from.name(),
                ),
            ),
            Err(e) => Line::warn(
                texts::VOICE,
                texts::voice_failed(&format!("{e:#}")),
                texts::VOICE_FIX,
            ),
        };
        vec![line]
    })
}

/// Starts every configured MCP server as the bot does, waits for each first start, and says
/// how it went; the servers stop when the client is dropped at the end.
pub(super) fn mcp<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        if context.config.mcp.servers.is_empty() {
            return Vec::new();
        }
        let mcp = Mcp::start(&context.config.mcp, &context.config.data_dir);
        mcp.ready().await;
        mcp.catalog()
            .servers
            .into_iter()
            .map(|server| {
                let what = texts::mcp(&server.name);
                match server.status {
                    ServerStatus::Up { tools, left_out } => {
                        Line::ok(what, texts::mcp_ok(tools, left_out.len()))
                    }
                    ServerStatus::Down { error, .. } => {
                        Line::warn(what, texts::mcp_down(&error), texts::MCP_FIX)
                    }
                    ServerStatus::Starting => Line::warn(what, texts::MCP_STARTING, texts::MCP_FIX),
                }
            })
            .collect()
    })
}
