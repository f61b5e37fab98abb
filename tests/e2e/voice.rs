//! Spoken replies end to end: a voice note is answered by text and then by one voice note,
//! made by a fake OpenAI-compatible `/audio/speech` on 127.0.0.1 whose OGG/Opus bytes reach
//! `sendVoice`; once, even across a kill -9 after the text was shown; `/voice off` stops it;
//! a failing endpoint (or one answering another format) leaves the text answer alone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::media::{FakeWhisper, PLAIN_TOML, VOICE, echoing_llm};
use crate::support::telegram::Call;
use crate::support::*;

/// What the fake speech server answers.
#[derive(Clone, Copy)]
enum Speech {
    /// OGG/Opus bytes.
    Opus,
    /// MP3 bytes (a server that ignores `response_format`).
    Mp3,
    /// A WAV file of [`WAV_SECONDS`] at 22.05 kHz (Piper's rate; a server that ignores
    /// `response_format`), which the bot encodes itself.
    Wav,
    /// A 500.
    Broken,
}

/// How long the WAV answer lasts.
const WAV_SECONDS: f64 = 1.3;

/// An Ogg page of one segment carrying `packet`.
fn ogg_page(packet: &[u8]) -> Vec<u8> {
    let mut page = b"OggS\0\x02".to_vec();
    page.extend_from_slice(&[0; 20]);
    page.push(1);
    page.push(u8::try_from(packet.len()).unwrap());
    page.extend_from_slice(packet);
    page
}

/// A tiny OGG/Opus file: the `OpusHead` page, then `OpusTags`.
fn opus_bytes() -> Vec<u8> {
    let mut head = b"OpusHead\x01\x01\x38\x01".to_vec();
    head.extend_from_slice(&48_000u32.to_le_bytes());
    head.extend_from_slice(&[0, 0, 0]);
    [ogg_page(&head), ogg_page(b"OpusTags-fake")].concat()
}

/// The requests a fake speech server received: each JSON body and its authorization.
type Asked = Arc<Mutex<Vec<(Value, Option<String>)>>>;

/// An OpenAI-compatible speech server under `/v1` that records each request (its JSON body
/// and authorization) and answers as told; the first request never, if told to hang.
struct FakeSpeech {
    url: String,
    asked: Asked,
}

impl FakeSpeech {
    async fn start(answer: Speech, hang_first: bool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let asked: Asked = Arc::default();
        let app = axum::Router::new()
            .route(
                "/v1/audio/speech",
                axum::routing::post(
                    move |State(asked): State<Asked>,
                          headers: HeaderMap,
                          axum::Json(body): axum::Json<Value>| async move {
                        let auth = headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string);
                        let first = {
                            let mut asked = asked.lock().unwrap();
                            asked.push((body, auth));
                            asked.len() == 1
                        };
                        if first && hang_first {
                            std::future::pending::<()>().await;
                        }
                        match answer {
                            Speech::Opus => (StatusCode::OK, opus_bytes()).into_response(),
                            Speech::Mp3 => (StatusCode::OK, b"ID3\x04\0\0\0\0 mp3 audio".to_vec())
                                .into_response(),
                            Speech::Wav => (StatusCode::OK, audio::wav_tone(22_050, WAV_SECONDS))
                                .into_response(),
                            Speech::Broken => {
                                (StatusCode::INTERNAL_SERVER_ERROR, "voice model not loaded")
                                    .into_response()
                            }
                        }
                    },
                ),
            )
            .with_state(asked.clone());
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, asked }
    }

    fn asked(&self) -> Vec<(Value, Option<String>)> {
        self.asked.lock().unwrap().clone()
    }
}

/// A bot with a transcription endpoint hearing `heard`, and spoken replies from `speech`.
async fn speaking_bot(heard: &'static str, speech: &FakeSpeech) -> Harness {
    let whisper = FakeWhisper::start(heard).await;
    let (stt, tts) = (whisper.url.clone(), speech.url.clone());
    Harness::start_with(echoing_llm().await, move |c| {
        c.speech.base_url = stt;
        c.speech.tts_url = tts;
        c.speech.tts_api_key = Some("sk-tts-secret".into());
        c.speech.tts_voice = "nova".into();
        c.limits.daily_tokens = 1_000_000;
        c.telegram.streaming = false;
    })
    .await
}

/// The audio a `sendVoice` carried: teloxide names the file part `attach://<part>`.
fn audio_of(call: &Call) -> String {
    let field = call.params["voice"].as_str().unwrap_or_default();
    let part = field.strip_prefix("attach://").unwrap_or(field);
    call.params[part].as_str().unwrap_or(field).to_string()
}

/// Waits until `chat` was sent `count` voice notes; panics after 10 s.
async fn wait_voices(tg: &FakeTelegram, chat: i64, count: usize) -> Vec<Call> {
    tg.wait_for(|t| {
        let voices = t.voices_to(chat);
        (voices.len() >= count).then_some(voices)
    })
    .await
}

#[tokio::test]
async fn a_voice_note_is_answered_by_text_then_once_by_a_voice_note() {
    let speech = FakeSpeech::start(Speech::Opus, false).await;
    let h = speaking_bot("What is the capital of France?", &speech).await;
    h.tg.serve_file("voice-1", VOICE);
    h.tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let voices = wait_voices(&h.tg, ALICE, 1).await;
    let voice = &voices[0];
    let audio = audio_of(voice);
    assert!(audio.starts_with("OggS"), "OGG: {audio:?}");
    assert!(audio.contains("OpusHead"), "Opus: {audio:?}");
    assert!(voice.at > sent[1].at, "after the text answer");
    assert!(
        voice.params["reply_parameters"]
            .as_str()
            .is_some_and(|r| r.contains("message_id")),
        "a reply to the voice note: {:?}",
        voice.params
    );
    let asked = speech.asked();
    assert_eq!(asked.len(), 1);
    let (body, auth) = &asked[0];
    assert_eq!(body["response_format"], "opus");
    assert_eq!(body["model"], "tts-1");
    assert_eq!(body["voice"], "nova");
    assert_eq!(body["input"], "you said: What is the capital of France?");
    assert_eq!(auth.as_deref(), Some("Bearer sk-tts-secret"));
    // Charged by characters: 40 spoken, 10 tokens, beside the agent's 110 and the transcript's.
    // The charge lands once `sendVoice` has answered, a moment after the fake saw the call.
    let alice = heurist::ids::UserId(ALICE as u64);
    let used = || h.app().store().usage().user_tokens_today(alice);
    let charged = 110 + 11 + 10;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while used() < charged && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(used(), charged);

    // A typed message is answered in text only.
    h.tg.send_text(ALICE, "and now in writing");
    h.tg.wait_messages(ALICE, 3).await;
    // /voice off: the next voice note is answered in text only.
    h.tg.send_text(ALICE, "/voice off");
    let said = h.tg.wait_messages(ALICE, 4).await[3].text();
    assert!(said.contains("text only"), "{said}");
    h.tg.serve_file("voice-2", VOICE);
    h.tg.send_voice_note(ALICE, "voice-2", 3, VOICE.len() as u64);
    h.tg.wait_messages(ALICE, 6).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        h.tg.voices_to(ALICE).len(),
        1,
        "once, and not after /voice off"
    );
    assert_eq!(speech.asked().len(), 1);
    h.stop().await;
}

/// A server that answers WAV whatever was asked: the bot encodes it to Ogg Opus itself, and
/// the voice note Telegram gets is a valid Ogg Opus stream as long as the WAV was.
#[tokio::test]
async fn a_speech_endpoint_answering_wav_is_encoded_to_an_ogg_opus_voice_note() {
    let speech = FakeSpeech::start(Speech::Wav, false).await;
    let h = speaking_bot("What is the capital of France?", &speech).await;
    h.tg.serve_file("voice-1", VOICE);
    h.tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let voices = wait_voices(&h.tg, ALICE, 1).await;
    assert!(voices[0].at > sent[1].at, "after the text answer");
    let field = voices[0].params["voice"].as_str().unwrap_or_default();
    let part = field.strip_prefix("attach://").unwrap_or("voice");
    let ogg = voices[0].part(part).expect("the voice note's bytes");
    let info = audio::opus_info(&ogg);
    assert_eq!((info.channels, info.input_rate), (1, 22_050), "{info:?}");
    assert!(info.pre_skip > 0 && info.packets > 0, "{info:?}");
    assert!(
        (info.seconds - WAV_SECONDS).abs() < 0.1,
        "lasts {} s, the WAV {WAV_SECONDS} s",
        info.seconds
    );
    assert_eq!(
        speech.asked()[0].0["response_format"],
        "opus",
        "opus asked first"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(h.tg.voices_to(ALICE).len(), 1, "once");
    h.stop().await;
}

#[tokio::test]
async fn a_failing_or_non_opus_speech_endpoint_leaves_the_text_answer_alone() {
    for answer in [Speech::Broken, Speech::Mp3] {
        let speech = FakeSpeech::start(answer, false).await;
        let h = speaking_bot("Hello there.", &speech).await;
        h.tg.serve_file("voice-1", VOICE);
        h.tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
        let sent = h.tg.wait_messages(ALICE, 2).await;
        assert_eq!(sent[1].text(), "you said: Hello there.");
        h.tg.wait_for(|_| (!speech.asked().is_empty()).then_some(()))
            .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(h.tg.voices_to(ALICE).is_empty(), "no voice note");
        assert_eq!(h.tg.messages_to(ALICE).len(), 2, "nothing else said");
        h.stop().await;
    }
}

/// Telegram refuses the voice note (`sendVoice` answers 400): the spoken characters are not
/// charged (one that goes through is: `a_voice_note_is_answered_by_text_then_once_by_a_voice_note`).
#[tokio::test]
async fn a_spoken_reply_telegram_refuses_is_not_charged() {
    let speech = FakeSpeech::start(Speech::Opus, false).await;
    let h = speaking_bot("What is the capital of France?", &speech).await;
    let refusal = json!({"ok": false, "error_code": 400,
        "description": "Bad Request: VOICE_MESSAGES_FORBIDDEN"});
    h.tg.script("sendVoice", 400, refusal);
    h.tg.serve_file("voice-1", VOICE);
    h.tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    h.tg.wait_messages(ALICE, 2).await;
    h.tg.wait_for(|t| (!t.calls("sendVoice").is_empty()).then_some(()))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.tg.voices_to(ALICE).is_empty(), "refused");
    let alice = heurist::ids::UserId(ALICE as u64);
    let used = h.app().store().usage().user_tokens_today(alice);
    // The agent's 110 and the transcript's 11; not the 10 of the 40 characters spoken.
    assert_eq!(used, 110 + 11, "a refused voice note is not charged");
    // Her Telegram refuses voice notes: none is synthesised for her again.
    assert!(!h.app().store().voices().wanted_by(alice), "turned off");
    h.stop().await;
}

/// A voice note the user forwards is not their own voice asking: it is transcribed and
/// answered in text, never spoken back.
#[tokio::test]
async fn a_forwarded_voice_note_gets_a_text_answer_only() {
    let speech = FakeSpeech::start(Speech::Opus, false).await;
    let h = speaking_bot("What is the capital of France?", &speech).await;
    h.tg.serve_file("voice-1", VOICE);
    h.tg.send_forwarded_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[1].text(), "you said: What is the capital of France?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(h.tg.calls("sendVoice").is_empty(), "no voice note");
    assert!(speech.asked().is_empty(), "nothing synthesised");
    h.stop().await;
}

/// Never a voice without its text: where Telegram refuses the chat's messages (400), the
/// answer is not spoken either.
#[tokio::test]
async fn no_voice_when_the_text_answer_could_not_be_shown() {
    let speech = FakeSpeech::start(Speech::Opus, false).await;
    let h = speaking_bot("What is the capital of France?", &speech).await;
    let refusal =
        json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"});
    for _ in 0..12 {
        h.tg.script("sendMessage", 400, refusal.clone());
    }
    h.tg.serve_file("voice-1", VOICE);
    h.tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    h.tg.wait_for(|t| {
        let asked = t.calls("sendMessage");
        asked
            .iter()
            .any(|c| c.text().starts_with("you said"))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(h.tg.messages_to(ALICE).is_empty(), "nothing shown");
    assert!(h.tg.calls("sendVoice").is_empty(), "no voice note");
    assert!(speech.asked().is_empty(), "nothing synthesised");
    h.stop().await;
}

/// kill -9 after the text answer is shown, while the reply is being synthesised: the restart
/// sends the voice note once (and the text never again); the key is never logged.
#[tokio::test]
async fn a_crash_after_the_text_was_shown_still_speaks_it_once() {
    let whisper = FakeWhisper::start("Is it raining?").await;
    let speech = FakeSpeech::start(Speech::Opus, true).await;
    let llm = echoing_llm().await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    const KEY: &str = "sk-tts-never-logged-0123";
    let env = [
        ("HEURIST_SPEECH_URL", whisper.url.as_str()),
        ("HEURIST_TTS_URL", speech.url.as_str()),
        ("HEURIST_TTS_API_KEY", KEY),
    ];
    let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &env, PLAIN_TOML);
    tg.serve_file("voice-1", VOICE);
    tg.send_voice_note(ALICE, "voice-1", 3, VOICE.len() as u64);
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while speech.asked().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "not spoken; log:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(tg.messages_to(ALICE).len(), 2, "the text was shown first");
    bot.kill();
    let first_log = bot.logs();
    let bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &env, PLAIN_TOML);
    let voices = wait_voices(&tg, ALICE, 1).await;
    assert!(audio_of(&voices[0]).contains("OpusHead"));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(tg.voices_to(ALICE).len(), 1, "spoken once");
    assert_eq!(
        tg.messages_to(ALICE).len(),
        2,
        "the text answer is not sent again"
    );
    assert_eq!(speech.asked().len(), 2);
    for log in [first_log, bot.logs()] {
        assert!(!log.contains(KEY), "the key is never logged");
    }
}
