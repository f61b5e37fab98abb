//! Telegram's limits at production pacing: no chat waits for another chat's slots or penalty.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

const GROUP: i64 = -100_777;

/// The pacing Heurist ships with (1 s per private chat, 3 s per group, 30 calls/s), and one
/// message per answer.
fn production_pacing(c: &mut heurist::Config) {
    c.telegram.chat_interval_ms = 1000;
    c.telegram.group_interval_ms = 3000;
    c.telegram.global_per_second = 30;
    c.options.enabled = false;
    c.learning.reflect = false;
    c.learning.feedback_buttons = false;
}

/// Answers "long" with four messages' worth of text and anything else with "re: <it>",
/// noting when each question reached the model.
fn llm_noting_times(
    asked: Arc<Mutex<HashMap<String, Instant>>>,
) -> impl Fn(&serde_json::Value, usize) -> Reply {
    move |req, _| {
        let question = last_user_text(req);
        asked
            .lock()
            .unwrap()
            .insert(question.clone(), Instant::now());
        if question == "long" {
            let paragraph = "A long answer sent in parts, one second apart. ".repeat(40);
            Reply::text(&vec![paragraph; 8].join("\n\n"))
        } else {
            Reply::text(&format!("re: {question}"))
        }
    }
}

#[tokio::test]
async fn short_answers_do_not_wait_for_a_long_answer_in_another_chat() {
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let llm = FakeLlm::start(llm_noting_times(asked.clone())).await;
    let h = Harness::start_with(llm, production_pacing).await;
    h.tg.enforce_chat_rate(Duration::from_millis(900));
    h.tg.send_text(ALICE, "long");
    // Alice's first part is out; her next parts are a second apart from here on.
    h.tg.wait_messages(ALICE, 1).await;

    h.tg.send_text(BOB, "short");
    h.tg.send_in_chat(GROUP, BOB, "@heurist_test_bot short in a group");
    for (chat, question) in [(BOB, "short"), (GROUP, "short in a group")] {
        let answered =
            h.tg.wait_text(chat, &format!("re: {question}"), Duration::from_secs(5))
                .await
                .expect("answered");
        let asked_at = asked.lock().unwrap()[question];
        // Limiter slots alone would add up to a second here (Alice's next part).
        assert!(
            answered.duration_since(asked_at) < Duration::from_millis(300),
            "{question:?} shown {:?} after the model answered",
            answered.duration_since(asked_at)
        );
    }
    let parts = h.tg.wait_messages(ALICE, 4).await;
    for pair in parts.windows(2) {
        assert!(pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(900));
    }
    assert_eq!(h.tg.flood_refusals(), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_429_in_one_chat_delays_that_chat_only_and_its_answer_arrives_once() {
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let llm = FakeLlm::start(llm_noting_times(asked.clone())).await;
    let h = Harness::start_with(llm, production_pacing).await;
    h.tg.script(
        "sendMessage",
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 8", "parameters": {"retry_after": 8}}),
    );
    h.tg.send_text(ALICE, "first");
    let refused_at =
        h.tg.wait_for(|t| t.calls("sendMessage").iter().find(|c| !c.ok).map(|c| c.at))
            .await;

    h.tg.send_text(BOB, "second");
    let bob_at =
        h.tg.wait_text(BOB, "re: second", Duration::from_secs(3))
            .await
            .expect("Bob is answered while Alice waits");
    assert!(bob_at.duration_since(refused_at) < Duration::from_secs(3));

    let alice_at =
        h.tg.wait_text(ALICE, "re: first", Duration::from_secs(12))
            .await
            .expect("Alice is answered after her wait");
    assert!(alice_at.duration_since(refused_at) >= Duration::from_secs(8));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.tg.messages_to(ALICE).len(), 1, "exactly once");
    h.stop().await;
}

/// One user sends 100 `/help` within a second: every reply is paced in that user's chat only
/// and off the dispatcher, so another user's question is answered at once; the flood past the
/// command rate gets one refusal, not 95 replies. Before replies left the dispatcher, the chat's
/// worker queue (64) filled and the dispatcher waited: the other user waited 33.6 s.
#[tokio::test]
async fn a_hundred_commands_in_one_chat_hold_no_other_chat() {
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let llm = FakeLlm::start(llm_noting_times(asked.clone())).await;
    let h = Harness::start_with(llm, |c| {
        production_pacing(c);
        c.limits.commands_per_minute = 5;
    })
    .await;
    h.tg.enforce_chat_rate(Duration::from_millis(900));
    for _ in 0..100 {
        h.tg.send_text(ALICE, "/help");
    }
    let sent = Instant::now();
    h.tg.send_text(BOB, "anyone there?");
    let answered =
        h.tg.wait_text(BOB, "re: anyone there?", Duration::from_secs(60))
            .await
            .expect("Bob is answered");
    let took = answered.duration_since(sent);
    eprintln!("Bob answered {took:?} after Alice's 100 /help");
    assert!(took < Duration::from_secs(2), "Bob waited {took:?}");

    // Five replies, a second apart, then the one refusal of the other 95.
    let screen =
        h.tg.wait_for(|t| {
            let screen = t.screen(ALICE);
            let last = screen.last()?;
            (screen.len() == 6 && last.contains("I did not answer your last 95 messages"))
                .then_some(screen)
        })
        .await;
    assert!(
        screen[..5].iter().all(|s| s.contains("How I work")),
        "{screen:#?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.tg.messages_to(ALICE).len(), 6, "one refusal");
    assert_eq!(h.tg.flood_refusals(), 0);
    h.stop().await;
}

/// 70 strangers mention the bot in a group within a second: they share one refusal, which
/// waits for the group's other messages, so a member's question there is answered within 5 s
/// and a private chat's within 2 s. Before, each refusal was a paced send in the group's
/// handler: the member got no answer within 60 s, the private chat waited 11.6 s.
#[tokio::test]
async fn seventy_strangers_in_a_group_hold_neither_its_members_nor_other_chats() {
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let llm = FakeLlm::start(llm_noting_times(asked.clone())).await;
    let h = Harness::start_with(llm, production_pacing).await;
    h.tg.enforce_chat_rate(Duration::from_millis(900));
    let strangers: Vec<i64> = (0..70).map(|i| 50_000 + i).collect();
    for &stranger in &strangers {
        h.tg.send_in_chat(GROUP, stranger, "@heurist_test_bot let me in");
    }
    let sent = Instant::now();
    h.tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot a member's question");
    h.tg.send_text(BOB, "a private question");
    for (chat, question, limit) in [
        (BOB, "a private question", Duration::from_secs(2)),
        (GROUP, "a member's question", Duration::from_secs(5)),
    ] {
        let answered =
            h.tg.wait_text(chat, &format!("re: {question}"), Duration::from_secs(60))
                .await
                .expect("answered");
        let took = answered.duration_since(sent);
        eprintln!("{question:?} answered {took:?} after 70 strangers");
        assert!(took < limit, "{question:?} waited {took:?}");
    }

    // One refusal in the group, edited to name every stranger.
    let refusal =
        h.tg.wait_for(|t| {
            let screen = t.screen(GROUP);
            let refusal = screen.iter().find(|s| s.contains("this bot is private"))?;
            strangers
                .iter()
                .all(|id| refusal.contains(&format!("<code>{id}</code>")))
                .then(|| refusal.clone())
        })
        .await;
    assert!(refusal.contains("ask the bot's owner"), "{refusal}");
    let sent = h.tg.messages_to(GROUP);
    assert_eq!(
        sent.len(),
        2,
        "one refusal and the member's answer: {sent:#?}"
    );
    assert_eq!(h.tg.flood_refusals(), 0);
    assert_eq!(
        h.llm.agent_requests().len(),
        2,
        "strangers cost no LLM call"
    );
    h.stop().await;
}

/// Messages that start no turn (voice notes, stickers) get their notice within the sender's
/// command rate: a flood of them is a few notices and one refusal, edited, not a paced notice
/// each queued for minutes in the chat's line.
#[tokio::test]
async fn a_flood_of_non_text_messages_gets_one_refusal() {
    let asked = Arc::new(Mutex::new(HashMap::new()));
    let llm = FakeLlm::start(llm_noting_times(asked.clone())).await;
    let h = Harness::start_with(llm, |c| {
        production_pacing(c);
        c.limits.commands_per_minute = 3;
    })
    .await;
    for _ in 0..30 {
        h.tg.send_location(ALICE);
    }
    let screen =
        h.tg.wait_for(|t| {
            let screen = t.screen(ALICE);
            let last = screen.last()?;
            (screen.len() == 4 && last.contains("I did not answer your last 27 messages"))
                .then_some(screen)
        })
        .await;
    assert!(
        screen[..3]
            .iter()
            .all(|s| s.contains("I can only read text")),
        "{screen:#?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.tg.messages_to(ALICE).len(), 4, "one refusal");
    h.stop().await;
}
