//! Real servers' limits: completion caps, context overflow, answers cut off at the cap.

use serde_json::{Value, json};

use crate::support::*;

fn prompt_chars(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().len())
        .sum()
}

fn overflow() -> Reply {
    Reply::status_body(
        400,
        json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 4100, "n_ctx": 4096}}),
    )
}

#[tokio::test]
async fn a_context_overflow_drops_old_turns_retries_and_answers() {
    // A server with a small context: prompts over 3,500 characters are refused.
    let llm = FakeLlm::start(|req, _| {
        if prompt_chars(req) > 3_500 {
            overflow()
        } else {
            Reply::text(&format!("ok {}", &last_user_text(req)[..5]))
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    for i in 0..4 {
        h.tg.send_text(ALICE, &format!("turn{i} {}", "x".repeat(1_000)));
        let sent = h.tg.wait_messages(ALICE, i + 1).await;
        assert_eq!(
            sent[i].params["text"],
            format!("ok turn{i}"),
            "turn {i} was answered"
        );
    }
    let requests = h.llm.agent_requests();
    let refused: Vec<&Value> = requests
        .iter()
        .filter(|r| prompt_chars(r) > 3_500)
        .collect();
    assert_eq!(refused.len(), 1, "one overflow, then the window moved");
    // The retry after the overflow starts with the system message and a whole turn.
    let retry_index = requests
        .iter()
        .position(|r| prompt_chars(r) > 3_500)
        .unwrap()
        + 1;
    let retry = requests[retry_index]["messages"].as_array().unwrap();
    assert_eq!(retry[0]["role"], "system");
    assert_eq!(retry[1]["role"], "user");
    assert!(!retry.iter().any(|m| {
        m["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("turn0")
    }));
    // The next turn did not start by overflowing again.
    let last = requests.last().unwrap();
    assert!(prompt_chars(last) <= 3_500);
    assert!(last_user_text(last).starts_with("turn3"));
    h.stop().await;
}

#[tokio::test]
async fn a_conversation_that_still_does_not_fit_suggests_clear() {
    let llm = FakeLlm::start(|req, _| {
        if last_user_text(req).starts_with("huge") {
            overflow()
        } else {
            Reply::text("fine")
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_text(ALICE, "small talk");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "huge message");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let text = sent[1].params["text"].as_str().unwrap();
    assert!(
        text.contains("/clear") && text.contains("context window"),
        "{text}"
    );
    // Trimmed once and retried once, no more.
    assert_eq!(h.llm.agent_requests().len(), 3);
    // The bot keeps serving, with a valid history.
    h.tg.send_text(ALICE, "still there?");
    let sent = h.tg.wait_messages(ALICE, 3).await;
    assert_eq!(sent[2].params["text"], "fine");
    h.stop().await;
}

#[tokio::test]
async fn an_answer_cut_off_at_the_cap_says_so_and_history_stays_valid() {
    let llm = FakeLlm::start(|req, i| {
        if i == 0 {
            Reply::completion(
                json!({"role": "assistant", "content": "The first half of a long"}),
                "length",
            )
        } else {
            let msgs = req["messages"].as_array().unwrap();
            Reply::text(&format!(
                "seen {}",
                msgs.iter()
                    .any(|m| m["content"] == "The first half of a long")
            ))
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_text(ALICE, "write an essay");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].params["text"].as_str().unwrap();
    assert!(text.starts_with("The first half of a long"), "{text}");
    assert!(
        text.contains("Cut off") && text.contains("1024 tokens"),
        "{text}"
    );
    h.tg.send_text(ALICE, "continue");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[1].params["text"], "seen true");
    h.stop().await;
}

#[tokio::test]
async fn every_request_carries_its_cap() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) {
            Reply::text(r#"{"options": []}"#)
        } else {
            Reply::text("hi")
        }
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    let (options, reflection) =
        h.tg.wait_for(|_| {
            let requests = h.llm.requests();
            let options = requests.iter().find(|r| is_options_request(r))?.clone();
            let reflection = requests.iter().find(|r| is_reflection_request(r))?.clone();
            Some((options, reflection))
        })
        .await;
    assert_eq!(h.llm.agent_requests()[0]["max_tokens"], 1024, "answer cap");
    assert_eq!(options["max_tokens"], 256, "extraction cap");
    assert_eq!(reflection["max_tokens"], 256, "reflection cap");
    h.stop().await;

    // Per model, and under the field OpenAI's reasoning models require.
    let llm = FakeLlm::answering("hi").await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.models[0].max_tokens = Some(333);
        c.llm.max_tokens_field = heurist::config::MaxTokensField::MaxCompletionTokens;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    let request = &h.llm.requests()[0];
    assert_eq!(request["max_completion_tokens"], 333);
    assert!(request.get("max_tokens").is_none());
    h.stop().await;
}

#[tokio::test]
async fn a_models_context_size_bounds_the_history_it_is_sent() {
    let llm = FakeLlm::answering("noted").await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.models[0].context_tokens = Some(4096);
    })
    .await;
    for i in 0..10 {
        h.tg.send_text(ALICE, &format!("note {i}: {}", "y".repeat(1_500)));
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    for request in h.llm.agent_requests() {
        // 4096 tokens minus the 1024 answer cap, at a conservative 3 bytes a token.
        assert!(
            prompt_chars(&request) < 3 * (4096 - 1024),
            "{} chars",
            prompt_chars(&request)
        );
    }
    let last = h.llm.agent_requests().pop().unwrap();
    assert!(
        last["messages"].as_array().unwrap().len() > 2,
        "some history is still sent"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_daily_budget_counts_options_and_reflection_calls_too() {
    let llm = FakeLlm::start(|request, _| {
        if is_options_request(request) {
            Reply::text(r#"{"options": ["Tell me more"]}"#)
        } else if is_reflection_request(request) {
            Reply::text(r#"{"heuristics": []}"#)
        } else {
            Reply::text("an answer")
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| c.limits.daily_tokens = 1_000_000).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    // The options call, then the reflection, run after the answer.
    h.tg.wait_for(|_| {
        (!h.llm.reflection_requests().is_empty()
            && h.app().learning().reflections_running() == 0
            && h.app().learning().pending_reflections().is_empty())
        .then_some(())
    })
    .await;
    let calls = h.llm.requests().len() as u64;
    assert!(calls >= 3, "agent, options and reflection: {calls}");
    // Every fake completion reports 100 prompt + 10 completion tokens.
    assert_eq!(
        h.app()
            .store()
            .usage()
            .user_tokens_today(heurist::ids::UserId(ALICE as u64)),
        calls * 110
    );
    h.stop().await;
}
