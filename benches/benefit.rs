//! Does what the bot learns change what the model does? Task families where a lesson matters,
//! run through the real bot (dispatcher, agent loop, MCP client, reflection, sled) with
//! learning on and with learning off, in the same run.
//!
//! The tools are the in-process "desk" MCP server (`tests/e2e/support/desk.rs`), whose
//! conventions only its errors tell:
//! - tool-argument conventions: `ticket` ids (`TCK-004411`), `booking` dates (`14.12.2026`),
//!   `stock` SKUs (`SKU-AB12`);
//! - a procedure where the order matters: `lock` a service before `deploy`;
//! - an output convention a user insists on: temperatures in °F as well ("No, always give…").
//!
//! Each family has training tasks, asked in one chat (Alice's, then one per family), then
//! held-out variants, each asked by a new user in a fresh chat, so only what the bot learned (never the chat history)
//! can carry over. With learning on, the reflections run as in production; the lessons an MCP
//! server's words taught wait for review (`review = "external"`, the default), and the
//! benchmark approves them as an admin does in `/heuristics pending`. With learning off
//! (`reflect = false`) nothing is learned. Reported per family and overall, on the held-out
//! tasks: first call in the right form, first call exactly right, tool errors, LLM calls and
//! tokens per task, task success, the injected block's tokens, and whether every task got an
//! honest answer (never the empty-answer placeholder).
//!
//! ```text
//! cargo bench --bench benefit                      # against the fake model below
//! cargo bench --bench benefit -- --smoke           # the same, goals asserted (CI)
//! HEURIST_BENCH_LLM_URL=http://127.0.0.1:8081/v1 HEURIST_BENCH_MODEL=qwen \
//!   HEURIST_BENCH_API_KEY=local-key cargo bench --bench benefit
//! ```
//!
//! `HEURIST_BENCH_FAMILIES=ticket,stock` runs only the families whose names start so;
//! `HEURIST_BENCH_DUMP=<file>` appends every exchange with the model as a JSON line;
//! `--verbose` prints each held-out task's calls and answer.
//!
//! Without `HEURIST_BENCH_LLM_URL` the model is a fake that follows lessons: it writes an
//! argument in the house form only when the prompt tells it the form (and fixes a call from
//! the error otherwise), and its reflection turns the evidence it is shown into lessons, plus
//! the vague ones Qwen2.5-Coder-1.5B wrote (which must not be stored). That proves the
//! plumbing: evidence → reflection → quality gate → storage → retrieval → prompt.
//! Against a real server, it measures the model.

#[path = "../tests/e2e/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use heurist::ids::UserId;
use heurist::learning::without_context;
use serde_json::{Value, json};
use support::desk::{self, DeskCall, DeskServer};
use support::{ALICE, FakeLlm, FakeTelegram, Reply, is_options_request, is_reflection_request};

/// Training chats after Alice's: one per family.
const FIRST_TRAINER: i64 = 4000;

/// The first user of the held-out tasks; each task gets the next one.
const FIRST_HELD_OUT_USER: i64 = 5001;

/// What the model's answer said when there was none, before the agent loop helped weak
/// models: no user may see it.
const EMPTY_PLACEHOLDER: &str = "(The model returned an empty answer.)";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A tool argument's house form, which only the tool's error tells.
    Convention,
    /// Tools that must be called in an order.
    Procedure,
    /// How the answer must be written.
    Output,
}

struct Family {
    name: &'static str,
    kind: Kind,
    /// Asked by Alice, in order, in one chat.
    train: &'static [&'static str],
    /// Asked by a new user each, with what the task's first call should be.
    held_out: &'static [(&'static str, &'static str)],
}

const FAMILIES: &[Family] = &[
    Family {
        name: "ticket ids",
        kind: Kind::Convention,
        train: &[
            "What is the status of support ticket 4411?",
            "Is ticket 2093 still open?",
        ],
        held_out: &[
            ("Can you check support ticket 5127 for me?", "TCK-005127"),
            ("Which team is handling ticket 98?", "TCK-000098"),
            ("Ticket 31337: who is it waiting for?", "TCK-031337"),
        ],
    },
    Family {
        name: "booking dates",
        kind: Kind::Convention,
        train: &[
            "Which meeting room is booked on 2026-12-14?",
            "Is any room booked on 2027-01-05?",
        ],
        held_out: &[
            ("What room is booked on 2026-12-21?", "21.12.2026"),
            ("Check the room bookings for 2027-02-03", "03.02.2027"),
            ("Which meeting room is taken on 2027-03-15?", "15.03.2027"),
        ],
    },
    Family {
        name: "stock SKUs",
        kind: Kind::Convention,
        train: &[
            "How many units of ab12 are in stock?",
            "How many cd34 items does the warehouse hold?",
        ],
        held_out: &[
            ("How many units of item ef56 do we have?", "SKU-EF56"),
            ("Stock level for gh78 in the warehouse, please", "SKU-GH78"),
            ("Do we still have jk90 in stock?", "SKU-JK90"),
        ],
    },
    Family {
        name: "lock before deploy",
        kind: Kind::Procedure,
        train: &[
            "Deploy the api service",
            "Please deploy the billing service",
        ],
        held_out: &[
            ("Deploy the search service", "search"),
            (
                "Deploy the latest build of the payments service",
                "payments",
            ),
            ("Can you deploy the auth service now?", "auth"),
        ],
    },
    Family {
        name: "temperatures in °F",
        kind: Kind::Output,
        train: &[
            "What's the weather in Paris?",
            "No, always give temperatures in Fahrenheit as well as Celsius.",
        ],
        held_out: &[
            ("What's the weather in Oslo today?", "Oslo"),
            ("How warm is it in Madrid right now?", "Madrid"),
            ("Tell me the weather in Berlin", "Berlin"),
        ],
    },
];

// ---------------------------------------------------------------------------------------
// The model: a recorder in front of the fake or a real server.

/// One chat completion the bot asked for, with what it got.
#[derive(Clone)]
struct Exchange {
    request: Value,
    response: Value,
}

/// A proxy in front of the model that keeps every exchange.
#[derive(Clone)]
struct Recorder {
    url: String,
    upstream: String,
    client: reqwest::Client,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
}

impl Recorder {
    async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let recorder = Self {
            url: format!("http://{}/v1", listener.local_addr().unwrap()),
            upstream: upstream.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(1800))
                .build()
                .unwrap(),
            exchanges: Arc::default(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(recorder.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        recorder
    }

    fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }
}

/// Forwards a request under `/v1` (and llama.cpp's `/props`) to the upstream server.
async fn forward(
    State(recorder): State<Recorder>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let base = recorder.upstream.trim_end_matches("/v1");
    let target = match path.strip_prefix("/v1") {
        Some(rest) => format!("{}{rest}", recorder.upstream),
        None => format!("{base}{path}"),
    };
    let mut upstream = recorder.client.request(method, &target).body(body.clone());
    for name in ["authorization", "content-type"] {
        if let Some(value) = headers.get(name) {
            upstream = upstream.header(name, value.as_bytes());
        }
    }
    let reply = match upstream.send().await {
        Ok(reply) => reply,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = axum::http::StatusCode::from_u16(reply.status().as_u16()).unwrap();
    let content_type = reply.headers().get("content-type").cloned();
    let answer = reply.bytes().await.unwrap_or_default();
    if path.ends_with("/chat/completions")
        && let (Ok(request), Ok(response)) = (
            serde_json::from_slice::<Value>(&body),
            serde_json::from_slice::<Value>(&answer),
        )
    {
        recorder
            .exchanges
            .lock()
            .unwrap()
            .push(Exchange { request, response });
    }
    let mut response = (status, answer).into_response();
    if let Some(content_type) = content_type {
        response.headers_mut().insert("content-type", content_type);
    }
    response
}

/// The last user message that is the user's (not the bot's "answer now" nudge).
fn asked(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .find(|c| !heurist::agent::is_answer_now(c))
        .unwrap_or_default()
        .to_string()
}

/// The messages of the request's current turn: after the user's message.
fn this_turn(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| !heurist::agent::is_answer_now(c))
        })
        .map_or(0, |i| i + 1);
    messages[start..].to_vec()
}

// ---------------------------------------------------------------------------------------
// The fake model: follows lessons, learns from evidence.

/// What in a prompt tells the fake each family's convention.
fn knows(family: &Family, prompt: &str) -> bool {
    match family.name {
        "ticket ids" => prompt.contains("TCK-"),
        "booking dates" => prompt.contains("DD.MM.YYYY"),
        "stock SKUs" => prompt.contains("SKU-"),
        "lock before deploy" => prompt.contains("call lock"),
        _ => prompt.contains("Fahrenheit") || prompt.contains("°F"),
    }
}

/// The family a task's text belongs to.
fn family_of(task: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| {
        f.train.iter().any(|t| task.ends_with(t))
            || f.held_out.iter().any(|(t, _)| task.ends_with(t))
    })
}

/// The word of a task a naive model passes: the number, date, code, service or city.
fn naive_argument(family: &Family, task: &str) -> String {
    let words: Vec<&str> = task
        .split(|c: char| c.is_whitespace() || c == '?' || c == ':' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    match family.name {
        "ticket ids" => words
            .iter()
            .find(|w| w.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or(&"1")
            .to_string(),
        "booking dates" => words
            .iter()
            .find(|w| w.contains('-'))
            .unwrap_or(&"")
            .to_string(),
        "stock SKUs" => words
            .iter()
            .find(|w| w.len() == 4 && w.bytes().any(|b| b.is_ascii_digit()))
            .unwrap_or(&"")
            .to_string(),
        "lock before deploy" => {
            let at = words.iter().position(|w| *w == "service").unwrap_or(1);
            words[at.saturating_sub(1)].to_string()
        }
        _ => words
            .iter()
            .find(|w| {
                w.chars().next().is_some_and(char::is_uppercase)
                    && !["What's", "How", "Tell", "No"].contains(w)
            })
            .unwrap_or(&"Paris")
            .to_string(),
    }
}

fn house_form(family: &Family, naive: &str) -> String {
    match family.name {
        "ticket ids" => desk::ticket_id(naive),
        "booking dates" => desk::house_date(naive).unwrap_or_default(),
        "stock SKUs" => desk::house_sku(naive),
        _ => naive.to_string(),
    }
}

fn call(tool: &str, key: &str, value: &str) -> Reply {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Reply::tool_call(
        &format!("call-{n}"),
        &format!("desk__{tool}"),
        json!({key: value}),
    )
}

fn agent_reply(request: &Value) -> Reply {
    let asked = asked(request);
    let task = without_context(&asked);
    let Some(family) = family_of(task) else {
        return Reply::text("Done.");
    };
    let turn = this_turn(request);
    let results: Vec<&str> = turn
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let told = knows(family, &asked)
        || results
            .iter()
            .any(|r| r.contains("Learned about this tool") && knows(family, r));
    let naive = naive_argument(family, task);
    // What the tool said, without the bot's data delimiters.
    let last: String = results
        .last()
        .copied()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.contains("<<<") && !line.contains(">>>") && !line.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let last = last.as_str();
    let fixed = last
        .split_once("(this one is ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(value, _)| value.to_string());
    match (family.name, results.len()) {
        ("temperatures in °F", _) if task.starts_with("No,") => {
            Reply::text("Paris: 16 °C (61 °F), light rain.")
        }
        ("temperatures in °F", 0) => call("weather", "city", &naive),
        ("temperatures in °F", _) => {
            let celsius: i64 = last
                .split_whitespace()
                .find_map(|w| w.parse().ok())
                .unwrap_or(10);
            if told {
                Reply::text(&format!(
                    "{naive}: {celsius} °C ({} °F), light rain.",
                    celsius * 9 / 5 + 32
                ))
            } else {
                Reply::text(&format!("{naive}: {celsius} °C, light rain."))
            }
        }
        ("lock before deploy", 0) if told => call("lock", "service", &naive),
        ("lock before deploy", 0) => call("deploy", "service", &naive),
        ("lock before deploy", _) if last.contains("not locked") => call("lock", "service", &naive),
        ("lock before deploy", _) if last.contains("Locked") => call("deploy", "service", &naive),
        ("lock before deploy", _) => Reply::text(last),
        (_, 0) => {
            let (tool, key) = match family.name {
                "ticket ids" => ("ticket", "id"),
                "booking dates" => ("booking", "date"),
                _ => ("stock", "sku"),
            };
            let value = if told {
                house_form(family, &naive)
            } else {
                naive
            };
            call(tool, key, &value)
        }
        _ => match fixed {
            Some(value) if results.len() < 3 => {
                let (tool, key) = match family.name {
                    "ticket ids" => ("ticket", "id"),
                    "booking dates" => ("booking", "date"),
                    _ => ("stock", "sku"),
                };
                call(tool, key, &value)
            }
            _ => Reply::text(last.trim_start_matches("error: ")),
        },
    }
}

/// The fake's reflection: a lesson from each failed call's error, shown in the evidence, and
/// from a user's insistence; and every time, the vague lessons a small model writes.
fn reflection_reply(request: &Value) -> Reply {
    let prompt = asked(request);
    let mut lessons: Vec<String> = Vec::new();
    let mut lines = prompt.lines();
    while let Some(line) = lines.next() {
        let Some((call, error)) = line.split_once("→ failed: ") else {
            continue;
        };
        let tool = call
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        // A server's words come delimited, on the lines after.
        let error = if line.contains("the tool reported an error") {
            lines
                .by_ref()
                .skip_while(|l| l.starts_with("<<<"))
                .take_while(|l| !l.starts_with(">>>"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            error.split(';').next().unwrap_or(error).to_string()
        };
        let rule = error
            .split_once(": ")
            .map_or(error.as_str(), |(_, rule)| rule);
        let lesson = format!("When calling {tool}: {rule}");
        if !lessons.contains(&lesson) {
            lessons.push(lesson);
        }
    }
    if prompt.contains("always give temperatures in Fahrenheit") {
        lessons
            .push("When reporting the weather or a temperature, give °F as well as °C".to_string());
    }
    lessons.push(
        "Use the correct tool: ensure you are using the correct tool to check the status".into(),
    );
    lessons.push("Verify the id is correct".into());
    let heuristics: Vec<Value> = lessons
        .iter()
        .take(3)
        .map(|text| json!({"text": text, "skill_name": null}))
        .collect();
    Reply::text(&json!({ "heuristics": heuristics }).to_string())
}

async fn fake_model() -> FakeLlm {
    FakeLlm::start(|request, _| {
        if is_reflection_request(request) {
            reflection_reply(request)
        } else if is_options_request(request) {
            Reply::text(r#"{"options": []}"#)
        } else {
            agent_reply(request)
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------
// One run: the bot with learning on or off.

struct Model {
    url: String,
    name: String,
    api_key: Option<String>,
    real: bool,
    /// How long one task may take.
    patience: Duration,
}

/// What one held-out task did.
#[derive(Default, Clone)]
struct Outcome {
    right_form: bool,
    exact: bool,
    tool_errors: usize,
    llm_calls: usize,
    tokens: usize,
    block_tokens: usize,
    /// Estimated prompt tokens of the task's agent calls, and the block's share of them.
    prompt_estimate: usize,
    success: bool,
    honest: bool,
    answer: String,
    /// Every desk call of the task, for `--verbose`.
    calls: Vec<String>,
}

struct Run {
    outcomes: HashMap<&'static str, Vec<Outcome>>,
    /// The first reflection's prompt, for `--verbose`.
    reflection: Option<String>,
    lessons: Vec<(String, Option<String>, String)>,
    wall: Duration,
}

fn tokens_of(text: &str) -> usize {
    text.len() / 3
}

/// The part of a user message that learning added.
fn block_of(content: &str) -> &str {
    let task = without_context(content);
    &content[..content.len() - task.len()]
}

async fn wait_reply(tg: &FakeTelegram, chat: i64, count: usize, patience: Duration) -> String {
    let until = Instant::now() + patience;
    loop {
        let sent = tg.messages_to(chat);
        if sent.len() >= count {
            // A long answer is split: the task's answer is all it sent.
            return sent[count - 1..]
                .iter()
                .map(|c| c.text())
                .collect::<Vec<_>>()
                .join("\n");
        }
        assert!(
            Instant::now() < until,
            "no answer to chat {chat} in {patience:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until no reflection has run for a moment.
async fn reflections_settle(app: &heurist::App, quiet: Duration) {
    let mut idle_since = Instant::now();
    loop {
        if app.learning().reflections_running() > 0 {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= quiet {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the task's first call to its family's tools was in the right form, and exactly
/// right.
fn first_call_checks(family: &Family, expected: &str, calls: &[DeskCall]) -> (bool, bool) {
    let relevant = |c: &&DeskCall| match family.kind {
        Kind::Procedure => c.tool == "lock" || c.tool == "deploy",
        _ => {
            matches!(family.name, "ticket ids" if c.tool == "ticket")
                || matches!(family.name, "booking dates" if c.tool == "booking")
                || matches!(family.name, "stock SKUs" if c.tool == "stock")
                || matches!(family.name, "temperatures in °F" if c.tool == "weather")
        }
    };
    let Some(first) = calls.iter().find(relevant) else {
        return (false, false);
    };
    let value = first
        .arguments
        .as_object()
        .and_then(|a| a.values().next())
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (form, exact) = match family.name {
        // The form is the convention's shape; exactly right is the value too (Qwen wrote
        // `TCK-5127` and `SKU-ef56`: the form, not the value).
        "ticket ids" => (ticket_form(&value), value == expected),
        "booking dates" => (desk::is_house_date(&value), value == expected),
        "stock SKUs" => (
            value
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case("SKU-")),
            value == expected,
        ),
        "lock before deploy" => (
            first.tool == "lock",
            first.tool == "lock" && value.trim().eq_ignore_ascii_case(expected),
        ),
        _ => (true, value.trim().eq_ignore_ascii_case(expected)),
    };
    (form, exact)
}

/// `TCK-` and digits, however many.
fn ticket_form(id: &str) -> bool {
    id.strip_prefix("TCK-")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn succeeded(family: &Family, expected: &str, answer: &str, calls: &[DeskCall]) -> bool {
    let answer_lower = answer.to_lowercase();
    match family.name {
        "ticket ids" => answer_lower.contains(desk::ticket_team(expected)),
        "booking dates" => answer.contains(desk::booked_room(expected)),
        "stock SKUs" => answer.contains(&desk::units(expected).to_string()),
        "lock before deploy" => calls.iter().any(|c| {
            c.tool == "deploy"
                && c.error.is_none()
                && c.arguments["service"]
                    .as_str()
                    .is_some_and(|s| s.trim().eq_ignore_ascii_case(expected))
        }),
        _ => answer.contains("°F") || answer_lower.contains("fahrenheit"),
    }
}

async fn run(model: &Model, families: &[&'static Family], learning: bool) -> Run {
    let started = Instant::now();
    let desk = DeskServer::start().await;
    let recorder = Recorder::start(&model.url).await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config(&tg, &recorder.url, dir.path());
    let held_out_count: usize = families.iter().map(|f| f.held_out.len()).sum();
    config
        .access
        .allowed_users
        .extend((0..held_out_count as u64).map(|i| UserId(FIRST_HELD_OUT_USER as u64 + i)));
    config
        .access
        .allowed_users
        .extend((0..families.len() as u64).map(|i| UserId(FIRST_TRAINER as u64 + i)));
    config.models.truncate(1);
    config.models[0].id = model.name.clone();
    config.llm.api_key = model.api_key.clone();
    config.mcp.servers = vec![desk.entry()];
    // The shipped skills, as a deployment has them.
    config.learning.skills_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/skills").into();
    config.options.enabled = false;
    config.learning.reflect = learning;
    if model.real {
        config.llm.request_timeout_secs = 900;
        config.llm.max_concurrent = 2;
    }
    let bot = heurist::start(config).await.unwrap();
    let app = bot.app();
    let quiet = if model.real {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(300)
    };

    // Training: each family's tasks in a chat of their own (Alice's first), one after the
    // other, so a correction follows the answer it corrects.
    for (n, family) in families.iter().enumerate() {
        let trainer = if n == 0 {
            ALICE
        } else {
            FIRST_TRAINER + n as i64
        };
        for (sent, task) in family.train.iter().enumerate() {
            tg.send_text(trainer, task);
            wait_reply(&tg, trainer, sent + 1, model.patience).await;
        }
    }
    reflections_settle(app, quiet).await;
    // The admin approves what waits for review, as `/heuristics pending` does.
    for listed in app.learning().listing(true) {
        app.learning().approve(listed.heuristic.id).unwrap();
    }
    let lessons = app
        .store()
        .learning()
        .heuristics()
        .into_iter()
        .map(|h| (h.text, h.tool, format!("{:?}", h.review)))
        .collect();

    // Held out: a new user per task.
    let mut outcomes: HashMap<&'static str, Vec<Outcome>> = HashMap::new();
    let mut user = FIRST_HELD_OUT_USER;
    for family in families {
        for (task, expected) in family.held_out {
            let before = desk.calls().len();
            tg.send_text(user, task);
            let answer = wait_reply(&tg, user, 1, model.patience).await;
            let calls = desk.calls()[before..].to_vec();
            let exchanges: Vec<Exchange> = recorder
                .exchanges()
                .into_iter()
                .filter(|e| {
                    !is_reflection_request(&e.request)
                        && !is_options_request(&e.request)
                        && without_context(&asked(&e.request)) == *task
                })
                .collect();
            let (right_form, exact) = first_call_checks(family, expected, &calls);
            let block = exchanges
                .first()
                .map(|e| tokens_of(block_of(&asked(&e.request))))
                .unwrap_or(0);
            let prompt_estimate = exchanges
                .iter()
                .map(|e| {
                    tokens_of(&e.request["messages"].to_string())
                        + tokens_of(&e.request["tools"].to_string())
                })
                .sum();
            let tokens = exchanges
                .iter()
                .map(|e| {
                    e.response["usage"]["total_tokens"].as_u64().map_or_else(
                        || tokens_of(&e.request.to_string()) + tokens_of(&e.response.to_string()),
                        |t| t as usize,
                    )
                })
                .sum();
            outcomes.entry(family.name).or_default().push(Outcome {
                right_form,
                exact,
                tool_errors: calls.iter().filter(|c| c.error.is_some()).count(),
                llm_calls: exchanges.len(),
                tokens,
                block_tokens: block * exchanges.len(),
                prompt_estimate,
                success: succeeded(family, expected, &answer, &calls),
                honest: !answer.trim().is_empty() && !answer.contains(EMPTY_PLACEHOLDER),
                answer,
                calls: calls
                    .iter()
                    .map(|c| {
                        format!(
                            "{}({}){}",
                            c.tool,
                            c.arguments,
                            if c.error.is_some() { " ✗" } else { "" }
                        )
                    })
                    .collect(),
            });
            user += 1;
        }
    }
    bot.stop().await;
    drop(tg);
    if let Ok(path) = std::env::var("HEURIST_BENCH_DUMP") {
        let lines: Vec<String> = recorder
            .exchanges()
            .iter()
            .map(|e| {
                json!({"learning": learning, "request": e.request, "response": e.response})
                    .to_string()
            })
            .collect();
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&(lines.join("\n") + "\n"));
        std::fs::write(&path, text).unwrap();
    }
    let reflection = recorder
        .exchanges()
        .iter()
        .find(|e| is_reflection_request(&e.request))
        .map(|e| {
            format!(
                "{}\n--- answered: {}",
                asked(&e.request),
                e.response["choices"][0]["message"]["content"]
            )
        });
    Run {
        outcomes,
        reflection,
        lessons,
        wall: started.elapsed(),
    }
}

// ---------------------------------------------------------------------------------------
// Report.

#[derive(Default)]
struct Totals {
    tasks: usize,
    right_form: usize,
    exact: usize,
    tool_errors: usize,
    llm_calls: usize,
    tokens: usize,
    block_tokens: usize,
    prompt_estimate: usize,
    success: usize,
    honest: usize,
}

impl Totals {
    fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Self {
        let mut t = Self::default();
        for o in outcomes {
            t.tasks += 1;
            t.right_form += usize::from(o.right_form);
            t.exact += usize::from(o.exact);
            t.tool_errors += o.tool_errors;
            t.llm_calls += o.llm_calls;
            t.tokens += o.tokens;
            t.block_tokens += o.block_tokens;
            t.prompt_estimate += o.prompt_estimate;
            t.success += usize::from(o.success);
            t.honest += usize::from(o.honest);
        }
        t
    }

    fn pct(&self, n: usize) -> f64 {
        if self.tasks == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.tasks as f64
        }
    }

    fn per_task(&self, n: usize) -> f64 {
        if self.tasks == 0 {
            0.0
        } else {
            n as f64 / self.tasks as f64
        }
    }

    fn block_share(&self) -> f64 {
        if self.prompt_estimate == 0 {
            0.0
        } else {
            100.0 * self.block_tokens as f64 / self.prompt_estimate as f64
        }
    }

    fn row(&self, name: &str, mode: &str) -> String {
        format!(
            "| {name} | {mode} | {:.0}% | {:.0}% | {:.2} | {:.1} | {:.0} | {:.0}% | {:.0} ({:.0}%) |",
            self.pct(self.right_form),
            self.pct(self.exact),
            self.per_task(self.tool_errors),
            self.per_task(self.llm_calls),
            self.per_task(self.tokens),
            self.pct(self.success),
            self.per_task(self.block_tokens),
            self.block_share(),
        )
    }
}

#[tokio::main]
async fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let verbose = std::env::args().any(|a| a == "--verbose")
        || std::env::var_os("HEURIST_BENCH_VERBOSE").is_some();
    let only: Option<String> = std::env::var("HEURIST_BENCH_FAMILIES").ok();
    let families: Vec<&'static Family> = FAMILIES
        .iter()
        .filter(|f| {
            only.as_ref()
                .is_none_or(|only| only.split(',').any(|o| f.name.starts_with(o.trim())))
        })
        .collect();
    let fake;
    let model = match std::env::var("HEURIST_BENCH_LLM_URL") {
        Ok(url) if !smoke => Model {
            url,
            name: std::env::var("HEURIST_BENCH_MODEL").unwrap_or_else(|_| "qwen".into()),
            api_key: std::env::var("HEURIST_BENCH_API_KEY").ok(),
            real: true,
            patience: Duration::from_secs(1800),
        },
        _ => {
            fake = fake_model().await;
            Model {
                url: fake.url.clone(),
                name: "test-model".into(),
                api_key: None,
                real: false,
                patience: Duration::from_secs(30),
            }
        }
    };
    println!(
        "Benefit: {} families, {} held-out tasks per mode, model {} ({})",
        families.len(),
        families.iter().map(|f| f.held_out.len()).sum::<usize>(),
        model.name,
        if model.real {
            model.url.as_str()
        } else {
            "the fake that follows lessons"
        }
    );
    let on = run(&model, &families, true).await;
    let off = run(&model, &families, false).await;

    println!("\nLessons stored with learning on (after the admin's review):");
    for (text, tool, review) in &on.lessons {
        println!(
            "- {text} [tool: {}; {review}]",
            tool.as_deref().unwrap_or("none")
        );
    }
    println!(
        "\n| family | learning | first call in the right form | first call exactly right | tool errors per task | LLM calls per task | tokens per task | task success | injected block tokens per task (share of prompt) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for family in &families {
        for (mode, result) in [("on", &on), ("off", &off)] {
            let totals = Totals::of(&result.outcomes[family.name]);
            println!("{}", totals.row(family.name, mode));
        }
    }
    let conventions = |r: &Run| {
        Totals::of(
            families
                .iter()
                .filter(|f| f.kind == Kind::Convention)
                .flat_map(|f| &r.outcomes[f.name]),
        )
    };
    let all = |r: &Run| Totals::of(r.outcomes.values().flatten());
    for (mode, result) in [("on", &on), ("off", &off)] {
        println!("{}", conventions(result).row("**tool conventions**", mode));
    }
    for (mode, result) in [("on", &on), ("off", &off)] {
        println!("{}", all(result).row("**all**", mode));
    }
    if verbose {
        if let Some(reflection) = &on.reflection {
            println!("\nThe first reflection's prompt:\n{reflection}\n");
        }
        for (mode, result) in [("on", &on), ("off", &off)] {
            for family in &families {
                for o in &result.outcomes[family.name] {
                    println!(
                        "  [{mode}] {}: {} → {:?}",
                        family.name,
                        o.calls.join(", "),
                        o.answer.chars().take(160).collect::<String>()
                    );
                }
            }
        }
    }
    let gain = conventions(&on).pct(conventions(&on).right_form)
        - conventions(&off).pct(conventions(&off).right_form);
    let worse: Vec<&str> = families
        .iter()
        .filter(|f| {
            let (a, b) = (
                Totals::of(&on.outcomes[f.name]),
                Totals::of(&off.outcomes[f.name]),
            );
            a.success < b.success || a.right_form < b.right_form
        })
        .map(|f| f.name)
        .collect();
    let share = all(&on).block_share();
    let dishonest = all(&on).tasks - all(&on).honest + all(&off).tasks - all(&off).honest;
    println!(
        "\nFirst calls in the right form over the tool conventions: {gain:+.0} points with learning on; \
         families worse with learning on: {}; injected block: {share:.1}% of the prompt tokens; \
         answers that were not honest: {dishonest}. Wall time: on {:.0} s, off {:.0} s.",
        if worse.is_empty() {
            "none".to_string()
        } else {
            worse.join(", ")
        },
        on.wall.as_secs_f64(),
        off.wall.as_secs_f64(),
    );
    let goals = gain >= 30.0 && worse.is_empty() && share <= 25.0 && dishonest == 0;
    println!(
        "Goals (≥ +30 points, no family worse, block ≤ 25 %, every answer honest): {}",
        if goals { "met" } else { "NOT met" }
    );
    if smoke {
        assert!(goals, "the benefit goals are not met");
        println!("\n1 passed, 0 failed");
    }
}
