//! The Prometheus endpoint: a bot started with `[metrics] listen` on a free port serves
//! `GET /metrics`, and after a few turns (answered, failed, refused, one 429 from Telegram, a
//! reflection that learned) every family shows with the values those turns make: in
//! OpenMetrics to Prometheus, and in Prometheus' text format, every sample under its family's
//! help, to anything else (what `promtool check metrics` reads; CI runs it on the scrape this
//! test writes to `HEURIST_SCRAPE_OUT`).

use std::time::Duration;

use heurist::config::McpServerConfig;
use serde_json::json;

use crate::support::mcp::stdio_server;
use crate::support::*;

const LESSON: &str = "Check the service status before restarting it";

/// Agent calls answer "done" ("fail" gets a 503 every time); reflections learn [`LESSON`];
/// options calls offer none.
async fn llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            let lesson = json!({"heuristics": [{"text": LESSON, "skill_name": null}]});
            Reply::text(&format!("```json\n{lesson}\n```"))
        } else if is_options_request(req) {
            Reply::text(r#"{"options": []}"#)
        } else if last_user_text(req) == "fail" {
            Reply::error(503, "overloaded")
        } else {
            Reply::text("done")
        }
    })
    .await
}

/// The value of the sample `name` (with its labels, as exposed), if it is there.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
}

/// What Prometheus 2.42 sends as it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The exposition at `url`, as Prometheus asks for it; `None` while nothing listens there.
async fn scrape(url: &str) -> Option<String> {
    let request = reqwest::Client::new().get(url);
    let response = request
        .header("accept", PROMETHEUS_ACCEPT)
        .send()
        .await
        .ok()?;
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"].to_str().unwrap();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    Some(response.text().await.unwrap())
}

/// Scrapes until `done` holds for the exposition (follow-ups finish in the background).
async fn scrape_until(url: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let text = scrape(url).await;
        let late = tokio::time::Instant::now() > deadline;
        match text {
            Some(text) if done(&text) || late => return text,
            None if late => panic!("nothing serves {url}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test]
async fn a_scrape_after_a_few_turns_shows_every_family() {
    let broken = McpServerConfig {
        command: Some("/nonexistent/mcp-server".into()),
        ..stdio_server("broken")
    };
    let h = Harness::start_with(llm().await, |config| {
        // The fake's lesson comes from no evidence; this test is about where it goes.
        config.learning.grounded_only = false;
        config.metrics.listen = "127.0.0.1:0".into();
        // Alice's second turn finds her budget spent: refused.
        config.limits.daily_tokens = 1;
        config.mcp.servers = vec![stdio_server("desk"), broken];
    })
    .await;
    let address = h
        .bot
        .as_ref()
        .unwrap()
        .metrics_address()
        .expect("metrics on");
    let url = format!("http://{address}/metrics");
    h.tg.script(
        "sendMessage",
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
    );
    // An admin's turn (exempt from the budget): answered, and its reflection learns.
    h.tg.send_text(ADMIN, "restart the service");
    h.tg.wait_messages(ADMIN, 1).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "again");
    h.tg.wait_messages(ALICE, 2).await;
    h.tg.send_text(BOB, "fail");
    h.tg.wait_messages(BOB, 1).await;

    let text = scrape_until(&url, |text| {
        sample(text, "heurist_reflections_total{outcome=\"learned\"}") == Some(1.0)
            && sample(text, "heurist_inbox_pending") == Some(0.0)
    })
    .await;
    let expected = [
        ("heurist_turns_total{outcome=\"answered\"}", 2.0),
        ("heurist_turns_total{outcome=\"failed\"}", 1.0),
        ("heurist_turns_total{outcome=\"refused\"}", 1.0),
        // The three turns that ran showed an answer: each is timed once.
        ("heurist_turn_duration_seconds_count", 3.0),
        ("heurist_turn_first_text_seconds_count", 3.0),
        (
            "heurist_llm_calls_total{kind=\"agent\",model=\"test-model\",outcome=\"error\"}",
            1.0,
        ),
        (
            "heurist_llm_calls_total{kind=\"reflection\",model=\"test-model\",outcome=\"ok\"}",
            1.0,
        ),
        (
            "heurist_telegram_rate_limited_total{method=\"sendMessage\"}",
            1.0,
        ),
        ("heurist_reflections_total{outcome=\"learned\"}", 1.0),
        ("heurist_heuristics{state=\"approved\"}", 1.0),
        ("heurist_heuristics{state=\"pending\"}", 0.0),
        ("heurist_mcp_server_up{server=\"desk\"}", 1.0),
        ("heurist_mcp_server_up{server=\"broken\"}", 0.0),
        ("heurist_queue_chats", 0.0),
        ("heurist_queue_turns", 0.0),
        ("heurist_inbox_pending", 0.0),
        // Bob's failed turn keeps his message for one 🔁 Retry.
        ("heurist_retries_pending", 1.0),
    ];
    for (name, value) in expected {
        assert_eq!(sample(&text, name), Some(value), "{name} in\n{text}");
    }
    let at_least = [
        // Every turn that ran called the agent; the fake reports 100 + 10 tokens, 60 cached.
        (
            "heurist_llm_calls_total{kind=\"agent\",model=\"test-model\",outcome=\"ok\"}",
            2.0,
        ),
        (
            "heurist_llm_tokens_total{kind=\"agent\",model=\"test-model\",direction=\"prompt\"}",
            200.0,
        ),
        (
            "heurist_llm_tokens_total{kind=\"agent\",model=\"test-model\",direction=\"completion\"}",
            20.0,
        ),
        (
            "heurist_llm_tokens_total{kind=\"agent\",model=\"test-model\",direction=\"cached\"}",
            120.0,
        ),
        // Three answers, the budget notice, and the attempt that got the 429.
        ("heurist_telegram_calls_total{method=\"sendMessage\"}", 5.0),
    ];
    for (name, least) in at_least {
        let value = sample(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
        assert!(value >= least, "{name} = {value} < {least}");
    }
    // The latency histograms are cumulative and end in +Inf with every turn.
    let inf = "heurist_turn_duration_seconds_bucket{le=\"+Inf\"}";
    assert_eq!(sample(&text, inf), Some(3.0), "{text}");
    assert_eq!(text.lines().last(), Some("# EOF"));
    plain_scrape_has_help_for_every_sample(&url).await;
    h.stop().await;
}

/// What `curl` and `promtool check metrics` read: Prometheus' text format, every sample
/// under its family's help and type; written to `HEURIST_SCRAPE_OUT` when it is set (CI runs
/// promtool on it).
async fn plain_scrape_has_help_for_every_sample(url: &str) {
    let response = reqwest::get(url).await.unwrap();
    let kind = response.headers()["content-type"].to_str().unwrap();
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    let text = response.text().await.unwrap();
    let answered = "heurist_turns_total{outcome=\"answered\"}";
    assert_eq!(sample(&text, answered), Some(2.0), "{text}");
    let missing = heurist::metrics::samples_without_help(&text);
    assert!(missing.is_empty(), "no help for {missing:?} in\n{text}");
    for family in [
        "heurist_llm_calls_total",
        "heurist_llm_tokens_total",
        "heurist_telegram_calls_total",
        "heurist_reflections_total",
        "heurist_backup_last_success_timestamp_seconds",
        "heurist_store_size_bytes",
        "heurist_data_volume_available_bytes",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family}:\n{text}"
        );
    }
    if let Some(out) = std::env::var_os("HEURIST_SCRAPE_OUT") {
        std::fs::write(out, &text).unwrap();
    }
}

#[tokio::test]
async fn metrics_are_off_unless_configured() {
    let h = Harness::start(FakeLlm::answering("x").await).await;
    assert_eq!(h.bot.as_ref().unwrap().metrics_address(), None);
    h.stop().await;
}

/// The binary as deployed, configured by `HEURIST_METRICS_LISTEN` alone, serves the endpoint
/// and stops it with the bot on SIGTERM.
#[tokio::test]
async fn the_deployed_binary_serves_metrics_where_the_environment_says() {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::answering("done").await;
    let dir = tempfile::tempdir().unwrap();
    // A port free a moment ago (the fakes pick theirs the same way).
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap();
    drop(free);
    let env = [("HEURIST_METRICS_LISTEN", address.to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &env);
    tg.send_text(ALICE, "hello");
    tg.wait_messages(ALICE, 1).await;
    let url = format!("http://{address}/metrics");
    let answered = "heurist_turns_total{outcome=\"answered\"}";
    let text = scrape_until(&url, |text| sample(text, answered) == Some(1.0)).await;
    assert_eq!(sample(&text, answered), Some(1.0), "{text}");
    bot.terminate();
    assert_eq!(
        bot.wait(Duration::from_secs(20)).await,
        Some(0),
        "{}",
        bot.logs()
    );
    assert!(
        scrape(&url).await.is_none(),
        "the endpoint stopped with the bot"
    );
}
