//! Argument rewrites (issue 34, item 4): a tool's refusal that states its form by example
//! teaches the bot to write a call in the old form in the tool's form itself, in the same turn
//! and in later ones, shown in the turn's progress; never for a server that switched it off,
//! never while the bot does not learn, and never kept from a turn that was not the user's own.
//! The fake model behaves as Qwen2.5-Coder-1.5B did on issue 34's desk: it writes the SKU from
//! the item number in its own form and, refused, repeats the same call.

use std::time::Duration;

use serde_json::json;

use crate::support::desk::{DeskCall, DeskServer};
use crate::support::mcp::this_turns_results;
use crate::support::telegram::Call;
use crate::support::*;

const STOCK: &str = "desk__stock_level";

/// Agent calls: the SKU as the model writes it (`SKU-<n>`, or the bare number for a question
/// that says "number"), the same call again after a refusal, then the tool's words or "The
/// tool reported an error."
async fn qwen_like() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return Reply::text(r#"{"heuristics": []}"#);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        // The question, not the bot's nudges after it.
        let asked = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .rfind(|c| c.contains("item"))
            .unwrap_or_default()
            .to_string();
        let number = asked
            .split(|c: char| !c.is_ascii_digit())
            .rfind(|w| !w.is_empty())
            .unwrap_or("0")
            .to_string();
        let sku = if asked.contains("number") {
            number
        } else {
            format!("SKU-{number}")
        };
        let results = this_turns_results(req);
        match results.last() {
            None => Reply::tool_call("c1", STOCK, json!({ "sku": sku })),
            Some(last) if last.starts_with("error") && results.len() < 2 => {
                Reply::tool_call("c2", STOCK, json!({ "sku": sku }))
            }
            Some(last) if last.starts_with("error") => Reply::text("The tool reported an error."),
            // Slow enough that the live display shows the progress first.
            Some(last) => Reply::text(&format!("The warehouse says: {}", tool_words(last)))
                .after(Duration::from_millis(400)),
        }
    })
    .await
}

/// The tool's own line inside the bot's delimiters.
fn tool_words(result: &str) -> String {
    result
        .lines()
        .find(|l| l.starts_with("SKU-"))
        .unwrap_or(result)
        .to_string()
}

/// Whether the store kept no form of the stock tool.
fn no_form_kept(h: &Harness) -> bool {
    h.app()
        .store()
        .rewrites()
        .of_tool(STOCK)
        .unwrap()
        .is_empty()
}

fn skus(calls: &[DeskCall]) -> Vec<(String, bool)> {
    calls
        .iter()
        .map(|c| {
            (
                c.arguments["sku"].as_str().unwrap_or_default().to_string(),
                c.error.is_none(),
            )
        })
        .collect()
}

fn with_desk(desk: &DeskServer, rewrite: bool) -> impl FnOnce(&mut heurist::Config) + use<> {
    let mut entry = desk.entry();
    entry.rewrite_arguments = rewrite;
    move |c: &mut heurist::Config| {
        c.mcp.servers = vec![entry];
        c.telegram.streaming = true;
        c.telegram.chat_interval_ms = 100;
    }
}

#[tokio::test]
async fn a_refusal_that_states_the_form_rewrites_the_repeat_and_later_first_calls() {
    let desk = DeskServer::start().await;
    let h = Harness::start_with(qwen_like().await, with_desk(&desk, true)).await;

    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    let answer = h.tg.wait_messages(ALICE, 1).await;
    // The model repeated its refused call word for word; the bot sent it in the form the
    // error stated by another item's example.
    assert_eq!(
        skus(&desk.calls()),
        [("SKU-15".into(), false), ("SKU-000015".into(), true)]
    );
    assert!(
        answer[0].text().contains("SKU-000015"),
        "{}",
        answer[0].text()
    );
    let shown: Vec<String> =
        h.tg.calls("editMessageText")
            .iter()
            .chain(h.tg.messages_to(ALICE).iter())
            .chain(h.tg.drafts_to(ALICE).iter())
            .map(Call::text)
            .collect();
    assert!(
        shown
            .iter()
            .any(|t| t.contains("✏️ desk__stock_level: sku SKU-15 → SKU-000015")),
        "the progress says what the bot rewrote: {shown:?}"
    );
    // The conversation the model sees next holds the call as it was made.
    let last = h.llm.agent_requests().pop().unwrap();
    let made: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["arguments"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(made, [r#"{"sku":"SKU-15"}"#, r#"{"sku":"SKU-000015"}"#]);
    let kept = h.app().store().rewrites().of_tool(STOCK).unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].0, "sku");
    assert_eq!(kept[0].1.worked, 1, "{kept:?}");

    // Bob, in a chat of his own: his first call is in the tool's form already.
    h.tg.send_text(BOB, "Stock for item number 982?");
    let answer = h.tg.wait_messages(BOB, 1).await;
    assert_eq!(skus(&desk.calls())[2..], [("SKU-000982".into(), true)]);
    assert!(
        answer[0].text().contains("SKU-000982"),
        "{}",
        answer[0].text()
    );
    // A call already in the form (here a wrong number) is the model's.
    h.tg.send_text(ADMIN, "How many units of item 009822 are in stock?");
    h.tg.wait_messages(ADMIN, 1).await;
    assert_eq!(skus(&desk.calls())[3..], [("SKU-009822".into(), true)]);
    h.stop().await;
}

#[tokio::test]
async fn a_server_that_switched_it_off_gets_every_call_as_written() {
    let desk = DeskServer::start().await;
    let h = Harness::start_with(qwen_like().await, with_desk(&desk, false)).await;
    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    let answer = h.tg.wait_messages(ALICE, 1).await;
    // The repeat is refused by the bot (the same failing call), never rewritten.
    assert_eq!(skus(&desk.calls()), [("SKU-15".into(), false)]);
    assert!(!answer[0].text().contains("SKU-000015"));
    assert!(no_form_kept(&h));
    h.stop().await;
}

#[tokio::test]
async fn a_bot_that_does_not_learn_rewrites_nothing() {
    let desk = DeskServer::start().await;
    let on = with_desk(&desk, true);
    let h = Harness::start_with(qwen_like().await, move |c| {
        on(c);
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(skus(&desk.calls()), [("SKU-15".into(), false)]);
    assert!(no_form_kept(&h));
    h.stop().await;
}

#[tokio::test]
async fn a_forwarded_message_uses_what_the_tool_says_but_teaches_later_turns_nothing() {
    let desk = DeskServer::start().await;
    let h = Harness::start_with(qwen_like().await, with_desk(&desk, true)).await;
    h.tg.send_forwarded(ALICE, "How many units of item 15 are in stock?");
    h.tg.wait_messages(ALICE, 1).await;
    // In its own turn the tool's refusal is the tool's word on its own argument.
    assert_eq!(
        skus(&desk.calls()),
        [("SKU-15".into(), false), ("SKU-000015".into(), true)]
    );
    assert!(
        no_form_kept(&h),
        "someone else's message teaches no later turn"
    );
    h.tg.send_text(BOB, "Stock for item number 982?");
    h.tg.wait_messages(BOB, 1).await;
    // Bob's first call goes as written; only his own turn's refusal rewrites the repeat.
    assert_eq!(
        skus(&desk.calls())[2..],
        [("982".into(), false), ("SKU-000982".into(), true)]
    );
    h.stop().await;
}

/// Agent calls: item 15's question as [`qwen_like`] does; any other is answered from memory
/// ("There are 12 units.") unless the bot asked to use the tool, then called with the bare
/// number.
async fn answers_from_memory() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return Reply::text(r#"{"heuristics": []}"#);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let asked = last_user_text(req);
        let results = this_turns_results(req);
        if asked.contains("item 15") || asked.contains("SKU-") {
            return match results.last() {
                None => Reply::tool_call("c1", STOCK, json!({ "sku": "SKU-15" })),
                Some(last) if last.starts_with("error") && results.len() < 2 => {
                    Reply::tool_call("c2", STOCK, json!({ "sku": "SKU-15" }))
                }
                Some(last) => Reply::text(&format!("The warehouse says: {}", tool_words(last))),
            };
        }
        match results.last() {
            Some(last) => Reply::text(&format!("The warehouse says: {}", tool_words(last))),
            None if asked.starts_with("Do not answer that from memory") => {
                Reply::tool_call("c1", STOCK, json!({ "sku": "77" }))
            }
            None => Reply::text("There are 12 units."),
        }
    })
    .await
}

#[tokio::test]
async fn an_answer_from_memory_is_asked_once_to_use_the_tool_the_bot_learned_it_needs() {
    for learning in [true, false] {
        let desk = DeskServer::start().await;
        let on = with_desk(&desk, true);
        let h = Harness::start_with(answers_from_memory().await, move |c| {
            on(c);
            c.learning.reflect = learning;
        })
        .await;
        h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
        h.tg.wait_messages(ALICE, 1).await;
        h.tg.send_text(BOB, "How many units of item 77 are in stock?");
        let answer = h.tg.wait_messages(BOB, 1).await;
        let asked_to_call = h.llm.agent_requests().iter().any(|r| {
            last_user_text(r).starts_with("Do not answer that from memory: call desk__stock_level")
        });
        if learning {
            assert!(asked_to_call);
            assert!(
                answer[0].text().contains("SKU-000077"),
                "{}",
                answer[0].text()
            );
            assert_eq!(
                skus(&desk.calls()).last(),
                Some(&("SKU-000077".into(), true))
            );
        } else {
            assert!(!asked_to_call, "nothing learned, nothing asked");
            assert_eq!(answer[0].text(), "There are 12 units.");
        }
        h.stop().await;
    }
}

/// Agent calls: item 15's question as [`qwen_like`] does; any other is answered from the chat's
/// history ("There are 12 units.") whatever the bot asks, unless the request holds the
/// question alone (a system prompt and one user message), then called with the bare number.
async fn copies_history() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return Reply::text(r#"{"heuristics": []}"#);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let messages = req["messages"].as_array().unwrap();
        let asked = last_user_text(req);
        let results = this_turns_results(req);
        if let Some(last) = results.last() {
            if last.starts_with("error") && results.len() < 2 {
                return Reply::tool_call("c2", STOCK, json!({ "sku": "SKU-15" }));
            }
            return Reply::text(&format!("The warehouse says: {}", tool_words(last)));
        }
        let alone = messages.iter().filter(|m| m["role"] != "system").count() == 1;
        if asked.contains("item 15") {
            Reply::tool_call("c1", STOCK, json!({ "sku": "SKU-15" }))
        } else if alone {
            Reply::tool_call("c1", STOCK, json!({ "sku": "77" }))
        } else {
            Reply::text("There are 12 units.")
        }
    })
    .await
}

#[tokio::test]
async fn a_chat_that_keeps_answering_from_its_history_is_asked_with_the_question_alone() {
    let desk = DeskServer::start().await;
    let h = Harness::start_with(copies_history().await, with_desk(&desk, true)).await;
    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "How many units of item 77 are in stock?");
    let answers = h.tg.wait_messages(ALICE, 2).await;
    let asks: Vec<String> = h.llm.agent_requests().iter().map(last_user_text).collect();
    assert!(
        asks.iter()
            .any(|a| a.starts_with("Do not answer that from memory: call desk__stock_level")),
        "{asks:?}"
    );
    assert!(
        answers[1].text().contains("SKU-000077"),
        "{}",
        answers[1].text()
    );
    assert_eq!(
        skus(&desk.calls()).last(),
        Some(&("SKU-000077".into(), true))
    );
    h.stop().await;
}
