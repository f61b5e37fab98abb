//! Poison updates through the real binary: a message whose turn aborts the process (the debug
//! build's `HEURIST_TEST_ABORT_ON` trigger, as a stack overflow would) crashes it at most
//! `max_turn_attempts` times. Then it is given up with one apology, the bot stays up and
//! answers everyone else, and the message never runs again. The same holds for a scheduled
//! run. And the leftovers of a `kill -9`: the working reaction is taken off.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;

use crate::support::llm::stalling_llm;
use crate::support::*;

/// What makes a turn abort the process as it starts (the trigger's marker).
const POISON: &str = "POISON-4711";

/// Nothing but the answer (no options, no 👍/👎, no reflection), answered whole.
const PLAIN_TOML: &str = "[llm]\nretry_base_ms = 20\n\
    [learning]\nskills_dir = \"/nonexistent\"\nreflect = false\nfeedback_buttons = false\n\
    [options]\nenabled = false\n[agent]\ntime_zone = \"UTC\"\n\
    [telegram]\npoll_timeout_secs = 1\nstreaming = false\n";

/// The apology of an update given up after two starts.
fn apology() -> String {
    heurist::texts::turn::gave_up(2)
}

/// The apology for a scheduled task's run: the task is cancelled too.
fn task_apology() -> String {
    format!("{}\n\n{}", apology(), heurist::texts::turn::TASK_CANCELLED)
}

/// A model that answers "answer to <message>", and schedules a task when asked to: the message
/// "schedule the poison" becomes a `schedule_task` call, two seconds from now, whose request
/// holds [`POISON`] (the message itself does not, so its own turn runs).
async fn model() -> FakeLlm {
    FakeLlm::start(|req, _| {
        let messages = req["messages"].as_array().unwrap();
        if messages.last().is_some_and(|m| m["role"] == "tool") {
            return Reply::text("scheduled");
        }
        let text = last_user_text(req);
        if text == "schedule the poison" {
            let when = Utc::now() + chrono::Duration::seconds(2);
            let args = json!({
                "request": format!("check {POISON}"),
                "kind": "task",
                "when": when.format("%Y-%m-%d %H:%M:%S").to_string(),
            });
            return Reply::tool_call("call_1", "schedule_task", args);
        }
        Reply::text(&format!("answer to {text}"))
    })
    .await
}

/// The bot on `dir` with the crash trigger armed.
fn spawn(tg: &FakeTelegram, llm: &FakeLlm, dir: &std::path::Path) -> BotProcess {
    let env = [("HEURIST_TEST_ABORT_ON", POISON)];
    BotProcess::spawn_with(tg, &llm.url, dir, &env, PLAIN_TOML)
}

/// Runs the bot, starting it again each time it dies, until `done` holds (at most 60 s and
/// 5 crashes): the running bot, and how many times it died on the way.
async fn keep_up(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    dir: &std::path::Path,
    mut bot: BotProcess,
    done: impl Fn(&FakeTelegram) -> bool,
) -> (BotProcess, usize) {
    let until = Instant::now() + Duration::from_secs(60);
    let mut crashes = 0;
    while !done(tg) {
        if let Some(status) = bot.child.try_wait().unwrap() {
            crashes += 1;
            assert!(
                crashes <= 5,
                "a crash loop: died {crashes} times ({status}); log:\n{}",
                bot.logs()
            );
            bot = spawn(tg, llm, dir);
        }
        assert!(
            Instant::now() < until,
            "not done in time; log:\n{}",
            bot.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (bot, crashes)
}

/// The messages to `chat` with exactly `text`.
fn count(tg: &FakeTelegram, chat: i64, text: &str) -> usize {
    tg.messages_to(chat)
        .iter()
        .filter(|c| c.text() == text)
        .count()
}

/// Restarts the bot once more and waits a while: the poison update does not run again (the
/// bot stays up), and nothing more is sent to Alice.
async fn never_again(tg: &FakeTelegram, llm: &FakeLlm, dir: &std::path::Path, mut bot: BotProcess) {
    let sent = tg.messages_to(ALICE).len();
    // Stopped as a service manager stops it (a kill right after an answer could leave the
    // restart notice of an answer whose record was not yet flushed).
    bot.terminate();
    assert_eq!(bot.wait(Duration::from_secs(15)).await, Some(0));
    let before = tg.calls("getWebhookInfo").len();
    let mut bot = spawn(tg, llm, dir);
    bot.started(tg, before, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        bot.child.try_wait().unwrap().is_none(),
        "the poison update ran again; log:\n{}",
        bot.logs()
    );
    let now = tg.messages_to(ALICE);
    assert_eq!(now.len(), sent, "nothing more for it: {now:#?}");
}

#[tokio::test]
async fn a_message_that_crashes_the_bot_is_given_up_after_two_starts_and_others_are_answered() {
    let llm = model().await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = spawn(&tg, &llm, dir.path());
    let poison = tg.send_text(ALICE, &format!("please read {POISON}"));
    let status = bot.wait(Duration::from_secs(20)).await;
    assert_eq!(
        status,
        None,
        "killed by a signal (abort); log:\n{}",
        bot.logs()
    );
    // Another chat writes while the bot is down.
    tg.send_text(BOB, "hello");

    let bot = spawn(&tg, &llm, dir.path());
    let answered = |tg: &FakeTelegram| {
        count(tg, ALICE, &apology()) >= 1 && count(tg, BOB, "answer to hello") >= 1
    };
    let (bot, crashes) = keep_up(&tg, &llm, dir.path(), bot, answered).await;
    assert_eq!(
        crashes, 1,
        "it ran once more after the first crash, and no more"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let told = tg.messages_to(ALICE);
    assert_eq!(told.len(), 1, "one apology, nothing else: {told:#?}");
    assert_eq!(
        told[0].params["reply_parameters"]["message_id"],
        json!(tg.message_id_of(poison)),
        "in reply to the message"
    );
    assert_eq!(
        count(&tg, BOB, "answer to hello"),
        1,
        "the other chat, once"
    );
    let asked = llm
        .agent_requests()
        .iter()
        .filter(|r| last_user_text(r).contains(POISON))
        .count();
    assert_eq!(asked, 0, "the poison never reached the model");
    assert!(
        bot.logs().contains("giving it up"),
        "the log says why; log:\n{}",
        bot.logs()
    );
    never_again(&tg, &llm, dir.path(), bot).await;
}

#[tokio::test]
async fn a_scheduled_run_that_crashes_the_bot_is_given_up_too() {
    let llm = model().await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let bot = spawn(&tg, &llm, dir.path());
    tg.send_text(ALICE, "schedule the poison");
    tg.wait_text(ALICE, "scheduled", Duration::from_secs(15))
        .await
        .expect("the task is scheduled");
    // At its time the run aborts the bot, and once more after the restart.
    let (bot, crashes) = keep_up(&tg, &llm, dir.path(), bot, |tg| {
        count(tg, ALICE, &task_apology()) >= 1
    })
    .await;
    assert_eq!(crashes, 2, "its first run and one rerun");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(count(&tg, ALICE, &task_apology()), 1, "one apology");
    assert_eq!(
        tg.messages_to(ALICE).len(),
        2,
        "the tool's answer and the apology"
    );
    tg.send_text(ALICE, "still there?");
    tg.wait_text(ALICE, "answer to still there?", Duration::from_secs(15))
        .await
        .expect("the bot answers");
    never_again(&tg, &llm, dir.path(), bot).await;
}

/// A `kill -9` while the working reaction is on the user's message: the restart takes it off
/// (once), though the turn that would have was killed.
#[tokio::test]
async fn the_working_reaction_a_kill_left_is_taken_off_after_the_restart() {
    let (llm, slow) = stalling_llm("the answer").await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = |after_ms: u64| format!("{PLAIN_TOML}working_reaction_after_ms = {after_ms}\n");
    let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &[], &toml(0));
    let update = tg.send_text(ALICE, "take your time");
    let message = json!(tg.message_id_of(update));
    let on_it = |tg: &FakeTelegram| {
        tg.calls("setMessageReaction")
            .into_iter()
            .filter(|c| c.params["chat_id"] == ALICE && c.params["message_id"] == message)
            .map(|c| c.params["reaction"].as_array().map_or(0, Vec::len))
            .collect::<Vec<_>>()
    };
    tg.wait_for(|tg| (on_it(tg) == [1]).then_some(())).await;
    bot.kill();

    slow.store(false, std::sync::atomic::Ordering::SeqCst);
    // The rerun answers long before it would put a reaction of its own on.
    let _bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &[], &toml(60_000));
    tg.wait_text(ALICE, "the answer", Duration::from_secs(20))
        .await
        .expect("answered after the restart");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(on_it(&tg), [1, 0], "put on, then taken off once");
}
