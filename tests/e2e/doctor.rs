//! `heurist doctor` against the fakes: a healthy deployment passes (the library's report, and
//! the real binary's exit status and output), and each thing that breaks a deployment gives
//! its line with the fix.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use heurist::Config;
use heurist::config::ModelConfig;
use heurist::ops::doctor::{self, Report, Status};
use heurist::store::Store;
use heurist::store::compaction::CompactionPolicy;
use serde_json::{Value, json};

use crate::support::mcp::stdio_server;
use crate::support::*;

/// Whether the request offers tools (the doctor's tool-calling probe does).
fn offers_tools(request: &Value) -> bool {
    request["tools"].as_array().is_some_and(|t| !t.is_empty())
}

/// A model server that knows both configured models, calls tools natively and says its
/// context as llama.cpp does.
async fn model_server() -> FakeLlm {
    let llm = FakeLlm::start(|request, _| {
        if offers_tools(request) {
            Reply::tool_call("c1", "get_time", json!({}))
        } else {
            Reply::text("OK")
        }
    })
    .await;
    llm.serve_props(json!({"default_generation_settings": {"n_ctx": 8192}}));
    llm
}

/// A SearXNG that answers `status` with `body` on `/search`.
async fn searxng(status: u16, body: Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/search",
        axum::routing::get(move || {
            let body = body.clone();
            async move {
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    axum::Json(body),
                )
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A transcription server under `/v1` that answers `status` with `body`, and counts the WAV
/// recordings it was sent.
async fn whisper(status: u16, body: Value) -> (String, Arc<AtomicUsize>) {
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = heard.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/v1/audio/transcriptions",
        axum::routing::post(move |form: axum::body::Bytes| {
            let (body, counter) = (body.clone(), counter.clone());
            async move {
                if form.windows(4).any(|w| w == b"RIFF") {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    axum::Json(body),
                )
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, heard)
}

/// The doctor's report on the test configuration for these fakes, tweaked.
async fn check(
    tg: &FakeTelegram,
    llm_url: &str,
    dir: &Path,
    tweak: impl FnOnce(&mut Config),
) -> Report {
    let mut config = config(tg, llm_url, dir);
    tweak(&mut config);
    doctor::run(&config).await.unwrap()
}

/// The line about `what`, which must have `status`, say `found` and give a fix with `fix`.
fn expect(report: &Report, what: &str, status: Status, found: &str, fix: Option<&str>) {
    let line = report
        .line(what)
        .unwrap_or_else(|| panic!("no line {what:?} in\n{}", report.render(&[])));
    assert_eq!(line.status, status, "{what}: {line:?}");
    assert!(line.found.contains(found), "{what}: {line:?}");
    match fix {
        Some(fix) => assert!(
            line.fix.as_deref().is_some_and(|f| f.contains(fix)),
            "{what}: {line:?}"
        ),
        None => assert_eq!(line.fix, None, "{what}: {line:?}"),
    }
}

#[tokio::test]
async fn a_healthy_deployment_passes_every_check() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let search = searxng(
        200,
        json!({"results": [{"title": "t", "url": "u", "content": "c"}]}),
    )
    .await;
    let (speech, _) = whisper(200, json!({"text": ""})).await;
    let (voice, _) = tts(200, OPUS.to_vec()).await;
    let report = check(&tg, &llm.url, dir.path(), |config| {
        config.tools.searxng_url = search;
        config.speech.base_url = speech;
        config.speech.tts_url = voice;
        config.learning.embedding_model = "embedder".into();
        config.mcp.servers = vec![stdio_server("probe")];
    })
    .await;
    let text = report.render(&[]);
    assert!(report.healthy(), "{text}");
    assert!(
        report.lines.iter().all(|l| l.status == Status::Ok),
        "{text}"
    );
    expect(&report, "Telegram token", Status::Ok, "the bot is @", None);
    expect(&report, "updates", Status::Ok, "long polling", None);
    expect(&report, "LLM endpoint", Status::Ok, "answers", None);
    expect(
        &report,
        "model test-model",
        Status::Ok,
        "context 8192 tokens (reported by the server)",
        None,
    );
    expect(
        &report,
        "tool calling (test-model)",
        Status::Ok,
        "native tool_calls",
        None,
    );
    expect(
        &report,
        "embeddings model embedder",
        Status::Ok,
        "4 dimensions",
        None,
    );
    expect(
        &report,
        "SearXNG",
        Status::Ok,
        "answers JSON (1 results",
        None,
    );
    expect(
        &report,
        "MCP server probe",
        Status::Ok,
        "started, 9 tools",
        None,
    );
    expect(&report, "data directory", Status::Ok, "is writable", None);
    expect(&report, "allow-list", Status::Ok, "2 users, 1 admins", None);
    expect(
        &report,
        "PDF reader",
        Status::Ok,
        "reads a test PDF in a child process (at most 10 s, 256 MB, 5 s of CPU)",
        None,
    );
    assert!(text.ends_with("Everything works.\n"), "{text}");
}

/// `heurist doctor` run as an operator runs it, configured by the environment: its exit
/// status and what it printed.
async fn doctor_binary(
    tg: &FakeTelegram,
    llm: &str,
    dir: &Path,
    config_file: &Path,
    allowed: &str,
) -> (Option<i32>, String) {
    // Async: the fakes answer on this test's runtime while the binary runs.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_heurist"))
        .arg("doctor")
        .current_dir(dir)
        .env_clear()
        .env("TELOXIDE_TOKEN", "123456:TEST-TOKEN")
        .env("TELOXIDE_API_URL", &tg.url)
        .env("OPENAI_BASE_URL", llm)
        .env("HEURIST_MODELS", "test-model")
        .env("HEURIST_DATA_DIR", dir.join("db"))
        .env("HEURIST_ALLOWED_USERS", allowed)
        .env("HEURIST_CONFIG", config_file)
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test]
async fn the_binary_exits_0_when_healthy_and_1_with_the_fix_otherwise() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("heurist.toml");
    // The config file named is missing: the doctor says so, with the fix.
    let (code, out) = doctor_binary(&tg, &llm.url, dir.path(), &file, "1001").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("✗ configuration: cannot read config file"),
        "{out}"
    );
    assert!(out.contains("    fix: "), "{out}");
    std::fs::write(&file, "").unwrap();
    let (code, out) = doctor_binary(&tg, &llm.url, dir.path(), &file, "1001").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("✓ Telegram token: the bot is @"), "{out}");
    assert!(out.ends_with("Everything works.\n"), "{out}");
    assert!(
        !out.contains("TEST-TOKEN"),
        "the token is never printed: {out}"
    );
    let (code, out) = doctor_binary(&tg, &llm.url, dir.path(), &file, "").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "✗ allow-list: empty: nobody can use the bot\n    fix: set HEURIST_ALLOWED_USERS"
        ),
        "{out}"
    );
}

#[tokio::test]
async fn a_refused_token_says_to_copy_it_again() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    tg.script(
        "getMe",
        401,
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
    );
    let report = check(&tg, &llm.url, dir.path(), |_| {}).await;
    assert!(!report.healthy());
    expect(
        &report,
        "Telegram token",
        Status::Fail,
        "401 Unauthorized",
        Some("@BotFather"),
    );
    expect(&report, "updates", Status::Skipped, "not checked", None);
    assert!(tg.calls("getWebhookInfo").is_empty());
}

#[tokio::test]
async fn a_webhook_left_set_while_polling_is_said_with_the_fix() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    tg.script(
        "getWebhookInfo",
        200,
        json!({"ok": true, "result": {"url": "https://old.example/hook", "has_custom_certificate": false, "pending_update_count": 3}}),
    );
    let report = check(&tg, &llm.url, dir.path(), |_| {}).await;
    assert!(report.healthy(), "polling deletes it at start: a warning");
    expect(
        &report,
        "updates",
        Status::Warn,
        "a webhook is set (https://old.example/hook)",
        Some("HEURIST_WEBHOOK_URL"),
    );
    assert!(
        tg.calls("deleteWebhook").is_empty(),
        "the doctor changes nothing"
    );
}

#[tokio::test]
async fn an_unreachable_llm_says_to_start_it_and_skips_the_models() {
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let report = check(&tg, &FakeLlm::down_url().await, dir.path(), |_| {}).await;
    assert!(!report.healthy());
    expect(
        &report,
        "LLM endpoint",
        Status::Fail,
        "cannot reach http://127.0.0.1:",
        Some("OPENAI_BASE_URL"),
    );
    expect(
        &report,
        "model test-model",
        Status::Skipped,
        "unreachable",
        None,
    );
    expect(
        &report,
        "tool calling (test-model)",
        Status::Skipped,
        "unreachable",
        None,
    );
}

#[tokio::test]
async fn an_unknown_model_says_to_load_it_or_fix_its_id() {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::start(|request, _| {
        if request["model"] != "test-model" {
            Reply::error(404, "model 'other' not found, try pulling it first")
        } else if offers_tools(request) {
            Reply::tool_call("c1", "get_time", json!({}))
        } else {
            Reply::text("OK")
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let report = check(&tg, &llm.url, dir.path(), |_| {}).await;
    assert!(!report.healthy());
    expect(
        &report,
        "model test-model",
        Status::Ok,
        "the server does not report its context",
        None,
    );
    let other = report
        .lines
        .iter()
        .find(|l| l.what.starts_with("model other/"))
        .unwrap();
    assert_eq!(other.status, Status::Fail);
    assert!(other.found.contains("HTTP 404"), "{other:?}");
    assert!(
        other.fix.as_deref().unwrap().contains("HEURIST_MODELS"),
        "{other:?}"
    );
}

/// A model on an endpoint of its own is probed there, with its own key, and each endpoint is
/// checked once: a model its own server does not know fails even though the default server
/// would answer for it (no false ✓), and a model whose own server is down is not checked
/// while the default endpoint's models are (no false ✗).
#[tokio::test]
async fn each_model_is_probed_at_its_own_endpoint_with_its_own_key() {
    const LOCAL_KEY: &str = "local-key-12345678";
    let tg = FakeTelegram::start().await;
    let default = model_server().await;
    let own = FakeLlm::start(|request, _| {
        if request["model"] == "local" && offers_tools(request) {
            Reply::tool_call("c1", "get_time", json!({}))
        } else if request["model"] == "local" {
            Reply::text("OK")
        } else {
            Reply::error(404, "model not found")
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let on = |url: &str, id: &str| ModelConfig {
        base_url: Some(url.to_string()),
        api_key_env: Some("LOCAL_KEY".into()),
        api_key: Some(LOCAL_KEY.into()),
        ..ModelConfig::with_id(id)
    };
    let report = check(&tg, &default.url, dir.path(), |c| {
        c.models.push(on(&own.url, "local"));
        c.models.push(on(&own.url, "unknown-there"));
    })
    .await;
    let text = report.render(&[]);
    expect(&report, "LLM endpoint", Status::Ok, "answers", None);
    expect(
        &report,
        "LLM endpoint for local, unknown-there",
        Status::Ok,
        &own.url,
        None,
    );
    assert_eq!(
        report
            .lines
            .iter()
            .filter(|l| l.what.starts_with("LLM endpoint"))
            .count(),
        2,
        "each endpoint once: {text}"
    );
    expect(&report, "model local", Status::Ok, "answers", None);
    let unknown = report.line("model unknown-there").unwrap();
    assert_eq!(unknown.status, Status::Fail, "{text}");
    assert!(unknown.found.contains("HTTP 404"), "{text}");
    expect(&report, "model test-model", Status::Ok, "answers", None);
    let asked: Vec<String> = own
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(asked, ["local", "unknown-there"], "{text}");
    let bearer = Some(format!("Bearer {LOCAL_KEY}"));
    assert!(
        own.authorizations().iter().all(|a| *a == bearer),
        "{:?}",
        own.authorizations()
    );
    assert!(
        default
            .requests()
            .iter()
            .all(|r| !r["model"].as_str().unwrap().contains("local")),
        "the default endpoint was asked about another endpoint's model"
    );

    let down = FakeLlm::down_url().await;
    let report = check(&tg, &default.url, dir.path(), |c| {
        c.models.push(on(&down, "local"));
    })
    .await;
    let text = report.render(&[]);
    expect(
        &report,
        "LLM endpoint for local",
        Status::Fail,
        "cannot reach http://127.0.0.1:",
        Some("base_url"),
    );
    expect(&report, "model local", Status::Skipped, "unreachable", None);
    expect(&report, "model test-model", Status::Ok, "answers", None);
    assert!(!text.contains(LOCAL_KEY), "{text}");

    // Every model on its own endpoint, no embeddings model: the default one is not used, so
    // it is not checked (its key may well be unset).
    let report = check(&tg, &FakeLlm::down_url().await, dir.path(), |c| {
        c.models = vec![on(&own.url, "local")];
        c.learning.embedding_model = String::new();
    })
    .await;
    let text = report.render(&[]);
    assert!(report.healthy(), "{text}");
    expect(
        &report,
        "LLM endpoint",
        Status::Skipped,
        "base_url of its own",
        None,
    );
    expect(
        &report,
        "tool calling (local)",
        Status::Ok,
        "native tool_calls",
        None,
    );
}

#[tokio::test]
async fn tool_calling_native_as_text_or_none() {
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let as_text = FakeLlm::start(|request, _| {
        if offers_tools(request) {
            Reply::text("```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```")
        } else {
            Reply::text("OK")
        }
    })
    .await;
    let report = check(&tg, &as_text.url, dir.path(), |_| {}).await;
    assert!(report.healthy(), "{}", report.render(&[]));
    expect(
        &report,
        "tool calling (test-model)",
        Status::Ok,
        "written as text",
        None,
    );
    let none = FakeLlm::answering("It is probably noon.").await;
    let report = check(&tg, &none.url, dir.path(), |_| {}).await;
    assert!(!report.healthy());
    expect(
        &report,
        "tool calling (test-model)",
        Status::Fail,
        "without calling the tool",
        Some("--jinja"),
    );
}

#[tokio::test]
async fn the_speech_endpoint_transcribes_a_test_recording_or_says_what_to_fix() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let report = check(&tg, &llm.url, dir.path(), |_| {}).await;
    expect(
        &report,
        "speech endpoint",
        Status::Skipped,
        "not configured",
        None,
    );

    let (url, heard) = whisper(200, json!({"text": ""})).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.speech.base_url = url).await;
    expect(
        &report,
        "speech endpoint",
        Status::Ok,
        "transcribes a test recording",
        None,
    );
    assert_eq!(heard.load(Ordering::SeqCst), 1, "one WAV recording sent");

    let (url, _) = whisper(500, json!({"error": "model not loaded"})).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.speech.base_url = url).await;
    assert!(report.healthy(), "speech is optional: a warning");
    expect(
        &report,
        "speech endpoint",
        Status::Warn,
        "500",
        Some("HEURIST_SPEECH_URL"),
    );
}

/// A speech server that answers every request with `status` and `body`, counting requests
/// that ask for Opus.
async fn tts(status: u16, body: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/v1/audio/speech",
        axum::routing::post(move |axum::Json(request): axum::Json<Value>| {
            let (counter, body) = (counter.clone(), body.clone());
            async move {
                if request["response_format"] == "opus" && request["input"].is_string() {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                (axum::http::StatusCode::from_u16(status).unwrap(), body)
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, asked)
}

/// An Ogg page whose packet is an `OpusHead`.
const OPUS: &[u8] = b"OggS\0\x02\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01\x08OpusHead";

#[tokio::test]
async fn the_speech_synthesis_endpoint_speaks_a_test_sentence_or_says_what_to_fix() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let report = check(&tg, &llm.url, dir.path(), |_| {}).await;
    expect(
        &report,
        "spoken replies",
        Status::Skipped,
        "not configured",
        None,
    );

    let (url, asked) = tts(200, OPUS.to_vec()).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.speech.tts_url = url).await;
    expect(
        &report,
        "spoken replies",
        Status::Ok,
        "speaks a test sentence as Ogg Opus",
        None,
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "one sentence asked for as opus"
    );

    // A server that answers WAV whatever was asked: encoded here, so it passes.
    let (url, _) = tts(200, audio::wav_tone(24_000, 0.5)).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.speech.tts_url = url).await;
    expect(
        &report,
        "spoken replies",
        Status::Ok,
        "speaks a test sentence as WAV, encoded here to Ogg Opus",
        None,
    );

    let (url, _) = tts(200, b"ID3 an mp3".to_vec()).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.speech.tts_url = url).await;
    assert!(report.healthy(), "spoken replies are optional: a warning");
    expect(
        &report,
        "spoken replies",
        Status::Warn,
        "the audio is MP3, which is not encoded here",
        Some("HEURIST_TTS_URL"),
    );
}

#[tokio::test]
async fn searxng_without_json_says_to_enable_the_format() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let search = searxng(403, json!("Forbidden")).await;
    let report = check(&tg, &llm.url, dir.path(), |c| c.tools.searxng_url = search).await;
    assert!(report.healthy(), "web_search is optional: a warning");
    expect(
        &report,
        "SearXNG",
        Status::Warn,
        "HTTP 403",
        Some("formats: [html, json]"),
    );
}

#[tokio::test]
async fn an_mcp_server_that_does_not_start_is_named_with_the_fix() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let report = check(&tg, &llm.url, dir.path(), |config| {
        let mut broken = stdio_server("broken");
        broken.command = Some("/nonexistent/mcp-server".into());
        broken.timeout_secs = 5;
        config.mcp.servers = vec![broken];
        config.mcp.retry_base_ms = 60_000;
    })
    .await;
    expect(
        &report,
        "MCP server broken",
        Status::Warn,
        "does not start",
        Some("[[mcp.servers]]"),
    );
}

#[tokio::test]
async fn an_unwritable_data_dir_and_an_empty_allow_list_fail() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    // A path under a regular file can never be created (even by root, as CI may run).
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(30),
        check(&tg, &llm.url, dir.path(), |config| {
            config.data_dir = file.join("data");
            config.access.allowed_users.clear();
            config.access.admins.clear();
        }),
    )
    .await
    .unwrap();
    assert!(!report.healthy());
    expect(
        &report,
        "data directory",
        Status::Fail,
        "cannot write in",
        Some("HEURIST_DATA_DIR"),
    );
    expect(
        &report,
        "allow-list",
        Status::Fail,
        "nobody can use the bot",
        Some("HEURIST_ALLOWED_USERS"),
    );
}

/// The backups line: nothing to warn about on a new deployment, a warning with the fix for a
/// store without a backup or with one older than twice the interval, the age otherwise, and
/// backups off said as such.
#[tokio::test]
async fn the_last_backups_age_is_shown_and_warned_about_past_twice_the_interval() {
    let tg = FakeTelegram::start().await;
    let llm = model_server().await;
    let dir = tempfile::tempdir().unwrap();
    let daily = |config: &mut Config| config.backup.every_hours = 24;
    let report = check(&tg, &llm.url, dir.path(), daily).await;
    expect(&report, "backups", Status::Ok, "no store to back up", None);

    let config = config(&tg, &llm.url, dir.path());
    let (store, _) =
        Store::open_data_dir(&config.data_dir, 1 << 20, CompactionPolicy::NEVER).unwrap();
    let report = check(&tg, &llm.url, dir.path(), daily).await;
    let fix = Some("cannot write a backup");
    expect(&report, "backups", Status::Warn, "no backup in", fix);

    let written = store
        .write_backup(&config.backup_dir(), chrono::Utc::now())
        .unwrap();
    let report = check(&tg, &llm.url, dir.path(), daily).await;
    let fresh = "the last one 0 min ago in";
    expect(&report, "backups", Status::Ok, fresh, None);
    assert!(report.healthy());

    let three_days = std::time::Duration::from_secs(3 * 86_400);
    let file = std::fs::File::options()
        .write(true)
        .open(&written.path)
        .unwrap();
    file.set_modified(std::time::SystemTime::now() - three_days)
        .unwrap();
    let report = check(&tg, &llm.url, dir.path(), daily).await;
    let late = "is 3 d old, past twice the interval (24 h)";
    expect(&report, "backups", Status::Warn, late, fix);
    assert!(report.healthy(), "a warning, not a failure");

    let report = check(&tg, &llm.url, dir.path(), |c| c.backup.every_hours = 0).await;
    expect(&report, "backups", Status::Ok, "none scheduled", None);
}
