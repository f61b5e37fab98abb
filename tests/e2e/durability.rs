//! Nothing lost, nobody in: crashes, shutdown, re-delivery, webhooks, budgets, hostile input.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::stalling_llm;
use crate::support::*;

fn answers_to(tg: &FakeTelegram, chat: i64, text: &str) -> usize {
    tg.messages_to(chat)
        .iter()
        .filter(|c| c.params["text"] == text)
        .count()
}

#[tokio::test]
async fn kill_9_mid_turn_then_restart_gives_exactly_one_answer() {
    let (llm, slow) = stalling_llm("the one answer").await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    tg.send_text(ALICE, "please answer once");
    tg.wait_for(|_| (!llm.agent_requests().is_empty()).then_some(()))
        .await;
    bot.child.kill().unwrap(); // SIGKILL: no shutdown code runs.
    bot.child.wait().unwrap();
    assert!(tg.messages_to(ALICE).is_empty());

    slow.store(false, Ordering::SeqCst);
    let _bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    tg.wait_messages(ALICE, 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(answers_to(&tg, ALICE, "the one answer"), 1);
    assert_eq!(tg.messages_to(ALICE).len(), 1, "exactly one answer");
}

#[tokio::test]
async fn sigterm_lets_the_running_turn_finish_then_exits_0() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::text("finished before exit").after(Duration::from_secs(2))
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    tg.send_text(ALICE, "take your time");
    tg.wait_for(|_| (!llm.agent_requests().is_empty()).then_some(()))
        .await;
    bot.terminate();
    let code = bot.wait(Duration::from_secs(15)).await;
    assert_eq!(code, Some(0), "log:\n{}", bot.logs());
    assert_eq!(answers_to(&tg, ALICE, "finished before exit"), 1);
    // Restarting does not answer it again.
    let _bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    tg.send_text(BOB, "ping");
    tg.wait_messages(BOB, 1).await;
    assert_eq!(answers_to(&tg, ALICE, "finished before exit"), 1);
}

#[tokio::test]
async fn a_redelivered_update_is_not_processed_twice() {
    let llm =
        FakeLlm::start(|req, _| Reply::text(&format!("answer to {}", last_user_text(req)))).await;
    let mut h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    let update = h.tg.send_text(ALICE, "only once");
    h.tg.wait_messages(ALICE, 1).await;
    h.restart().await;
    h.tg.redeliver(update);
    h.tg.send_text(ALICE, "next");
    h.tg.wait_messages(ALICE, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(answers_to(&h.tg, ALICE, "answer to only once"), 1);
    assert_eq!(
        h.llm
            .agent_requests()
            .iter()
            .filter(|r| last_user_text(r) == "only once")
            .count(),
        1
    );
    h.stop().await;
}

#[tokio::test]
async fn a_cancelled_turn_is_not_resumed_after_a_restart() {
    let llm = FakeLlm::start(|req, _| {
        let slow = last_user_text(req) == "slow";
        Reply::text("late").after(Duration::from_secs(if slow { 30 } else { 0 }))
    })
    .await;
    let mut h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_text(ALICE, "slow");
    h.tg.wait_for(|_| (!h.llm.agent_requests().is_empty()).then_some(()))
        .await;
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_messages(ALICE, 1).await;
    h.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        h.llm.agent_requests().len(),
        1,
        "the cancelled turn was not resumed"
    );
    h.stop().await;
}

#[tokio::test]
async fn webhook_requests_need_the_secret_token() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = listener.local_addr().unwrap();
    drop(listener);
    let h = Harness::start_with(FakeLlm::answering("via webhook").await, move |c| {
        c.telegram.webhook_url = "https://bot.example.com/telegram/hook".into();
        c.telegram.webhook_listen = listen.to_string();
        c.telegram.webhook_secret = "s3cret-Token_value".into();
    })
    .await;
    let registered = h.tg.wait_for(|t| t.calls("setWebhook").pop()).await;
    assert_eq!(
        registered.params["url"],
        "https://bot.example.com/telegram/hook"
    );
    assert_eq!(registered.params["secret_token"], "s3cret-Token_value");
    // Telegram sends reactions only to a webhook registered for them.
    let allowed = &registered.params["allowed_updates"];
    assert!(
        allowed.to_string().contains("message_reaction"),
        "{allowed}"
    );
    assert!(
        h.tg.calls("getUpdates").is_empty(),
        "no polling in webhook mode"
    );

    let update = |id: i64, text: &str| {
        json!({"update_id": id, "message": {
            "message_id": id, "date": 1_700_000_000, "text": text,
            "chat": {"id": ALICE, "type": "private", "first_name": "A"},
            "from": crate::support::telegram::user_json(ALICE),
        }})
    };
    // The webhook server binds in the background; wait until it accepts connections.
    h.tg.wait_for(|_| std::net::TcpStream::connect(listen).ok())
        .await;
    let client = reqwest::Client::new();
    let url = format!("http://{listen}/telegram/hook");
    let post = |secret: Option<&str>, body: Value| {
        let mut request = client.post(&url).json(&body);
        if let Some(secret) = secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        request.send()
    };
    assert_eq!(
        post(None, update(1, "no secret")).await.unwrap().status(),
        401
    );
    assert_eq!(
        post(Some("wrong"), update(2, "wrong secret"))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        post(Some("s3cret-Token_value"), update(3, "right secret"))
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].params["text"], "via webhook");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked: Vec<String> = h.llm.agent_requests().iter().map(last_user_text).collect();
    assert_eq!(asked, ["right secret"]);
    h.stop().await;
}

#[tokio::test]
async fn the_turn_rate_and_the_daily_budget_are_enforced_with_a_friendly_message() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.turns_per_minute = 2;
    })
    .await;
    for text in ["one", "two", "three"] {
        h.tg.send_text(ALICE, text);
    }
    let sent = h.tg.wait_messages(ALICE, 3).await;
    let limited: Vec<&str> = sent
        .iter()
        .filter_map(|c| c.params["text"].as_str())
        .filter(|t| t.contains("faster than I can answer"))
        .collect();
    assert_eq!(limited.len(), 1, "{sent:?}");
    assert_eq!(h.llm.agent_requests().len(), 2);
    // Admins are exempt.
    for text in ["a", "b", "c"] {
        h.tg.send_text(ADMIN, text);
    }
    h.tg.wait_messages(ADMIN, 3).await;
    assert_eq!(h.llm.agent_requests().len(), 5);
    h.stop().await;

    // Each fake call reports 110 tokens; a budget of 150 allows two turns a day.
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.daily_tokens = 150;
    })
    .await;
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        h.tg.send_text(BOB, text);
        h.tg.wait_messages(BOB, i + 1).await;
    }
    let last = h.tg.messages_to(BOB).pop().unwrap();
    assert!(
        last.params["text"]
            .as_str()
            .unwrap()
            .contains("today's budget of 150 tokens")
    );
    assert_eq!(h.llm.agent_requests().len(), 2);
    h.stop().await;
}

#[tokio::test]
async fn fetch_url_never_reaches_private_addresses() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "internal admin page" }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut targets = vec![
        format!("http://127.0.0.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://0x7f.0.0.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://localhost:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://10.0.0.1/".to_string(),
        "http://100.64.0.1/".to_string(),
        "http://224.0.0.1/".to_string(),
    ];
    // A DNS name (not "localhost") that resolves to a private address, where the machine has one.
    let host = std::fs::read_to_string("/etc/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    if !host.is_empty()
        && tokio::net::lookup_host((host.as_str(), 0))
            .await
            .is_ok_and(|mut a| a.all(|a| !heurist::agent::net_guard::is_public_ip(a.ip())))
    {
        targets.push(format!("http://{host}:{port}/"));
    }
    let results = fetch_each(&targets, "fetch the internal pages").await;
    for (url, result) in targets.iter().zip(&results) {
        assert!(
            result.starts_with("error: ") && result.contains("public"),
            "{url}: {result}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the private server was never reached"
    );
}

/// This machine's addresses other than loopback, found without the bot's code: the source
/// address of a route out (IPv4) and the global ones `/proc/net/if_inet6` lists (IPv6).
fn non_loopback_addresses() -> Vec<std::net::IpAddr> {
    let mut found = Vec::new();
    let routed = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|socket| socket.connect("203.0.113.1:9").map(|()| socket))
        .and_then(|socket| socket.local_addr());
    if let Ok(local) = routed {
        found.push(local.ip());
    }
    let inet6 = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    for line in inet6.lines() {
        let Some(hex) = line.split_whitespace().next() else {
            continue;
        };
        if let Ok(bits) = u128::from_str_radix(hex, 16) {
            found.push(std::net::IpAddr::V6(bits.into()));
        }
    }
    found.retain(|ip| {
        !ip.is_loopback()
            && !ip.is_unspecified()
            && !matches!(ip, std::net::IpAddr::V6(v6) if v6.is_unicast_link_local())
    });
    found.dedup();
    found
}

#[tokio::test]
async fn fetch_url_never_reaches_this_hosts_own_addresses() {
    let own = non_loopback_addresses();
    if own.is_empty() {
        eprintln!("skipped: this machine has no non-loopback interface address");
        return;
    }
    let hits = Arc::new(AtomicUsize::new(0));
    let mut targets = Vec::new();
    // A service listening on every interface, as one bound to 0.0.0.0 or [::] does.
    for any in ["0.0.0.0:0", "[::]:0"] {
        let Ok(listener) = tokio::net::TcpListener::bind(any).await else {
            continue;
        };
        let port = listener.local_addr().unwrap().port();
        let counter = hits.clone();
        let app = axum::Router::new().fallback(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { "internal admin page" }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let v4 = any.starts_with('0');
        targets.extend(
            own.iter()
                .filter(|ip| ip.is_ipv4() == v4)
                .map(|ip| format!("http://{}/", std::net::SocketAddr::new(*ip, port))),
        );
    }
    assert!(!targets.is_empty(), "no listener for {own:?}");
    let results = fetch_each(&targets, "fetch this machine's own pages").await;
    for (url, result) in targets.iter().zip(&results) {
        assert!(
            result.starts_with("error: ") && result.contains("an address of this host"),
            "{url}: {result}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "this host was never reached"
    );
}

#[tokio::test]
async fn secrets_never_reach_logs_or_users() {
    const KEY: &str = "sk-SECRET-API-KEY-0123456789";
    let llm =
        FakeLlm::start(|_, _| Reply::error(401, &format!("Incorrect API key provided: {KEY}")))
            .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let admin = ADMIN.to_string();
    let mut bot = BotProcess::spawn(
        &tg,
        &llm.url,
        dir.path(),
        &[("OPENAI_API_KEY", KEY), ("HEURIST_ADMINS", &admin)],
    );
    tg.send_text(ALICE, "hello");
    let sent = tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].params["text"].as_str().unwrap();
    assert!(
        shown.contains("admins") && !shown.contains(KEY) && !shown.contains("401"),
        "{shown}"
    );
    let alert = tg.wait_messages(ADMIN, 1).await[0].params["text"].to_string();
    assert!(
        alert.contains("HTTP 401") && alert.contains("[redacted]") && !alert.contains(KEY),
        "the admin hears what failed, without the key: {alert}"
    );
    bot.terminate();
    bot.wait(Duration::from_secs(15)).await;
    // Also a run that cannot reach Telegram at all (errors quote the URL with the token).
    let dead = FakeLlm::down_url().await;
    let mut offline = BotProcess::spawn(
        &tg,
        &dead,
        dir.path(),
        &[("TELOXIDE_API_URL", &dead.replace("/v1", ""))],
    );
    assert_eq!(offline.wait(Duration::from_secs(30)).await, Some(2));

    for logs in [bot.logs(), offline.logs()] {
        assert!(
            logs.contains("DEBUG") || logs.contains("heurist:"),
            "logs were captured:\n{logs}"
        );
        for secret in ["123456:TEST-TOKEN", "TEST-TOKEN", KEY] {
            assert!(!logs.contains(secret), "{secret} leaked:\n{logs}");
        }
    }
    assert!(
        offline.logs().contains("cannot reach the Telegram Bot API"),
        "{}",
        offline.logs()
    );
}

#[tokio::test]
async fn turns_out_of_the_history_window_are_pruned_while_the_bot_runs() {
    // Answers of about 250 tokens under a 600-token budget: the window keeps two turns or so.
    let llm = FakeLlm::start(|req, _| {
        Reply::text(&format!("{} {}", last_user_text(req), "word ".repeat(250)))
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.agent.history_tokens = 600;
        c.prune_interval_secs = 1;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    let mut updates = Vec::new();
    for i in 0..6 {
        updates.push(heurist::ids::UpdateId(
            h.tg.send_text(ALICE, &format!("m{i}")) as u32,
        ));
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    let store = h.app().store();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while store
        .history()
        .stored_answer(in_chat(ALICE), updates[0])
        .is_some()
    {
        assert!(
            std::time::Instant::now() < until,
            "the first turn, long out of the window, was not pruned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What the LLM sees is untouched: the last turn is still there, and the next request
    // carries the same window as before the prune.
    assert!(
        store
            .history()
            .stored_answer(in_chat(ALICE), updates[5])
            .is_some()
    );
    let window = store
        .history()
        .window(in_chat(ALICE), 600)
        .unwrap()
        .messages;
    assert!(!window.is_empty());
    h.tg.send_text(ALICE, "m6");
    h.tg.wait_messages(ALICE, 7).await;
    let last = h.llm.agent_requests().pop().unwrap();
    let sent = last["messages"].as_array().unwrap();
    let texts: Vec<&str> = sent.iter().filter_map(|m| m["content"].as_str()).collect();
    for message in &window {
        assert!(
            texts.contains(&message.content()),
            "the window's {:?} reached the LLM",
            &message.content()[..2]
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn old_tickets_are_pruned_while_the_bot_runs() {
    use heurist::store::{FeedbackTicket, OptionTicket, ReflectionJob, Vote};
    let llm = FakeLlm::start(|_, _| Reply::text("unused")).await;
    let h = Harness::start_with(llm, |c| {
        c.retention_days = 30;
        c.prune_interval_secs = 1;
    })
    .await;
    // Let the start-up prune pass, so only the background one can remove what follows.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = chrono::Utc::now().timestamp();
    let (old, fresh) = (now - 31 * 24 * 3600, now - 29 * 24 * 3600);
    let store = h.app().store();
    let option = |created| OptionTicket {
        chat: heurist::ids::ChatId(ALICE),
        message_id: 1,
        labels: vec!["a".into()],
        epoch: 0,
        chosen: None,
        feedback: None,
        created,
        topic: None,
        chosen_by: None,
    };
    let feedback = |created| FeedbackTicket {
        chat: heurist::ids::ChatId(ALICE),
        lessons: vec![],
        job: ReflectionJob {
            chat: heurist::ids::ChatId(ALICE),
            user: None,
            model: "test-model".into(),
            request: "t".into(),
            tools: vec![],
            outcome: "ok".into(),
            external: false,
            untrusted: false,
            grounds: None,
            answer: None,
            skills: Vec::new(),
            evidence: String::new(),
            proven: Vec::new(),
        },
        vote: None,
        changes: 0,
        created,
    };
    let old_option = store.tickets().create(&option(old)).unwrap();
    let fresh_option = store.tickets().create(&option(fresh)).unwrap();
    let old_feedback = store.tickets().create_feedback(&feedback(old)).unwrap();
    let fresh_feedback = store.tickets().create_feedback(&feedback(fresh)).unwrap();
    assert!(
        store.tickets().get(&old_option).is_some(),
        "stored before the prune"
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while store.tickets().get(&old_option).is_some() {
        assert!(
            std::time::Instant::now() < until,
            "not pruned while running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        store.tickets().get(&fresh_option).is_some(),
        "within the retention"
    );
    assert!(matches!(
        store
            .tickets()
            .vote(&old_feedback, heurist::ids::ChatId(ALICE), true, 1)
            .unwrap(),
        Vote::Unknown
    ));
    assert!(matches!(
        store
            .tickets()
            .vote(&fresh_feedback, heurist::ids::ChatId(ALICE), true, 1)
            .unwrap(),
        Vote::Recorded(_)
    ));
    h.stop().await;
}

/// A chat whose `answer` panics (as a bug in the adapter would), recording what else it shows.
struct PanickingChat {
    panic_on_answer: bool,
    answers: std::sync::Mutex<Vec<String>>,
    notices: std::sync::Mutex<Vec<String>>,
}

impl PanickingChat {
    fn new(panic_on_answer: bool) -> Arc<Self> {
        Arc::new(Self {
            panic_on_answer,
            answers: Default::default(),
            notices: Default::default(),
        })
    }
}

impl heurist::turn::Messenger for PanickingChat {
    fn typing(
        &self,
        _chat: heurist::conversation::Conversation,
    ) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    fn live(
        &self,
        _chat: heurist::conversation::Conversation,
        _reply_to: Option<i32>,
        _turn: heurist::cancel::TurnId,
        _events: tokio::sync::mpsc::UnboundedReceiver<heurist::agent::AgentEvent>,
        _on_visible: heurist::turn::OnVisible,
    ) -> futures_util::future::BoxFuture<'static, Option<heurist::turn::Live>> {
        Box::pin(async { Some(heurist::turn::Live::default()) })
    }

    fn answer<'a>(
        &'a self,
        _chat: heurist::conversation::Conversation,
        _reply_to: Option<i32>,
        _live: heurist::turn::Live,
        markdown: &'a str,
        _keyboard: heurist::turn::Keyboard,
        _on_visible: heurist::turn::OnVisible,
    ) -> futures_util::future::BoxFuture<'a, Vec<i32>> {
        Box::pin(async move {
            assert!(!self.panic_on_answer, "a bug while showing the answer");
            self.answers.lock().unwrap().push(markdown.to_string());
            vec![1]
        })
    }

    fn set_keyboard(
        &self,
        _chat: heurist::ids::ChatId,
        _message: i32,
        _keyboard: heurist::turn::Keyboard,
    ) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn notice<'a>(
        &'a self,
        _chat: heurist::conversation::Conversation,
        text: &'a str,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move { self.notices.lock().unwrap().push(text.to_string()) })
    }

    fn image<'a>(
        &'a self,
        _file_id: &'a str,
    ) -> futures_util::future::BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(async { anyhow::bail!("no photos here") })
    }
}

#[tokio::test]
async fn a_panicking_turn_is_marked_failed_told_once_and_never_replayed() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::text("an answer that cannot be shown")
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(&tg, &llm.url, dir.path());
    let request = heurist::store::TurnRequest::new(
        heurist::ids::ChatId(ALICE),
        heurist::ids::UserId(ALICE as u64),
        "crash on me",
    );
    let input = heurist::turn::TurnInput::new(request, heurist::ids::UpdateId(77));
    {
        let app = heurist::App::new(config.clone()).unwrap();
        let chat = PanickingChat::new(true);
        let out: heurist::turn::SharedMessenger = chat.clone();
        assert!(heurist::turn::accept(&app, &out, input.clone()).await);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while chat.notices.lock().unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < until,
                "no notice after the panic"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            *chat.notices.lock().unwrap(),
            vec![heurist::texts::turn::PANIC_NOTICE.to_string()],
            "told once"
        );
        assert!(
            app.store().inbox().unfinished().is_empty(),
            "marked failed, not left pending or stored"
        );
        // Re-delivered by Telegram: still not processed again.
        assert!(!heurist::turn::accept(&app, &out, input.clone()).await);
    }
    // A restart on the same database: nothing is replayed, nothing is shown.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let app = loop {
        match heurist::App::new(config.clone()) {
            Ok(app) => break app,
            Err(e) => {
                assert!(std::time::Instant::now() < until, "cannot reopen: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let chat = PanickingChat::new(false);
    let out: heurist::turn::SharedMessenger = chat.clone();
    heurist::turn::recover(&app, &out).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(chat.answers.lock().unwrap().is_empty(), "not replayed");
    assert!(chat.notices.lock().unwrap().is_empty(), "not told again");
    assert_eq!(llm.agent_requests().len(), 1, "the LLM was asked once");
}

/// The stopped bot's database, opened by the test: `stop` waits up to 2 s for aborted tasks
/// to let go of it, and under load (the whole suite on one busy core) one may take longer.
async fn reopen(dir: &std::path::Path) -> sled::Db {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match sled::open(dir) {
            Ok(db) => return db,
            Err(e) => {
                assert!(std::time::Instant::now() < until, "cannot reopen: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test]
async fn an_unreadable_chat_state_stops_the_turn_with_an_error_and_keeps_the_history() {
    let llm = FakeLlm::start(|_, _| Reply::text("an answer")).await;
    let mut h = Harness::start(llm).await;
    let first = heurist::ids::UpdateId(h.tg.send_text(ALICE, "first") as u32);
    h.tg.wait_messages(ALICE, 1).await;
    // Disk damage while the bot is stopped: Alice's chat state no longer decodes.
    let dir = h.app().data_dir().store_dir();
    h.bot.take().unwrap().stop().await;
    let garbage: &[u8] = br#"{"window_start":0,"next_seq":"#;
    {
        let db = reopen(&dir).await;
        let chats = db.open_tree("chats").unwrap();
        chats.insert(ALICE.to_be_bytes(), garbage).unwrap();
        db.flush().unwrap();
    }
    h.bot = Some(heurist::start(h.config.clone()).await.unwrap());
    let requests = h.llm.agent_requests().len();

    let second = heurist::ids::UpdateId(h.tg.send_text(ALICE, "second") as u32);
    let told = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(
        told[1].params["text"],
        heurist::texts::turn::UNREADABLE_NOTICE
    );
    // Bob's chat goes on.
    h.tg.send_text(BOB, "hello");
    h.tg.wait_messages(BOB, 1).await;
    assert_eq!(
        h.llm.agent_requests().len(),
        requests + 1,
        "only Bob's turn asked the LLM"
    );
    let store = h.app().store();
    assert_eq!(
        store
            .history()
            .stored_answer(in_chat(ALICE), first)
            .as_deref(),
        Some("an answer")
    );
    assert_eq!(
        store.history().stored_answer(in_chat(ALICE), second),
        None,
        "nothing stored"
    );
    // Each update is marked done a moment after its reply was sent (Bob's too): wait for it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !store.inbox().unfinished().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        store.inbox().unfinished().is_empty(),
        "the message is done with, not resumed at every start"
    );
    h.bot.take().unwrap().stop().await;
    let db = reopen(&dir).await;
    let chats = db.open_tree("chats").unwrap();
    assert_eq!(
        chats.get(ALICE.to_be_bytes()).unwrap().as_deref(),
        Some(garbage),
        "the state is left as it was"
    );
    let history = db.open_tree("history").unwrap();
    assert_eq!(history.scan_prefix(ALICE.to_be_bytes()).count(), 1);
}

/// Asks a bot with the SSRF guard on (`fetch_allow_private = false`) to `fetch_url` each of
/// `targets` in one turn, and returns the tool result of each, in order.
async fn fetch_each(targets: &[String], ask: &str) -> Vec<String> {
    let urls = targets.to_vec();
    let llm = FakeLlm::start(move |req, i| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(400, "no");
        }
        match urls.get(i) {
            Some(url) => Reply::tool_call(&format!("c{i}"), "fetch_url", json!({"url": url})),
            None => Reply::text("done"),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.tools.fetch_allow_private = false;
        c.agent.max_iterations = 20;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, ask);
    h.tg.wait_messages(ALICE, 1).await;
    let last = h.llm.agent_requests().pop().unwrap();
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(results.len(), targets.len());
    h.stop().await;
    results
}
