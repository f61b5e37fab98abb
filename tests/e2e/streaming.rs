//! Live replies: streamed edits within Telegram's rate, progress, stop, fallbacks. Private
//! chats stream as native drafts by default (tests/e2e/drafts.rs); these tests prove the
//! edits that groups, and servers and chats without drafts, get, in a private chat with
//! drafts off.

use std::time::Duration;

use heurist::telegram::render::{html_to_plain, render_parts};
use serde_json::json;

use crate::support::telegram::{Call, check_text};
use crate::support::*;

/// Streaming as deployed: on, edits spaced a second apart per chat (drafts off: edits).
fn streaming(c: &mut heurist::Config) {
    c.telegram.streaming = true;
    c.telegram.drafts = false;
    c.telegram.chat_interval_ms = 1000;
    c.options.enabled = false;
    c.learning.reflect = false;
    c.learning.feedback_buttons = false;
}

/// Sends and edits that reached `chat`, in order.
fn writes(h: &Harness, chat: i64) -> Vec<Call> {
    let mut calls: Vec<Call> = ["sendMessage", "editMessageText", "editMessageReplyMarkup"]
        .iter()
        .flat_map(|m| h.tg.calls(m))
        .filter(|c| c.params["chat_id"] == json!(chat))
        .collect();
    calls.sort_by_key(|c| c.at);
    calls
}

fn essay(chars: usize) -> String {
    let mut text =
        String::from("# Streaming\n\nThe answer **grows** in place, one edit a second.\n\n");
    let mut i = 0;
    while text.len() < chars {
        text.push_str(&format!(
            "Paragraph {i} explains <detail> & more, with `code` and *emphasis*.\n\n"
        ));
        if i % 15 == 7 {
            text.push_str("```rust\nfn main() {\n    println!(\"a < b && c > d\");\n}\n```\n\n");
        }
        i += 1;
    }
    text
}

#[tokio::test]
async fn a_slow_stream_grows_in_place_within_telegrams_rate() {
    let answer = essay(900);
    let reply = answer.clone();
    let llm = FakeLlm::start(move |req, _| {
        assert_eq!(req["stream"], true);
        Reply::streamed(&reply, 30, Duration::from_millis(100))
    })
    .await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.enforce_chat_rate(Duration::from_millis(900));
    h.tg.send_text(ALICE, "write slowly");
    let expected: Vec<(String, String)> = render_parts(&answer)
        .into_iter()
        .map(|p| (p, String::new()))
        .collect();
    // The final state: the rendered answer, and no Stop button any more.
    h.tg.wait_for(|t| (t.screen_with_keyboards(ALICE) == expected).then_some(()))
        .await;

    assert_eq!(h.tg.flood_refusals(), 0, "never over Telegram's rate");
    let calls = writes(&h, ALICE);
    assert!(
        calls
            .iter()
            .filter(|c| c.method == "editMessageText")
            .count()
            >= 2,
        "edited in place"
    );
    assert_eq!(
        calls.iter().filter(|c| c.method == "sendMessage").count(),
        1,
        "one message"
    );
    for pair in calls.windows(2) {
        assert!(pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(900));
    }
    // It really grew: the first text was a prefix of the answer, shorter than it.
    let first = html_to_plain(calls[0].params["text"].as_str().unwrap());
    assert!(first.len() < html_to_plain(&expected[0].0).len());
    // While streaming there is a Stop button; the final answer has none.
    assert!(
        calls[0].params["reply_markup"]
            .to_string()
            .contains("__act__stop|")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_12000_character_stream_ends_in_valid_parts() {
    let answer = essay(12_000);
    let reply = answer.clone();
    let llm =
        FakeLlm::start(move |_, _| Reply::streamed(&reply, 40, Duration::from_millis(40))).await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.enforce_chat_rate(Duration::from_millis(900));
    h.tg.send_text(ALICE, "write a lot");
    let expected = render_parts(&answer);
    assert!(expected.len() >= 3);
    let screen =
        h.tg.wait_for(|t| (t.screen(ALICE) == expected).then(|| t.screen(ALICE)))
            .await;
    for part in &screen {
        check_text(part, Some("HTML")).unwrap();
    }
    let visible: String = screen.iter().map(|p| html_to_plain(p)).collect();
    for i in [0, 50, 120] {
        assert!(
            visible.contains(&format!("Paragraph {i} explains <detail> & more")),
            "paragraph {i}"
        );
    }
    assert_eq!(h.tg.flood_refusals(), 0);
    h.stop().await;
}

#[tokio::test]
async fn stop_ends_the_stream_promptly() {
    let answer = essay(3_000);
    let reply = answer.clone();
    let llm =
        FakeLlm::start(move |_, _| Reply::streamed(&reply, 100, Duration::from_millis(200))).await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "a long one");
    let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let stop = live.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    let turn = stop.strip_prefix("__act__stop|").unwrap();
    assert!(
        !turn.is_empty() && turn.bytes().all(|b| b.is_ascii_alphanumeric()),
        "the ⏹ names its turn: {stop}"
    );
    let pressed = std::time::Instant::now();
    let query = h.tg.press(
        ALICE,
        ALICE,
        live.result["message_id"].as_i64().unwrap(),
        &stop,
    );
    let toast =
        h.tg.wait_for(|t| {
            t.calls("answerCallbackQuery")
                .into_iter()
                .find(|c| c.params["callback_query_id"] == query.as_str())
        })
        .await;
    assert_eq!(toast.params["text"], "Stopped");
    let stopped =
        h.tg.wait_last(ALICE, |s, _| s.ends_with(heurist::texts::telegram::STOPPED))
            .await
            .0;
    assert!(
        pressed.elapsed() < Duration::from_secs(3),
        "stopped after {:?}",
        pressed.elapsed()
    );
    assert!(
        html_to_plain(&stopped).len() < answer.len(),
        "the answer was cut short"
    );
    let writes_then = writes(&h, ALICE).len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        writes(&h, ALICE).len(),
        writes_then,
        "nothing more after the stop"
    );
    // The chat goes on.
    h.tg.send_text(ALICE, "/cancel");
    let sent =
        h.tg.wait_for(|t| {
            t.messages_to(ALICE)
                .into_iter()
                .find(|c| c.params["text"] == "Nothing is running.")
        })
        .await;
    assert!(sent.ok);
    h.stop().await;
}

#[tokio::test]
async fn cancel_mid_stream_confirms_once_in_the_live_message() {
    let answer = essay(3_000);
    let reply = answer.clone();
    let llm =
        FakeLlm::start(move |_, _| Reply::streamed(&reply, 100, Duration::from_millis(200))).await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "a long one");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "/cancel");
    let stopped =
        h.tg.wait_last(ALICE, |s, _| s.ends_with(heurist::texts::telegram::STOPPED))
            .await;
    assert!(!stopped.1.contains("stop"), "no dead ⏹: {}", stopped.1);
    // The next message is answered after the stop, so anything /cancel sent came before it.
    h.tg.send_text(ALICE, "/cancel");
    h.tg.wait_for(|t| {
        t.messages_to(ALICE)
            .into_iter()
            .find(|c| c.params["text"] == "Nothing is running.")
    })
    .await;
    let texts: Vec<String> =
        h.tg.messages_to(ALICE)
            .iter()
            .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
            .collect();
    assert_eq!(
        texts.len(),
        2,
        "the live message and the second /cancel's answer, no second confirmation: {texts:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_provider_that_does_not_stream_still_works() {
    let llm = FakeLlm::start(|req, _| {
        assert_eq!(req["stream"], true, "asked to stream");
        Reply::text("a plain **JSON** completion")
    })
    .await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "hi");
    h.tg.wait_for(|t| (t.screen(ALICE) == ["a plain <b>JSON</b> completion"]).then_some(()))
        .await;
    assert!(
        h.tg.calls("editMessageText").is_empty(),
        "one final message, no live edits"
    );
    h.stop().await;
}

#[tokio::test]
async fn tool_progress_is_shown_while_it_runs_and_gone_from_the_answer() {
    let page = serve_html("<p>Opening hours: 9 to 5</p>").await;
    let url = page.clone();
    let llm = FakeLlm::start(move |_, i| match i {
        0 => Reply::streamed_tool_call("c1", "fetch_url", json!({"url": url})),
        _ => Reply::streamed("The shop opens at **9**.", 5, Duration::from_millis(50)),
    })
    .await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "when does it open?");
    h.tg.wait_for(|t| (t.screen(ALICE) == ["The shop opens at <b>9</b>."]).then_some(()))
        .await;
    let shown: Vec<String> = writes(&h, ALICE)
        .iter()
        .map(|c| c.params["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        shown.iter().any(|t| t.contains("🔎 fetching 127.0.0.1…")),
        "{shown:?}"
    );
    // The streamed tool call was assembled: the model got the page.
    let second = &h.llm.requests()[1];
    let tool = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("Opening hours: 9 to 5")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_live_message_the_user_deleted_is_replaced_by_a_new_one() {
    let llm = FakeLlm::start(|_, _| {
        Reply::streamed("Final words, complete.", 10, Duration::from_millis(250))
    })
    .await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "go");
    let live = h.tg.wait_messages(ALICE, 1).await.remove(0);
    h.tg.delete_on_screen(ALICE, live.result["message_id"].as_i64().unwrap());
    h.tg.wait_for(|t| (t.screen(ALICE) == ["Final words, complete."]).then_some(()))
        .await;
    assert!(
        h.tg.messages_to(ALICE).len() >= 2,
        "a new message replaced the deleted one"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_photo_reaches_a_vision_model_once_and_stays_out_of_history() {
    let llm = FakeLlm::answering("A tiny JPEG.").await;
    let h = Harness::start_with(llm, |c| {
        c.models[0].vision = true;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_photo_with_caption(ALICE, Some("what is this?"));
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].params["text"], "A tiny JPEG.");
    let request = &h.llm.agent_requests()[0];
    let content = &request["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "what is this?"}));
    assert_eq!(
        content[1]["image_url"]["url"],
        "data:image/jpeg;base64,/9j/4A=="
    );
    assert!(
        h.tg.calls("getFile")
            .iter()
            .all(|c| c.params["file_id"] == "large"),
        "the largest size under the cap"
    );

    h.tg.send_text(ALICE, "and now?");
    h.tg.wait_messages(ALICE, 2).await;
    let next = &h.llm.agent_requests()[1];
    let earlier = &next["messages"].as_array().unwrap()[1]["content"];
    assert_eq!(
        earlier, "what is this?\n[1 image(s) were attached here]",
        "no image bytes in the history"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_photo_on_a_model_without_vision_gets_its_caption_answered_with_a_note() {
    let llm =
        FakeLlm::start(|req, _| Reply::text(&format!("about: {}", last_user_text(req)))).await;
    let h = Harness::start_with(llm, |c| {
        // The chat's model (the first) cannot see; the other one can.
        c.models[1].vision = true;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_photo_with_caption(ALICE, Some("how do I fix this error?"));
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let note = sent[0].params["text"].as_str().unwrap();
    let vision_model = &h.config.models[1].id;
    assert!(
        note.contains("I did not see the image")
            && note.contains("test-model")
            && note.contains("answer its caption as text")
            && note.contains(&format!("/model {vision_model} here")),
        "{note}"
    );
    let requests = h.llm.agent_requests();
    assert_eq!(requests.len(), 1);
    let asked = &requests[0]["messages"].as_array().unwrap().last().unwrap()["content"];
    let asked = asked.as_str().expect("plain text content, no image part");
    assert!(asked.starts_with("how do I fix this error?"), "{asked}");
    assert!(!asked.contains("base64"), "{asked}");
    assert!(h.tg.calls("getFile").is_empty(), "the photo is not fetched");
    let answer = sent[1].params["text"].as_str().unwrap();
    assert!(
        answer.starts_with("about: how do I fix this error?"),
        "{answer}"
    );

    // Without a caption: the note only, and no LLM call.
    h.tg.send_photo_with_caption(ALICE, None);
    let sent = h.tg.wait_messages(ALICE, 3).await;
    let note = sent[2].params["text"].as_str().unwrap();
    assert!(
        note.contains("I did not see the image") && note.contains("cannot answer it"),
        "{note}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.llm.agent_requests().len(), 1);
    assert_eq!(h.tg.messages_to(ALICE).len(), 3);
    h.stop().await;
}

#[tokio::test]
async fn live_frames_never_show_half_written_markup() {
    // Each piece ends inside markup, and arrives after the previous frame was shown.
    let pieces = [
        "Paris is **the cap",
        "ital** of [France](https://en.wikipedia",
        ".org/wiki/France). Try `cargo",
        " test` and then:\n\n```sh\nls -",
        "la\n```\n\n| Tool | Speed |\n|---|---|\n| rg | fast |",
    ];
    let answer = pieces.concat();
    let mut events =
        vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]})];
    events.extend(
        pieces
            .iter()
            .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]})),
    );
    events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    let llm = FakeLlm::start(move |_, _| Reply {
        status: 200,
        body: serde_json::Value::Null,
        delay: Duration::ZERO,
        events: Some((events.clone(), Duration::from_millis(1300))),
        headers: Vec::new(),
    })
    .await;
    let h = Harness::start_with(llm, streaming).await;
    h.tg.send_text(ALICE, "capital of France?");
    let expected = render_parts(&answer);
    h.tg.wait_for(|t| (t.screen(ALICE) == expected).then_some(()))
        .await;

    let frames: Vec<String> = writes(&h, ALICE)
        .iter()
        .filter_map(|c| c.params["text"].as_str().map(str::to_string))
        .collect();
    assert!(frames.len() >= 4, "one frame per piece: {frames:#?}");
    for frame in &frames {
        check_text(frame, Some("HTML")).unwrap();
        let visible = html_to_plain(frame);
        for raw in ["**", "`", "](", "[France", "| Tool"] {
            assert!(!visible.contains(raw), "{raw:?} on screen in {visible:?}");
        }
    }
    assert!(
        frames
            .iter()
            .any(|f| f.contains("<pre><code class=\"language-sh\">ls -</code></pre>")),
        "an unclosed fence shows as a code block: {frames:#?}"
    );
    assert!(frames.last().unwrap().contains("<pre>Tool  Speed\n"));
    h.stop().await;
}
