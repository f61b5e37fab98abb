//! Honest cancel: a ⏹ stops only its own turn, and only before that turn's answer is stored;
//! a stop that comes later keeps the answer and says so, once; a live message is always
//! finished (no dead ⏹).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::telegram::Call;
use crate::support::*;

/// Streaming on, edits 100 ms apart, no reflection. Drafts off: a live message and its ⏹
/// (a draft has no button; drafts.rs covers stopping one).
fn streaming(c: &mut heurist::Config) {
    c.telegram.streaming = true;
    c.telegram.drafts = false;
    c.telegram.chat_interval_ms = 100;
    c.learning.reflect = false;
}

/// The ⏹ data under a live message, if it shows one.
fn stop_data(call: &Call) -> Option<String> {
    call.buttons()
        .into_iter()
        .find(|d| d.starts_with("__act__stop|"))
}

/// The answer to callback query `query`, once it came.
async fn toast(h: &Harness, query: &str) -> String {
    let call =
        h.tg.wait_for(|t| {
            t.calls("answerCallbackQuery")
                .into_iter()
                .find(|c| c.params["callback_query_id"] == query)
        })
        .await;
    call.params["text"].as_str().unwrap_or_default().to_string()
}

/// How often the chat's stored history holds a user message `text`.
fn stored_times(h: &Harness, chat: i64, text: &str) -> usize {
    let window = h
        .app()
        .store()
        .history()
        .window(in_chat(chat), 1_000_000)
        .unwrap();
    let messages = serde_json::to_value(&window.messages).unwrap();
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" && m["content"] == json!(text))
        .count()
}

/// The text messages sent to `chat` (not edits).
fn sent_texts(h: &Harness, chat: i64) -> Vec<String> {
    h.tg.messages_to(chat)
        .iter()
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn an_old_stop_button_does_not_stop_the_turn_running_now() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) {
            return Reply::error(500, "no options here");
        }
        match last_user_text(req).as_str() {
            "first" => Reply::streamed("The first answer, told in a few pieces.", 6, ms(80)),
            _ => Reply::streamed(&"The second answer goes on. ".repeat(12), 12, ms(150)),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        streaming(c);
        c.options.enabled = false;
    })
    .await;
    h.tg.send_text(ALICE, "first");
    let first = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let old_stop = stop_data(&first).expect("the live message has a ⏹");
    let first_id = first.result["message_id"].as_i64().unwrap();
    // The first answer is complete: its ⏹ is gone.
    h.tg.wait_for(|t| {
        t.screen_with_keyboards(ALICE)
            .first()
            .filter(|(text, keyboard)| {
                text.contains("The first answer, told") && !keyboard.contains("__act__stop")
            })
            .cloned()
    })
    .await;

    h.tg.send_text(ALICE, "second");
    let second = h.tg.wait_messages(ALICE, 2).await.remove(1);
    let new_stop = stop_data(&second).expect("the second live message has a ⏹");
    assert_ne!(new_stop, old_stop, "each turn's ⏹ names its own turn");
    let query = h.tg.press(ALICE, ALICE, first_id, &old_stop);
    assert_eq!(toast(&h, &query).await, "That answer is already complete");

    // The second turn runs to its end: its whole answer, stored, no ⏹ and no stop notice.
    let expected = "The second answer goes on. ".repeat(12);
    h.tg.wait_last(ALICE, |text, keyboard| {
        text.trim() == expected.trim() && !keyboard.contains("__act__stop")
    })
    .await;
    assert!(
        h.tg.screen(ALICE).iter().all(|s| !s.contains("Stopped")),
        "nothing says stopped: {:?}",
        h.tg.screen(ALICE)
    );
    h.tg.wait_for(|_| (stored_times(&h, ALICE, "second") == 1).then_some(()))
        .await;
    assert_eq!(stored_times(&h, ALICE, "first"), 1);
    assert_eq!(sent_texts(&h, ALICE).len(), 2, "the two live messages only");
    h.stop().await;
}

#[tokio::test]
async fn stop_during_streaming_confirms_once_and_leaves_no_dead_stop_button() {
    let h = long_stream().await;
    h.tg.send_text(ALICE, "a long one");
    let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let stop = stop_data(&live).unwrap();
    let query = h.tg.press(
        ALICE,
        ALICE,
        live.result["message_id"].as_i64().unwrap(),
        &stop,
    );
    assert_eq!(toast(&h, &query).await, "Stopped");
    let (text, keyboard) =
        h.tg.wait_last(ALICE, |s, _| s.ends_with(heurist::texts::telegram::STOPPED))
            .await;
    assert_eq!(keyboard, "", "the stopped message has no buttons: {text}");
    tokio::time::sleep(ms(300)).await;
    assert_eq!(
        sent_texts(&h, ALICE).len(),
        1,
        "one confirmation, in the live message: {:?}",
        sent_texts(&h, ALICE)
    );
    assert_eq!(stored_times(&h, ALICE, "a long one"), 0, "nothing stored");
    assert_eq!(
        h.tg.screen_with_keyboards(ALICE).last().unwrap().1,
        "",
        "still no ⏹"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancel_while_the_first_live_frame_is_on_its_way_confirms_once() {
    let h = long_stream().await;
    h.tg.slow_answer("sendMessage", ms(800));
    h.tg.send_text(ALICE, "a long one");
    // The live message has reached Telegram, but the bot has not heard back yet.
    h.tg.wait_for(|t| (!t.calls("sendMessage").is_empty()).then_some(()))
        .await;
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_last(ALICE, |s, _| s.ends_with(heurist::texts::telegram::STOPPED))
        .await;
    tokio::time::sleep(ms(500)).await;
    assert_eq!(
        sent_texts(&h, ALICE).len(),
        1,
        "the live message is the one confirmation: {:?}",
        sent_texts(&h, ALICE)
    );
    assert_eq!(h.tg.screen_with_keyboards(ALICE).last().unwrap().1, "");
    h.stop().await;
}

#[tokio::test]
async fn a_stop_button_left_by_a_failed_final_edit_is_taken_away_when_pressed() {
    // The turn's own ⏹, and one in the format of a version before turns had ids.
    for (name, legacy) in [("its own ⏹", false), ("a ⏹ without a turn id", true)] {
        let llm = FakeLlm::start(|_, _| {
            Reply::streamed(&"An answer whose edits all fail. ".repeat(8), 8, ms(80))
        })
        .await;
        let h = Harness::start_with(llm, |c| {
            streaming(c);
            c.options.enabled = false;
        })
        .await;
        refuse_text_edits(&h);
        h.tg.send_text(ALICE, "question");
        let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
        let stop = if legacy {
            "__act__stop|".to_string()
        } else {
            stop_data(&live).unwrap()
        };
        let message = live.result["message_id"].as_i64().unwrap();
        // The turn is over once its update is marked answered (after it showed what it could).
        h.tg.wait_for(|_| {
            let over = h.app().store().inbox().unfinished().is_empty();
            (over && stored_times(&h, ALICE, "question") == 1).then_some(())
        })
        .await;
        assert!(
            h.tg.screen_with_keyboards(ALICE)[0]
                .1
                .contains("__act__stop"),
            "case {name}: the final edit failed: the ⏹ is still there"
        );
        let query = h.tg.press(ALICE, ALICE, message, &stop);
        assert_eq!(
            toast(&h, &query).await,
            "That answer is already complete",
            "case {name}"
        );
        let cleared =
            h.tg.wait_for(|t| {
                t.calls("editMessageReplyMarkup")
                    .into_iter()
                    .find(|c| c.params["message_id"] == message)
            })
            .await;
        assert_eq!(
            cleared.params["reply_markup"]["inline_keyboard"],
            json!([]),
            "case {name}: the dead ⏹ is removed"
        );
        h.stop().await;
    }
}

/// A stop whose "Stopped" line cannot be edited in (Telegram refuses every text edit) still
/// takes the ⏹ away, so no dead button stays under the stopped answer.
#[tokio::test]
async fn a_stop_whose_confirmation_edit_fails_still_removes_the_stop_button() {
    let h = long_stream().await;
    refuse_text_edits(&h);
    h.tg.send_text(ALICE, "a long one");
    let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let message = live.result["message_id"].as_i64().unwrap();
    let query =
        h.tg.press(ALICE, ALICE, message, &stop_data(&live).unwrap());
    assert_eq!(toast(&h, &query).await, "Stopped");
    let cleared =
        h.tg.wait_for(|t| {
            t.calls("editMessageReplyMarkup")
                .into_iter()
                .find(|c| c.params["message_id"] == message)
        })
        .await;
    assert_eq!(cleared.params["reply_markup"]["inline_keyboard"], json!([]));
    assert_eq!(stored_times(&h, ALICE, "a long one"), 0, "nothing stored");
    h.stop().await;
}

/// Answers the agent at once (streamed) and the options call only after `options_delay`, so
/// the turn waits, its answer stored, up to `attach_wait_ms` before showing it.
async fn llm_with_slow_options(options_delay: Duration) -> FakeLlm {
    FakeLlm::start(move |req, _| {
        if is_options_request(req) {
            return Reply::text("```json\n{\"options\": [\"Yes\", \"No\"]}\n```")
                .after(options_delay);
        }
        let answer = "Here is the answer, in a few pieces.";
        if req["stream"] == true {
            Reply::streamed(answer, 5, ms(60))
        } else {
            Reply::text(answer)
        }
    })
    .await
}

/// Waits until the turn asked for its options: it has stored its answer by then.
async fn wait_until_stored(h: &Harness) {
    h.tg.wait_for(|_| {
        h.llm
            .requests()
            .iter()
            .any(is_options_request)
            .then_some(())
    })
    .await;
    assert_eq!(
        stored_times(h, ALICE, "question"),
        1,
        "stored before options"
    );
}

#[tokio::test]
async fn a_stop_after_the_answer_was_stored_keeps_it_and_says_so_once() {
    let h = Harness::start_with(llm_with_slow_options(ms(4_000)).await, |c| {
        streaming(c);
        c.options.attach_wait_ms = 2_000;
    })
    .await;
    h.tg.send_text(ALICE, "question");
    let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let stop = stop_data(&live).unwrap();
    wait_until_stored(&h).await;
    let query = h.tg.press(
        ALICE,
        ALICE,
        live.result["message_id"].as_i64().unwrap(),
        &stop,
    );
    assert_eq!(
        toast(&h, &query).await,
        "Too late to stop: the answer was already saved, so it is kept."
    );
    // The answer is finished in place: whole, with 👍/👎 and without ⏹.
    let (_, keyboard) =
        h.tg.wait_last(ALICE, |text, keyboard| {
            text == "Here is the answer, in a few pieces." && keyboard.contains("__act__fb|")
        })
        .await;
    assert!(!keyboard.contains("__act__stop"), "no dead ⏹: {keyboard}");
    assert_eq!(
        sent_texts(&h, ALICE).len(),
        1,
        "the live message only: the toast was the one word on the stop"
    );
    assert_eq!(
        stored_times(&h, ALICE, "question"),
        1,
        "stored exactly once"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancel_after_the_answer_was_stored_keeps_it_and_says_so_once() {
    let h = Harness::start_with(llm_with_slow_options(ms(4_000)).await, |c| {
        c.options.attach_wait_ms = 2_000;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "question");
    wait_until_stored(&h).await;
    h.tg.send_text(ALICE, "/cancel");
    let answered =
        h.tg.wait_for(|t| {
            let texts: Vec<Value> = t
                .messages_to(ALICE)
                .iter()
                .map(|c| c.params["text"].clone())
                .collect();
            (texts.len() >= 2).then_some(texts)
        })
        .await;
    assert_eq!(
        answered,
        [
            json!("Too late to stop: the answer was already saved, so it is kept."),
            json!("Here is the answer, in a few pieces."),
        ],
        "told once, then the answer"
    );
    tokio::time::sleep(ms(300)).await;
    assert_eq!(sent_texts(&h, ALICE).len(), 2, "nothing more");
    assert_eq!(
        stored_times(&h, ALICE, "question"),
        1,
        "stored exactly once"
    );
    h.stop().await;
}

#[tokio::test]
async fn cancel_with_nothing_running_says_so_plainly() {
    let h = Harness::start_with(FakeLlm::answering("done").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 2).await;
    h.tg.wait_for(|_| (stored_times(&h, ALICE, "hello") == 1).then_some(()))
        .await;
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_messages(ALICE, 3).await;
    tokio::time::sleep(ms(200)).await;
    assert_eq!(
        sent_texts(&h, ALICE),
        ["Nothing is running.", "done", "Nothing is running."]
    );
    assert_eq!(stored_times(&h, ALICE, "hello"), 1, "the answer stays");
    h.stop().await;
}

/// A turn stopped after some of its LLM calls still pays for them: stopping just before the
/// last call must not make tool rounds free under a daily budget.
#[tokio::test]
async fn a_stopped_turn_is_charged_for_the_calls_it_made() {
    let llm = FakeLlm::start(|req, _| {
        let rounds = req["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
        match rounds {
            0 => Reply::tool_call("c1", "no_such_tool", json!({})),
            1 => Reply::tool_call("c2", "no_such_tool", json!({})),
            _ => Reply::text("too late").after(Duration::from_secs(30)),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.telegram.streaming = false;
        c.limits.daily_tokens = 100_000;
    })
    .await;
    h.tg.send_text(ALICE, "use tools");
    h.tg.wait_for(|_| (h.llm.agent_requests().len() == 3).then_some(()))
        .await;
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(
        sent_texts(&h, ALICE),
        ["Stopped. Nothing of that request was kept."]
    );
    // Two calls completed (each 100 tokens read + 10 written, as the fake reports); the
    // third, stopped in flight, is charged the estimate it reserved (a ⏹ just before each
    // answer ends must not make answers free).
    let charged =
        h.tg.wait_for(|_| {
            let used = h
                .app()
                .store()
                .usage()
                .user_tokens_today(heurist::ids::UserId(ALICE as u64));
            (used > 220).then_some(used)
        })
        .await;
    assert!(charged < 220 + 10_000, "{charged}");
    assert_eq!(stored_times(&h, ALICE, "use tools"), 0, "nothing stored");
    h.stop().await;
}

/// A bot (streaming on) whose LLM streams a long answer slowly, so a stop lands mid-stream.
async fn long_stream() -> Harness {
    let llm = FakeLlm::start(|_, _| {
        Reply::streamed(&"A long answer that streams. ".repeat(40), 40, ms(150))
    })
    .await;
    Harness::start_with(llm, streaming).await
}

/// Makes Telegram refuse the next 40 text edits, as it does for a message it cannot edit.
fn refuse_text_edits(h: &Harness) {
    for _ in 0..40 {
        h.tg.script(
            "editMessageText",
            400,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: message can't be edited"}),
        );
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
