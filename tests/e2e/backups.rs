//! Online backups and their restore: a backup taken through `/backup` while 20 chats are
//! answered restores (through the real binary's `heurist restore`) into a store that holds
//! every conversation, lesson, memory and task as they were, record by record, and the restored
//! bot answers and fires its tasks on time; `kill -9` in the middle of a backup leaves the one
//! before it restorable; a damaged file or a data directory in use is refused in one line and
//! nothing changes; `/backup` is an admin's, in a private chat; the schedule writes one at
//! start when the last is due, and not again before its interval.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use heurist::Config;
use heurist::ids::UserId;
use heurist::schedule::{TaskKind, Timing};
use heurist::store::compaction::CompactionPolicy;
use heurist::store::{Store, Task};

use crate::support::*;

/// The users of the 20 chats (private chats: chat id = user id).
const FIRST_USER: i64 = 3000;
const CHATS: i64 = 20;
/// Questions each chat asks, one after the other.
const QUESTIONS: usize = 6;

/// Answers "answer to: <question>" after a moment, so turns are running while the backup is
/// taken.
async fn slow_llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::text(&format!("answer to: {}", last_user_text(req))).after(Duration::from_millis(40))
    })
    .await
}

/// The 20 chats' users allowed, nothing learned or offered along the way (so the lessons, the
/// memories and the tasks stay as they were set up while the chats are answered).
fn twenty_chats(config: &mut Config) {
    config
        .access
        .allowed_users
        .extend((FIRST_USER..FIRST_USER + CHATS).map(|u| UserId(u as u64)));
    config.learning.reflect = false;
    config.learning.feedback_buttons = false;
    config.options.enabled = false;
    config.agent.time_zone = "UTC".into();
}

/// `heurist restore FILE` as an operator runs it, into `data_dir`: its exit code, stdout and
/// stderr.
fn restore_binary(file: &Path, data_dir: &Path) -> (Option<i32>, String, String) {
    let cwd = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_heurist"))
        .arg("restore")
        .arg(file)
        .current_dir(cwd.path())
        .env_clear()
        .env("TELOXIDE_TOKEN", "123456:TEST-TOKEN")
        .env("HEURIST_DATA_DIR", data_dir)
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (
        output.status.code(),
        text(output.stdout),
        text(output.stderr),
    )
}

/// Opens a stopped bot's store (the original, or a restored one) to compare.
fn open(dir: &Path) -> Store {
    Store::open_data_dir(dir, 1 << 20, CompactionPolicy::NEVER)
        .unwrap()
        .0
}

/// Lessons (one approved, one pending, with their scores) imported as an operator would,
/// before the bot starts.
async fn import_lessons(config: &Config, dir: &Path) {
    let file = dir.join("lessons.jsonl");
    let lessons = [
        r#"{"text": "Restart the nginx service after editing its configuration file", "review": "Approved", "uses": 4, "successes": 3, "failures": 1, "up": 2}"#,
        r#"{"text": "Run cargo fmt before committing Rust code changes", "review": "Pending", "uses": 1, "down": 1}"#,
    ];
    std::fs::write(&file, lessons.join("\n")).unwrap();
    heurist::ops::lessons::import(config, &file, true)
        .await
        .unwrap();
}

/// A reminder of `user` in their private chat at `at` (unix seconds).
fn reminder(user: i64, request: &str, at: i64) -> Task {
    Task {
        id: 0,
        user: UserId(user as u64),
        chat: heurist::ids::ChatId(user),
        topic: None,
        kind: TaskKind::Reminder,
        request: request.into(),
        timing: Timing::Once { at },
        zone: "UTC".into(),
        next_run: at,
        created: chrono::Utc::now().timestamp(),
        tainted: false,
    }
}

/// Answers the 20 chats have on screen now.
fn answered(tg: &FakeTelegram) -> usize {
    (FIRST_USER..FIRST_USER + CHATS)
        .map(|chat| {
            tg.messages_to(chat)
                .iter()
                .filter(|m| m.text().starts_with("answer to:"))
                .count()
        })
        .sum()
}

/// Each of the 20 chats asks its questions one after the other, each once the last is
/// answered.
fn ask_all(tg: &FakeTelegram) -> Vec<tokio::task::JoinHandle<()>> {
    (FIRST_USER..FIRST_USER + CHATS)
        .map(|chat| {
            let tg = tg.clone();
            tokio::spawn(async move {
                for n in 0..QUESTIONS {
                    tg.send_text(chat, &format!("question {n} from {chat}"));
                    tg.wait_messages(chat, n + 1).await;
                }
            })
        })
        .collect()
}

/// `/backup` from the admin: the file its reply names, in `dir`.
async fn backup_now(tg: &FakeTelegram, dir: &Path) -> PathBuf {
    let before = tg.messages_to(ADMIN).len();
    tg.send_text(ADMIN, "/backup");
    let reply = tg.wait_messages(ADMIN, before + 1).await[before].text();
    let name = reply
        .strip_prefix("💾 Backup written: ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{reply}"));
    assert!(reply.ends_with(" KB)"), "{reply}");
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_20_chats_are_answered_restores_every_record_and_the_bot_goes_on() {
    let llm = slow_llm().await;
    let root = tempfile::tempdir().unwrap();
    let tg = FakeTelegram::start().await;
    let mut config = config(&tg, &llm.url, &root.path().join("db"));
    twenty_chats(&mut config);
    import_lessons(&config, root.path()).await;
    let bot = heurist::start(config.clone()).await.unwrap();
    let store = bot.app().store();
    let now = chrono::Utc::now().timestamp();
    store
        .memories()
        .change(UserId(ALICE as u64), |facts| {
            facts.remember("likes green tea", now, 50)
        })
        .unwrap();
    // Due once the restored bot runs (the original is stopped before).
    let due = now + 25;
    store
        .tasks()
        .add(reminder(3001, "water the plants", due))
        .unwrap();
    store
        .tasks()
        .add(reminder(3002, "renew the passport", now + 86_400))
        .unwrap();

    let chats = ask_all(&tg);
    while answered(&tg) < 30 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let answered_before = answered(&tg);
    let file = backup_now(&tg, &config.backup_dir()).await;
    let answered_after = answered(&tg);
    for chat in chats {
        chat.await.unwrap();
    }
    assert!(
        answered_after < CHATS as usize * QUESTIONS,
        "the backup was taken while the chats were answered"
    );
    bot.stop().await;

    let restored_dir = root.path().join("restored");
    let (code, out, err) = restore_binary(&file, &restored_dir);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("restored "), "{out}");
    compare(
        &config.data_dir,
        &restored_dir,
        answered_before,
        answered_after,
    );
    the_restored_bot_answers_and_fires_its_task(&tg, &llm, &restored_dir, due).await;
}

/// The restored store holds the original's lessons, memories and tasks record for record, and
/// of each conversation the turns up to the backup, each whole, equal to the original's.
fn compare(original: &Path, restored: &Path, at_least: usize, at_most: usize) {
    let (original, restored) = (open(original), open(restored));
    let lessons = original.learning().lessons();
    assert_eq!(lessons.len(), 2);
    assert_eq!(restored.learning().lessons(), lessons);
    // Alice does not chat meanwhile (a fact is touched as it is used).
    let user = UserId(ALICE as u64);
    assert_eq!(
        restored.memories().facts(user),
        original.memories().facts(user)
    );
    assert_eq!(restored.memories().facts(user).list().len(), 1);
    assert_eq!(restored.tasks().all(), original.tasks().all());
    assert_eq!(restored.tasks().all().len(), 2);
    let mut turns = 0;
    for chat in FIRST_USER..FIRST_USER + CHATS {
        let window = |store: &Store| store.history().window(in_chat(chat), 1 << 20).unwrap();
        let (had, kept) = (window(&original).messages, window(&restored).messages);
        assert_eq!(had.len(), QUESTIONS * 2, "chat {chat}: every turn stored");
        assert!(kept.len() % 2 == 0, "chat {chat}: whole turns only");
        assert_eq!(kept[..], had[..kept.len()], "chat {chat}: as they were");
        for (n, pair) in kept.chunks(2).enumerate() {
            let question = format!("question {n} from {chat}");
            assert_eq!(pair[0].content(), question);
            assert_eq!(pair[1].content(), format!("answer to: {question}"));
        }
        turns += kept.len() / 2;
    }
    // Each answer on screen was stored before it was shown: those shown before the backup
    // are in it; and past those shown once it was written, at most the one turn each chat may
    // have had stored and not yet shown (a chat asks again only once it sees the answer).
    let at_most = at_most + CHATS as usize;
    assert!(
        (at_least..=at_most).contains(&turns),
        "{at_least} <= {turns} <= {at_most}"
    );
}

/// A bot on the restored store, for the same bot on Telegram (whose update ids go on): a
/// user's conversation goes on from what was restored, and the reminder fires at its time
/// (not before), once.
async fn the_restored_bot_answers_and_fires_its_task(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    dir: &Path,
    due: i64,
) {
    let mut config = config(tg, &llm.url, dir);
    twenty_chats(&mut config);
    let bot = heurist::start(config).await.unwrap();
    let chat = FIRST_USER + 5;
    let restored = bot
        .app()
        .store()
        .history()
        .window(in_chat(chat), 1 << 20)
        .unwrap()
        .messages
        .len();
    tg.send_text(chat, "and now?");
    // Recovery may speak in this chat first (a turn under way at the backup's moment).
    let answered = tg
        .wait_text(chat, "answer to: and now?", Duration::from_secs(20))
        .await;
    assert!(answered.is_some(), "the restored bot answers");
    let asked = llm
        .agent_requests()
        .into_iter()
        .rev()
        .find(|r| last_user_text(r) == "and now?")
        .unwrap();
    let sent = asked["messages"].as_array().unwrap().len();
    assert!(
        sent > restored,
        "the restored history is in the request ({sent} messages, {restored} restored)"
    );
    let fired = tg
        .wait_text(
            FIRST_USER + 1,
            "⏰ Reminder: water the plants",
            Duration::from_secs(40),
        )
        .await;
    assert!(fired.is_some(), "the reminder fired");
    assert!(chrono::Utc::now().timestamp() >= due, "not before its time");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reminders = tg
        .messages_to(FIRST_USER + 1)
        .iter()
        .filter(|m| m.text().starts_with("⏰ Reminder"))
        .count();
    assert_eq!(reminders, 1, "once");
    bot.stop().await;
}

#[tokio::test]
async fn kill_9_during_a_backup_leaves_the_backup_before_it_restorable() {
    let tg = FakeTelegram::start().await;
    let llm = FakeLlm::answering("noted").await;
    let data = tempfile::tempdir().unwrap();
    let backups = data.path().join("backups");
    let admin = [("HEURIST_ADMINS", "9001")];
    let bot = BotProcess::spawn(&tg, &llm.url, data.path(), &admin);
    bot.started(&tg, 0, Duration::from_secs(20)).await;
    tg.send_text(ALICE, "remember the first thing");
    tg.wait_messages(ALICE, 1).await;
    let first = backup_now(&tg, &backups).await;
    bot.terminate();
    let mut bot = bot;
    assert_eq!(bot.wait(Duration::from_secs(20)).await, Some(0));

    let marker = data.path().join("paused");
    let marker_env = marker.display().to_string();
    let env = [admin[0], ("HEURIST_TEST_PAUSE_BACKUP", marker_env.as_str())];
    let mut bot = BotProcess::spawn(&tg, &llm.url, data.path(), &env);
    bot.started(&tg, 1, Duration::from_secs(20)).await;
    tg.send_text(ALICE, "and a second thing");
    tg.wait_messages(ALICE, 2).await;
    tg.send_text(ADMIN, "/backup");
    let until = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(Instant::now() < until, "no pause: {}", bot.logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bot.kill();

    let mut names: Vec<String> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    let half = backups.join(&names[0]);
    assert!(names[0].starts_with(".heurist-") && names[0].ends_with(".backup.tmp"));
    assert!(std::fs::metadata(&half).unwrap().len() > 0, "cut mid-way");
    assert_eq!(backups.join(&names[1]), first);

    let (code, out, err) = restore_binary(&first, &data.path().join("restored"));
    assert_eq!(code, Some(0), "{out}{err}");
    let restored = open(&data.path().join("restored"));
    let texts: Vec<String> = restored
        .history()
        .window(in_chat(ALICE), 1 << 20)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.content().to_string())
        .collect();
    assert_eq!(texts, ["remember the first thing", "noted"]);
    let (code, _, err) = restore_binary(&half, &data.path().join("from-half"));
    assert_eq!(code, Some(2));
    assert!(err.contains("truncated"), "{err}");
    assert!(!data.path().join("from-half").exists());

    // The next backup clears the leftover.
    let bot = BotProcess::spawn(&tg, &llm.url, data.path(), &admin);
    bot.started(&tg, 2, Duration::from_secs(20)).await;
    backup_now(&tg, &backups).await;
    let leftovers = std::fs::read_dir(&backups)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[tokio::test]
async fn a_damaged_backup_or_a_data_directory_in_use_is_refused_in_one_line_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/backup-v1.backup"
    ))
    .unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "truncated",
            good[..good.len() * 2 / 3].to_vec(),
            "is truncated",
        ),
        ("corrupted", flipped, "is corrupted"),
        ("not a backup", b"hello".to_vec(), "not a Heurist backup"),
    ];
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (name, bytes, says) in cases {
        let file = dir.path().join(format!("{name}.backup"));
        std::fs::write(&file, bytes).unwrap();
        for into in [dir.path().join("missing"), empty.clone()] {
            let (code, out, err) = restore_binary(&file, &into);
            assert_eq!(code, Some(2), "{name}: {out}{err}");
            assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
            assert!(
                err.starts_with("heurist: ") && err.contains(says),
                "{name}: {err}"
            );
            assert!(out.is_empty(), "{name}: {out}");
        }
        assert!(!dir.path().join("missing").exists(), "{name}");
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "{name}");
    }
    let file = dir.path().join("good.backup");
    std::fs::write(&file, &good).unwrap();
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("CURRENT"), "store-1 0\n").unwrap();
    let (code, _, err) = restore_binary(&file, &busy);
    assert_eq!(code, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(
        std::fs::read_to_string(busy.join("CURRENT")).unwrap(),
        "store-1 0\n"
    );
    let (code, out, err) = restore_binary(&file, &empty);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("into"), "{out}");
}

#[tokio::test]
async fn backup_is_for_admins_in_a_private_chat() {
    let h = Harness::start(FakeLlm::answering("ok").await).await;
    let dir = h.config.backup_dir();
    h.tg.send_text(ALICE, "/backup");
    let refused = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(
        refused[0].text(),
        "Sorry, only the bot's admins can do that."
    );
    const GROUP: i64 = -100_555;
    h.tg.send_in_chat(GROUP, ADMIN, "/backup");
    let refused = h.tg.wait_messages(GROUP, 1).await;
    assert!(
        refused[0].text().contains("private chat"),
        "{}",
        refused[0].text()
    );
    assert!(backup_files(&dir).is_empty(), "nothing written");
    let file = backup_now(&h.tg, &dir).await;
    assert_eq!(backup_files(&dir), [file]);
    h.stop().await;
}

/// The backups in `dir`.
fn backup_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "backup"))
        .collect()
}

#[tokio::test]
async fn the_schedule_backs_up_at_start_when_due_and_not_again_before_its_interval() {
    let mut h = Harness::start_with(FakeLlm::answering("ok").await, |config| {
        config.backup.every_hours = 24;
    })
    .await;
    let dir = h.config.backup_dir();
    let until = Instant::now() + Duration::from_secs(10);
    while backup_files(&dir).is_empty() {
        assert!(Instant::now() < until, "no backup at start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(backup_files(&dir).len(), 1, "the last one is not due yet");
    h.stop().await;
}
