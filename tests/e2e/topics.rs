//! Forum topics and group replies: each topic of a forum is its own conversation (history,
//! queue, `/clear`), answered in that topic; in groups an answer replies to its message.

use std::sync::atomic::Ordering;
use std::time::Duration;

use heurist::telegram::render::render_parts;
use serde_json::{Value, json};

use crate::support::llm::stalling_llm;
use crate::support::telegram::{BOT_USERNAME, Call};
use crate::support::*;

/// A forum supergroup and two of its topics.
const FORUM: i64 = -100_777;
const TOPIC_A: i64 = 11;
const TOPIC_B: i64 = 22;
/// A plain (non-forum) group.
const GROUP: i64 = -200_555;

/// A group message that addresses the bot.
fn to_bot(text: &str) -> String {
    format!("@{BOT_USERNAME} {text}")
}

/// Answers every turn with the text it was asked, so each answer names its question.
async fn echo_llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        let answer = format!("answer to {}", last_user_text(req));
        if req["stream"] == true {
            Reply::streamed(&answer, 3, Duration::from_millis(10))
        } else {
            Reply::text(&answer)
        }
    })
    .await
}

fn quiet(c: &mut heurist::Config) {
    c.options.enabled = false;
    c.learning.reflect = false;
    c.learning.feedback_buttons = false;
}

/// The messages sent to `chat` whose text is `text`.
fn sent(tg: &FakeTelegram, chat: i64, text: &str) -> Vec<Call> {
    tg.messages_to(chat)
        .into_iter()
        .filter(|c| c.params["text"] == text)
        .collect()
}

/// Waits for `text` in `chat` and returns the one message that shows it.
async fn one_answer(tg: &FakeTelegram, chat: i64, text: &str) -> Call {
    tg.wait_for(|t| (!sent(t, chat, text).is_empty()).then_some(()))
        .await;
    let mut calls = sent(tg, chat, text);
    assert_eq!(calls.len(), 1, "{text:?} was sent once");
    calls.remove(0)
}

/// Waits until `chat` shows just `text` (sent at once, or grown live), and returns the one
/// message sent for it.
async fn shown(tg: &FakeTelegram, chat: i64, text: &str) -> Call {
    tg.wait_for(|t| (t.screen(chat) == [text]).then_some(()))
        .await;
    let mut sends = tg.messages_to(chat);
    assert_eq!(sends.len(), 1, "one message shows {text:?}");
    sends.remove(0)
}

/// The agent request whose last user message is `question`.
fn request_for(llm: &FakeLlm, question: &str) -> Value {
    llm.agent_requests()
        .into_iter()
        .find(|r| last_user_text(r) == question)
        .unwrap_or_else(|| panic!("no agent request for {question:?}"))
}

/// The texts of every message in an LLM request.
fn request_texts(request: &Value) -> String {
    request["messages"].to_string()
}

fn replies_to(call: &Call, message: i64) -> bool {
    call.params["reply_parameters"]["message_id"] == json!(message)
        && call.params["reply_parameters"]["allow_sending_without_reply"] == json!(true)
}

#[tokio::test]
async fn two_topics_are_answered_in_their_own_topic_with_their_own_history() {
    let h = Harness::start_with(echo_llm().await, quiet).await;
    let first_a =
        h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha one"));
    let in_a = one_answer(&h.tg, FORUM, "answer to alpha one").await;
    let first_b = h.tg.send_in_topic(FORUM, TOPIC_B, BOB, &to_bot("beta one"));
    let in_b = one_answer(&h.tg, FORUM, "answer to beta one").await;
    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha two"));
    one_answer(&h.tg, FORUM, "answer to alpha two").await;

    assert_eq!(in_a.params["message_thread_id"], json!(TOPIC_A));
    assert_eq!(in_b.params["message_thread_id"], json!(TOPIC_B));
    assert!(
        replies_to(&in_a, h.tg.message_id_of(first_a)),
        "{:?}",
        in_a.params
    );
    assert!(
        replies_to(&in_b, h.tg.message_id_of(first_b)),
        "{:?}",
        in_b.params
    );

    let b = request_texts(&request_for(&h.llm, "beta one"));
    assert!(!b.contains("alpha"), "topic B's request shows topic A: {b}");
    let a = request_texts(&request_for(&h.llm, "alpha two"));
    assert!(
        a.contains("answer to alpha one"),
        "topic A lost its history: {a}"
    );
    assert!(!a.contains("beta"), "topic A's request shows topic B: {a}");
    h.stop().await;
}

#[tokio::test]
async fn clear_in_one_topic_leaves_the_other_topics_history() {
    let h = Harness::start_with(echo_llm().await, quiet).await;
    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha one"));
    one_answer(&h.tg, FORUM, "answer to alpha one").await;
    h.tg.send_in_topic(FORUM, TOPIC_B, ALICE, &to_bot("beta one"));
    one_answer(&h.tg, FORUM, "answer to beta one").await;

    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, "/clear");
    let done =
        h.tg.wait_for(|t| {
            t.messages_to(FORUM)
                .into_iter()
                .find(|c| c.params["text"].as_str().unwrap_or("").starts_with("Done"))
        })
        .await;
    assert_eq!(
        done.params["message_thread_id"],
        json!(TOPIC_A),
        "said in topic A"
    );

    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha two"));
    one_answer(&h.tg, FORUM, "answer to alpha two").await;
    h.tg.send_in_topic(FORUM, TOPIC_B, ALICE, &to_bot("beta two"));
    one_answer(&h.tg, FORUM, "answer to beta two").await;
    let a = request_texts(&request_for(&h.llm, "alpha two"));
    assert!(!a.contains("alpha one"), "topic A was cleared: {a}");
    let b = request_texts(&request_for(&h.llm, "beta two"));
    assert!(
        b.contains("answer to beta one"),
        "topic B kept its history: {b}"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_option_pressed_in_a_topic_continues_that_topic() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) {
            return Reply::text(r#"{"options": ["Tell me more", "Thanks"]}"#);
        }
        if is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::text(&format!("answer to {}", last_user_text(req)))
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.learning.reflect = false;
        // The options come in the answer's own send.
        c.options.attach_wait_ms = 5_000;
    })
    .await;
    h.tg.send_in_topic(FORUM, TOPIC_B, BOB, &to_bot("beta one"));
    one_answer(&h.tg, FORUM, "answer to beta one").await;
    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha one"));
    let offered = one_answer(&h.tg, FORUM, "answer to alpha one").await;
    let data = offered.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .expect("the answer carries its options")
        .to_string();
    let message = offered.result["message_id"].as_i64().unwrap();
    h.tg.press(ALICE, FORUM, message, &data);

    let continued = one_answer(&h.tg, FORUM, "answer to Tell me more").await;
    assert_eq!(continued.params["message_thread_id"], json!(TOPIC_A));
    assert!(replies_to(&continued, message), "{:?}", continued.params);
    let request = request_texts(&request_for(&h.llm, "Tell me more"));
    assert!(
        request.contains("alpha one"),
        "the press continues topic A: {request}"
    );
    assert!(!request.contains("beta"), "topic B stays apart: {request}");
    h.stop().await;
}

#[tokio::test]
async fn cancel_in_one_topic_stops_only_that_topics_turn() {
    let llm = FakeLlm::start(|req, _| {
        let slow = last_user_text(req) == "alpha slow";
        Reply::text("late").after(Duration::from_secs(if slow { 30 } else { 0 }))
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, &to_bot("alpha slow"));
    h.tg.wait_for(|_| (!h.llm.agent_requests().is_empty()).then_some(()))
        .await;
    h.tg.send_in_topic(FORUM, TOPIC_B, ALICE, "/cancel");
    let nothing = one_answer(&h.tg, FORUM, "Nothing is running.").await;
    assert_eq!(nothing.params["message_thread_id"], json!(TOPIC_B));
    h.tg.send_in_topic(FORUM, TOPIC_A, ALICE, "/cancel");
    let stopped = one_answer(&h.tg, FORUM, "Stopped. Nothing of that request was kept.").await;
    assert_eq!(stopped.params["message_thread_id"], json!(TOPIC_A));
    h.stop().await;
}

#[tokio::test]
async fn a_group_answer_replies_to_its_message_and_a_private_one_does_not() {
    for streaming in [false, true] {
        let h = Harness::start_with(echo_llm().await, |c| {
            quiet(c);
            c.telegram.streaming = streaming;
        })
        .await;
        let asked = h.tg.send_in_chat(GROUP, ALICE, &to_bot("in the group"));
        let answer = shown(&h.tg, GROUP, "answer to in the group").await;
        assert!(
            replies_to(&answer, h.tg.message_id_of(asked)),
            "streaming {streaming}: {:?}",
            answer.params
        );
        assert!(
            answer.params.get("message_thread_id").is_none(),
            "streaming {streaming}: a plain group has no topics"
        );
        h.tg.send_text(ALICE, "in private");
        let private = shown(&h.tg, ALICE, "answer to in private").await;
        assert!(
            private.params.get("reply_parameters").is_none(),
            "streaming {streaming}: {:?}",
            private.params
        );
        h.stop().await;
    }
}

#[tokio::test]
async fn a_live_answer_in_a_group_replies_with_its_first_message_only() {
    // Slow enough that the live display sends before the answer is complete, and long
    // enough (6000 characters) for two messages.
    let answer = "word ".repeat(1200);
    let streamed = answer.clone();
    let llm = FakeLlm::start(move |req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        Reply::streamed(&streamed, 12, Duration::from_millis(60))
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        quiet(c);
        c.telegram.streaming = true;
    })
    .await;
    let asked =
        h.tg.send_in_topic(FORUM, TOPIC_B, ALICE, &to_bot("a long one"));
    let rendered = render_parts(&answer);
    assert_eq!(rendered.len(), 2);
    h.tg.wait_for(|t| (t.screen(FORUM) == rendered).then_some(()))
        .await;
    let sends = h.tg.messages_to(FORUM);
    assert_eq!(sends.len(), 2, "each part was sent once");
    assert!(
        replies_to(&sends[0], h.tg.message_id_of(asked)),
        "{:?}",
        sends[0].params
    );
    for later in &sends[1..] {
        assert!(
            later.params.get("reply_parameters").is_none(),
            "{:?}",
            later.params
        );
    }
    for send in &sends {
        assert_eq!(send.params["message_thread_id"], json!(TOPIC_B));
    }
    h.stop().await;
}

#[tokio::test]
async fn a_pending_topic_turn_is_answered_in_its_topic_after_a_crash() {
    let (llm, slow) = stalling_llm("the topic's answer").await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    let asked = tg.send_in_topic(FORUM, TOPIC_B, ALICE, &to_bot("survive a crash"));
    tg.wait_for(|_| (!llm.agent_requests().is_empty()).then_some(()))
        .await;
    bot.child.kill().unwrap(); // SIGKILL: no shutdown code runs.
    bot.child.wait().unwrap();
    assert!(tg.messages_to(FORUM).is_empty());

    slow.store(false, Ordering::SeqCst);
    let _bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    let answer = one_answer(&tg, FORUM, "the topic's answer").await;
    assert_eq!(answer.params["message_thread_id"], json!(TOPIC_B));
    assert!(
        replies_to(&answer, tg.message_id_of(asked)),
        "{:?}",
        answer.params
    );
}
