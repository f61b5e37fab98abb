//! 🔁 Retry under a failed answer: the failed message runs again once, through the real
//! dispatcher and turn path; a second, concurrent, forged, foreign, old or other member's press
//! runs nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

fn toast(h: &Harness, query: &str) -> Option<String> {
    h.tg.calls("answerCallbackQuery")
        .into_iter()
        .find(|c| c.params["callback_query_id"] == query)
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
}

/// A bot whose LLM answers `503` to every agent request while `down` is set.
async fn flaky() -> (Harness, Arc<AtomicBool>) {
    flaky_with(|_| {}).await
}

async fn flaky_with(tweak: impl FnOnce(&mut heurist::Config)) -> (Harness, Arc<AtomicBool>) {
    let down = Arc::new(AtomicBool::new(true));
    let flag = down.clone();
    let llm = FakeLlm::start(move |req, _| {
        if flag.load(Ordering::SeqCst) {
            Reply::error(503, "overloaded, try later")
        } else {
            Reply::text(&format!("answer to {}", last_user_text(req)))
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        tweak(c);
    })
    .await;
    (h, down)
}

/// The failed answer to `text` in `chat`: its message id and its one button's data.
async fn failed_answer(h: &Harness, chat: i64, text: &str) -> (i64, String) {
    h.tg.send_text(chat, text);
    let sent = h.tg.wait_messages(chat, 1).await;
    let shown = sent[0].params["text"].as_str().unwrap();
    assert!(shown.contains("not reachable"), "{shown}");
    assert!(
        shown.contains("Your message is kept: 🔁 Retry sends it again."),
        "{shown}"
    );
    assert!(
        !shown.contains("503") && !shown.contains("in a minute"),
        "{shown}"
    );
    let rows = sent[0].params["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("a keyboard under the failed answer")
        .clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][0]["text"], "🔁 Retry");
    let data = rows[0][0]["callback_data"].as_str().unwrap().to_string();
    assert!(
        data.starts_with("__act__retry|") && data.len() <= 64,
        "{data}"
    );
    (sent[0].result["message_id"].as_i64().unwrap(), data)
}

fn answers(h: &Harness, chat: i64, text: &str) -> usize {
    h.tg.messages_to(chat)
        .iter()
        .filter(|c| c.params["text"] == text)
        .count()
}

#[tokio::test]
async fn retry_after_a_5xx_runs_the_message_once_and_answers() {
    for (name, streaming) in [("sent whole", false), ("streamed live", true)] {
        retry_runs_once(name, streaming).await;
    }
}

/// The whole round, with answers streamed live or sent whole.
async fn retry_runs_once(name: &str, streaming: bool) {
    let (h, down) = flaky_with(|c| c.telegram.streaming = streaming).await;
    let (message, data) = failed_answer(&h, ALICE, "what is sled?").await;
    let failed_requests = h.llm.agent_requests().len();
    assert!(failed_requests >= 1, "{name}");
    down.store(false, Ordering::SeqCst);

    let query = h.tg.press(ALICE, ALICE, message, &data);
    h.tg.wait_text(ALICE, "answer to what is sled?", Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("{name}: the retried message is answered"));
    assert_eq!(toast(&h, &query).as_deref(), Some("Retrying…"), "{name}");
    // The button went from the failed answer (an edit posted off the dispatcher).
    h.tg.wait_for(|t| {
        t.calls("editMessageReplyMarkup")
            .iter()
            .any(|c| {
                c.params["message_id"] == message
                    && c.params["reply_markup"]["inline_keyboard"] == Value::Array(vec![])
            })
            .then_some(())
    })
    .await;
    let retried = &h.llm.agent_requests()[failed_requests..];
    assert_eq!(retried.len(), 1, "{name}: one request for the retry");
    assert_eq!(last_user_text(&retried[0]), "what is sled?", "{name}");

    // A press that still arrives (a stale client) runs nothing.
    let again = h.tg.press(ALICE, ALICE, message, &data);
    let said = h.tg.wait_for(|_| toast(&h, &again)).await;
    assert!(said.starts_with("Already retried"), "{name}: {said}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.llm.agent_requests().len(), failed_requests + 1, "{name}");
    assert_eq!(answers(&h, ALICE, "answer to what is sled?"), 1, "{name}");
    h.stop().await;
}

#[tokio::test]
async fn a_double_press_runs_the_message_once() {
    let (h, down) = flaky().await;
    let (message, data) = failed_answer(&h, ALICE, "double?").await;
    let failed_requests = h.llm.agent_requests().len();
    down.store(false, Ordering::SeqCst);

    let first = h.tg.press(ALICE, ALICE, message, &data);
    let second = h.tg.press(ALICE, ALICE, message, &data);
    let toasts =
        h.tg.wait_for(|_| Some((toast(&h, &first)?, toast(&h, &second)?)))
            .await;
    let mut toasts = [toasts.0, toasts.1];
    toasts.sort();
    assert!(toasts[0].starts_with("Already retried"), "{toasts:?}");
    assert_eq!(toasts[1], "Retrying…", "{toasts:?}");
    h.tg.wait_text(ALICE, "answer to double?", Duration::from_secs(10))
        .await
        .expect("answered once");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.llm.agent_requests().len(), failed_requests + 1);
    assert_eq!(answers(&h, ALICE, "answer to double?"), 1);
    h.stop().await;
}

#[tokio::test]
async fn forged_foreign_and_old_retries_are_refused_and_run_nothing() {
    let (h, down) = flaky().await;
    let (message, data) = failed_answer(&h, ALICE, "mine").await;
    let failed_requests = h.llm.agent_requests().len();
    down.store(false, Ordering::SeqCst);

    // A day-old retry, as one left from yesterday's failure.
    let old = heurist::store::RetryTicket {
        request: heurist::store::TurnRequest::new(
            heurist::ids::ChatId(ALICE),
            heurist::ids::UserId(ALICE as u64),
            "yesterday",
        ),
        used: false,
        claimed_by: None,
        created: chrono::Utc::now().timestamp() - 25 * 3600,
    };
    let old = h.app().store().retries().create(&old).unwrap();
    const EXPIRED: &str = "This retry has expired";
    // (name, presser, chat, data, toast)
    let presses = [
        (
            "forged id",
            ALICE,
            ALICE,
            "__act__retry|zzzzzzzzzzzzz".to_string(),
            EXPIRED,
        ),
        ("another chat's retry", BOB, BOB, data.clone(), EXPIRED),
        (
            "a day old",
            ALICE,
            ALICE,
            format!("__act__retry|{old}"),
            EXPIRED,
        ),
        (
            "another member's message, as in a group",
            BOB,
            ALICE,
            data.clone(),
            "Only the person who sent that message can retry it",
        ),
    ];
    for (name, user, chat, data, want) in presses {
        let query = h.tg.press(user, chat, message, &data);
        let said = h.tg.wait_for(|_| toast(&h, &query)).await;
        assert!(said.starts_with(want), "{name}: {said}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.llm.agent_requests().len(), failed_requests, "nothing ran");
    assert!(h.tg.messages_to(BOB).is_empty());

    // The real one still works after the refusals.
    h.tg.press(ALICE, ALICE, message, &data);
    h.tg.wait_text(ALICE, "answer to mine", Duration::from_secs(10))
        .await
        .expect("the genuine retry runs");
    h.stop().await;
}

#[tokio::test]
async fn a_retry_over_the_rate_limit_is_refused_and_stays_usable() {
    let (h, down) = flaky_with(|c| c.limits.turns_per_minute = 1).await;
    let (message, data) = failed_answer(&h, ALICE, "limited").await;
    let failed_requests = h.llm.agent_requests().len();
    down.store(false, Ordering::SeqCst);

    let query = h.tg.press(ALICE, ALICE, message, &data);
    let said = h.tg.wait_for(|_| toast(&h, &query)).await;
    assert!(said.contains("faster than I can answer"), "{said}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.llm.agent_requests().len(), failed_requests, "nothing ran");
    // The refusal did not use the retry up: it can still be claimed once.
    let id = data.strip_prefix("__act__retry|").unwrap();
    let claim = h
        .app()
        .store()
        .retries()
        .claim(
            id,
            heurist::ids::ChatId(ALICE),
            heurist::ids::UserId(ALICE as u64),
            0,
            None,
        )
        .unwrap();
    assert!(
        matches!(claim, heurist::store::RetryClaim::Claimed(_)),
        "{claim:?}"
    );
    h.stop().await;
}
