//! What a turn costs Heurist itself, and how that scales with chats and history.
//!
//! Runs the real `heurist` binary against an in-process fake Telegram Bot API and a
//! zero-latency fake LLM on 127.0.0.1, with options extraction and reflection on and
//! Telegram's rate limits lifted (so the bot, not Telegram, is the ceiling). Each chat sends
//! its next message when the previous answer arrived. Reported per scenario:
//!
//! - turns/s through the pipeline;
//! - bot CPU time per turn (user + system time of the bot process, all threads);
//! - p50/p99 added latency: from getUpdates handing the update to the bot to the answer's
//!   sendMessage (the fake LLM answers at once, so this is the bot's own time);
//! - peak RSS of the bot process, and its idle RSS after start-up;
//! - sled size per 1,000 turns; start-up time from spawn to the first getUpdates.
//!
//! Then token discipline over a scripted 10-turn conversation: how much of each request is a
//! byte-identical prefix of the previous one (agent calls), or of its agent call (options
//! extraction and reflection).
//!
//! Then a paced run at Telegram's production pacing (100 chats × 3 messages, fast LLM, no
//! options): Telegram calls per answered turn (one is the goal) and the wall time as a
//! multiple of the floor 30 calls/s imply.
//!
//! Then streamed answers at production pacing, as native drafts (`telegram.drafts`, private
//! chats) and as edits: Telegram calls per answer, the visible delay (from getUpdates handing
//! the update to the bot to the first text on screen: a draft, or the live message) and the
//! time to the whole answer with its keyboard.
//!
//! `cargo bench --bench pipeline` runs the full set (under a minute on 2 cores);
//! `-- --smoke` a tiny one (CI runs it so this cannot rot, and checks the goals);
//! `-- --only "100 chats"` only the scenarios whose name holds that text; `-- --runs 5` gives
//! each figure of the table as its median over five runs of the scenario (one run's CPU per
//! turn can be a third off the next one's on a small shared machine).

// A benchmark's scenario may read longer than a production function (Cargo.toml's `[lints]` hold
// `clippy::too_many_lines` for production code; unit tests are exempt alike in src/lib.rs).
#![allow(clippy::too_many_lines)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

#[path = "common/disk.rs"]
mod disk;

use std::time::{Duration, Instant};

use disk::dir_size;
use heurist::conversation::Conversation;
use heurist::ids::ChatId;
use heurist::llm::ChatMessage;
use heurist::telegram::render::render_parts;
use serde_json::{Value, json};
use support::telegram::FakeTelegram;
use support::{
    BotProcess, FakeLlm, Reply, is_options_request, is_reflection_request, last_user_text,
};

/// Telegram's production pacing (the defaults), no per-user turn limit, options off: the
/// paced run counts the calls of answers without options.
const PACED_TOML: &str = "\
[telegram]
chat_interval_ms = 1000
group_interval_ms = 3000
global_per_second = 30
[limits]
turns_per_minute = 0
[options]
enabled = false
";

/// Telegram's limits lifted, shipped skills on, everything else as deployed.
const BENCH_TOML: &str = "\
[telegram]
chat_interval_ms = 0
group_interval_ms = 0
global_per_second = 1000000
[limits]
turns_per_minute = 0
";

/// Production pacing with streaming on, drafts on or off (`{drafts}`), options and reflection
/// off: every call to the chat belongs to the streamed answer.
const STREAMED_TOML: &str = "\
[telegram]
chat_interval_ms = 1000
group_interval_ms = 3000
global_per_second = 30
streaming = true
drafts = {drafts}
[limits]
turns_per_minute = 0
[options]
enabled = false
[learning]
reflect = false
";

/// The calls that write to a chat (the paced ones; "typing…" is not counted).
const WRITES: [&str; 5] = [
    "sendMessage",
    "editMessageText",
    "editMessageReplyMarkup",
    "deleteMessage",
    "sendMessageDraft",
];

struct Scenario {
    name: String,
    chats: usize,
    messages: usize,
    /// Turns already stored per chat before the run.
    history: usize,
    /// Extra chats stored (never written to during the run).
    stored_chats: usize,
    /// Pause between an answer and the chat's next message.
    think: Duration,
}

/// One stage of a single chat's turn (see [`stages`]).
struct Stage {
    name: &'static str,
    p50: Duration,
    p99: Duration,
}

struct Figures {
    turns: usize,
    turns_per_sec: f64,
    cpu_per_turn: Duration,
    p50: Duration,
    p99: Duration,
    idle_rss_kb: u64,
    peak_rss_kb: u64,
    sled_kb_per_1000: f64,
    startup: Duration,
    /// Where a single chat's latency goes (empty for several chats).
    stages: Vec<Stage>,
}

/// Each figure's median over several runs of one scenario (on a small shared machine one
/// run's CPU per turn can be a third off the next one's); of an even number, the upper one.
fn median_figures(runs: Vec<Figures>) -> Figures {
    fn median<T: Copy + PartialOrd>(runs: &[Figures], field: impl Fn(&Figures) -> T) -> T {
        let mut values: Vec<T> = runs.iter().map(field).collect();
        values.sort_by(|a, b| a.partial_cmp(b).unwrap());
        values[values.len() / 2]
    }
    let stages = (0..runs[0].stages.len())
        .map(|i| Stage {
            name: runs[0].stages[i].name,
            p50: median(&runs, |f| f.stages[i].p50),
            p99: median(&runs, |f| f.stages[i].p99),
        })
        .collect();
    Figures {
        turns: median(&runs, |f| f.turns),
        turns_per_sec: median(&runs, |f| f.turns_per_sec),
        cpu_per_turn: median(&runs, |f| f.cpu_per_turn),
        p50: median(&runs, |f| f.p50),
        p99: median(&runs, |f| f.p99),
        idle_rss_kb: median(&runs, |f| f.idle_rss_kb),
        peak_rss_kb: median(&runs, |f| f.peak_rss_kb),
        sled_kb_per_1000: median(&runs, |f| f.sled_kb_per_1000),
        startup: median(&runs, |f| f.startup),
        stages,
    }
}

fn zero_latency_llm() -> impl Fn(&Value, usize) -> Reply + Send + Sync + 'static {
    |req, i| {
        if is_options_request(req) {
            Reply::text(r#"{"options": ["Tell me more", "Thanks"]}"#)
        } else if is_reflection_request(req) {
            let tips = [
                "Answer the question first, then details",
                "Quote the user's numbers back",
                "Prefer short paragraphs",
            ];
            Reply::text(
                &json!({"heuristics": [{"text": tips[i % 3], "skill_name": null}]}).to_string(),
            )
        } else {
            Reply::text(&format!(
                "re: {}",
                last_user_text(req)
                    .rsplit("\n\n")
                    .next()
                    .unwrap_or_default()
            ))
        }
    }
}

/// Stores `turns` turns in each of `chats` chats (ids from `first`), as the bot would have.
fn prefill(store: &heurist::store::Store, first: i64, chats: usize, turns: usize) {
    for chat in first..first + chats as i64 {
        for t in 0..turns {
            let messages = [
                ChatMessage::user(format!("earlier question {t} about something specific")),
                ChatMessage::assistant(format!(
                    "An earlier answer {t}, a couple of sentences long, as answers are."
                )),
            ];
            store
                .history()
                .append(
                    Conversation::new(ChatId(chat), None),
                    0,
                    None,
                    &messages,
                    &Default::default(),
                )
                .unwrap();
        }
    }
}

fn proc_status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of a process (all threads), from /proc/<pid>/stat.
fn cpu_time(pid: u32) -> Duration {
    const TICKS_PER_SEC: u64 = 100; // USER_HZ on Linux
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 1000 / TICKS_PER_SEC)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn run(scenario: &Scenario) -> Figures {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::start(zero_latency_llm()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    const FIRST_CHAT: i64 = 1001;
    if scenario.history > 0 || scenario.stored_chats > 0 {
        // One handle for both: sled releases its directory lock a moment after the last
        // handle is dropped, so a second open right after the first could fail.
        let store = heurist::store::Store::open(&db).unwrap();
        prefill(&store, FIRST_CHAT, scenario.chats, scenario.history);
        prefill(&store, 1_000_000, scenario.stored_chats, 2);
        store.db().flush().unwrap();
    }
    let size_before = dir_size(&db);
    let users = (FIRST_CHAT..FIRST_CHAT + scenario.chats as i64)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let spawned = Instant::now();
    let mut bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &users), ("RUST_LOG", "warn")],
        BENCH_TOML,
    );
    let pid = bot.child.id();
    let startup = loop {
        if let Some(at) = tg.first_poll() {
            break at.duration_since(spawned);
        }
        assert!(
            spawned.elapsed() < Duration::from_secs(30),
            "the bot did not start:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss_kb = proc_status_kb(pid, "VmRSS:");
    let cpu_before = cpu_time(pid);

    let started = Instant::now();
    let mut drivers = Vec::new();
    for chat in FIRST_CHAT..FIRST_CHAT + scenario.chats as i64 {
        let tg = tg.clone();
        let messages = scenario.messages;
        let think = scenario.think;
        drivers.push(tokio::spawn(async move {
            let mut turns = Vec::with_capacity(messages);
            for m in 0..messages {
                let text = format!("chat {chat} message {m}: what do you think?");
                let update = tg.send_text(chat, &text);
                let answered = tg
                    .wait_text(chat, &format!("re: {text}"), Duration::from_secs(60))
                    .await
                    .expect("an answer");
                let delivered = tg.delivered_at(update).unwrap();
                turns.push((text, delivered, answered));
                tokio::time::sleep(think).await;
            }
            turns
        }));
    }
    let mut turns = Vec::new();
    for driver in drivers {
        turns.extend(driver.await.unwrap());
    }
    let elapsed = started.elapsed();
    let stages = if scenario.chats == 1 {
        stages(&turns, &llm)
    } else {
        Vec::new()
    };
    let mut latencies: Vec<Duration> = turns
        .iter()
        .map(|(_, delivered, answered)| answered.duration_since(*delivered))
        .collect();
    // Let the background work (options, reflections) finish before reading CPU and memory.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = cpu_time(pid).saturating_sub(cpu_before);
    let peak_rss_kb = proc_status_kb(pid, "VmHWM:");
    bot.terminate();
    bot.wait(Duration::from_secs(20)).await;
    let turns = latencies.len();
    latencies.sort();
    let grown = dir_size(&db).saturating_sub(size_before);
    Figures {
        turns,
        turns_per_sec: turns as f64 / elapsed.as_secs_f64(),
        cpu_per_turn: cpu / turns.max(1) as u32,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        idle_rss_kb,
        peak_rss_kb,
        sled_kb_per_1000: grown as f64 / 1024.0 / turns.max(1) as f64 * 1000.0,
        startup,
        stages,
    }
}

/// Where a single chat's added latency goes: the median and p99 of each stage, from the
/// update handed to the bot to the agent's LLM request, from there to the options request,
/// and from that to the answer's sendMessage (the fake LLM's own time is in the last two).
fn stages(turns: &[(String, Instant, Instant)], llm: &FakeLlm) -> Vec<Stage> {
    let requests = llm.requests();
    let arrivals = llm.arrivals();
    let mut stages: [Vec<Duration>; 3] = Default::default();
    for (text, delivered, answered) in turns {
        let Some(agent) = requests.iter().position(|r| {
            !is_options_request(r) && !is_reflection_request(r) && last_user_text(r).ends_with(text)
        }) else {
            continue;
        };
        let Some(options) = (agent..requests.len()).find(|&i| is_options_request(&requests[i]))
        else {
            continue;
        };
        stages[0].push(arrivals[agent].duration_since(*delivered));
        stages[1].push(arrivals[options].duration_since(arrivals[agent]));
        stages[2].push(answered.duration_since(arrivals[options]));
    }
    let names = [
        "update → agent request",
        "agent request → options request",
        "options request → answer sent",
    ];
    names
        .into_iter()
        .zip(stages)
        .map(|(name, mut stage)| {
            stage.sort();
            Stage {
                name,
                p50: percentile(&stage, 0.5),
                p99: percentile(&stage, 0.99),
            }
        })
        .collect()
}

/// The paced run: `chats` chats × `messages` messages at production pacing with a fast LLM.
/// Returns Telegram send/edit/delete calls per answered turn, and the wall time as a multiple of
/// the floor that `global_per_second` (30) implies for one call per answer.
async fn paced(chats: usize, messages: usize) -> (f64, f64, Duration) {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::start(zero_latency_llm()).await;
    let dir = tempfile::tempdir().unwrap();
    const FIRST_CHAT: i64 = 1001;
    let users = (FIRST_CHAT..FIRST_CHAT + chats as i64)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &users), ("RUST_LOG", "warn")],
        PACED_TOML,
    );
    while tg.first_poll().is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let drivers: Vec<_> = (FIRST_CHAT..FIRST_CHAT + chats as i64)
        .map(|chat| {
            let tg = tg.clone();
            tokio::spawn(async move {
                for m in 0..messages {
                    let text = format!("chat {chat} message {m}: what do you think?");
                    tg.send_text(chat, &text);
                    tg.wait_text(chat, &format!("re: {text}"), Duration::from_secs(120))
                        .await
                        .expect("an answer");
                }
            })
        })
        .collect();
    for driver in drivers {
        driver.await.unwrap();
    }
    let elapsed = started.elapsed();
    // Any call an answer still owed (a final edit, a keyboard) would come now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    bot.terminate();
    bot.wait(Duration::from_secs(20)).await;
    let turns = chats * messages;
    let calls: usize = WRITES.iter().map(|m| tg.calls(m).len()).sum();
    let floor = Duration::from_secs_f64(turns as f64 / 30.0);
    (
        calls as f64 / turns as f64,
        elapsed.as_secs_f64() / floor.as_secs_f64(),
        elapsed,
    )
}

/// The answer the streaming LLM gives to `question`: about 600 characters of plain words.
fn streamed_answer(question: &str) -> String {
    let mut answer = format!("re: {question}");
    while answer.len() < 600 {
        answer.push_str(" and the answer grows word by word");
    }
    answer
}

/// What streamed answers cost and how soon they show, for one way of streaming.
struct Streamed {
    answers: usize,
    /// Writes to the chat per answer, and of them drafts.
    calls: f64,
    drafts: f64,
    edits: usize,
    sends: usize,
    /// From the update handed to the bot to the first text on screen.
    first_p50: Duration,
    first_p99: Duration,
    /// From the update handed to the bot to the whole answer with its keyboard.
    whole_p50: Duration,
}

/// Streamed answers at production pacing, as drafts or as edits: `chats` chats ask `messages`
/// questions each, the next once the answer is whole; the fake LLM streams every answer in
/// 10 pieces 200 ms apart.
async fn streamed(drafts: bool, chats: usize, messages: usize) -> Streamed {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::start(|req, _| {
        let text = last_user_text(req);
        let question = text.rsplit("\n\n").next().unwrap_or_default();
        Reply::streamed(&streamed_answer(question), 10, Duration::from_millis(200))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    const FIRST_CHAT: i64 = 1001;
    let users = (FIRST_CHAT..FIRST_CHAT + chats as i64)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let toml = STREAMED_TOML.replace("{drafts}", &drafts.to_string());
    let mut bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &users), ("RUST_LOG", "warn")],
        &toml,
    );
    while tg.first_poll().is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drivers: Vec<_> = (FIRST_CHAT..FIRST_CHAT + chats as i64)
        .map(|chat| {
            let tg = tg.clone();
            tokio::spawn(async move {
                let mut asked = Vec::with_capacity(messages);
                for m in 0..messages {
                    let text = format!("chat {chat} message {m}: what do you think?");
                    let whole = render_parts(&streamed_answer(&text)).remove(0);
                    asked.push((chat, tg.send_text(chat, &text), whole.clone()));
                    let until = Instant::now() + Duration::from_secs(120);
                    while !tg
                        .screen_with_keyboards(chat)
                        .last()
                        .is_some_and(|(shown, keys)| {
                            *shown == whole && !keys.is_empty() && !keys.contains("__act__stop")
                        })
                    {
                        assert!(Instant::now() < until, "chat {chat}: no whole answer");
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                asked
            })
        })
        .collect();
    let mut asked = Vec::new();
    for driver in drivers {
        asked.extend(driver.await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    bot.terminate();
    bot.wait(Duration::from_secs(20)).await;
    measure_streamed(&tg, &asked)
}

/// Reads each answer's calls from what the fake Telegram recorded: those to its chat from its
/// update's delivery to the next one's.
fn measure_streamed(tg: &FakeTelegram, asked: &[(i64, i64, String)]) -> Streamed {
    let writes: Vec<support::telegram::Call> = WRITES.iter().flat_map(|m| tg.calls(m)).collect();
    let (mut firsts, mut wholes, mut calls, mut drafts) = (Vec::new(), Vec::new(), 0, 0);
    for (i, (chat, update, whole)) in asked.iter().enumerate() {
        let from = tg.delivered_at(*update).unwrap();
        let to = asked[i + 1..]
            .iter()
            .find(|(next, _, _)| next == chat)
            .and_then(|(_, next, _)| tg.delivered_at(*next));
        let mut mine: Vec<_> = writes
            .iter()
            .filter(|c| c.params["chat_id"] == json!(chat))
            .filter(|c| c.at >= from && to.is_none_or(|to| c.at < to))
            .collect();
        mine.sort_by_key(|c| c.at);
        calls += mine.len();
        drafts += mine
            .iter()
            .filter(|c| c.method == "sendMessageDraft")
            .count();
        let shown = mine
            .iter()
            .find(|c| c.ok && matches!(c.method.as_str(), "sendMessage" | "sendMessageDraft"));
        firsts.push(shown.expect("something shown").at.duration_since(from));
        let done = mine.iter().rev().find(|c| c.ok && c.text() == *whole);
        wholes.push(done.expect("the whole answer").at.duration_since(from));
    }
    firsts.sort();
    wholes.sort();
    let answers = asked.len();
    let count = |method: &str| tg.calls(method).len();
    Streamed {
        answers,
        calls: calls as f64 / answers as f64,
        drafts: drafts as f64 / answers as f64,
        edits: count("editMessageText"),
        sends: count("sendMessage"),
        first_p50: percentile(&firsts, 0.50),
        first_p99: percentile(&firsts, 0.99),
        whole_p50: percentile(&wholes, 0.50),
    }
}

/// A request's prompt as providers cache it: the tool schemas (rendered before the
/// conversation), then the messages.
fn prompt_bytes(request: &Value) -> String {
    format!(
        "{}{}",
        request["tools"],
        request["messages"].to_string().trim_end_matches(']')
    )
}

/// How two requests' prompts overlap: (share of `earlier` that `later` repeats byte for byte
/// at its start, share of `later` that is that common prefix).
fn overlap(earlier: &Value, later: &Value) -> (f64, f64) {
    let (a, b) = (prompt_bytes(earlier), prompt_bytes(later));
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    (
        common as f64 / a.len() as f64,
        common as f64 / b.len() as f64,
    )
}

/// Mean and minimum of a list of shares.
fn stats(shares: &[f64]) -> (f64, f64) {
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    (mean, shares.iter().copied().fold(1.0, f64::min))
}

/// Prompt-cache figures of a scripted 10-turn conversation: for agent calls against the
/// previous agent call, and for options and reflection calls against their agent call,
/// (reuse mean, reuse min, cached-share mean, cached-share min).
async fn token_discipline() -> [(f64, f64, f64, f64); 3] {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::start(zero_latency_llm()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("RUST_LOG", "warn")],
        BENCH_TOML,
    );
    let questions = [
        "What time is it in Tokyo?",
        "Summarize https://example.com/article for me",
        "Now make it shorter",
        "Proofread: their going to the park tomorow",
        "Research which sources say Rust is fast",
        "Thanks! What else should I know?",
        "Convert 9am Berlin to New York time",
        "Write a haiku about sled",
        "Explain BM25 briefly",
        "Goodbye",
    ];
    for q in questions {
        tg.send_text(support::ALICE, q);
        tg.wait_text(support::ALICE, &format!("re: {q}"), Duration::from_secs(30))
            .await
            .expect("an answer");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    bot.terminate();
    bot.wait(Duration::from_secs(20)).await;
    let requests = llm.requests();
    let agent: Vec<&Value> = requests
        .iter()
        .filter(|r| !is_options_request(r) && !is_reflection_request(r))
        .collect();
    let summary = |pairs: Vec<(f64, f64)>| {
        let (reuse, share): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        let (reuse_mean, reuse_min) = stats(&reuse);
        let (share_mean, share_min) = stats(&share);
        (reuse_mean, reuse_min, share_mean, share_min)
    };
    let follow_ups = |pick: fn(&Value) -> bool| {
        requests
            .iter()
            .filter(|r| pick(r))
            .filter_map(|r| {
                // Its agent call: the agent request whose messages it extends.
                let messages = r["messages"].as_array()?;
                let call = agent
                    .iter()
                    .rev()
                    .find(|a| messages.starts_with(a["messages"].as_array().unwrap()))?;
                Some(overlap(call, r))
            })
            .collect::<Vec<_>>()
    };
    if let Ok(path) = std::env::var("HEURIST_BENCH_DUMP") {
        let dump: Vec<String> = requests
            .iter()
            .filter(|r| is_reflection_request(r))
            .map(prompt_bytes)
            .collect();
        let agents: Vec<String> = agent.iter().map(|r| prompt_bytes(r)).collect();
        std::fs::write(path, serde_json::to_string(&(agents, dump)).unwrap()).unwrap();
    }
    [
        summary(agent.windows(2).map(|w| overlap(w[0], w[1])).collect()),
        summary(follow_ups(is_options_request)),
        summary(follow_ups(is_reflection_request)),
    ]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    // `-- --only "100 chats"`: just the scenarios whose name holds that text (for profiling).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    // `-- --runs 5`: each scenario's figures are the medians of that many runs.
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .map(|i| {
            args.get(i + 1)
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .expect("--runs takes a number of runs, 1 or more (odd: a median)")
        })
        .unwrap_or(1);
    let scenarios: Vec<Scenario> = if smoke {
        vec![Scenario {
            name: "smoke: 3 chats × 2".into(),
            chats: 3,
            messages: 2,
            history: 10,
            stored_chats: 20,
            think: Duration::ZERO,
        }]
    } else {
        vec![
            Scenario {
                name: "1 chat × 100 msgs, 20 ms pauses".into(),
                chats: 1,
                messages: 100,
                history: 0,
                stored_chats: 0,
                think: Duration::from_millis(20),
            },
            Scenario {
                name: "10 chats × 20 msgs".into(),
                chats: 10,
                messages: 20,
                history: 0,
                stored_chats: 0,
                think: Duration::ZERO,
            },
            Scenario {
                name: "100 chats × 10 msgs".into(),
                chats: 100,
                messages: 10,
                history: 0,
                stored_chats: 0,
                think: Duration::ZERO,
            },
            Scenario {
                name: "1,000 chats × 3 msgs".into(),
                chats: 1000,
                messages: 3,
                history: 0,
                stored_chats: 0,
                think: Duration::ZERO,
            },
            Scenario {
                name: "50 chats, 10-turn history".into(),
                chats: 50,
                messages: 5,
                history: 10,
                stored_chats: 0,
                think: Duration::ZERO,
            },
            Scenario {
                name: "50 chats, 500-turn history".into(),
                chats: 50,
                messages: 5,
                history: 500,
                stored_chats: 0,
                think: Duration::ZERO,
            },
            Scenario {
                name: "100 chats, 10,000 stored chats".into(),
                chats: 100,
                messages: 5,
                history: 2,
                stored_chats: 10_000,
                think: Duration::ZERO,
            },
        ]
    };
    println!(
        "| scenario | turns | turns/s | CPU/turn | p50 added | p99 added | idle RSS | peak RSS | sled/1k turns | start-up |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for scenario in scenarios
        .iter()
        .filter(|s| only.as_ref().is_none_or(|o| s.name.contains(o.as_str())))
    {
        let mut figures = Vec::with_capacity(runs);
        for _ in 0..runs {
            figures.push(run(scenario).await);
        }
        let f = median_figures(figures);
        println!(
            "| {} | {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {:.1} MB | {:.1} MB | {:.0} KB | {} ms |",
            scenario.name,
            f.turns,
            f.turns_per_sec,
            f.cpu_per_turn.as_secs_f64() * 1000.0,
            f.p50.as_secs_f64() * 1000.0,
            f.p99.as_secs_f64() * 1000.0,
            f.idle_rss_kb as f64 / 1024.0,
            f.peak_rss_kb as f64 / 1024.0,
            f.sled_kb_per_1000,
            f.startup.as_millis(),
        );
        for stage in &f.stages {
            println!(
                "| … {} | | | | {:.2} ms | {:.2} ms | | | | |",
                stage.name,
                stage.p50.as_secs_f64() * 1000.0,
                stage.p99.as_secs_f64() * 1000.0,
            );
        }
    }
    if only.is_some() {
        return;
    }
    let (chats, messages) = if smoke { (3, 2) } else { (100, 3) };
    let (calls_per_turn, of_floor, wall) = paced(chats, messages).await;
    println!();
    println!(
        "Paced run (chat_interval_ms 1000, group_interval_ms 3000, global_per_second 30), {chats} chats × {messages} messages, fast LLM, no options:"
    );
    println!("| Telegram calls per answered turn | wall time | × the 30 calls/s floor |");
    println!("|---|---|---|");
    println!(
        "| {calls_per_turn:.2} | {:.2} s | {of_floor:.2}× |",
        wall.as_secs_f64()
    );
    if smoke {
        assert!(
            (calls_per_turn - 1.0).abs() < 1e-9,
            "one call per short answer"
        );
    }

    let (chats, messages) = if smoke { (2, 1) } else { (10, 3) };
    println!();
    println!(
        "Streamed answers at production pacing (chat_interval_ms 1000), {chats} private chats × {messages} answers of 600 characters streamed over 2 s:"
    );
    println!(
        "| streaming | Telegram calls per answer (of them drafts) | first text on screen p50 / p99 | whole answer p50 |"
    );
    println!("|---|---|---|---|");
    for drafts in [true, false] {
        let f = streamed(drafts, chats, messages).await;
        let name = if drafts { "native drafts" } else { "edits" };
        println!(
            "| {name} | {:.2} ({:.2}) | {} ms / {} ms | {} ms |",
            f.calls,
            f.drafts,
            f.first_p50.as_millis(),
            f.first_p99.as_millis(),
            f.whole_p50.as_millis(),
        );
        if smoke && drafts {
            assert!(f.drafts > 0.0, "drafts were streamed");
            assert_eq!(f.edits, 0, "no edit where drafts stream");
            assert_eq!(f.sends, f.answers, "one sendMessage per drafted answer");
        } else if smoke {
            assert_eq!(f.drafts, 0.0, "no draft with drafts off");
            assert!(f.edits > 0, "edits stream");
        }
    }

    let [agent, options, reflection] = token_discipline().await;
    println!();
    println!(
        "Prompt caching over a scripted 10-turn conversation (tools + messages, byte for byte):"
    );
    println!(
        "| requests | reuse of the earlier request (mean / min) | cached share of the later request (mean / min) |"
    );
    println!("|---|---|---|");
    for (name, (reuse_mean, reuse_min, share_mean, share_min)) in [
        ("agent call vs the previous agent call", agent),
        ("options extraction vs its agent call", options),
        ("reflection vs its agent call", reflection),
    ] {
        println!(
            "| {name} | {:.1}% / {:.1}% | {:.1}% / {:.1}% |",
            reuse_mean * 100.0,
            reuse_min * 100.0,
            share_mean * 100.0,
            share_min * 100.0
        );
    }
    if smoke {
        for (reuse_mean, reuse_min, _, _) in [agent, options, reflection] {
            assert!(
                reuse_min > 0.999 && reuse_mean > 0.999,
                "requests must extend earlier ones byte for byte"
            );
        }
        let (_, _, reflection_share_mean, _) = reflection;
        assert!(
            reflection_share_mean >= 0.75,
            "the provider's cache must serve at least 75 % of a reflection, on average"
        );
        println!("\n1 passed, 0 failed");
    }
}
