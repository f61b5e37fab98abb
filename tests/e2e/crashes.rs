//! Nothing lost, nothing twice across `kill -9`: the real binary is killed at random points
//! while it takes updates and streams answers, restarted on the same database, and every
//! message ends up with exactly one answer message, or one restart notice, or (killed while
//! its turn ran, twice) one apology that it was given up.

use std::time::{Duration, Instant};

use crate::support::*;

/// The notice a chat gets when a crash came while its answer was on its way (the bot's
/// `texts::turn::RESTART_NOTICE`).
const RESTART_NOTICE: &str = heurist::texts::turn::RESTART_NOTICE;

/// Whether `text` is what a chat is told instead of its answer: the restart notice, or the
/// apology of a message whose turn the kills interrupted as often as `max_turn_attempts`
/// allows (2), given up so that a message that crashes the bot cannot do so at every start.
fn told_instead(text: &serde_json::Value) -> bool {
    *text == RESTART_NOTICE || *text == heurist::texts::turn::gave_up(2)
}

/// Streaming on, live edits every 100 ms, nothing but the answer (no options, no 👍/👎, no
/// reflection), so every message sent to a chat is its answer or the notice.
const CRASH_TOML: &str = "[llm]\nretry_base_ms = 20\n\
    [learning]\nskills_dir = \"/nonexistent\"\nreflect = false\nfeedback_buttons = false\n\
    [options]\nenabled = false\n\
    [telegram]\nchat_interval_ms = 100\npoll_timeout_secs = 1\nstreaming = true\n";

/// [`CRASH_TOML`] with native drafts off: a private chat's live answer is a message edited in
/// place, as in groups and where drafts are refused.
fn edits_crash_toml() -> String {
    format!("{CRASH_TOML}drafts = false\n")
}

/// Answers in one message when done, so the answer's text is the one `sendMessage`.
const UNSTREAMED_TOML: &str = "[llm]\nretry_base_ms = 20\n\
    [learning]\nskills_dir = \"/nonexistent\"\nreflect = false\nfeedback_buttons = false\n\
    [options]\nenabled = false\n\
    [telegram]\nchat_interval_ms = 100\npoll_timeout_secs = 1\nstreaming = false\n";

/// The answer the fake LLM streams to the message `token`.
fn answer_to(token: &str) -> String {
    format!("reply to {token}: one two three four five six seven eight nine ten eleven twelve")
}

/// A small seeded generator (xorshift64*): the kill points are random but reproducible from
/// the seed the test prints.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Spawns the bot and waits until it finished what the previous run left (recovery runs
/// before it asks for the webhook settings, right before it starts polling).
async fn spawn_recovered(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    dir: &std::path::Path,
    users: &str,
) -> BotProcess {
    spawn_recovered_with(tg, llm, dir, users, CRASH_TOML).await
}

/// [`spawn_recovered`] with `toml` as the config file.
async fn spawn_recovered_with(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    dir: &std::path::Path,
    users: &str,
    toml: &str,
) -> BotProcess {
    let before = tg.calls("getWebhookInfo").len();
    let bot = BotProcess::spawn_with(tg, &llm.url, dir, &[("HEURIST_ALLOWED_USERS", users)], toml);
    bot.started(tg, before, Duration::from_secs(20)).await;
    bot
}

#[tokio::test]
async fn kill_9_at_random_points_loses_nothing_and_answers_nothing_twice() {
    const FIRST_USER: i64 = 5000;
    const MAX_MESSAGES: i64 = 60;
    let seed = std::env::var("HEURIST_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
        | 1;
    println!("kill -9 loop seed: {seed} (rerun with HEURIST_KILL_SEED={seed})");
    let mut rng = Rng(seed);
    let llm = FakeLlm::start(|req, _| {
        let answer = answer_to(&last_user_text(req));
        // A turn resumed into a message already on screen asks without streaming.
        if req["stream"] == true {
            Reply::streamed(&answer, 8, Duration::from_millis(80))
        } else {
            Reply::text(&answer).after(Duration::from_millis(640))
        }
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let users: Vec<String> = (FIRST_USER..FIRST_USER + MAX_MESSAGES)
        .map(|u| u.to_string())
        .collect();
    let users = users.join(",");

    // One message per chat, so every message sent to a chat belongs to that one message.
    let mut sent: Vec<(i64, String)> = Vec::new();
    let started = Instant::now();
    let mut kills = 0;
    // About 25 s, and at least 5 kills however slowly a loaded machine starts the binary
    // (bounded at 90 s).
    let more = |kills: i32| {
        (started.elapsed() < Duration::from_secs(25) || kills < 5)
            && started.elapsed() < Duration::from_secs(90)
    };
    while more(kills) && (sent.len() as i64) < MAX_MESSAGES - 3 {
        let mut bot = spawn_recovered(&tg, &llm, dir.path(), &users).await;
        for _ in 0..=rng.below(3) {
            let chat = FIRST_USER + sent.len() as i64;
            let token = format!("msg-{}", sent.len());
            tg.send_text(chat, &token);
            sent.push((chat, token));
            tokio::time::sleep(Duration::from_millis(rng.below(300))).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
        bot.kill();
        kills += 1;
    }

    // A last run finishes what every crash left.
    let bot = spawn_recovered(&tg, &llm, dir.path(), &users).await;
    let resolved = |chat: i64, token: &str| {
        tg.messages_to(chat)
            .iter()
            .any(|c| told_instead(&c.params["text"]))
            || tg.screen(chat) == [answer_to(token)]
    };
    let until = Instant::now() + Duration::from_secs(30);
    while !sent.iter().all(|(chat, token)| resolved(*chat, token)) {
        if Instant::now() > until {
            let open: Vec<_> = sent
                .iter()
                .filter(|(chat, token)| !resolved(*chat, token))
                .map(|(chat, token)| (token, tg.screen(*chat)))
                .collect();
            panic!(
                "seed {seed}: not every message was answered: {open:#?}\nlast log:\n{}",
                bot.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Anything that would come twice comes now.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut notices = 0;
    for (chat, token) in &sent {
        let messages = tg.messages_to(*chat);
        let (told, answers): (Vec<_>, Vec<_>) = messages
            .iter()
            .partition(|c| told_instead(&c.params["text"]));
        assert!(
            answers.len() <= 1 && told.len() <= 1,
            "seed {seed}: {token} got {} answer messages and {} notices: {messages:#?}",
            answers.len(),
            told.len()
        );
        if told.is_empty() {
            assert_eq!(
                tg.screen(*chat),
                [answer_to(token)],
                "seed {seed}: {token} shows its whole answer, once"
            );
        }
        notices += told.len();
    }
    println!(
        "{} messages, {kills} kills, {notices} restart notices or apologies, {} answered in full",
        sent.len(),
        sent.len() - notices
    );
    assert!(kills >= 5, "the loop killed the bot often enough ({kills})");
}

#[tokio::test]
async fn kill_9_after_get_updates_before_the_turn_starts_still_answers_once() {
    let llm =
        FakeLlm::start(|req, _| Reply::text(&format!("answer to {}", last_user_text(req)))).await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let allowed = ALICE.to_string();
    let env = [("HEURIST_ALLOWED_USERS", allowed.as_str())];
    // Both updates come in one getUpdates; the first one's handler (a button press, answered
    // at once) hangs on Telegram, so the second waits behind it in the chat's line, received
    // but not yet recorded, when the kill comes.
    tg.hang_next("answerCallbackQuery");
    tg.press(ALICE, ALICE, 1, "__act__nothing");
    let waiting = tg.send_text(ALICE, "hello");
    let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &env, UNSTREAMED_TOML);
    tg.wait_for(|t| (t.hung() == 1).then_some(())).await;
    // Give an eager listener every chance to confirm the batch, then kill.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let offsets: Vec<i64> = tg
        .calls("getUpdates")
        .iter()
        .filter_map(|c| c.params["offset"].as_i64())
        .collect();
    assert!(
        offsets.iter().all(|&offset| offset <= waiting),
        "nothing was confirmed while an update was unhandled: {offsets:?}"
    );
    assert!(llm.agent_requests().is_empty(), "the turn had not started");
    bot.kill();

    let _bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &env, UNSTREAMED_TOML);
    tg.wait_text(ALICE, "answer to hello", Duration::from_secs(20))
        .await
        .expect("answered after the restart");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let answers = tg
        .messages_to(ALICE)
        .iter()
        .filter(|c| c.params["text"] == "answer to hello")
        .count();
    assert_eq!(answers, 1, "answered once");
    assert_eq!(llm.agent_requests().len(), 1, "the LLM was asked once");
}

#[tokio::test]
async fn the_webhook_answers_telegram_only_once_the_message_is_in_the_inbox() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = listener.local_addr().unwrap();
    drop(listener);
    // The turn stays unanswered for the whole test, so its inbox entry stays pending.
    let llm = FakeLlm::start(|_, _| Reply::text("late").after(Duration::from_secs(30))).await;
    let h = Harness::start_with(llm, move |c| {
        c.telegram.webhook_url = "https://bot.example.com/telegram/hook".into();
        c.telegram.webhook_listen = listen.to_string();
        c.telegram.webhook_secret = "s3cret".into();
        c.options.enabled = false;
    })
    .await;
    let message = |id: i64, text: &str| {
        serde_json::json!({
            "message_id": id, "date": 1_700_000_000, "text": text,
            "chat": {"id": ALICE, "type": "private", "first_name": "A"},
            "from": crate::support::telegram::user_json(ALICE),
        })
    };
    let post = |id: i64, text: &str| {
        let update = if text == "press" {
            serde_json::json!({"update_id": id, "callback_query": {
                "id": "q", "chat_instance": "ci", "data": "__act__nothing",
                "from": crate::support::telegram::user_json(ALICE),
                "message": message(1, "an answer"),
            }})
        } else {
            serde_json::json!({"update_id": id, "message": message(id, text)})
        };
        let request = reqwest::Client::new()
            .post(format!("http://{listen}/telegram/hook"))
            .header("X-Telegram-Bot-Api-Secret-Token", "s3cret")
            .json(&update);
        tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) })
    };
    // The first update's handler (a button press, answered at once) waits on Telegram, so
    // the message behind it in the chat's line is received but not yet recorded.
    h.tg.hang_next("answerCallbackQuery");
    assert_eq!(post(40, "press").await.unwrap().unwrap(), 200);
    let waiting = post(41, "remember me");
    h.tg.wait_for(|t| (t.hung() == 1).then_some(())).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "Telegram is not answered while the message is not recorded"
    );
    h.tg.release_hung();
    assert_eq!(waiting.await.unwrap().unwrap(), 200);
    let recorded: Vec<(u32, String)> = h
        .app()
        .store()
        .inbox()
        .unfinished()
        .into_iter()
        .map(|(id, entry)| (id.0, entry.request.text))
        .collect();
    assert_eq!(
        recorded,
        [(41, "remember me".to_string())],
        "recorded when Telegram was answered"
    );
    h.stop().await;
}

/// A streamed answer too long for one message is killed after its second message appeared:
/// the restart finishes the answer in both messages, and sends no third (edits: drafts off;
/// a drafted answer has no message to finish, see drafts.rs).
#[tokio::test]
async fn kill_9_during_a_long_answer_finishes_it_in_the_messages_already_shown() {
    const CHAT: i64 = 6000;
    let long = format!("{} END", "word ".repeat(1400));
    let answer = long.clone();
    let llm = FakeLlm::start(move |req, _| {
        if req["stream"] == true {
            Reply::streamed(&answer, 40, Duration::from_millis(150))
        } else {
            Reply::text(&answer)
        }
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let users = CHAT.to_string();
    let mut bot = spawn_recovered_with(&tg, &llm, dir.path(), &users, &edits_crash_toml()).await;
    tg.send_text(CHAT, "a long one");
    let until = Instant::now() + Duration::from_secs(20);
    while tg.messages_to(CHAT).len() < 2 {
        assert!(
            Instant::now() < until,
            "no second live message; log:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The display edits again only after the second message's id was recorded (flushed): an
    // edit after it proves the record is on disk.
    let edits = |tg: &FakeTelegram| {
        tg.calls("editMessageText")
            .into_iter()
            .filter(|c| c.params["chat_id"] == CHAT)
            .count()
    };
    let before = edits(&tg);
    while edits(&tg) == before {
        assert!(
            Instant::now() < until,
            "no edit after the second message; log:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !tg.screen(CHAT).last().is_some_and(|t| t.ends_with("END")),
        "killed while the answer was still streaming"
    );
    bot.kill();

    let bot = spawn_recovered_with(&tg, &llm, dir.path(), &users, &edits_crash_toml()).await;
    let until = Instant::now() + Duration::from_secs(20);
    while !tg.screen(CHAT).last().is_some_and(|t| t.ends_with("END")) {
        assert!(
            Instant::now() < until,
            "the answer was not finished; log:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = tg.messages_to(CHAT);
    assert_eq!(sent.len(), 2, "no third message: {sent:#?}");
    let screen = tg.screen(CHAT);
    assert_eq!(screen.len(), 2, "{screen:#?}");
    assert_eq!(
        screen.join(" ").split_whitespace().count(),
        long.split_whitespace().count(),
        "the whole answer, once"
    );
}
