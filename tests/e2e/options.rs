//! Option buttons: extraction → ticket → keyboard → press → next turn.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::telegram::Call;
use crate::support::*;

const LONG_LABEL: &str =
    "Расскажи подробнее о втором варианте, пожалуйста, с примерами кода и пояснениями 🙏";

/// Answers agent calls with a question, and options calls with `options_reply(attempt)`.
async fn llm_with_options(
    options_reply: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> FakeLlm {
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    FakeLlm::start(move |req, _| {
        if is_options_request(req) {
            options_reply(attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
        } else {
            Reply::text(&format!("Answer to: {}. Which one?", last_user_text(req)))
        }
    })
    .await
}

fn json_options(labels: &[&str]) -> Reply {
    Reply::text(&format!("```json\n{}\n```", json!({"options": labels})))
}

/// The option buttons of a call that carried a keyboard, with the message they are under.
pub(crate) fn option_keyboard(call: &Call) -> Option<(i64, Vec<(String, String)>)> {
    if !call.ok {
        return None;
    }
    let buttons: Vec<(String, String)> = call.params["reply_markup"]["inline_keyboard"]
        .as_array()?
        .iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .map(|b| {
            (
                b["text"].as_str().unwrap_or_default().to_string(),
                b["callback_data"].as_str().unwrap_or_default().to_string(),
            )
        })
        .filter(|(_, data)| data.starts_with("__opt__"))
        .collect();
    if buttons.is_empty() {
        return None;
    }
    let message = match call.method.as_str() {
        "sendMessage" => call.result["message_id"].as_i64(),
        _ => call.params["message_id"].as_i64(),
    }?;
    Some((message, buttons))
}

/// Every call to `chat` that put option buttons under a message, oldest first.
pub(crate) fn option_calls(h: &Harness, chat: i64) -> Vec<Call> {
    let mut calls: Vec<Call> = ["sendMessage", "editMessageText", "editMessageReplyMarkup"]
        .into_iter()
        .flat_map(|method| h.tg.calls(method))
        .filter(|c| c.params["chat_id"] == json!(chat) && option_keyboard(c).is_some())
        .collect();
    calls.sort_by_key(|c| c.at);
    calls
}

/// The option buttons attached to the chat's answer, once they are there (in the answer's own
/// send, or by a keyboard edit).
async fn wait_keyboard(h: &Harness, chat: i64) -> (i64, Vec<(String, String)>) {
    h.tg.wait_for(|_| option_calls(h, chat).first().and_then(option_keyboard))
        .await
}

fn answered_with(h: &Harness, query_id: &str) -> Option<Value> {
    h.tg.calls("answerCallbackQuery")
        .into_iter()
        .find(|c| c.params["callback_query_id"] == query_id)
        .map(|c| c.params)
}

#[tokio::test]
async fn options_appear_as_a_keyboard_on_the_answer() {
    let h = Harness::start(llm_with_options(|_| json_options(&["Red", "Blue", LONG_LABEL])).await)
        .await;
    h.tg.send_text(ALICE, "pick a colour");
    let answer = h.tg.wait_messages(ALICE, 1).await;
    let (message_id, buttons) = wait_keyboard(&h, ALICE).await;
    assert_eq!(message_id, answer[0].result["message_id"].as_i64().unwrap());
    assert_eq!(buttons.len(), 3);
    assert_eq!(buttons[0].0, "Red");
    assert!(
        buttons[2].0.ends_with('…') && buttons[2].0.chars().count() <= 41,
        "{}",
        buttons[2].0
    );
    for (_, data) in &buttons {
        assert!(data.starts_with("__opt__") && data.len() <= 64, "{data}");
    }
    // Quick options come in the answer's one send, with the 👍/👎 row under them.
    let sends = h.tg.calls("sendMessage");
    assert_eq!(sends.len(), 1);
    assert!(h.tg.calls("editMessageReplyMarkup").is_empty());
    let markup = &sends[0].params["reply_markup"]["inline_keyboard"];
    let last_row = markup.as_array().unwrap().last().unwrap();
    assert!(
        last_row[0]["callback_data"]
            .as_str()
            .unwrap()
            .starts_with("__act__fb|")
    );
    // The fake Bot API rejects data over 64 bytes; nothing was rejected.
    assert!(sends[0].ok);
    h.stop().await;
}

#[tokio::test]
async fn pressing_a_long_non_ascii_option_sends_the_full_label_and_marks_the_choice() {
    let h = Harness::start(llm_with_options(|_| json_options(&["Short", LONG_LABEL])).await).await;
    h.tg.send_text(ALICE, "options please");
    h.tg.wait_messages(ALICE, 1).await;
    let (message_id, buttons) = wait_keyboard(&h, ALICE).await;
    let query = h.tg.press(ALICE, ALICE, message_id, &buttons[1].1);

    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(
        sent[1].params["text"],
        format!("Answer to: {LONG_LABEL}. Which one?")
    );
    let answered = answered_with(&h, &query).expect("the press was answered");
    assert!(answered.get("text").is_none(), "no error toast: {answered}");
    let agent = h.llm.agent_requests();
    assert_eq!(last_user_text(&agent[1]), LONG_LABEL);
    // Same history: the press continued the conversation.
    assert!(
        agent[1]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "Answer to: options please. Which one?")
    );
    // The keyboard became a mark of the choice.
    let marks: Vec<Value> =
        h.tg.calls("editMessageReplyMarkup")
            .into_iter()
            .map(|c| c.params)
            .filter(|p| p["message_id"] == message_id)
            .collect();
    let mark = &marks.last().unwrap()["reply_markup"]["inline_keyboard"];
    assert_eq!(
        mark.as_array().unwrap().len(),
        2,
        "the mark, then the 👍/👎 row"
    );
    assert_eq!(mark[1][0]["text"], "👍");
    assert!(
        mark[0][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("✓ Расскажи")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_second_press_does_nothing() {
    let h = Harness::start(llm_with_options(|_| json_options(&["Yes", "No"])).await).await;
    h.tg.send_text(ALICE, "shall we?");
    h.tg.wait_messages(ALICE, 1).await;
    let (message_id, buttons) = wait_keyboard(&h, ALICE).await;
    h.tg.press(ALICE, ALICE, message_id, &buttons[0].1);
    let second = h.tg.press(ALICE, ALICE, message_id, &buttons[1].1);
    h.tg.wait_messages(ALICE, 2).await;
    let toast = h.tg.wait_for(|_| answered_with(&h, &second)).await;
    assert_eq!(toast["text"], "You already chose an option here");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.llm.agent_requests().len(),
        2,
        "only the first press started a turn"
    );
    assert_eq!(h.tg.messages_to(ALICE).len(), 2);
    h.stop().await;
}

#[tokio::test]
async fn expired_forged_and_foreign_options_change_nothing() {
    let h = Harness::start(llm_with_options(|_| json_options(&["Yes", "No"])).await).await;
    h.tg.send_text(ALICE, "question");
    h.tg.wait_messages(ALICE, 1).await;
    let (message_id, buttons) = wait_keyboard(&h, ALICE).await;
    let ticket = buttons[0]
        .1
        .trim_start_matches("__opt__")
        .split('|')
        .next()
        .unwrap()
        .to_string();
    let id = ticket.rsplit_once('.').unwrap().0.to_string();

    let forged = [
        ("unknown ticket", ALICE, "__opt__zzzzzz.0|Yes".to_string()),
        ("no ticket", ALICE, "__opt__|Yes".to_string()),
        ("bare label", ALICE, "__opt__Yes".to_string()),
        ("index out of range", ALICE, format!("__opt__{id}.7|Yes")),
        (
            "label does not match",
            ALICE,
            format!("__opt__{id}.0|Delete everything"),
        ),
        ("another chat's ticket", BOB, buttons[0].1.clone()),
        ("garbage", ALICE, "\u{1}\u{2}garbage".to_string()),
        (
            "unknown action",
            ALICE,
            "__act__self_destruct|now".to_string(),
        ),
    ];
    for (name, user, data) in &forged {
        let query = h.tg.press(*user, *user, message_id, data);
        let toast = h.tg.wait_for(|_| answered_with(&h, &query)).await;
        assert_eq!(toast["text"], "This option has expired", "case {name}");
    }
    // A stranger pressing a real button is refused too.
    let query = h.tg.press(STRANGER, ALICE, message_id, &buttons[0].1);
    let toast = h.tg.wait_for(|_| answered_with(&h, &query)).await;
    assert_eq!(toast["text"], "Sorry, this bot is private.");

    // After /clear the real button belongs to an earlier answer.
    h.tg.send_text(ALICE, "/clear");
    h.tg.wait_messages(ALICE, 2).await;
    let query = h.tg.press(ALICE, ALICE, message_id, &buttons[0].1);
    let toast = h.tg.wait_for(|_| answered_with(&h, &query)).await;
    assert_eq!(toast["text"], "That choice belongs to an earlier answer");

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        h.llm.agent_requests().len(),
        1,
        "no press caused an LLM call"
    );
    assert_eq!(h.tg.messages_to(ALICE).len(), 2);
    assert!(h.tg.messages_to(BOB).is_empty());
    h.stop().await;
}

#[tokio::test]
async fn extraction_retries_after_prose_and_reuses_the_agent_request_exactly() {
    let h = Harness::start_with(
        llm_with_options(|attempt| {
            if attempt == 0 {
                Reply::text("You could pick red or blue.")
            } else {
                json_options(&["Red"])
            }
        })
        .await,
        |config| {
            config.learning.reflect = false;
            config.models[0].reasoning_effort = Some("low".into());
            config.models[0].provider_order = vec!["provider-a".into()];
        },
    )
    .await;
    h.tg.send_text(ALICE, "colours?");
    h.tg.wait_messages(ALICE, 1).await;
    let (_, buttons) = wait_keyboard(&h, ALICE).await;
    assert_eq!(buttons[0].0, "Red");

    let requests = h.llm.requests();
    assert_eq!(requests.len(), 3, "agent, options, options retry");
    let (agent, extraction, retry) = (&requests[0], &requests[1], &requests[2]);
    for field in [
        "model",
        "temperature",
        "tools",
        "reasoning_effort",
        "provider",
    ] {
        assert_eq!(agent[field], extraction[field], "{field} differs");
        assert_eq!(agent[field], retry[field], "{field} differs");
    }
    assert_eq!(agent["reasoning_effort"], "low");
    // Byte-identical prefix: the agent call's messages, then its answer, then the prompt.
    let agent_msgs = agent["messages"].as_array().unwrap();
    let extraction_msgs = extraction["messages"].as_array().unwrap();
    let prefix = serde_json::to_string(&agent_msgs[..]).unwrap();
    let extraction_prefix = serde_json::to_string(&extraction_msgs[..agent_msgs.len()]).unwrap();
    assert_eq!(prefix, extraction_prefix);
    assert_eq!(extraction_msgs[agent_msgs.len()]["role"], "assistant");
    assert_eq!(extraction_msgs.len(), agent_msgs.len() + 2);
    // The retry pushes the prose back with the retry prompt.
    let retry_msgs = retry["messages"].as_array().unwrap();
    assert_eq!(&retry_msgs[..extraction_msgs.len()], &extraction_msgs[..]);
    assert_eq!(
        retry_msgs[extraction_msgs.len()]["content"],
        "You could pick red or blue."
    );
    assert_eq!(
        retry_msgs.last().unwrap()["content"],
        heurist::options::OPTIONS_RETRY_PROMPT
    );
    h.stop().await;
}

#[tokio::test]
async fn failing_extraction_never_costs_the_answer() {
    struct Case {
        name: &'static str,
        reply: fn(usize) -> Reply,
    }
    let cases = [
        Case {
            name: "prose twice",
            reply: |_| Reply::text("no json here"),
        },
        Case {
            name: "server errors",
            reply: |_| Reply::error(400, "bad request"),
        },
        Case {
            name: "empty list",
            reply: |_| json_options(&[]),
        },
        Case {
            name: "tool calls",
            reply: |_| Reply::tool_call("x", "current_time", json!({})),
        },
    ];
    for case in cases {
        let h = Harness::start(llm_with_options(case.reply).await).await;
        h.tg.send_text(ALICE, "hello");
        let sent = h.tg.wait_messages(ALICE, 1).await;
        assert_eq!(
            sent[0].params["text"], "Answer to: hello. Which one?",
            "case {}",
            case.name
        );
        h.tg.wait_for(|_| (h.llm.requests().len() >= 2).then_some(()))
            .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            h.tg.calls("editMessageReplyMarkup").is_empty(),
            "case {}",
            case.name
        );
        h.stop().await;
    }
}

/// The answer waits for options at most `options.attach_wait_ms` (1.5 s by default), not for a
/// 3 s extraction; the options then come by one keyboard edit.
#[tokio::test]
async fn an_answer_waits_for_slow_options_at_most_attach_wait() {
    let h = Harness::start(
        llm_with_options(|_| json_options(&["Later"]).after(Duration::from_secs(3))).await,
    )
    .await;
    let started = std::time::Instant::now();
    h.tg.send_text(ALICE, "quick");
    h.tg.wait_messages(ALICE, 1).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let (_, buttons) = wait_keyboard(&h, ALICE).await;
    assert_eq!(buttons[0].0, "Later");
    h.stop().await;
}
