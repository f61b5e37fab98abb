//! Short answers at production pacing: one Telegram call per answer, with its HTML and
//! keyboard; quick options in that same call, slow ones by one keyboard edit; no link
//! previews; earlier answers' options retired by a new turn and by /clear.

use std::time::Duration;

use serde_json::{Value, json};

use crate::options::{option_calls, option_keyboard};
use crate::support::telegram::Call;
use crate::support::*;

/// The chats every test here talks in at once (admins are allowed too).
const CHATS: [i64; 3] = [ALICE, BOB, ADMIN];

/// Markdown with a link, so a preview card would be possible and the HTML shows.
fn answer_for(question: &str) -> String {
    format!("**Sure**: {question}, see https://example.com/docs")
}

/// Answers agent calls with [`answer_for`] and options calls with `options` after `delay`.
async fn llm(options: &'static [&'static str], delay: Duration) -> FakeLlm {
    FakeLlm::start(move |req, _| {
        if is_options_request(req) {
            Reply::text(&json!({ "options": options }).to_string()).after(delay)
        } else {
            Reply::text(&answer_for(&last_user_text(req)))
        }
    })
    .await
}

/// Production pacing; `streaming` as given.
async fn start(llm: FakeLlm, streaming: bool) -> Harness {
    Harness::start_with(llm, |config| {
        config.telegram.chat_interval_ms = 1000;
        config.telegram.group_interval_ms = 3000;
        config.telegram.global_per_second = 30;
        config.telegram.streaming = streaming;
    })
    .await
}

fn to_chat(calls: Vec<Call>, chat: i64) -> Vec<Call> {
    calls
        .into_iter()
        .filter(|c| c.params["chat_id"] == json!(chat))
        .collect()
}

fn previews_disabled(params: &Value) -> bool {
    params["link_preview_options"]["is_disabled"] == json!(true)
}

#[tokio::test]
async fn a_short_answer_is_one_send_with_html_feedback_and_no_preview() {
    struct Case {
        name: &'static str,
        streaming: bool,
    }
    let cases = [
        Case {
            name: "streaming on",
            streaming: true,
        },
        Case {
            name: "streaming off",
            streaming: false,
        },
    ];
    for case in cases {
        let h = start(llm(&[], Duration::ZERO).await, case.streaming).await;
        for chat in CHATS {
            h.tg.send_text(chat, &format!("question of {chat}"));
        }
        for chat in CHATS {
            h.tg.wait_messages(chat, 1).await;
        }
        // Anything a second call would do (a final edit, a keyboard edit) has had its time.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        for chat in CHATS {
            let sends = to_chat(h.tg.calls("sendMessage"), chat);
            assert_eq!(sends.len(), 1, "case {}: chat {chat}", case.name);
            let send = &sends[0].params;
            assert_eq!(send["parse_mode"], "HTML", "case {}", case.name);
            assert!(
                send["text"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("<b>Sure</b>"),
                "case {}: {}",
                case.name,
                send["text"]
            );
            assert!(previews_disabled(send), "case {}: {send}", case.name);
            let data = sends[0].buttons();
            assert_eq!(data.len(), 2, "case {}: 👍/👎 only: {data:?}", case.name);
            assert!(
                data.iter().all(|d| d.starts_with("__act__fb|")),
                "case {}: {data:?}",
                case.name
            );
            for method in ["editMessageText", "editMessageReplyMarkup"] {
                assert!(
                    to_chat(h.tg.calls(method), chat).is_empty(),
                    "case {}: chat {chat} got {method}",
                    case.name
                );
            }
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn quick_options_come_in_the_send_and_slow_ones_by_one_keyboard_edit() {
    struct Case {
        name: &'static str,
        delay: Duration,
        in_send: bool,
    }
    let cases = [
        Case {
            name: "quick options",
            delay: Duration::ZERO,
            in_send: true,
        },
        Case {
            name: "options slower than attach_wait_ms",
            delay: Duration::from_millis(2500),
            in_send: false,
        },
    ];
    for case in cases {
        let h = start(llm(&["Red", "Blue"], case.delay).await, true).await;
        for chat in CHATS {
            h.tg.send_text(chat, "pick a colour");
        }
        for chat in CHATS {
            h.tg.wait_for(|_| option_calls(&h, chat).first().cloned())
                .await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for chat in CHATS {
            let sends = to_chat(h.tg.calls("sendMessage"), chat);
            assert_eq!(sends.len(), 1, "case {}", case.name);
            assert!(previews_disabled(&sends[0].params), "case {}", case.name);
            let edits = to_chat(h.tg.calls("editMessageReplyMarkup"), chat);
            let offered = option_calls(&h, chat);
            assert_eq!(offered.len(), 1, "case {}: options shown once", case.name);
            let (message, labels) = option_keyboard(&offered[0]).unwrap();
            assert_eq!(message, sends[0].result["message_id"].as_i64().unwrap());
            let labels: Vec<&str> = labels.iter().map(|(text, _)| text.as_str()).collect();
            assert_eq!(labels, ["Red", "Blue"], "case {}", case.name);
            assert!(
                offered[0]
                    .buttons()
                    .iter()
                    .any(|d| d.starts_with("__act__fb|")),
                "case {}: 👍/👎 beside the options",
                case.name
            );
            if case.in_send {
                assert_eq!(offered[0].method, "sendMessage", "case {}", case.name);
                assert!(edits.is_empty(), "case {}", case.name);
            } else {
                assert_eq!(edits.len(), 1, "case {}: one keyboard edit", case.name);
                assert_eq!(offered[0].method, "editMessageReplyMarkup");
            }
            assert!(to_chat(h.tg.calls("editMessageText"), chat).is_empty());
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn earlier_options_are_removed_by_a_new_turn_and_by_clear_and_refused() {
    let h = start(llm(&["Yes", "No"], Duration::ZERO).await, true).await;
    h.tg.send_text(ALICE, "first");
    let (first, old) =
        h.tg.wait_for(|_| option_calls(&h, ALICE).first().and_then(option_keyboard))
            .await;
    h.tg.send_text(ALICE, "second");
    let (second, _) =
        h.tg.wait_for(|_| option_calls(&h, ALICE).get(1).and_then(option_keyboard))
            .await;
    assert_ne!(first, second);
    // The first answer lost its options (one edit), its 👍/👎 stayed.
    let removal =
        h.tg.wait_for(|t| {
            to_chat(t.calls("editMessageReplyMarkup"), ALICE)
                .into_iter()
                .find(|c| c.params["message_id"] == json!(first))
        })
        .await;
    let kept = removal.buttons();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.iter().all(|d| d.starts_with("__act__fb|")), "{kept:?}");

    // A press of the old option still arriving starts nothing.
    let agent_calls = h.llm.agent_requests().len();
    let query = h.tg.press(ALICE, ALICE, first, &old[0].1);
    let toast =
        h.tg.wait_for(|t| {
            t.calls("answerCallbackQuery")
                .into_iter()
                .find(|c| c.params["callback_query_id"] == query)
        })
        .await;
    assert_eq!(
        toast.params["text"],
        "That choice belongs to an earlier answer"
    );

    // /clear removes the second answer's options too.
    h.tg.send_text(ALICE, "/clear");
    h.tg.wait_for(|t| {
        to_chat(t.calls("editMessageReplyMarkup"), ALICE)
            .into_iter()
            .find(|c| c.params["message_id"] == json!(second))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        h.llm.agent_requests().len(),
        agent_calls,
        "no press started a turn"
    );
    let removals = to_chat(h.tg.calls("editMessageReplyMarkup"), ALICE);
    assert_eq!(removals.len(), 2, "one edit per retired keyboard");
    h.stop().await;
}

#[tokio::test]
async fn a_vote_stays_shown_when_the_options_are_retired() {
    let h = Harness::start_with(llm(&["Yes", "No"], Duration::ZERO).await, |c| {
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "first");
    let (first, _) =
        h.tg.wait_for(|_| option_calls(&h, ALICE).first().and_then(option_keyboard))
            .await;
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let up = sent[0]
        .buttons()
        .into_iter()
        .find(|d| d.starts_with("__act__fb|") && d.ends_with(".u"))
        .expect("a 👍 button");
    h.tg.press(ALICE, ALICE, first, &up);
    h.tg.wait_for(|t| {
        to_chat(t.calls("editMessageReplyMarkup"), ALICE)
            .into_iter()
            .find(|c| c.params["message_id"] == json!(first))
    })
    .await;

    h.tg.send_text(ALICE, "second");
    // The retiring edit takes the options off and keeps the vote's mark.
    let retired =
        h.tg.wait_for(|t| {
            to_chat(t.calls("editMessageReplyMarkup"), ALICE)
                .into_iter()
                .filter(|c| c.params["message_id"] == json!(first))
                .nth(1)
        })
        .await;
    let rows = retired.params["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 1, "only the 👍/👎 row: {rows:?}");
    assert_eq!(rows[0][0]["text"], "👍 ✓");
    assert_eq!(rows[0][1]["text"], "👎");
    h.stop().await;
}
