//! Commands and `__act__` actions, per role, in private chats and groups.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const OTHER_MODEL: &str = "other/model-with-a-very-long-slug-that-would-not-fit-in-callback-data";
const GROUP: i64 = -100_500;

fn answered(h: &Harness, query: &str) -> Option<Value> {
    h.tg.calls("answerCallbackQuery")
        .into_iter()
        .find(|c| c.params["callback_query_id"] == query)
        .map(|c| c.params)
}

/// The model each agent request of `chat`'s user used, in order.
fn models_used(h: &Harness, user_text: &str) -> Vec<String> {
    h.llm
        .agent_requests()
        .iter()
        .filter(|r| last_user_text(r) == user_text)
        .map(|r| r["model"].as_str().unwrap().to_string())
        .collect()
}

async fn model_keyboard(h: &Harness, chat: i64, nth: usize) -> (i64, Vec<(String, String)>) {
    let sent = h.tg.wait_messages(chat, nth).await;
    let call = &sent[nth - 1];
    let buttons = call.params["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("a keyboard")
        .iter()
        .map(|row| {
            (
                row[0]["text"].as_str().unwrap().to_string(),
                row[0]["callback_data"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (call.result["message_id"].as_i64().unwrap(), buttons)
}

#[tokio::test]
async fn admins_switch_the_model_of_one_chat_with_buttons() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ADMIN, "/model");
    let (message_id, buttons) = model_keyboard(&h, ADMIN, 1).await;
    assert_eq!(buttons.len(), 2);
    assert_eq!(buttons[0].0, "✓ test-model");
    assert!(!buttons[1].0.starts_with('✓'));
    for (_, data) in &buttons {
        assert!(
            data.starts_with("__act__set_model|") && data.len() <= 64,
            "{data}"
        );
        assert!(!data.contains("other/"), "the slug is never in the data");
    }
    let query = h.tg.press(ADMIN, ADMIN, message_id, &buttons[1].1);
    let toast = h.tg.wait_for(|_| answered(&h, &query)).await;
    assert_eq!(toast["text"], format!("Model: {OTHER_MODEL}"));
    // One edit: the header names the new model, and the ✓ moved with it.
    let edit = h.tg.wait_for(|t| t.calls("editMessageText").pop()).await;
    assert_eq!(edit.params["message_id"], message_id);
    assert_eq!(
        edit.params["text"],
        format!("Model for this chat: <b>{OTHER_MODEL}</b>. Choose another:")
    );
    let rows = &edit.params["reply_markup"]["inline_keyboard"];
    assert_eq!(rows[0][0]["text"], "test-model");
    assert!(rows[1][0]["text"].as_str().unwrap().starts_with("✓ other/"));
    assert!(h.tg.calls("editMessageReplyMarkup").is_empty());
    let shown = h.tg.screen(ADMIN);
    assert!(shown[0].contains(OTHER_MODEL), "{shown:?}");

    h.tg.send_text(ADMIN, "which model?");
    h.tg.wait_messages(ADMIN, 2).await;
    h.tg.send_text(ALICE, "which model?");
    h.tg.wait_messages(ALICE, 1).await;
    let mut used = models_used(&h, "which model?");
    used.sort();
    assert_eq!(
        used,
        vec![OTHER_MODEL.to_string(), "test-model".to_string()],
        "only the admin's chat switched"
    );

    // It is persisted: a restart keeps the chat's choice.
    let mut h = h;
    h.restart().await;
    h.tg.send_text(ADMIN, "still?");
    h.tg.wait_messages(ADMIN, 3).await;
    assert_eq!(models_used(&h, "still?"), [OTHER_MODEL]);
    h.stop().await;
}

#[tokio::test]
async fn non_admins_and_forged_actions_change_nothing() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "/model");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(sent[0].text().contains("only the bot's admins"));
    assert!(sent[0].params.get("reply_markup").is_none());
    h.tg.send_text(ALICE, &format!("/model {OTHER_MODEL}"));
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert!(sent[1].text().contains("only the bot's admins"));

    // A modified client sends the real action data anyway.
    let key = heurist::telegram::keyboards::model_key(OTHER_MODEL);
    let query =
        h.tg.press(ALICE, ALICE, 1, &format!("__act__set_model|{key}"));
    let toast = h.tg.wait_for(|_| answered(&h, &query)).await;
    assert_eq!(toast["text"], "Sorry, only the bot's admins can do that.");
    // An admin naming a model that is not configured.
    let query = h.tg.press(ADMIN, ADMIN, 1, "__act__set_model|deadbeef");
    let toast = h.tg.wait_for(|_| answered(&h, &query)).await;
    assert_eq!(toast["text"], "That model is not configured");
    h.tg.send_text(ADMIN, "/model gpt-imaginary");
    let sent = h.tg.wait_messages(ADMIN, 1).await;
    assert!(
        sent[0]
            .text()
            .starts_with("Unknown model \"gpt-imaginary\"")
    );

    h.tg.send_text(ALICE, "model?");
    h.tg.wait_messages(ALICE, 3).await;
    h.tg.send_text(ADMIN, "model?");
    h.tg.wait_messages(ADMIN, 2).await;
    assert_eq!(models_used(&h, "model?"), ["test-model", "test-model"]);
    assert!(h.tg.calls("editMessageReplyMarkup").is_empty());
    assert!(h.tg.calls("editMessageText").is_empty());
    h.stop().await;
}

#[tokio::test]
async fn an_admin_can_switch_with_an_argument() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ADMIN, &format!("/model {OTHER_MODEL}"));
    let sent = h.tg.wait_messages(ADMIN, 1).await;
    assert_eq!(
        sent[0].text(),
        format!("Model for this chat: {OTHER_MODEL}")
    );
    h.tg.send_text(ADMIN, "hi");
    h.tg.wait_messages(ADMIN, 2).await;
    assert_eq!(models_used(&h, "hi"), [OTHER_MODEL]);
    h.stop().await;
}

#[tokio::test]
async fn the_clear_button_empties_the_next_requests_history() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "remember 7");
    h.tg.wait_messages(ALICE, 1).await;
    let query = h.tg.press(ALICE, ALICE, 1, "__act__clear|");
    let toast = h.tg.wait_for(|_| answered(&h, &query)).await;
    assert_eq!(toast["text"], "Done: I forgot this chat's conversation.");
    h.tg.send_text(ALICE, "what number?");
    h.tg.wait_messages(ALICE, 2).await;
    let requests = h.llm.agent_requests();
    assert_eq!(requests[1]["messages"].as_array().unwrap().len(), 2);
    h.stop().await;
}

#[tokio::test]
async fn cancel_stops_a_slow_turn_without_writing_history() {
    let llm = FakeLlm::start(|req, _| {
        let slow = last_user_text(req) == "slow question";
        Reply::text("answer").after(Duration::from_millis(if slow { 5_000 } else { 0 }))
    })
    .await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_text(ALICE, "slow question");
    h.tg.wait_for(|_| (!h.llm.requests().is_empty()).then_some(()))
        .await;
    let started = std::time::Instant::now();
    h.tg.send_text(ALICE, "/cancel");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "/cancel was not stuck behind the turn"
    );
    assert_eq!(sent[0].text(), "Stopped. Nothing of that request was kept.");
    h.tg.send_text(ALICE, "next");
    h.tg.wait_messages(ALICE, 2).await;
    let next = h
        .llm
        .agent_requests()
        .into_iter()
        .find(|r| last_user_text(r) == "next")
        .unwrap();
    assert_eq!(
        next["messages"].as_array().unwrap().len(),
        2,
        "no partial history"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        h.tg.messages_to(ALICE).len(),
        2,
        "the cancelled turn never answered"
    );
    h.tg.send_text(ALICE, "/cancel");
    let sent = h.tg.wait_messages(ALICE, 3).await;
    assert_eq!(sent[2].text(), "Nothing is running.");
    h.stop().await;
}

#[tokio::test]
async fn stats_and_help_depend_on_the_role() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    // What /stats shows is tested in refusals.rs; here only who sees the whole bot.
    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let stats = sent[1].text();
    assert!(
        stats.contains("<code>test-model</code>: 1 answer"),
        "{stats}"
    );
    assert!(!stats.contains("Whole bot"));
    h.tg.send_text(ADMIN, "/stats");
    let sent = h.tg.wait_messages(ADMIN, 1).await;
    assert!(
        sent[0]
            .text()
            .contains("<b>Whole bot</b>\n• <code>test-model</code>: 1 answer"),
        "{}",
        sent[0].text()
    );

    h.tg.send_text(ALICE, "/help");
    let sent = h.tg.wait_messages(ALICE, 3).await;
    assert_eq!(sent[2].params["parse_mode"], "HTML");
    let help = sent[2].text();
    for topic in [
        "<b>Memory</b>",
        "/clear",
        "<b>Option buttons</b>",
        "👍 / 👎",
        "heuristics",
        "⏹ Stop",
        "🔁 Retry",
        "/cancel",
        "<b>Photos</b>",
        "up to 20 messages a minute",
    ] {
        assert!(help.contains(topic), "{topic} missing: {help}");
    }
    assert!(!help.contains("/model"), "{help}");
    h.tg.send_text(ALICE, "/start");
    let sent = h.tg.wait_messages(ALICE, 4).await;
    let start = sent[3].text();
    assert!(
        start.contains("Hi") && start.contains("Try first") && start != help,
        "{start}"
    );
    h.tg.send_text(ADMIN, "/help");
    let help = h.tg.wait_messages(ADMIN, 2).await[1].text();
    for command in [
        "/model &lt;id&gt;",
        "/heuristics pending",
        "/skills",
        "/tools",
    ] {
        assert!(help.contains(command), "{command} missing: {help}");
    }

    let menus = h.tg.calls("setMyCommands");
    let admin_menu = menus
        .iter()
        .find(|c| c.params["scope"]["chat_id"] == json!(ADMIN))
        .expect("admin menu");
    assert!(admin_menu.params["commands"].to_string().contains("model"));
    let default_menu = menus
        .iter()
        .find(|c| c.params.get("scope").is_none())
        .unwrap();
    assert!(
        !default_menu.params["commands"]
            .to_string()
            .contains("model")
    );
    h.stop().await;
}

#[tokio::test]
async fn in_groups_the_bot_answers_only_when_addressed() {
    let llm = FakeLlm::start(|req, _| Reply::text(&format!("re: {}", last_user_text(req)))).await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_in_chat(GROUP, ALICE, "just chatting among humans");
    h.tg.send_in_chat(GROUP, ALICE, "/help@some_other_bot");
    h.tg.send_in_chat(GROUP, STRANGER, "random stranger talk");
    h.tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot what is 2+2?");
    let sent = h.tg.wait_messages(GROUP, 1).await;
    assert_eq!(sent[0].text(), "re: what is 2+2?");
    let answer_id = sent[0].result["message_id"].as_i64().unwrap();

    h.tg.send_reply_to_bot(GROUP, BOB, "and times 3?", answer_id);
    let sent = h.tg.wait_messages(GROUP, 2).await;
    assert_eq!(sent[1].text(), "re: and times 3?");
    h.tg.send_in_chat(GROUP, ALICE, "/help@heurist_test_bot");
    let sent = h.tg.wait_messages(GROUP, 3).await;
    assert!(sent[2].text().starts_with("<b>How I work</b>"));
    h.tg.send_in_chat(GROUP, BOB, "/stats");
    h.tg.wait_messages(GROUP, 4).await;
    // A stranger addressing the bot is refused (per user, as in private chats).
    h.tg.send_in_chat(GROUP, STRANGER, "@heurist_test_bot let me in");
    let sent = h.tg.wait_messages(GROUP, 5).await;
    assert!(sent[4].text().contains(&STRANGER.to_string()));

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.tg.messages_to(GROUP).len(), 5, "silence otherwise");
    let requests = h.llm.agent_requests();
    assert_eq!(requests.len(), 2);
    // History is per chat: the second request saw the first exchange in the group.
    assert!(
        requests[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "re: what is 2+2?")
    );
    h.stop().await;
}
