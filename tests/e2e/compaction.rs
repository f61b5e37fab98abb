//! Bounded disk: the real binary compacts its store while it runs (restarting in place) and
//! at start-up, and a `kill -9` in the middle of a compaction loses no record.

use std::path::Path;
use std::time::{Duration, Instant};

use heurist::store::Store;
use heurist::store::compaction::CompactionPolicy;

use crate::support::*;

/// Compaction on any growth of 10 %, checked every second; answers in one message, nothing but
/// the answer (no options, no 👍/👎, no reflection). Top-level keys come before the tables.
const COMPACTING_TOML: &str = "compact_factor = 1.1\ncompact_min_mb = 0\nprune_interval_secs = 1\n\
    [llm]\nretry_base_ms = 20\n\
    [learning]\nskills_dir = \"/nonexistent\"\nreflect = false\nfeedback_buttons = false\n\
    [options]\nenabled = false\n\
    [telegram]\nchat_interval_ms = 100\npoll_timeout_secs = 1\nstreaming = false\n";

const NEVER: CompactionPolicy = CompactionPolicy::NEVER;

/// The generation `CURRENT` names in the data directory `db`.
fn generation(db: &Path) -> u64 {
    let current = std::fs::read_to_string(db.join("CURRENT")).unwrap_or_default();
    current
        .split_whitespace()
        .next()
        .and_then(|name| name.strip_prefix("store-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The `store-*` directories in `db`.
fn generations(db: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(db)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("store-"))
        .collect();
    names.sort();
    names
}

fn answer_to(text: &str) -> String {
    let token = text.split_whitespace().next().unwrap_or_default();
    let words = "words of a long answer ".repeat(150);
    format!("answer to {token}: {}", words.trim_end())
}

#[tokio::test]
async fn a_running_bot_compacts_its_store_in_place_and_answers_every_message_once() {
    const FIRST: i64 = 7000;
    let llm = FakeLlm::start(|req, _| Reply::text(&answer_to(&last_user_text(req)))).await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let users: Vec<String> = (FIRST..FIRST + 400).map(|u| u.to_string()).collect();
    let users = users.join(",");
    let mut bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &users)],
        COMPACTING_TOML,
    );

    // One message per chat, a new chat every 150 ms, until the bot has compacted in place
    // twice, and then a few more: every message sent before, during and after the restarts.
    let mut sent: Vec<(i64, String)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(120);
    let mut after = 0;
    while after < 5 {
        assert!(
            Instant::now() < until && sent.len() < 400,
            "the bot did not compact in place twice ({} messages sent); log:\n{}",
            sent.len(),
            bot.logs()
        );
        let chat = FIRST + sent.len() as i64;
        let text = format!("m{} {}", sent.len(), "a long question ".repeat(100));
        tg.send_text(chat, &text);
        sent.push((chat, text));
        tokio::time::sleep(Duration::from_millis(150)).await;
        if generation(&db) >= 3 {
            after += 1;
        }
    }
    assert!(
        bot.child.try_wait().unwrap().is_none(),
        "the bot compacted without exiting"
    );
    let logs = bot.logs();
    assert!(
        logs.matches("restarting in place to compact the store")
            .count()
            >= 2,
        "{logs}"
    );

    let answered = |chat: i64, text: &str| tg.screen(chat) == [answer_to(text)];
    let until = Instant::now() + Duration::from_secs(30);
    while !sent.iter().all(|(chat, text)| answered(*chat, text)) {
        assert!(
            Instant::now() < until,
            "not every message was answered: {:#?}\nlog:\n{}",
            sent.iter()
                .filter(|(chat, text)| !answered(*chat, text))
                .map(|(chat, _)| (chat, tg.screen(*chat)))
                .collect::<Vec<_>>(),
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (chat, text) in &sent {
        assert_eq!(
            tg.messages_to(*chat).len(),
            1,
            "{} was answered once",
            &text[..4]
        );
    }
    assert_eq!(
        llm.agent_requests().len(),
        sent.len(),
        "each message ran once"
    );

    bot.terminate();
    assert_eq!(bot.wait(Duration::from_secs(20)).await, Some(0));
    let live = generation(&db);
    assert_eq!(
        generations(&db),
        [format!("store-{live}")],
        "one generation left"
    );
    let (store, _) = Store::open_data_dir(&db, 1 << 20, NEVER).unwrap();
    for (chat, _) in &sent {
        assert_eq!(
            store
                .history()
                .window(in_chat(*chat), 1 << 20)
                .unwrap()
                .messages
                .len(),
            2,
            "chat {chat} kept its turn through every compaction"
        );
    }
}

#[tokio::test]
async fn kill_9_during_a_start_up_compaction_loses_no_record() {
    let llm = FakeLlm::start(|req, _| Reply::text(&answer_to(&last_user_text(req)))).await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // A store big enough that its copy takes a while: 40 chats × 100 turns of about 3 KB.
    let (store, _) = Store::open_data_dir(&db, 1 << 24, NEVER).unwrap();
    for chat in 0..40i64 {
        for i in 0..100 {
            let question = format!("q{i} {}", "question words ".repeat(60));
            let turn = [
                heurist::llm::ChatMessage::user(question),
                heurist::llm::ChatMessage::assistant(answer_to("x")),
            ];
            assert!(
                store
                    .history()
                    .append(in_chat(chat), 0, None, &turn, &Default::default())
                    .unwrap()
            );
        }
    }
    store.db().flush().unwrap();
    let live = store.db().live_bytes().unwrap();
    drop(store);

    let mut mid_copy = 0;
    for round in 0..6 {
        // Due at once: as if the store had grown since its last compaction.
        let n = generation(&db);
        std::fs::write(db.join("CURRENT.tmp"), format!("store-{n} 0\n")).unwrap();
        std::fs::rename(db.join("CURRENT.tmp"), db.join("CURRENT")).unwrap();
        let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &[], COMPACTING_TOML);
        // This run's copy has begun (a copy an earlier kill left is no sign of it).
        let until = Instant::now() + Duration::from_secs(20);
        while !bot.logs().contains("compacting the store") {
            assert!(
                Instant::now() < until,
                "round {round}: no compaction began; log:\n{}",
                bot.logs()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Somewhere in the copy, or just after it.
        tokio::time::sleep(Duration::from_millis(round * 40)).await;
        bot.kill();
        // Killed before the switch to the copy.
        if generation(&db) == n {
            mid_copy += 1;
        }
    }
    println!("{mid_copy} of 6 kills came in the middle of a copy");
    assert!(
        mid_copy >= 1,
        "at least one kill came in the middle of a copy"
    );

    // A last start finishes (or redoes) the compaction and runs.
    let n = generation(&db);
    std::fs::write(db.join("CURRENT.tmp"), format!("store-{n} 0\n")).unwrap();
    std::fs::rename(db.join("CURRENT.tmp"), db.join("CURRENT")).unwrap();
    let before = tg.calls("getWebhookInfo").len();
    let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &[], COMPACTING_TOML);
    bot.started(&tg, before, Duration::from_secs(30)).await;
    bot.terminate();
    assert_eq!(bot.wait(Duration::from_secs(20)).await, Some(0));

    assert!(generation(&db) > n, "the last start compacted");
    assert_eq!(
        generations(&db),
        [format!("store-{}", generation(&db))],
        "one generation left"
    );
    let (store, _) = Store::open_data_dir(&db, 1 << 24, NEVER).unwrap();
    for chat in 0..40i64 {
        assert_eq!(
            store
                .history()
                .window(in_chat(chat), usize::MAX)
                .unwrap()
                .messages
                .len(),
            200,
            "chat {chat} kept every turn"
        );
    }
    // Every record, byte for byte in size; the id counter is the one record a start may add.
    let now = store.db().live_bytes().unwrap();
    assert!(
        now >= live && now <= live + 64,
        "live bytes {live} before, {now} after ({mid_copy} kills mid-copy)"
    );
}
