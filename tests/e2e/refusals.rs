//! What people see when the bot says no, and `/stats`: one refusal per burst over the turn
//! rate, strangers refused once a day (restarts included, groups only when they address the
//! bot), the "Request access" button, and the usage figures in plain words.

use std::time::Duration;

use crate::support::telegram::Call;
use crate::support::*;

const GROUP: i64 = -100_777;

fn edits_to(h: &Harness, chat: i64) -> Vec<Call> {
    h.tg.calls("editMessageText")
        .into_iter()
        .filter(|c| c.params["chat_id"] == chat)
        .collect()
}

fn toast_of(h: &Harness, query: &str) -> Option<String> {
    h.tg.calls("answerCallbackQuery")
        .into_iter()
        .find(|c| c.params["callback_query_id"] == query)
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
}

#[tokio::test]
async fn stats_speak_plainly_with_totals_budget_and_top_users() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.daily_tokens = 50_000;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[1].params["parse_mode"], "HTML");
    let stats = sent[1].text();
    // Every fake completion reports 100 prompt (60 cached) + 10 completion tokens.
    for want in [
        "<b>This chat</b>",
        "• <code>test-model</code>: 1 answer · 100 tokens read (60 reused from cache) · 10 \
         tokens written",
        "<b>Your budget today</b>: 110 tokens of 50,000 used, 49,890 left.",
    ] {
        assert!(stats.contains(want), "{want:?} missing in\n{stats}");
    }
    for jargon in ["calls", "cached", "completion", "prompt", "Whole bot"] {
        assert!(!stats.contains(jargon), "{jargon:?} in\n{stats}");
    }

    h.tg.send_text(ALICE, "again");
    h.tg.wait_messages(ALICE, 3).await;
    h.tg.send_text(BOB, "me too");
    h.tg.wait_messages(BOB, 1).await;
    h.tg.send_text(ALICE, "/stats");
    let stats = h.tg.wait_messages(ALICE, 4).await[3].text();
    assert!(
        stats.contains("2 answers · 200 tokens read (120 reused from cache) · 20 tokens written"),
        "{stats}"
    );
    assert!(
        stats.contains("220 tokens of 50,000 used, 49,780 left"),
        "{stats}"
    );

    // Admins (exempt from the budget here) also see the whole bot and who used it most.
    h.tg.send_text(ADMIN, "/stats");
    let sent = h.tg.wait_messages(ADMIN, 1).await;
    assert_eq!(sent[0].params["parse_mode"], "HTML");
    let stats = sent[0].text();
    for want in [
        "<b>This chat</b>\nNo answers yet.",
        "<b>You today</b>: 0 tokens, no daily budget.",
        "🤖 <b>Whole bot</b>\n• <code>test-model</code>: 3 answers · 300 tokens read (180 \
         reused from cache) · 30 tokens written",
        "<b>Top users today</b>\n1. User1001 (<code>1001</code>): 220 tokens\n2. User1002 \
         (<code>1002</code>): 110 tokens",
        "<b>Top users of all time</b>\n1. User1001 (<code>1001</code>): 220 tokens",
        // A fresh store, under the shipped compact_min_mb of 64 MB.
        " MB on disk; compacted once past 64 MB.",
    ] {
        assert!(stats.contains(want), "{want:?} missing in\n{stats}");
    }

    // In a group every member reads the reply: an admin's /stats there names nobody else.
    h.tg.send_in_chat(GROUP, ADMIN, "/stats");
    let stats = h.tg.wait_messages(GROUP, 1).await[0].text();
    assert!(stats.contains("<b>This chat</b>"), "{stats}");
    for private in ["Whole bot", "Top users", "User1001", "1001", "on disk"] {
        assert!(!stats.contains(private), "{private:?} in\n{stats}");
    }
    h.stop().await;
}

#[tokio::test]
async fn six_messages_over_the_limit_get_one_refusal_that_is_edited() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.turns_per_minute = 2;
    })
    .await;
    for i in 0..2 {
        h.tg.send_text(ALICE, &format!("question {i}"));
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    for i in 0..6 {
        h.tg.send_text(ALICE, &format!("too fast {i}"));
    }
    // Refusals that come while the refusal is on its way are counted in its next edit.
    h.tg.wait_last(ALICE, |text, _| {
        text.contains("I did not answer your last 6 messages.")
    })
    .await;
    let sent = h.tg.messages_to(ALICE);
    assert_eq!(sent.len(), 3, "two answers and one refusal");
    let refusal = &sent[2];
    assert!(
        refusal.text().contains("faster than I can answer"),
        "{}",
        refusal.text()
    );
    let refusal_id = refusal.result["message_id"].clone();
    let edits = edits_to(&h, ALICE);
    assert!(edits.len() <= 5, "at most one edit per later refusal");
    let mut counts = vec![];
    for (i, edit) in edits.iter().enumerate() {
        assert_eq!(edit.params["message_id"], refusal_id, "edit {i}");
        let text = edit.text();
        let count = (2..=6)
            .find(|n| text.contains(&format!("I did not answer your last {n} messages.")))
            .unwrap_or_else(|| panic!("edit {i}: {text}"));
        assert!(
            text.contains("Please wait") && text.contains("seconds, then send them again"),
            "edit {i}: {text}"
        );
        counts.push(count);
    }
    assert!(counts.is_sorted_by(|a, b| a < b), "{counts:?}");
    assert_eq!(h.tg.screen(ALICE).len(), 3, "one refusal on screen");
    assert_eq!(
        h.llm.agent_requests().len(),
        2,
        "refused messages cost no LLM call"
    );
    h.stop().await;
}

/// Waits until everything the stranger sent before is handled: updates of one chat are handled
/// in order, so once a later press there is answered, the messages before it were handled.
async fn handled(h: &Harness, refusal_id: i64) {
    let press = h.tg.press(STRANGER, STRANGER, refusal_id, "__act__nothing");
    h.tg.wait_for(|_| toast_of(h, &press)).await;
}

#[tokio::test]
async fn a_stranger_is_refused_once_a_day_even_across_a_restart() {
    let mut h = Harness::start(FakeLlm::answering("secret").await).await;
    h.tg.send_text(STRANGER, "let me in");
    h.tg.send_text(STRANGER, "please?");
    let sent = h.tg.wait_messages(STRANGER, 1).await;
    assert_eq!(sent[0].params["parse_mode"], "HTML");
    let text = sent[0].text();
    assert!(
        text.contains(&format!("<code>{STRANGER}</code>"))
            && text.contains("ask the bot's owner to add your id"),
        "{text}"
    );
    assert!(!text.contains("HEURIST_"), "no env-var jargon: {text}");
    assert!(sent[0].buttons().is_empty(), "no button unless configured");
    let refusal_id = sent[0].result["message_id"].as_i64().unwrap();
    // Updates of one chat are handled in order: once a later press there is answered, the
    // messages before it were handled.
    handled(&h, refusal_id).await;
    h.restart().await;
    h.tg.send_text(STRANGER, "hello again");
    handled(&h, refusal_id).await;
    assert_eq!(h.tg.messages_to(STRANGER).len(), 1, "one refusal a day");
    assert!(h.llm.requests().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_group_stranger_is_refused_once_when_addressing_and_ignored_otherwise() {
    let llm = FakeLlm::start(|req, _| Reply::text(&format!("re: {}", last_user_text(req)))).await;
    let h = Harness::start_with(llm, |c| c.options.enabled = false).await;
    h.tg.send_in_chat(GROUP, STRANGER, "just talking to friends");
    h.tg.send_in_chat(GROUP, STRANGER, "@heurist_test_bot let me in");
    h.tg.send_in_chat(GROUP, STRANGER, "@heurist_test_bot hello??");
    h.tg.send_in_chat(GROUP, STRANGER, "/help");
    h.tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot hi");
    // A group's updates are handled in order: once Alice is answered, the rest were handled.
    h.tg.wait_for(|t| {
        let sent = t.messages_to(GROUP);
        sent.iter().any(|c| c.text() == "re: hi").then_some(())
    })
    .await;
    let sent = h.tg.messages_to(GROUP);
    assert_eq!(sent.len(), 2, "one refusal and Alice's answer: {sent:#?}");
    assert!(sent[0].text().contains(&format!("<code>{STRANGER}</code>")));
    assert_eq!(sent[1].text(), "re: hi");
    assert_eq!(h.llm.agent_requests().len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn request_access_tells_the_admins_once_and_refuses_forged_presses() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.access.request_button = true;
    })
    .await;
    h.tg.send_text(STRANGER, "let me in");
    let sent = h.tg.wait_messages(STRANGER, 1).await;
    let refusal = &sent[0];
    let data = format!("__act__access|{STRANGER}");
    assert_eq!(refusal.buttons(), vec![data.clone()]);
    assert!(refusal.text().contains("Request access"));
    let id = refusal.result["message_id"].as_i64().unwrap();

    // Another stranger presses it, and someone forges an unreadable id.
    let other = h.tg.press(STRANGER + 1, STRANGER, id, &data);
    let garbage = h.tg.press(STRANGER + 1, STRANGER, id, "__act__access|me");
    let first = h.tg.press(STRANGER, STRANGER, id, &data);
    let second = h.tg.press(STRANGER, STRANGER, id, &data);
    // Presses in one chat are handled in order: once the second is answered, the first was
    // too (its notice to the admins and its edit are posted, and waited for below).
    let toast = h.tg.wait_for(|_| toast_of(&h, &second)).await;
    assert_eq!(toast, "Request already sent");
    assert_eq!(toast_of(&h, &first).as_deref(), Some("Request sent"));
    assert_eq!(
        toast_of(&h, &other).as_deref(),
        Some("That button is not valid")
    );
    assert_eq!(
        toast_of(&h, &garbage).as_deref(),
        Some("Sorry, this bot is private.")
    );

    let notices = h.tg.wait_messages(ADMIN, 1).await;
    let notice = notices[0].text();
    assert!(
        notice.contains(&format!("User{STRANGER} asks to use the bot"))
            && notice.contains(&format!("<code>{STRANGER}</code>")),
        "{notice}"
    );
    let screen =
        h.tg.wait_for(|t| {
            let screen = t.screen_with_keyboards(STRANGER);
            (edits_to(&h, STRANGER).len() >= 2).then_some(screen)
        })
        .await;
    assert_eq!(screen.len(), 1);
    assert!(screen[0].0.contains("✅ Request sent"), "{:?}", screen[0]);
    assert_eq!(screen[0].1, "", "the button is gone");
    assert_eq!(h.tg.messages_to(STRANGER).len(), 1);
    assert_eq!(h.tg.messages_to(ADMIN).len(), 1, "the admins are told once");

    // Forged data against a message that does not carry the button (here the refusal, whose
    // button is gone) edits nothing.
    let edits = edits_to(&h, STRANGER).len();
    let forged = h.tg.press(STRANGER, STRANGER, id, &data);
    let toast = h.tg.wait_for(|_| toast_of(&h, &forged)).await;
    assert_eq!(toast, "Request already sent");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        edits_to(&h, STRANGER).len(),
        edits,
        "no message was rewritten"
    );
    assert!(h.llm.requests().is_empty());
    h.stop().await;
}

/// A refusal waits for its group's pacing slot (3 s after the group's last message), and the
/// refused message records nothing: its update is released at once, so Telegram is asked for
/// the next updates meanwhile and another chat's message is answered before that refusal.
#[tokio::test]
async fn a_refusal_waiting_for_its_group_slot_holds_no_other_chat() {
    let h = Harness::start_with(FakeLlm::answering("ok").await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.limits.turns_per_minute = 1;
        c.telegram.chat_interval_ms = 1000;
        c.telegram.group_interval_ms = 3000;
        c.telegram.global_per_second = 30;
    })
    .await;
    h.tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot first");
    h.tg.wait_messages(GROUP, 1).await;
    h.tg.send_in_chat(GROUP, ALICE, "@heurist_test_bot second, over the limit");
    // The refusal's handler is now waiting for the group's next slot.
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.tg.send_text(BOB, "hello");
    h.tg.wait_messages(BOB, 1).await;
    assert_eq!(
        h.tg.messages_to(GROUP).len(),
        1,
        "Bob was answered while the group's refusal still waited for its slot"
    );
    let refusal = h.tg.wait_messages(GROUP, 2).await;
    assert!(
        refusal[1].text().contains("faster than I can answer"),
        "{}",
        refusal[1].text()
    );
    h.stop().await;
}
