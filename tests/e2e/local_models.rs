//! Small local models and the servers they run on: tool calls written as text, thinking,
//! llama-server's shared context (500 "Context size has been exceeded"), a cap on requests in
//! flight, and the context window learned from the server.

use std::time::Duration;

use serde_json::{Value, json};

use crate::hostile::{assert_valid_tool_history, everything_shown};
use crate::support::*;

/// llama-server's answer when the requests in flight together outgrow its shared context.
fn context_full() -> Reply {
    Reply::status_body(
        500,
        json!({"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}),
    )
}

/// Options and reflection calls get valid answers; the rest goes to `agent`.
fn with_follow_ups(request: &Value, agent: impl FnOnce() -> Reply) -> Reply {
    if is_options_request(request) {
        Reply::text(r#"{"options": ["Tell me more", "Thanks"]}"#)
    } else if is_reflection_request(request) {
        Reply::text(
            r#"{"heuristics": [{"text": "Read the clock in UTC before answering", "skill_name": null}]}"#,
        )
    } else {
        agent()
    }
}

/// `text`, streamed in pieces when the request asks for a stream.
fn answer(request: &Value, text: &str) -> Reply {
    if request["stream"] == true {
        Reply::streamed(text, 9, Duration::from_millis(10))
    } else {
        Reply::text(text)
    }
}

fn streaming(on: bool) -> impl FnOnce(&mut heurist::Config) {
    move |c| {
        c.telegram.streaming = on;
        c.telegram.chat_interval_ms = 20;
    }
}

fn has_tool_result(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "tool")
}

/// Waits until `chat`'s answer carries option buttons (in its send or by a later edit).
async fn wait_options(h: &Harness, chat: i64) {
    h.tg.wait_for(|_| crate::options::option_calls(h, chat).first().cloned())
        .await;
}

#[tokio::test]
async fn tool_calls_written_as_text_run_and_are_never_shown() {
    struct Case {
        name: &'static str,
        streaming: bool,
        call: &'static str,
    }
    let cases = [
        Case {
            name: "fenced json, as Qwen2.5-Coder writes it",
            streaming: false,
            call: "```json\n{\"name\": \"current_time\", \"arguments\": {}}\n```",
        },
        Case {
            name: "fenced json, streamed",
            streaming: true,
            call: "```json\n{\"name\": \"current_time\", \"arguments\": {}}\n```",
        },
        Case {
            name: "hermes tags with doubled braces, streamed",
            streaming: true,
            call: "<tool_call>\n{{\"name\": \"current_time\", \"arguments\": {{}}}}\n</tool_call>",
        },
    ];
    for case in cases {
        let call = case.call;
        let llm = FakeLlm::start(move |req, _| {
            with_follow_ups(req, || {
                if has_tool_result(req) {
                    answer(req, "It is noon by the clock.")
                } else {
                    answer(req, call)
                }
            })
        })
        .await;
        let h = Harness::start_with(llm, streaming(case.streaming)).await;
        h.tg.send_text(ALICE, "what time is it?");
        h.tg.wait_for(|t| {
            t.screen(ALICE)
                .contains(&"It is noon by the clock.".to_string())
                .then_some(())
        })
        .await;
        wait_options(&h, ALICE).await;
        h.tg.wait_for(|_| (!h.llm.reflection_requests().is_empty()).then_some(()))
            .await;

        for text in everything_shown(&h, ALICE) {
            for raw in ["current_time", "```", "{", "tool_call", "arguments"] {
                assert!(
                    !text.contains(raw),
                    "case {}: {raw:?} shown in {text:?}",
                    case.name
                );
            }
        }
        let agent = h.llm.agent_requests();
        assert_eq!(
            agent.len(),
            2,
            "case {}: the tool ran, then the answer",
            case.name
        );
        let messages = agent[1]["messages"].as_array().unwrap();
        let call = messages
            .iter()
            .find_map(|m| m["tool_calls"].as_array())
            .unwrap_or_else(|| panic!("case {}: no tool call stored", case.name));
        assert_eq!(
            call[0]["function"]["name"], "current_time",
            "case {}",
            case.name
        );
        let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
        assert!(
            result["content"].as_str().unwrap().starts_with("UTC: "),
            "case {}: {result}",
            case.name
        );
        // The next requests (the answer, options, reflection) carry a valid history.
        for request in h.llm.requests() {
            assert_valid_tool_history(&request);
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn a_json_answer_naming_no_tool_stays_an_answer() {
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            Reply::text(r#"{"name": "Ada Lovelace", "born": 1815}"#)
        })
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "a person as JSON, please");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].params["text"].as_str().unwrap();
    assert!(
        text.contains("Ada Lovelace") && text.contains("1815"),
        "{text}"
    );
    assert_eq!(h.llm.agent_requests().len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn thinking_is_never_shown_stored_nor_fed_to_follow_ups() {
    const THOUGHT: &str =
        "<think>\nThe user wants a sum. My secret plan: say four.\n</think>\n\nThe answer is 4.";
    for streamed in [false, true] {
        let llm = FakeLlm::start(|req, _| {
            // "thanks" gets an answer of its own: the same one again would be parroted.
            let thanked = last_user_text(req).ends_with("thanks");
            with_follow_ups(req, || {
                answer(req, if thanked { "You're welcome." } else { THOUGHT })
            })
        })
        .await;
        let h = Harness::start_with(llm, streaming(streamed)).await;
        h.tg.send_text(ALICE, "2+2?");
        h.tg.wait_for(|t| {
            t.screen(ALICE)
                .contains(&"The answer is 4.".to_string())
                .then_some(())
        })
        .await;
        wait_options(&h, ALICE).await;
        h.tg.wait_for(|_| (!h.llm.reflection_requests().is_empty()).then_some(()))
            .await;
        h.tg.send_text(ALICE, "thanks");
        h.tg.wait_for(|_| (h.llm.agent_requests().len() == 2).then_some(()))
            .await;

        for text in everything_shown(&h, ALICE) {
            assert!(
                !text.contains("secret") && !text.contains("think"),
                "streaming {streamed}: shown {text:?}"
            );
        }
        for request in h.llm.requests().iter().skip(1) {
            assert!(
                !request["messages"].to_string().contains("secret"),
                "streaming {streamed}: thinking was fed back: {request}"
            );
        }
        let history = h.llm.agent_requests()[1]["messages"].clone();
        assert!(
            history
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "assistant" && m["content"] == "The answer is 4."),
            "streaming {streamed}: {history}"
        );
        h.stop().await;
    }
}

#[tokio::test]
async fn context_full_while_requests_overlap_is_retried_and_the_buttons_still_arrive() {
    // As llama-server with one shared cache: a request that arrives while another is in
    // flight finds the context full.
    let llm = FakeLlm::start_with_load(|req, _, others| {
        if others > 0 {
            return context_full();
        }
        with_follow_ups(req, || {
            Reply::text(&format!("Answer to {}", last_user_text(req)))
        })
        .after(Duration::from_millis(50))
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.llm.max_retries = 12;
        // The fake's lessons come from no evidence: this is about the requests getting through.
        c.learning.grounded_only = false;
    })
    .await;
    h.tg.send_text(ALICE, "alice asks");
    h.tg.send_text(BOB, "bob asks");
    for (chat, text) in [(ALICE, "Answer to alice asks"), (BOB, "Answer to bob asks")] {
        let sent = h.tg.wait_messages(chat, 1).await;
        assert_eq!(sent[0].params["text"], text);
        wait_options(&h, chat).await;
    }
    // Both reflections got through too.
    h.tg.wait_for(|_| {
        let (requests, statuses) = (h.llm.requests(), h.llm.statuses());
        let reflected = |task: &str| {
            requests.iter().enumerate().any(|(i, r)| {
                is_reflection_request(r)
                    && last_user_text(r).contains(task)
                    && statuses.get(i) == Some(&200)
            })
        };
        (reflected("alice asks") && reflected("bob asks")).then_some(())
    })
    .await;
    h.tg.wait_for(|_| (!h.app().store().learning().lessons().is_empty()).then_some(()))
        .await;
    assert!(
        h.llm.statuses().contains(&500),
        "the requests overlapped, and the fake refused one: {:?}",
        h.llm.statuses()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_context_that_stays_full_is_an_overflow_and_old_turns_are_dropped() {
    // The prompt alone no longer fits: every request with history is refused.
    let llm = FakeLlm::start(|req, _| {
        if req["messages"].as_array().unwrap().len() > 2 {
            context_full()
        } else {
            Reply::text("fits")
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.llm.max_retries = 2;
    })
    .await;
    h.tg.send_text(ALICE, "one");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "two");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[1].params["text"], "fits");
    let agent = h.llm.agent_requests();
    // One turn, then three refused attempts (retries exhausted), then the trimmed request.
    assert_eq!(agent.len(), 5, "{:?}", h.llm.statuses());
    assert_eq!(h.llm.statuses(), [200, 500, 500, 500, 200]);
    let last = agent[4]["messages"].as_array().unwrap();
    assert_eq!(last.len(), 2);
    assert_eq!(last_user_text(&agent[4]), "two");
    h.stop().await;
}

/// Two users at once, with options and reflection: returns the most requests the fake saw in
/// flight together.
async fn burst(max_concurrent: usize) -> usize {
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || Reply::text("hello back")).after(Duration::from_millis(40))
    })
    .await;
    let h = Harness::start_with(llm, |c| c.llm.max_concurrent = max_concurrent).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.send_text(BOB, "hello");
    for chat in [ALICE, BOB] {
        h.tg.wait_messages(chat, 1).await;
        wait_options(&h, chat).await;
    }
    h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 2).then_some(()))
        .await;
    assert!(h.llm.statuses().iter().all(|s| *s == 200));
    let max = h.llm.max_in_flight();
    h.stop().await;
    max
}

#[tokio::test]
async fn max_concurrent_bounds_the_requests_in_flight() {
    assert_eq!(burst(1).await, 1, "one at a time: every call queued");
    assert!(burst(4).await >= 2, "the default lets calls overlap");
}

#[tokio::test]
async fn a_users_answer_is_served_before_queued_background_calls() {
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || Reply::text("ok")).after(Duration::from_millis(300))
    })
    .await;
    // The answer does not wait for its options here, so both are still queued when Bob asks.
    let h = Harness::start_with(llm, |c| {
        c.llm.max_concurrent = 1;
        c.options.attach_wait_ms = 0;
    })
    .await;
    h.tg.send_text(ALICE, "alice first");
    h.tg.wait_messages(ALICE, 1).await;
    // Alice's options and reflection are queued now (one in flight): Bob's turn comes after.
    h.tg.send_text(BOB, "bob second");
    h.tg.wait_messages(BOB, 1).await;
    h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 2).then_some(()))
        .await;
    let kinds: Vec<String> = h
        .llm
        .requests()
        .iter()
        .map(|r| {
            if is_options_request(r) {
                "options".to_string()
            } else if is_reflection_request(r) {
                "reflection".to_string()
            } else {
                last_user_text(r)
            }
        })
        .collect();
    let bob = kinds.iter().position(|k| k == "bob second").unwrap();
    let background_before_bob = kinds[..bob]
        .iter()
        .filter(|k| *k == "options" || *k == "reflection")
        .count();
    assert!(
        background_before_bob <= 1,
        "only the background call already in flight went before Bob: {kinds:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_known_context_caps_max_tokens_and_is_asked_for_once() {
    struct Case {
        name: &'static str,
        props: Option<Value>,
        models: Option<Value>,
        configured: Option<usize>,
        gets: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "llama.cpp /props",
            props: Some(json!({"default_generation_settings": {"n_ctx": 900}, "total_slots": 4})),
            models: Some(json!({"data": [{"id": "test-model", "meta": {"n_ctx_train": 32768}}]})),
            configured: None,
            gets: &["/v1/models", "/props"],
        },
        Case {
            name: "context_length in /v1/models",
            props: None,
            models: Some(json!({"data": [{"id": "test-model", "context_length": 900}]})),
            configured: None,
            gets: &["/v1/models"],
        },
        Case {
            name: "the server says nothing: config",
            props: None,
            models: None,
            configured: Some(900),
            gets: &["/v1/models", "/props"],
        },
    ];
    for case in cases {
        let llm = FakeLlm::start(|req, _| with_follow_ups(req, || Reply::text("short"))).await;
        if let Some(props) = case.props {
            llm.serve_props(props);
        }
        if let Some(models) = case.models {
            llm.serve_models(models);
        }
        let h = Harness::start_with(llm, |c| c.models[0].context_tokens = case.configured).await;
        for (i, text) in ["one", "two"].iter().enumerate() {
            h.tg.send_text(ALICE, text);
            h.tg.wait_messages(ALICE, i + 1).await;
            wait_options(&h, ALICE).await;
        }
        h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 2).then_some(()))
            .await;
        for request in h.llm.requests() {
            let cap = request["max_tokens"].as_u64().unwrap() as usize;
            let prompt: usize = request["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap_or_default().len())
                .sum::<usize>()
                / 3;
            assert!(
                cap + prompt <= 900,
                "case {}: cap {cap} with a prompt of at least {prompt} tokens",
                case.name
            );
        }
        for request in h.llm.agent_requests() {
            assert!(
                request["max_tokens"].as_u64().unwrap() < 1024,
                "case {}: the answer cap was lowered",
                case.name
            );
        }
        assert_eq!(h.llm.gets(), case.gets, "case {}: asked once", case.name);
        h.stop().await;
    }
}

/// A context window the server reports shrinks the history sent, not only the answer cap:
/// with `n_ctx` 4096 and `history_tokens` 12,000, eight turns of about 500 tokens each would
/// overflow the server if all were sent; the oldest are left out instead.
#[tokio::test]
async fn a_context_the_server_reports_shrinks_the_history_budget() {
    let llm = FakeLlm::start(|req, _| with_follow_ups(req, || Reply::text("noted"))).await;
    llm.serve_props(json!({"default_generation_settings": {"n_ctx": 4096}}));
    let h = Harness::start_with(llm, |c| c.agent.history_tokens = 12_000).await;
    let texts: Vec<String> = (0..8)
        .map(|i| format!("turn{i} {}", "lorem ipsum ".repeat(125)))
        .collect();
    for (i, text) in texts.iter().enumerate() {
        h.tg.send_text(ALICE, text);
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    let requests = h.llm.agent_requests();
    let last = requests.last().unwrap().to_string();
    assert!(last.contains("turn7 "), "the new message is sent");
    assert!(last.contains("turn6 "), "the latest turn still fits");
    assert!(!last.contains("turn0 "), "the oldest turn is left out");
    let history_chars: usize = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().len())
        .sum();
    assert!(
        history_chars / 3 + 1024 <= 4096,
        "the prompt ({history_chars} chars) leaves room for the answer cap"
    );
    h.stop().await;
}

/// Whether the request's last message is the bot's ask that begins with `prefix`.
fn asks(request: &Value, prefix: &str) -> bool {
    let last = request["messages"].as_array().unwrap().last().unwrap();
    last["role"] == "user" && last_user_text(request).starts_with(prefix)
}

/// The model's answer when the bot asks it to answer from a result: that result's line
/// holding `word` ("none" without one).
fn from_the_result(request: &Value, word: &str) -> Option<Reply> {
    asks(request, heurist::agent::ANSWER_FROM_RESULT_PROMPT).then(|| {
        let ask = last_user_text(request);
        let line = ask.lines().find(|l| l.contains(word)).unwrap_or("none");
        answer(request, line)
    })
}

/// The tool results of the request's current turn (after its first user message of the turn).
fn results_of(request: &Value) -> Vec<String> {
    crate::support::mcp::tool_results(request)
}

/// What Qwen2.5-Coder-1.5B did on llama-server, tried by hand: the same failing call three
/// times although the error tells the fix, then an empty answer (or the bot's own hint given
/// back as its answer), and an empty answer again when asked once more. The bot runs the failing call once, tells the model so on each
/// repeat, asks once for the answer (without tools, which a weak model would call instead),
/// and then tells the user in plain words which tool failed and why, with 🔁 Retry.
#[tokio::test]
async fn a_weak_model_repeating_a_failing_call_then_silent_gets_an_honest_answer() {
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            let asked_again = last_user_text(req) == heurist::agent::ANSWER_NOW_PROMPT;
            match results_of(req).len() {
                n @ 0..3 if !asked_again => {
                    Reply::tool_call(&format!("c{n}"), "probe__fail", json!({"id": "4411"}))
                }
                // Qwen on llama-server gave the bot's own hint back as its answer.
                _ if !asked_again => Reply::text(heurist::agent::calls::REPEAT_HINT),
                _ => Reply::text(""),
            }
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.mcp.servers = vec![crate::support::mcp::stdio_server("probe")];
    })
    .await;
    h.tg.send_text(ALICE, "look up ticket 4411");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].text();
    assert!(text.contains("probe__fail"), "{text}");
    assert!(text.contains("the disk is on fire"), "{text}");
    assert!(!text.contains("empty answer"), "{text}");
    let buttons = sent[0].buttons();
    assert!(
        buttons.iter().any(|data| data.starts_with("__act__retry|")),
        "{buttons:?}"
    );
    let agent = h.llm.agent_requests();
    let last = agent.last().unwrap();
    assert_eq!(last_user_text(last), heurist::agent::ANSWER_NOW_PROMPT);
    // Asked again without tools: offered them, a weak model calls one instead of answering.
    assert!(agent[0]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(
        last["tools"].as_array().is_none_or(Vec::is_empty),
        "{}",
        last["tools"]
    );
    let results = results_of(last);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].contains("the disk is on fire"), "{results:?}");
    for repeat in &results[1..] {
        assert!(repeat.contains("already failed in this turn"), "{repeat}");
        assert!(repeat.contains("the disk is on fire"), "{repeat}");
    }
    h.stop().await;
}

/// A failed call may be right once another call changed what it failed on: the desk's
/// `deploy` fails until `lock` ran, and the same `deploy` then runs (found by the benefit
/// benchmark, where the repeat guard once refused it and the turn ran out of steps).
#[tokio::test]
async fn a_failed_call_runs_again_after_another_call_succeeded() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            let results = results_of(req);
            let service = json!({"service": "api"});
            match results.len() {
                0 => Reply::tool_call("c0", "desk__deploy", service),
                1 => Reply::tool_call("c1", "desk__lock", service),
                2 => Reply::tool_call("c2", "desk__deploy", service),
                _ => answer(req, "Deployed api."),
            }
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, "deploy the api service");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(
        sent[0].text().contains("Deployed api."),
        "{}",
        sent[0].text()
    );
    let calls = desk.calls();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["deploy", "lock", "deploy"]);
    assert!(calls[2].error.is_none(), "{calls:?}");
    h.stop().await;
}

/// Qwen2.5-Coder-1.5B on llama-server called the weather tool three times with the same city,
/// then told the user the tool gave no output. A call that repeats one that already answered
/// in the turn is not run: the answer is asked for, without tools, with the result that
/// answered repeated under the ask (asked without it, Qwen said "the tool did not provide any
/// output"), and that answer is what the user reads.
#[tokio::test]
async fn a_call_repeating_one_that_answered_gets_the_answer_asked_for() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            let ask = last_user_text(req);
            if heurist::agent::is_answer_now(&ask) {
                // Offered no tools, the weak model answers from the result in front of it.
                assert!(req["tools"].as_array().is_none_or(Vec::is_empty));
                assert!(
                    ask.starts_with(heurist::agent::ANSWER_FROM_RESULT_PROMPT),
                    "{ask}"
                );
                let line = ask
                    .lines()
                    .find(|l| l.contains("°C"))
                    .unwrap_or("no result");
                return answer(req, line);
            }
            Reply::tool_call(
                &format!("c{}", results_of(req).len()),
                "desk__weather",
                json!({"city": "Oslo"}),
            )
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, "What's the weather in Oslo today?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(sent[0].text().contains("Oslo: 12 °C"), "{}", sent[0].text());
    assert_eq!(desk.calls().len(), 1, "{:?}", desk.calls());
    // The dropped call is not in the stored turn: its history stays valid.
    let window = h
        .app()
        .store()
        .history()
        .window(in_chat(ALICE), 100_000)
        .unwrap();
    let calls = window
        .messages
        .iter()
        .filter(|m| matches!(m, heurist::llm::ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
        .count();
    assert_eq!(calls, 1);
    h.stop().await;
}

/// Fresh chats, seed 14, learning off (Qwen2.5-Coder-1.5B, the benefit benchmark): after
/// `stock_level` refused `70`, the answer relayed the desk's rule instead of applying it. It
/// is asked once to fix the refused call, never shown, and the fixed call's result is what
/// the user reads.
#[tokio::test]
async fn a_refusals_rule_relayed_as_the_answer_gets_the_call_fixed() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            if asks(req, heurist::agent::calls::RELAYED_REFUSAL_PROMPT) {
                return Reply::tool_call("c9", "desk__stock_level", json!({"sku": "SKU-000070"}));
            }
            match results_of(req).last() {
                None => Reply::tool_call("c0", "desk__stock_level", json!({"sku": "70"})),
                Some(last) if last.starts_with("error: ") => answer(
                    req,
                    "You have entered an invalid SKU. The correct format is SKU- followed by \
                     the item number as six digits, zero-padded (item 4411 is SKU-004411).",
                ),
                Some(last) => answer(req, last.lines().nth(1).unwrap_or(last)),
            }
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, "How many of item 70 are left in stock?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    assert!(shown.contains("SKU-000070"), "{shown}");
    assert!(!shown.contains("correct format"), "{shown}");
    assert_eq!(desk.calls().len(), 2, "{:?}", desk.calls());
    h.stop().await;
}

/// One chat, seed 14, learning off (Qwen2.5-Coder-1.5B, the benefit benchmark on 5e14957):
/// the rule relayed, asked to fix the call, relayed again; asked with the question alone, the
/// model made the refused call again, and the bot's repeat (which quotes the refusal) was the
/// only place the desk's rule stood. The relay after it was shown as the answer. The quoted
/// refusal is the tool's too: the user gets the honest note that quotes the desk, with 🔁 Retry.
#[tokio::test]
async fn a_refusal_relayed_after_the_bots_repeat_is_no_answer() {
    const RELAY: &str = "I received an error indicating that the item number '70' does not \
         exist in the system and that SKUs must be written as SKU- followed by the item number \
         as six digits, zero-padded (item 4411 is SKU-004411).";
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            if last_user_text(req) == "Hello" {
                return answer(req, "Hello! How can I help?");
            }
            match results_of(req).last() {
                None => Reply::tool_call("c0", "desk__stock_level", json!({"sku": "70"})),
                Some(_) => answer(req, RELAY),
            }
        })
    })
    .await;
    // Rewrites off, as with learning off (the benchmark's run): the refused call made again
    // is the same call, which the bot does not run again.
    let mut entry = desk.entry();
    entry.rewrite_arguments = false;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![entry]).await;
    // An earlier turn: the chat's history is what the question alone leaves out.
    h.tg.send_text(ALICE, "Hello");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "How many of item 70 are left in stock?");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let shown = sent[1].text();
    assert!(!shown.contains("I received an error"), "{shown}");
    assert!(
        shown.starts_with("Sorry, I could not finish this."),
        "{shown}"
    );
    assert!(
        shown.contains("no item '70'"),
        "it quotes the desk: {shown}"
    );
    assert!(
        h.llm
            .agent_requests()
            .iter()
            .any(|r| results_of(r).iter().any(|t| t.contains("not run again"))),
        "the refused call was made again and turned away"
    );
    assert_eq!(desk.calls().len(), 1, "{:?}", desk.calls());
    h.stop().await;
}

/// One chat, seed 13, learning on (Qwen2.5-Coder-1.5B, the benefit benchmark on 5e14957): the
/// stock call worked ("SKU-000070: 56 units in the Leipzig warehouse."), and the answer told the
/// user how to make it, in Markdown. Its one word of the result, "units", is the question's
/// paraphrase, not the figure: it was shown. Now it is asked again from the result.
#[tokio::test]
async fn a_worked_call_described_in_markdown_is_asked_from_its_result() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            if let Some(reply) = from_the_result(req, "units") {
                return reply;
            }
            match results_of(req).last() {
                None => Reply::tool_call("c0", "desk__stock_level", json!({"sku": "SKU-000070"})),
                Some(_) => answer(
                    req,
                    "To determine how many units of item 70 are left in stock, you can call the \
                     `desk__stock_level` function with the `sku` parameter set to \"SKU-000070\".",
                ),
            }
        })
    })
    .await;
    shows_the_one_result(llm, &desk, "How many of item 70 are left in stock?").await;
}

/// One chat, seed 12, learning on (Qwen2.5-Coder-1.5B, the benefit benchmark on 5e14957):
/// the first ask went on a call the model only described; the call it then made worked ("room
/// Delta is booked 10:00-11:00"), and it described that call instead of answering. The user
/// got "the model gave no answer" with the room in the turn. Now the model is asked once to
/// answer from that result, and its answer is what the user reads.
#[tokio::test]
async fn a_described_call_after_the_call_worked_is_asked_from_its_result() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            if let Some(reply) = from_the_result(req, "room") {
                return reply;
            }
            if asks(req, heurist::agent::calls::MAKE_THE_CALL_PROMPT) {
                return Reply::tool_call("b1", "desk__booking", json!({"date": "15.03.2027"}));
            }
            let said = if results_of(req).is_empty() {
                "Use the desk__booking function with the date 15.03.2027."
            } else {
                "To view the meeting room bookings on 2027-03-15, you can call the \
                 `desk__booking` function with the argument `{\"date\": \"15.03.2027\"}`."
            };
            answer(req, said)
        })
    })
    .await;
    shows_the_one_result(llm, &desk, "Which meeting room is taken on 2027-03-15?").await;
}

/// Alice asks `question` of a bot on `desk`; the answer shown is the reply of the turn's one
/// desk call, not a call described.
async fn shows_the_one_result(
    llm: FakeLlm,
    desk: &crate::support::desk::DeskServer,
    question: &str,
) {
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, question);
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    let calls = desk.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        shown.contains(&calls[0].reply),
        "{shown} / {}",
        calls[0].reply
    );
    assert!(!shown.contains("you can call"), "{shown}");
    h.stop().await;
}

/// Fresh chats, seed 9, learning off (Qwen2.5-Coder-1.5B, the benefit benchmark): after
/// `shipping_quote` refused `1.2` (and the bot turned its repeat away), the answer was the error's example, "The price of
/// shipping a 0.3 kg parcel is 300." No call of the turn worked and every figure of that
/// answer is the error's, none the user's: it is asked again to fix the refused call (the
/// tools kept), never shown, and the call made then is what the user reads.
#[tokio::test]
async fn an_errors_example_given_as_the_answer_is_asked_again_and_never_shown() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            let results = results_of(req);
            if asks(req, heurist::agent::calls::RELAYED_REFUSAL_PROMPT) {
                assert!(req["tools"].as_array().is_some_and(|t| !t.is_empty()));
                return Reply::tool_call("c9", "desk__shipping_quote", json!({"weight": 1200}));
            }
            match results.last() {
                None => Reply::tool_call("c0", "desk__shipping_quote", json!({"weight": 1.2})),
                Some(last) if last.starts_with("error: ") => {
                    answer(req, "The price of shipping a 0.3 kg parcel is 300.")
                }
                Some(last) => answer(req, last.lines().nth(1).unwrap_or(last)),
            }
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, "Quote me shipping for a parcel weighing 1.2 kg");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    assert!(shown.contains("A 1200 g parcel ships for EUR"), "{shown}");
    assert!(!shown.contains("0.3 kg"), "{shown}");
    let calls = desk.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("a 0.3 kg parcel is 300"))
    );
    h.stop().await;
}

/// Fresh chats, seed 7 (Qwen2.5-Coder-1.5B): the booking call failed with the date's right
/// form in its error, `current_time` worked, then the model called `current_time` again.
/// Asked for the answer from that result, it gave the time as the answer to "Which meeting
/// room is booked on 2026-12-14?". The repeat now gets the ask to fix the failed call, with
/// the tools still offered, and the call made then answers.
#[tokio::test]
async fn a_repeated_answered_call_after_a_failed_one_gets_the_failed_one_fixed() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            let ask = last_user_text(req);
            if asks(req, heurist::agent::calls::FIX_THE_CALL_PROMPT) {
                assert!(ask.contains("desk__booking"), "{ask}");
                assert!(req["tools"].as_array().is_some_and(|t| !t.is_empty()));
                return Reply::tool_call("c9", "desk__booking", json!({"date": "14.12.2026"}));
            }
            let results = results_of(req);
            match results.len() {
                0 => Reply::tool_call("c0", "desk__booking", json!({"date": "2026-12-14"})),
                1 | 2 if !results.last().unwrap().contains("room") => {
                    Reply::tool_call(&format!("c{}", results.len()), "current_time", json!({}))
                }
                _ => answer(
                    req,
                    results.last().unwrap().lines().nth(1).unwrap_or("none"),
                ),
            }
        })
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![desk.entry()]).await;
    h.tg.send_text(ALICE, "Which meeting room is booked on 2026-12-14?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    assert!(!shown.contains("UTC"), "{shown}");
    let calls = desk.calls();
    let booked = calls.last().unwrap();
    assert_eq!(booked.arguments, json!({"date": "14.12.2026"}), "{calls:?}");
    assert!(booked.error.is_none(), "{calls:?}");
    assert!(shown.contains(&booked.reply), "{shown} / {}", booked.reply);
    h.stop().await;
}

/// An empty answer after a tool call gets one more call, and its answer is what the user sees.
#[tokio::test]
async fn an_empty_answer_is_asked_for_once_more() {
    let llm = FakeLlm::start(|req, _| {
        with_follow_ups(req, || {
            if heurist::agent::is_answer_now(&last_user_text(req)) {
                answer(req, "It is noon in Paris.")
            } else if has_tool_result(req) {
                answer(req, "")
            } else {
                Reply::tool_call("c1", "current_time", json!({}))
            }
        })
    })
    .await;
    for on in [false, true] {
        let h = Harness::start_with(llm.clone(), streaming(on)).await;
        h.tg.send_text(ALICE, "what time is it in Paris?");
        let text =
            h.tg.wait_for(|_| {
                everything_shown(&h, ALICE)
                    .into_iter()
                    .find(|text| text.contains("noon"))
            })
            .await;
        assert!(!text.contains("empty"), "{text}");
        h.stop().await;
    }
}
