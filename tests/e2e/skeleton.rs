//! The walking skeleton: replies, access, tools, rendering, history, failures.

use std::time::{Duration, Instant};

use heurist::telegram::render::html_to_plain;
use serde_json::{Value, json};

use crate::support::*;

fn messages(request: &Value) -> &Vec<Value> {
    request["messages"].as_array().unwrap()
}

#[tokio::test]
async fn a_reply_reaches_the_right_chat_as_html() {
    // An LLM that takes a moment, so "typing…" shows while it works.
    let llm =
        FakeLlm::start(|_, _| Reply::text("Hi **Alice** <3").after(Duration::from_millis(600)))
            .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "hello");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].params["text"], "Hi <b>Alice</b> &lt;3");
    assert_eq!(sent[0].params["parse_mode"], "HTML");
    assert!(h.tg.messages_to(BOB).is_empty());

    let requests = h.llm.agent_requests();
    assert_eq!(requests.len(), 1);
    let msgs = messages(&requests[0]);
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(
        msgs.last().unwrap(),
        &json!({"role": "user", "content": "hello"})
    );
    assert_eq!(requests[0]["model"], "test-model");
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["current_time", "fetch_url", "schedule_task", "remember"]
    );
    assert!(
        !h.tg.calls("sendChatAction").is_empty(),
        "typing… was shown"
    );
    let commands = h.tg.calls("setMyCommands");
    assert_eq!(commands.len(), 2, "the users' menu and the admin's");
    h.stop().await;
}

#[tokio::test]
async fn an_instant_answer_needs_no_typing_action() {
    let h = Harness::start(FakeLlm::answering("quick").await).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(h.tg.calls("sendChatAction").is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_stranger_gets_their_id_and_causes_no_llm_call() {
    let h = Harness::start(FakeLlm::answering("secret").await).await;
    h.tg.send_text(STRANGER, "let me in");
    let sent = h.tg.wait_messages(STRANGER, 1).await;
    let text = sent[0].params["text"].as_str().unwrap();
    assert!(text.contains(&STRANGER.to_string()), "{text}");
    assert!(
        text.contains("ask the bot's owner to add your id"),
        "{text}"
    );
    // A later allowed message is answered, proving the stranger's was fully handled before.
    h.tg.send_text(ALICE, "hi");
    h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(h.llm.agent_requests().len(), 1);
    assert_eq!(h.tg.messages_to(STRANGER).len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn tool_calls_round_trip_through_the_model() {
    let page = crate::support::serve_html("<html><head><title>Menu</title></head><body><p>Soup &amp; bread</p><script>evil()</script></body></html>").await;
    let page_url = page.clone();
    let llm = FakeLlm::start(move |req, i| match i {
        0 => Reply::tool_call("call_1", "current_time", json!({})),
        1 => Reply::tool_call("call_2", "fetch_url", json!({"url": page_url})),
        _ => {
            let msgs = req["messages"].as_array().unwrap();
            let results: Vec<String> = msgs
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap().to_string())
                .collect();
            Reply::text(&format!("tools said: {}", results.join(" || ")))
        }
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "what time is it and what is on the menu?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = html_to_plain(sent[0].params["text"].as_str().unwrap());
    assert!(text.contains("UTC: "), "{text}");
    assert!(text.contains("Soup & bread"), "{text}");
    assert!(!text.contains("evil"), "{text}");

    let requests = h.llm.agent_requests();
    assert_eq!(requests.len(), 3);
    let last = messages(&requests[2]);
    // The assistant tool-call message carries a string content, never null.
    let call = last.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(call["content"], "");
    assert_eq!(call["tool_calls"][0]["id"], "call_1");
    let result = last.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], "call_1");
    // Each request extends the previous one: the prompt prefix is stable within a turn.
    for pair in requests.windows(2) {
        let (a, b) = (messages(&pair[0]), messages(&pair[1]));
        assert_eq!(&b[..a.len()], &a[..]);
    }
    h.stop().await;
}

#[tokio::test]
async fn a_10000_character_markdown_answer_arrives_split_valid_and_complete() {
    let mut answer = String::from("# Report\n\nHere is **the code** you asked for:\n\n");
    for block in 0..6 {
        answer.push_str(&format!("Block {block} does <things> & more.\n\n```rust\n"));
        for line in 0..30 {
            answer.push_str(&format!(
                "let value_{block}_{line} = compute({line}) < limit && ok;\n"
            ));
        }
        answer.push_str("```\n\n");
    }
    while answer.len() < 10_000 {
        answer.push_str("- a list item with *emphasis* and `code`\n");
    }
    let expected_lines: Vec<String> = (0..6)
        .flat_map(|b| {
            (0..30).map(move |l| format!("let value_{b}_{l} = compute({l}) < limit && ok;"))
        })
        .collect();
    let answer: &'static str = Box::leak(answer.into_boxed_str());
    let h = Harness::start(FakeLlm::answering(answer).await).await;
    h.tg.send_text(ALICE, "write a lot");
    let first = h.tg.wait_messages(ALICE, 3).await;
    // Wait until the sending has finished (no new part for a moment).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = h.tg.messages_to(ALICE);
    assert_eq!(
        sent.len(),
        h.tg.calls("sendMessage").len(),
        "Telegram refused a part"
    );
    assert!(sent.len() >= first.len());
    let visible: String = sent
        .iter()
        .map(|c| html_to_plain(c.params["text"].as_str().unwrap()))
        .collect::<Vec<_>>()
        .join("\n");
    for line in &expected_lines {
        assert!(visible.contains(line), "lost: {line}");
    }
    assert!(visible.contains("Block 5 does <things> & more."));
    for call in &sent {
        let text = call.params["text"].as_str().unwrap();
        assert!(text.encode_utf16().count() <= 4096);
        crate::support::telegram::check_text(text, Some("HTML")).unwrap();
    }
    h.stop().await;
}

#[tokio::test]
async fn history_survives_a_restart_and_prompts_stay_byte_stable() {
    let llm =
        FakeLlm::start(|req, _| Reply::text(&format!("you said {}", last_user_text(req)))).await;
    let mut h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "my name is Ada");
    h.tg.wait_messages(ALICE, 1).await;
    h.restart().await;
    h.tg.send_text(ALICE, "what is my name?");
    h.tg.wait_messages(ALICE, 2).await;

    let requests = h.llm.agent_requests();
    assert_eq!(requests.len(), 2);
    let (first, second) = (messages(&requests[0]), messages(&requests[1]));
    assert_eq!(
        &second[..first.len()],
        &first[..],
        "turn 2 must begin with turn 1's request"
    );
    assert_eq!(
        second[first.len()],
        json!({"role": "assistant", "content": "you said my name is Ada"})
    );
    // Byte-level: the serialized prefix is identical, so providers' prompt caches hit.
    let bytes = |msgs: &[Value]| serde_json::to_string(msgs).unwrap();
    assert!(bytes(second).starts_with(bytes(first).trim_end_matches(']')));
    h.stop().await;
}

#[tokio::test]
async fn llm_500_then_ok_is_retried() {
    let llm = FakeLlm::start(|_, i| {
        if i == 0 {
            Reply::error(500, "overloaded")
        } else {
            Reply::text("recovered")
        }
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "hi");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].params["text"], "recovered");
    assert_eq!(h.llm.agent_requests().len(), 2);
    h.stop().await;
}

#[tokio::test]
async fn llm_4xx_is_not_retried_and_the_admins_hear_why_once() {
    let llm = FakeLlm::start(|_, _| Reply::error(401, "invalid api key")).await;
    let h = Harness::start(llm).await;
    for (i, text) in ["hi", "again"].into_iter().enumerate() {
        h.tg.send_text(ALICE, text);
        let sent = h.tg.wait_messages(ALICE, i + 1).await;
        let shown = sent[i].params["text"].as_str().unwrap();
        assert!(
            !shown.contains("401") && !shown.contains("invalid api key"),
            "no status or provider words reach the user: {shown}"
        );
        assert!(shown.contains("told the bot's admins"), "{shown}");
    }
    let alerts = h.tg.wait_messages(ADMIN, 1).await;
    let alert = alerts[0].params["text"].as_str().unwrap();
    assert!(
        alert.contains("HTTP 401")
            && alert.contains("invalid api key")
            && alert.contains("test-model"),
        "{alert}"
    );
    assert_eq!(h.llm.agent_requests().len(), 2, "one request per message");
    assert_eq!(
        h.tg.messages_to(ADMIN).len(),
        1,
        "the second failure within the hour does not alert again"
    );
    h.stop().await;
}

#[tokio::test]
async fn llm_down_tells_the_user_keeps_the_message_and_keeps_serving() {
    let down = FakeLlm::down_url().await;
    let llm = FakeLlm::answering("back again").await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let bot = heurist::start(config(&tg, &down, dir.path()))
        .await
        .unwrap();
    let started = Instant::now();
    tg.send_text(ALICE, "are you there?");
    let sent = tg.wait_messages(ALICE, 1).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let text = sent[0].params["text"].as_str().unwrap();
    assert!(text.contains("not reachable"), "{text}");
    // The bot keeps serving: another chat is answered too.
    tg.send_text(BOB, "hello?");
    tg.wait_messages(BOB, 1).await;
    bot.stop().await;

    // With the LLM back, the next request still carries the unanswered message.
    let bot = heurist::start(config(&tg, &llm.url, dir.path()))
        .await
        .unwrap();
    tg.send_text(ALICE, "now?");
    tg.wait_messages(ALICE, 2).await;
    let request = &llm.agent_requests()[0];
    let contents: Vec<&str> = messages(request)
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(contents.contains(&"are you there?"), "{contents:?}");
    // Roles still alternate (some chat templates require it).
    let roles: Vec<&str> = messages(request)
        .iter()
        .skip(1)
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    bot.stop().await;
}

#[tokio::test]
async fn telegram_429_is_retried_after_retry_after_and_arrives_once() {
    let h = Harness::start(FakeLlm::answering("patience").await).await;
    h.tg.script(
        "sendMessage",
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
    );
    h.tg.send_text(ALICE, "hi");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let attempts = h.tg.calls("sendMessage");
    assert_eq!(attempts.len(), 2);
    assert!(!attempts[0].ok && attempts[1].ok);
    assert!(attempts[1].at.duration_since(attempts[0].at) >= Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.tg.messages_to(ALICE).len(), 1, "exactly once");
    assert_eq!(sent[0].params["text"], "patience");
    h.stop().await;
}

#[tokio::test]
async fn html_telegram_refuses_is_resent_as_plain_text() {
    let h = Harness::start(FakeLlm::answering("**bold** answer").await).await;
    h.tg.script("sendMessage", 400, json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: whatever"}));
    h.tg.send_text(ALICE, "hi");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].params["text"], "bold answer");
    assert!(sent[0].params.get("parse_mode").is_none());
    h.stop().await;
}

#[tokio::test]
async fn non_text_messages_get_a_polite_answer_and_no_llm_call() {
    // Photos are covered with the vision tests, recordings and documents in media.rs; here,
    // what is none of them.
    let h = Harness::start(FakeLlm::answering("x").await).await;
    h.tg.send_location(ALICE);
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(
        sent[0].params["text"].as_str().unwrap().contains(
            "I can only read text messages, photos, voice notes, video notes and documents"
        )
    );
    assert!(h.llm.requests().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn clear_empties_the_next_requests_history() {
    let h = Harness::start(FakeLlm::answering("noted").await).await;
    h.tg.send_text(ALICE, "remember 42");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "/clear");
    h.tg.wait_messages(ALICE, 2).await;
    h.tg.send_text(ALICE, "what number?");
    h.tg.wait_messages(ALICE, 3).await;
    let requests = h.llm.agent_requests();
    assert_eq!(
        messages(&requests[1]).len(),
        2,
        "system + the new message only"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_iteration_cap_ends_a_turn_honestly() {
    // A new call every step (an identical one that already answered is cut short instead:
    // see `local_models`).
    let llm = FakeLlm::start(|_, i| {
        Reply::tool_call(&format!("c{i}"), "current_time", json!({"step": i}))
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "loop forever");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(
        sent[0].params["text"]
            .as_str()
            .unwrap()
            .contains("I stopped after 8 steps")
    );
    assert_eq!(h.llm.agent_requests().len(), 8);
    h.stop().await;
}

#[tokio::test]
async fn callback_queries_are_answered_at_once() {
    let h = Harness::start(FakeLlm::answering("x").await).await;
    let id = h.tg.press(ALICE, ALICE, 5, "garbage");
    let answered =
        h.tg.wait_for(|t| t.calls("answerCallbackQuery").into_iter().next())
            .await;
    assert_eq!(answered.params["callback_query_id"], id.as_str());
    assert!(h.llm.requests().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn messages_of_one_chat_are_answered_in_order() {
    let llm = FakeLlm::start(|req, _| {
        let text = last_user_text(req);
        let delay = if text == "first" { 300 } else { 0 };
        Reply::text(&format!("answer to {text}")).after(Duration::from_millis(delay))
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "first");
    h.tg.send_text(ALICE, "second");
    h.tg.send_text(BOB, "other chat");
    let bob = h.tg.wait_messages(BOB, 1).await;
    assert!(
        h.tg.messages_to(ALICE).is_empty(),
        "Bob's turn did not wait for Alice's"
    );
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[0].params["text"], "answer to first");
    assert_eq!(sent[1].params["text"], "answer to second");
    assert_eq!(bob[0].params["text"], "answer to other chat");
    // The second turn saw the first one's answer: turns do not interleave.
    let second = h
        .llm
        .requests()
        .into_iter()
        .find(|r| last_user_text(r) == "second")
        .unwrap();
    assert!(
        messages(&second)
            .iter()
            .any(|m| m["content"] == "answer to first")
    );
    h.stop().await;
}

#[test]
fn a_missing_token_stops_start_up_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_heurist"))
        .current_dir(dir.path())
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("TELOXIDE_TOKEN is not set"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn an_unparseable_config_stops_start_up_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[llm\nbase_url = 1").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_heurist"))
        .current_dir(dir.path())
        .env_clear()
        .env("HEURIST_CONFIG", &file)
        .env("TELOXIDE_TOKEN", "1:x")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("bad.toml line 1"), "{stderr}");
}

#[tokio::test]
async fn a_failed_turn_is_not_reflected_on() {
    // The first turn calls a tool, then its follow-up call fails: the turn had a request, but
    // the endpoint that just failed is not asked to reflect on it.
    let llm = FakeLlm::start(|request, i| match i {
        0 => Reply::tool_call("c1", "current_time", json!({})),
        1 => Reply::error(401, "invalid api key"),
        _ if is_reflection_request(request) => Reply::text(r#"{"heuristics": []}"#),
        _ => Reply::text("fine"),
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "what time is it?");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "second task");
    h.tg.wait_messages(ALICE, 2).await;
    h.tg.wait_for(|_| {
        (!h.llm.reflection_requests().is_empty() && h.app().learning().reflections_running() == 0)
            .then_some(())
    })
    .await;
    let reflected: Vec<String> = h
        .llm
        .reflection_requests()
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(reflected.len(), 1, "only the answered turn: {reflected:?}");
    assert!(
        reflected[0].contains("Task summary: second task")
            && !reflected[0].contains("Task summary: what time"),
        "{}",
        reflected[0]
    );
    h.stop().await;
}
