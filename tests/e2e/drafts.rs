//! Native draft streaming: a private chat's live answer is a `sendMessageDraft` draft, then one
//! `sendMessage`; groups, servers without the method (404) and chats that refuse drafts (400)
//! get edits, found out once and remembered; a stop or a crash during a draft leaves no message.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use heurist::telegram::render::{html_to_plain, render_parts};
use serde_json::json;

use crate::support::telegram::{BOT_USERNAME, Call, check_text};
use crate::support::*;

/// A plain (non-forum) group.
const GROUP: i64 = -200_555;

/// Streaming on with drafts (the default), frames 100 ms apart, no options or reflection; the
/// 👍/👎 keyboard stays, to show it goes on the one final message.
fn drafting(c: &mut heurist::Config) {
    c.telegram.streaming = true;
    c.telegram.drafts = true;
    c.telegram.chat_interval_ms = 100;
    c.telegram.group_interval_ms = 100;
    c.options.enabled = false;
    c.learning.reflect = false;
}

/// An answer long enough to be shown in several frames, with markup to render.
fn answer_to(question: &str) -> String {
    format!(
        "About **{question}**: the answer grows as a draft, word by word, and is sent once \
         when it is done. It has `code`, *emphasis* and <angle> & ampersands, so every frame \
         must be valid HTML, and it goes on a little longer than one frame can hold."
    )
}

/// A fake LLM that streams `answer_to` the question over about a second (a resumed turn,
/// which asks without streaming, gets it whole).
async fn slow_llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        let answer = answer_to(&last_user_text(req));
        if req["stream"] == true {
            Reply::streamed(&answer, 12, Duration::from_millis(80))
        } else {
            Reply::text(&answer)
        }
    })
    .await
}

/// Edits of messages in `chat`.
fn edits_in(h: &Harness, chat: i64) -> Vec<Call> {
    h.tg.calls("editMessageText")
        .into_iter()
        .filter(|c| c.params["chat_id"] == json!(chat))
        .collect()
}

/// Waits until `chat`'s last messages show exactly `answer`, rendered, finished (no ⏹).
async fn shows(tg: &FakeTelegram, chat: i64, answer: &str) {
    let expected = render_parts(answer);
    tg.wait_for(|t| {
        let screen = t.screen_with_keyboards(chat);
        let texts: Vec<String> = screen.iter().map(|(text, _)| text.clone()).collect();
        let live = screen.iter().any(|(_, keys)| keys.contains("__act__stop"));
        (texts.ends_with(&expected) && !live).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_streamed_private_answer_is_drafted_then_sent_once() {
    let h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.enforce_chat_rate(Duration::from_millis(90));
    h.tg.send_text(ALICE, "drafts");
    let answer = answer_to("drafts");
    shows(&h.tg, ALICE, &answer).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let drafts = h.tg.drafts_to(ALICE);
    assert!(drafts.len() >= 2, "streamed in frames: {drafts:#?}");
    let id = &drafts[0].params["draft_id"];
    assert!(id.as_i64().is_some_and(|id| id != 0), "{id}");
    for draft in &drafts {
        assert!(draft.ok, "{:?}", draft.result);
        assert_eq!(&draft.params["draft_id"], id, "one draft, animated");
        check_text(&draft.text(), Some("HTML")).unwrap();
        assert!(
            draft.params.get("reply_markup").is_none(),
            "a draft has no buttons"
        );
    }
    let first = html_to_plain(&drafts[0].text());
    assert!(first.len() < html_to_plain(&render_parts(&answer)[0]).len());

    let sends = h.tg.messages_to(ALICE);
    assert_eq!(sends.len(), 1, "one final sendMessage: {sends:#?}");
    let sent = &sends[0];
    assert_eq!(sent.text(), render_parts(&answer)[0]);
    let buttons = sent.buttons();
    assert!(
        !buttons.is_empty() && buttons.iter().all(|b| !b.starts_with("__act__stop")),
        "the answer's keyboard, no ⏹: {buttons:?}"
    );
    assert!(drafts.iter().all(|d| d.at < sent.at), "no draft after it");
    assert!(edits_in(&h, ALICE).is_empty(), "no editMessageText");
    assert_eq!(h.tg.flood_refusals(), 0, "drafts are paced like any call");
    h.stop().await;
}

#[tokio::test]
async fn tool_progress_shows_in_the_draft_and_is_gone_from_the_answer() {
    let page = serve_html("<p>Opening hours: 9 to 5</p>").await;
    let llm = FakeLlm::start(move |_, i| match i {
        0 => Reply::streamed_tool_call("c1", "fetch_url", json!({"url": page})),
        _ => Reply::streamed("The shop opens at **9**.", 5, Duration::from_millis(50)),
    })
    .await;
    let h = Harness::start_with(llm, drafting).await;
    h.tg.send_text(ALICE, "when does it open?");
    shows(&h.tg, ALICE, "The shop opens at **9**.").await;
    let drafted: Vec<String> = h.tg.drafts_to(ALICE).iter().map(Call::text).collect();
    assert!(
        drafted.iter().any(|t| t.contains("🔎 fetching 127.0.0.1…")),
        "{drafted:?}"
    );
    assert_eq!(h.tg.messages_to(ALICE).len(), 1);
    assert!(edits_in(&h, ALICE).is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_group_answer_is_edited_not_drafted() {
    let h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.send_in_chat(GROUP, ALICE, &format!("@{BOT_USERNAME} groups"));
    shows(&h.tg, GROUP, &answer_to("groups")).await;
    assert!(
        h.tg.calls("sendMessageDraft").is_empty(),
        "no draft is even tried in a group"
    );
    assert!(
        !edits_in(&h, GROUP).is_empty(),
        "the live message was edited"
    );
    assert_eq!(h.tg.messages_to(GROUP).len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_server_without_drafts_gets_edits_from_then_on() {
    let h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.refuse_drafts(None, 404);
    h.tg.send_text(ALICE, "first");
    shows(&h.tg, ALICE, &answer_to("first")).await;
    let tried = h.tg.calls("sendMessageDraft");
    assert_eq!(tried.len(), 1, "found out once: {tried:#?}");
    assert!(!tried[0].ok);
    assert_eq!(h.tg.messages_to(ALICE).len(), 1, "the answer, once");
    assert!(!edits_in(&h, ALICE).is_empty(), "it went on with edits");

    // Another chat, later: the bot remembers the server has no drafts.
    h.tg.send_text(BOB, "second");
    shows(&h.tg, BOB, &answer_to("second")).await;
    assert_eq!(
        h.tg.calls("sendMessageDraft").len(),
        1,
        "no draft call for the second answer"
    );
    assert!(!edits_in(&h, BOB).is_empty());
    assert_eq!(h.tg.messages_to(BOB).len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_draft_refused_mid_answer_finishes_with_edits_there_only() {
    let h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.send_text(ALICE, "refused");
    h.tg.wait_for(|t| (!t.drafts_to(ALICE).is_empty()).then_some(()))
        .await;
    h.tg.refuse_drafts(Some(ALICE), 400);
    let answer = answer_to("refused");
    shows(&h.tg, ALICE, &answer).await;
    let drafts = h.tg.drafts_to(ALICE);
    assert!(drafts[0].ok && drafts.last().is_some_and(|d| !d.ok));
    let sends = h.tg.messages_to(ALICE);
    assert_eq!(sends.len(), 1, "nothing twice: {sends:#?}");
    assert!(!edits_in(&h, ALICE).is_empty(), "finished with edits");

    // This chat is remembered; another private chat still drafts.
    let refused = drafts.len();
    h.tg.send_text(ALICE, "again");
    shows(&h.tg, ALICE, &answer_to("again")).await;
    assert_eq!(h.tg.drafts_to(ALICE).len(), refused, "no draft here again");
    assert_eq!(h.tg.messages_to(ALICE).len(), 2, "each answer once");
    h.tg.send_text(BOB, "elsewhere");
    shows(&h.tg, BOB, &answer_to("elsewhere")).await;
    assert!(h.tg.drafts_to(BOB).iter().any(|d| d.ok));
    assert!(edits_in(&h, BOB).is_empty());
    h.stop().await;
}

#[tokio::test]
async fn cancel_during_a_draft_leaves_only_its_confirmation() {
    let llm = FakeLlm::start(|_, _| {
        Reply::streamed(&"word ".repeat(400), 100, Duration::from_millis(100))
    })
    .await;
    let h = Harness::start_with(llm, drafting).await;
    h.tg.send_text(ALICE, "a long one");
    h.tg.wait_for(|t| (!t.drafts_to(ALICE).is_empty()).then_some(()))
        .await;
    h.tg.send_text(ALICE, "/cancel");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(sent[0].text().contains("Stopped"), "{:?}", sent[0].text());
    let drafted = h.tg.drafts_to(ALICE).len();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(h.tg.drafts_to(ALICE).len(), drafted, "no draft after it");
    assert_eq!(
        h.tg.messages_to(ALICE).len(),
        1,
        "no partial answer message"
    );
    assert!(edits_in(&h, ALICE).is_empty());
    h.stop().await;
}

#[tokio::test]
async fn kill_9_during_a_draft_then_restart_gives_exactly_one_answer() {
    // Streams slowly until the kill; the run after it answers at once.
    let slow = Arc::new(AtomicBool::new(true));
    let flag = slow.clone();
    let llm = FakeLlm::start(move |req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        let answer = answer_to(&last_user_text(req));
        match (req["stream"] == true, flag.load(Ordering::SeqCst)) {
            (true, true) => Reply::streamed(&answer, 40, Duration::from_millis(250)),
            (true, false) => Reply::streamed(&answer, 2, Duration::ZERO),
            (false, _) => Reply::text(&answer),
        }
    })
    .await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    tg.send_text(ALICE, "crash");
    tg.wait_for(|t| (!t.drafts_to(ALICE).is_empty()).then_some(()))
        .await;
    bot.kill();
    assert!(tg.messages_to(ALICE).is_empty(), "a draft is not a message");

    slow.store(false, Ordering::SeqCst);
    let _bot = BotProcess::spawn(&tg, &llm.url, dir.path(), &[]);
    shows(&tg, ALICE, &answer_to("crash")).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sends = tg.messages_to(ALICE);
    assert_eq!(sends.len(), 1, "one answer, no restart notice: {sends:#?}");
    assert!(
        tg.calls("editMessageText").is_empty(),
        "nothing to clean up"
    );
}

/// The draft carries the client's stop control (`can_stop`, the draft not kept on stop); its
/// press reaches the bot as a `stopped_message_generation` update, which cancels the turn as
/// ⏹ and `/cancel` do: the confirmation is the one message, no draft and no late answer come
/// after it, and nothing of the turn is stored. A stop naming another draft stops nothing.
#[tokio::test]
async fn the_drafts_stop_control_cancels_the_turn_like_cancel() {
    let llm = FakeLlm::start(|_, _| {
        Reply::streamed(&"word ".repeat(400), 100, Duration::from_millis(100))
    })
    .await;
    let h = Harness::start_with(llm, drafting).await;
    h.tg.send_text(ALICE, "a long one");
    let first =
        h.tg.wait_for(|t| t.drafts_to(ALICE).into_iter().find(|d| d.ok))
            .await;
    assert_eq!(first.params["can_stop"], json!(true), "{:?}", first.params);
    assert!(
        first.params.get("keep_on_stop").is_none(),
        "a stopped draft goes"
    );
    let id = first.params["draft_id"].as_i64().unwrap();
    h.tg.stop_draft(ALICE, id + 1000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        h.tg.messages_to(ALICE).is_empty(),
        "another draft's stop stops nothing"
    );

    h.tg.stop_draft(ALICE, id);
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(sent[0].text().contains("Stopped"), "{:?}", sent[0].text());
    let drafted = h.tg.drafts_to(ALICE).len();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(h.tg.drafts_to(ALICE).len(), drafted, "no draft after it");
    assert_eq!(h.tg.messages_to(ALICE).len(), 1, "no late answer");
    let window = h
        .app()
        .store()
        .history()
        .window(in_chat(ALICE), 100_000)
        .unwrap();
    assert!(
        window.messages.is_empty(),
        "nothing kept: {:?}",
        window.messages
    );
    h.stop().await;
}

/// In webhook mode too: the bot registers the webhook for draft stops by name, offers the
/// control, and a stop posted to the webhook (with its secret token) cancels the turn; one
/// without the token is refused and stops nothing.
#[tokio::test]
async fn a_drafts_stop_reaches_a_webhook_bot_too() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = listener.local_addr().unwrap();
    drop(listener);
    let llm = FakeLlm::start(|_, _| {
        Reply::streamed(&"word ".repeat(400), 100, Duration::from_millis(100))
    })
    .await;
    let h = Harness::start_with(llm, move |c| {
        drafting(c);
        c.telegram.webhook_url = "https://bot.example.com/hook".into();
        c.telegram.webhook_listen = listen.to_string();
        c.telegram.webhook_secret = "s3cret".into();
    })
    .await;
    let registered = h.tg.wait_for(|t| t.calls("setWebhook").pop()).await;
    let allowed = registered.params["allowed_updates"].to_string();
    assert!(allowed.contains("stopped_message_generation"), "{allowed}");
    assert!(allowed.contains("message_reaction"), "{allowed}");
    h.tg.wait_for(|_| std::net::TcpStream::connect(listen).ok())
        .await;
    let post = move |secret: &'static str, body: serde_json::Value| async move {
        reqwest::Client::new()
            .post(format!("http://{listen}/hook"))
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
    };
    let message = json!({"update_id": 1, "message": {
        "message_id": 1, "date": 1_700_000_000, "text": "a long one",
        "chat": {"id": ALICE, "type": "private", "first_name": "A"},
        "from": crate::support::telegram::user_json(ALICE),
    }});
    tokio::spawn(post("s3cret", message));
    let first =
        h.tg.wait_for(|t| t.drafts_to(ALICE).into_iter().find(|d| d.ok))
            .await;
    assert_eq!(first.params["can_stop"], json!(true), "{:?}", first.params);
    let id = first.params["draft_id"].as_i64().unwrap();
    let stop = |update_id: i64| {
        json!({"update_id": update_id, "stopped_message_generation": {
            "chat": {"id": ALICE, "type": "private", "first_name": "A"},
            "draft_id": id}})
    };
    assert_eq!(post("wrong", stop(2)).await, 401);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        h.tg.messages_to(ALICE).is_empty(),
        "a forged stop stops nothing"
    );

    assert_eq!(post("s3cret", stop(3)).await, 200);
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert!(sent[0].text().contains("Stopped"), "{:?}", sent[0].text());
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(h.tg.messages_to(ALICE).len(), 1, "no late answer");
    h.stop().await;
}

/// A Bot API server that refuses `can_stop` gets the same draft again without it, and no
/// draft asks for it again, in this answer or the next.
#[tokio::test]
async fn a_server_refusing_the_stop_control_gets_drafts_without_it_found_once() {
    let h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.refuse_can_stop();
    h.tg.send_text(ALICE, "one");
    shows(&h.tg, ALICE, &answer_to("one")).await;
    h.tg.send_text(ALICE, "two");
    shows(&h.tg, ALICE, &answer_to("two")).await;
    let drafts = h.tg.drafts_to(ALICE);
    let asked: Vec<&Call> = drafts
        .iter()
        .filter(|d| d.params.get("can_stop").is_some())
        .collect();
    assert_eq!(asked.len(), 1, "asked once: {drafts:#?}");
    assert!(!asked[0].ok);
    assert!(
        drafts.iter().filter(|d| d.ok).count() >= 2,
        "drafts go on without it: {drafts:#?}"
    );
    assert!(edits_in(&h, ALICE).is_empty(), "still drafts, not edits");
    h.stop().await;
}

/// Where Telegram refused to send the bot draft stops (the start-up `getUpdates` naming
/// them got a 400), a press could not reach the bot: drafts go without the stop control.
#[tokio::test]
async fn drafts_offer_no_stop_control_when_stops_cannot_reach_the_bot() {
    let mut h = Harness::start_with(slow_llm().await, drafting).await;
    h.tg.refuse_stop_updates();
    h.restart().await;
    h.tg.send_text(ALICE, "one");
    shows(&h.tg, ALICE, &answer_to("one")).await;
    let drafts = h.tg.drafts_to(ALICE);
    assert!(drafts.iter().any(|d| d.ok), "drafted: {drafts:#?}");
    assert!(
        drafts.iter().all(|d| d.params.get("can_stop").is_none()),
        "no stop control: {drafts:#?}"
    );
    h.stop().await;
}
