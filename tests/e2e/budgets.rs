//! Access is checked when a turn runs, not only when its message arrives: a user taken off the
//! allow-list gets no LLM call for turns still waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::*;

const GROUP: i64 = -4242;

fn texts_to(tg: &FakeTelegram, chat: i64) -> Vec<String> {
    tg.messages_to(chat)
        .iter()
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn asked_about(llm: &FakeLlm, word: &str) -> usize {
    llm.agent_requests()
        .iter()
        .filter(|r| last_user_text(r).contains(word))
        .count()
}

/// Waits until the bot confirmed `update` to Telegram (its next getUpdates asks past it), which
/// it does only once the update is in its inbox on disk.
async fn confirmed(tg: &FakeTelegram, update: i64) {
    tg.wait_for(|t| {
        t.calls("getUpdates")
            .iter()
            .any(|c| c.params["offset"].as_i64().is_some_and(|o| o > update))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn turns_of_a_user_removed_from_the_allow_list_are_dropped_after_a_restart() {
    // Agent calls hang while `slow` is set; follow-ups fail.
    let slow = Arc::new(AtomicBool::new(true));
    let flag = slow.clone();
    let llm = FakeLlm::start(move |req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        let delay = if flag.load(Ordering::SeqCst) { 30 } else { 0 };
        Reply::text("answered").after(Duration::from_secs(delay))
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    // Alice's slow turn runs in the group; Bob's waits in the group's queue behind it, and
    // his private turn is running when the bot dies.
    tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot alice, slowly");
    tg.wait_for(|_| (asked_about(&llm, "alice") == 1).then_some(()))
        .await;
    let queued = tg.send_in_chat(GROUP, BOB, "@heurist_test_bot bob, queued");
    tg.send_text(BOB, "bob, running");
    tg.wait_for(|_| (asked_about(&llm, "bob, running") == 1).then_some(()))
        .await;
    confirmed(&tg, queued).await;
    assert_eq!(asked_about(&llm, "bob, queued"), 0, "still queued");
    bot.kill();

    // The operator takes Bob off the allow-list and starts the bot again.
    slow.store(false, Ordering::SeqCst);
    let polls = tg.calls("getWebhookInfo").len();
    let only_alice = ALICE.to_string();
    let mut bot = BotProcess::spawn(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &only_alice)],
    );
    bot.started(&tg, polls, Duration::from_secs(20)).await;
    tg.wait_messages(GROUP, 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(asked_about(&llm, "alice"), 2, "Alice's turn resumed");
    assert_eq!(
        asked_about(&llm, "bob"),
        1,
        "no LLM call for Bob's turns after the restart: {}",
        bot.logs()
    );
    assert!(tg.messages_to(BOB).is_empty(), "nothing sent to Bob");
    assert_eq!(
        texts_to(&tg, GROUP),
        ["answered"],
        "the group got Alice's answer and nothing for Bob"
    );
    bot.kill();

    // Bob's dropped turns are finished: even with Bob allowed again they never run.
    let polls = tg.calls("getWebhookInfo").len();
    let bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    bot.started(&tg, polls, Duration::from_secs(20)).await;
    tg.send_text(ALICE, "ping");
    tg.wait_messages(ALICE, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(asked_about(&llm, "bob"), 1, "never retried");
    assert!(tg.messages_to(BOB).is_empty());
}
