//! Access and budgets are checked when a turn runs, not only when its message arrives: a user
//! taken off the allow-list gets no LLM call for turns still waiting, and the daily token
//! budget binds queued and parallel turns and every call made for a user's turn.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::support::llm::stalling_llm;
use crate::support::*;

const GROUP: i64 = -4242;
const OTHER_GROUP: i64 = -4343;
const BUDGET_TEXT: &str = "today's budget of";

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
    let (llm, slow) = stalling_llm("answered").await;
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

/// An LLM whose agent calls take `delay` and report 110 tokens each; follow-ups fail.
async fn paced_llm(delay: Duration) -> FakeLlm {
    FakeLlm::start(move |req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::text("answered").after(delay)
    })
    .await
}

#[tokio::test]
async fn parallel_and_queued_turns_of_one_user_overshoot_the_budget_by_at_most_one_call() {
    // Each call reports 110 tokens: a budget of 150 is spent by the second call.
    let h = Harness::start_with(paced_llm(Duration::from_millis(300)).await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.daily_tokens = 150;
    })
    .await;
    // All accepted at once (nothing spent yet), in three conversations that run in parallel:
    // checked only as each turn starts, three first calls would go out together.
    for i in 0..2 {
        h.tg.send_text(BOB, &format!("private {i}"));
        h.tg.send_in_chat(GROUP, BOB, &format!("@heurist_test_bot group {i}"));
        h.tg.send_in_chat(OTHER_GROUP, BOB, &format!("@heurist_test_bot other {i}"));
    }
    for chat in [BOB, GROUP, OTHER_GROUP] {
        h.tg.wait_messages(chat, 1).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls = h.llm.agent_requests().len();
    let spent = h
        .app()
        .store()
        .usage()
        .user_tokens_today(heurist::ids::UserId(BOB as u64));
    assert!(calls <= 2, "{calls} calls for a budget of 150");
    assert!(
        spent <= 150 + 110,
        "{spent} tokens: over by more than one call"
    );
    for chat in [BOB, GROUP, OTHER_GROUP] {
        let refusals = texts_to(&h.tg, chat)
            .iter()
            .filter(|t| t.contains(BUDGET_TEXT))
            .count();
        assert_eq!(refusals, 1, "one budget message in {chat}");
    }
    h.stop().await;
}

#[tokio::test]
async fn queued_turns_after_the_budget_is_spent_get_one_message_and_no_llm_call() {
    let h = Harness::start_with(paced_llm(Duration::from_millis(800)).await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.daily_tokens = 100;
    })
    .await;
    h.tg.send_text(BOB, "the one that spends it");
    h.tg.wait_for(|_| (h.llm.agent_requests().len() == 1).then_some(()))
        .await;
    for i in 0..4 {
        h.tg.send_text(BOB, &format!("queued {i}"));
    }
    h.tg.wait_messages(BOB, 2).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(h.llm.agent_requests().len(), 1, "no call for a queued turn");
    let texts = texts_to(&h.tg, BOB);
    assert_eq!(
        texts.len(),
        2,
        "the answer and one budget message: {texts:?}"
    );
    assert_eq!(texts[0], "answered");
    assert!(
        texts[1].contains("today's budget of 100 tokens"),
        "{texts:?}"
    );
    h.stop().await;
}

fn reflection_reply(lesson: &str) -> Reply {
    let body = serde_json::json!({"heuristics": [{"text": lesson, "skill_name": null}]});
    Reply::text(&format!("```json\n{body}\n```"))
}

/// The 👎 callback data under the first message sent to `chat`, and that message's id.
async fn thumbs_down(h: &Harness, chat: i64) -> (i64, String) {
    let sent = h.tg.wait_messages(chat, 1).await;
    let rows = sent[0].params["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("a keyboard")
        .clone();
    let row: &Value = rows.last().unwrap();
    assert_eq!(row[1]["text"], "👎");
    (
        sent[0].result["message_id"].as_i64().unwrap(),
        row[1]["callback_data"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn follow_ups_and_embeddings_are_charged_to_the_user_whose_turn_they_serve() {
    const LESSON: &str = "Answer a greeting with a greeting before anything else";
    // Every completion reports 110 tokens; the fake embeddings server reports none, so an
    // embedding is charged its estimate (a token per three bytes, and one).
    let llm = FakeLlm::start(|req, _| {
        let last = last_user_text(req);
        if last == heurist::options::OPTIONS_RETRY_PROMPT {
            // The extraction's second attempt outlives its timeout.
            Reply::text(r#"{"options": ["late"]}"#).after(Duration::from_secs(5))
        } else if is_options_request(req) {
            Reply::text("not the JSON asked for")
        } else if is_reflection_request(req) && last.contains("👎") {
            reflection_reply(LESSON)
        } else if is_reflection_request(req) {
            Reply::text(r#"{"heuristics": []}"#)
        } else {
            Reply::text("hello to you")
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.timeout_secs = 1;
        // The fake's lesson comes from no evidence; this test is about where it goes.
        c.learning.grounded_only = false;
        c.options.max_attempts = 2;
        c.options.attach_wait_ms = 0;
        c.learning.embedding_model = "embedder".into();
    })
    .await;
    let embedded = |text: &str| text.len() as u64 / 3 + 1;
    let user = BOB as u64;
    h.tg.send_text(BOB, "hello");
    let (message, down) = thumbs_down(&h, BOB).await;
    // The turn's reflection follows its extraction, which times out first.
    h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 1).then_some(()))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.app()
            .store()
            .usage()
            .user_tokens_today(heurist::ids::UserId(user)),
        110 + embedded("hello") + 110 + 110,
        "the answer, the message's embedding, the extraction's first attempt (it timed out \
         on its second) and the reflection"
    );

    // Anyone's 👎 in the chat reflects for Bob's turn, and what it learns is embedded.
    h.tg.press(BOB, BOB, message, &down);
    h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 2).then_some(()))
        .await;
    h.tg.wait_for(|_| {
        h.app()
            .store()
            .learning()
            .lessons()
            .iter()
            .any(|x| x.text == LESSON)
            .then_some(())
    })
    .await;
    assert_eq!(
        h.app()
            .store()
            .usage()
            .user_tokens_today(heurist::ids::UserId(user)),
        110 + embedded("hello") + 110 + 110 + 110 + embedded(LESSON),
        "the 👎 reflection and its lesson's embedding"
    );
    h.stop().await;
}
