//! Lessons, hints and errors are never the answer (issue 34), with the answers
//! Qwen2.5-Coder-1.5B gave as fixtures: a learned lesson given back word for word, the repeat
//! guard's own words, an earlier answer of the chat repeated for the next question, and how
//! to call a tool instead of calling it. Each is asked again (with what the turn has, then
//! with the question alone where the history is being copied), and never shown.

use serde_json::{Value, json};

use crate::support::*;
use heurist::learning::Source;
use heurist::learning::lessons::NewLesson;

/// The lesson the issue saw given as the answer to three questions.
const LESSON: &str = "When checking stock for an item fails repeatedly with the same error, \
    consider changing the SKU or using a different tool.";
/// The repeat guard's words, which the issue saw as an answer.
const GUARD: &str = "Do not repeat it: change the arguments as that error says, or answer the \
    user with what you have.";
/// The answer to seven questions in a row, learning off.
const SAME_ANSWER: &str = "The tool reported an error.";

fn quiet(c: &mut heurist::Config) {
    c.options.enabled = false;
    c.learning.reflect = false;
    c.learning.feedback_buttons = false;
}

/// Whether the request is one of the bot's asks after a parroted answer.
fn asked_again(request: &Value) -> bool {
    let last = last_user_text(request);
    last.starts_with("Your last reply only repeated") || last.starts_with("Do not tell me how")
}

/// Stores `lesson` (the reflection's JSON for one) as learned from a turn that went well and
/// called `tools`.
async fn learn(h: &Harness, lesson: Value, tools: &[&str]) {
    let entry: NewLesson = serde_json::from_value(lesson).unwrap();
    let source = Source {
        outcome: "success".into(),
        tools: tools.iter().map(|t| t.to_string()).collect(),
        ..Source::default()
    };
    h.app()
        .learning()
        .learn(vec![entry], &source)
        .await
        .unwrap();
}

/// The messages of `request` (system first).
fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().unwrap().clone()
}

/// Starts a bot that knows [`LESSON`], whose model gives back `copy` when the lesson is in its
/// prompt and answers when asked again; asks the stock question and returns what Alice read.
async fn the_lesson_given_back(copy: &'static str) -> (Harness, String) {
    let llm = FakeLlm::start(move |req, _| {
        if asked_again(req) {
            return Reply::text("Item 982 has 12 units in stock.");
        }
        if last_user_text(req).contains(LESSON) {
            return Reply::text(copy);
        }
        Reply::text("no lesson in the prompt")
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    learn(&h, json!({"text": LESSON, "skill_name": null}), &[]).await;
    h.tg.send_text(
        ALICE,
        "How many units of item 982 are in stock? My checking fails",
    );
    let shown = h.tg.wait_messages(ALICE, 1).await[0].text().to_string();
    (h, shown)
}

#[tokio::test]
async fn a_lesson_given_back_as_the_answer_is_asked_again_and_never_shown() {
    // The model: the lesson in its prompt, given back as the answer.
    const COPY: &str = "Checking stock for an item fails repeatedly with the same error, \
                        consider changing the SKU or using a different tool.";
    let (h, shown) = the_lesson_given_back(COPY).await;
    assert_eq!(shown, "Item 982 has 12 units in stock.");
    let history = h
        .app()
        .store()
        .history()
        .window(in_chat(ALICE), 100_000)
        .unwrap();
    let stored = format!("{:?}", history.messages);
    assert!(!stored.contains("Checking stock for an item"), "{stored}");
    h.stop().await;
}

/// Part of a lesson inside a longer answer (one chat, seed 6, learning on: six words of a
/// lesson shown to the model, in an answer of its own words around them) is that lesson passed
/// to the user: asked again, never shown.
#[tokio::test]
async fn six_words_of_a_lesson_inside_an_answer_are_asked_again_and_never_shown() {
    const COPY: &str = "Item 982: no figures yet. Consider changing the SKU or using a \
                        different tool.";
    let (h, shown) = the_lesson_given_back(COPY).await;
    assert_eq!(shown, "Item 982 has 12 units in stock.");
    h.stop().await;
}

/// The same for a lesson shown beside the failed result of its tool (one chat, seed 6: "…
/// Please use the correct SKU format (SKU-0005127) or contact the support team for help."):
/// the lesson's words sit in the tool message, but they are the lesson's, not the tool's.
#[tokio::test]
async fn six_words_of_a_lesson_beside_a_failed_result_are_asked_again_and_never_shown() {
    const TOOL_LESSON: &str = "When calling desk__stock_level, write the SKU as SKU-000031 or \
        contact the support team for help.";
    const COPY: &str = "Error: The tool returned an error. Please use the correct SKU format \
        or contact the support team for help.";
    const ANSWER: &str = "I could not read the stock of item 31.";
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        if asked_again(req) {
            return Reply::text(ANSWER);
        }
        let last = messages(req).last().cloned().unwrap();
        let shown = last["content"].as_str().unwrap_or_default();
        if last["role"] == "tool" && shown.contains("contact the support team") {
            return Reply::text(COPY);
        }
        if last["role"] == "tool" {
            return Reply::text("the lesson was not shown");
        }
        Reply::tool_call("c1", "desk__stock_level", json!({"sku": "item31"}))
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        quiet(c);
        c.mcp.servers = vec![desk.entry()];
    })
    .await;
    let lesson = json!({"text": TOOL_LESSON, "skill_name": null, "tool": "desk__stock_level"});
    learn(&h, lesson, &["desk__stock_level"]).await;
    for lesson in h.app().store().learning().lessons() {
        assert_eq!(lesson.tool.as_deref(), Some("desk__stock_level"));
        h.app().learning().approve(lesson.id).unwrap();
    }
    h.tg.send_text(ALICE, "Do we still have item 31 in the warehouse?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].text(), ANSWER);
    h.stop().await;
}

#[tokio::test]
async fn the_guards_words_are_never_the_answer() {
    let llm = FakeLlm::start(|_, _| Reply::text(GUARD)).await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    assert!(!shown.contains("Do not repeat it"), "{shown}");
    assert!(shown.starts_with("Sorry"), "the honest note: {shown}");
    assert!(
        sent[0]
            .buttons()
            .iter()
            .any(|b| b.starts_with("__act__retry|")),
        "with 🔁 Retry"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_earlier_answer_copied_from_the_history_is_asked_again_without_it() {
    let llm = FakeLlm::start(|req, _| {
        let history = messages(req).iter().any(|m| m["role"] == "assistant");
        // Copies what it sees; with the question alone, it answers it.
        if history {
            Reply::text(SAME_ANSWER)
        } else if last_user_text(req).contains("item 15") {
            Reply::text("Item 15: 3 units in stock.")
        } else {
            Reply::text(SAME_ANSWER)
        }
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "How many units of item 982 are in stock?");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.send_text(ALICE, "How many units of item 15 are in stock?");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert_eq!(sent[1].text(), "Item 15: 3 units in stock.");
    // The last request held the question alone: the system message and the question.
    let last = h.llm.agent_requests().last().cloned().unwrap();
    let roles: Vec<Value> = messages(&last).iter().map(|m| m["role"].clone()).collect();
    assert_eq!(roles, [json!("system"), json!("user")], "{last}");
    // A third question the model still cannot answer but by copying: the honest note.
    h.tg.send_text(ALICE, "And item 16?");
    let sent = h.tg.wait_messages(ALICE, 3).await;
    assert!(sent[2].text().starts_with("Sorry"), "{}", sent[2].text());
    h.stop().await;
}

#[tokio::test]
async fn how_to_call_a_tool_is_not_an_answer_the_call_is_made() {
    let llm = FakeLlm::start(|req, _| {
        let last = messages(req).last().cloned().unwrap();
        if last["role"] == "tool" {
            return Reply::text("It is noon where you are.");
        }
        if asked_again(req) {
            return Reply::tool_call("c1", "current_time", json!({}));
        }
        Reply::text("To get the time, use the current_time tool with your zone.")
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "What time is it?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].text(), "It is noon where you are.");
    h.stop().await;
}

/// Starts a bot whose model's `fetch_url` call fails, then answers `described` (how to make
/// the call) and, asked again, the failure in its own words; checks that Alice read only that.
async fn described_after_a_failed_fetch(described: &'static str) -> Harness {
    let llm = FakeLlm::start(move |req, _| {
        if asked_again(req) {
            return Reply::text("I could not fetch that page: its address is not valid.");
        }
        let last = messages(req).last().cloned().unwrap();
        if last["role"] == "tool" {
            return Reply::text(described);
        }
        Reply::tool_call("c1", "fetch_url", json!({"url": "not a url"}))
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "What does my page say?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(
        sent[0].text(),
        "I could not fetch that page: its address is not valid."
    );
    h
}

/// After a call that failed, telling the user how to make it is still no answer (a real run:
/// "you can use the fetch_url function with the URL …").
#[tokio::test]
async fn how_to_call_a_tool_that_failed_is_not_an_answer_either() {
    let h = described_after_a_failed_fetch(
        "You can use the fetch_url function with the URL of the page.",
    )
    .await;
    h.stop().await;
}

/// A failed call's arguments written out for the user (a real run, one chat, after the
/// ticket desk refused `{"id":"TCK-0005127"}`: "It should be called with {"id":"TCK-0005127"}
/// to look up ticket 5127.") are no answer either, though the tool is not named: asked again
/// to make the call, never shown.
#[tokio::test]
async fn a_failed_calls_arguments_written_out_are_not_an_answer() {
    let h = described_after_a_failed_fetch(
        "It should be called with {\"url\": \"https://example.org/page\"} to read it.",
    )
    .await;
    assert!(
        h.llm
            .requests()
            .iter()
            .any(|r| last_user_text(r).starts_with("Do not tell me how")),
        "the model was asked to make the call"
    );
    h.stop().await;
}

/// A call written out as text once the tools were taken away to ask for the answer (a real
/// run: after an empty reply, `{"name": "current_time", "arguments": {…}}` and a made-up
/// result) is a call described, not an answer: asked again, never shown.
#[tokio::test]
async fn a_call_written_out_after_the_tools_were_taken_away_is_not_shown() {
    let llm = FakeLlm::start(|req, _| {
        if asked_again(req) {
            return Reply::text("I have no page to read: tell me its address.");
        }
        if last_user_text(req).starts_with("Your last reply was empty") {
            assert!(req.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)));
            return Reply::text(
                "{\"name\": \"fetch_url\", \"arguments\": {\"url\": \"https://example.org\"}}\n\n{\"status\": \"fetched\"}",
            );
        }
        Reply::text("")
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "What does my page say?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(
        sent[0].text(),
        "I have no page to read: tell me its address."
    );
    h.stop().await;
}

/// Sends `message`; the model answers `copy`, then, asked again, `honest`: only `honest` is
/// shown.
async fn only_the_second_answer_is_shown(message: &str, copy: &'static str, honest: &'static str) {
    let llm = FakeLlm::start(move |req, _| {
        if asked_again(req) {
            return Reply::text(honest);
        }
        Reply::text(copy)
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, message);
    let sent = h.tg.wait_messages(ALICE, 1).await;
    assert_eq!(sent[0].text(), honest);
    h.stop().await;
}

/// The user's question asked back (Qwen2.5-Coder-1.5B in one chat: "Ticket 31337: who is it
/// waiting for?") is no answer: asked again, never shown.
#[tokio::test]
async fn the_question_asked_back_is_not_an_answer() {
    only_the_second_answer_is_shown(
        "Who is ticket 31337 waiting for?",
        "Ticket 31337: who is it waiting for?",
        "I cannot see ticket 31337 from here.",
    )
    .await;
}

/// The user's whole message given back as a statement (Qwen2.5-Coder-1.5B, fresh chats, seed
/// 14, learning off: "Stock level for item 5127, please.") is no answer either: asked again,
/// never shown.
#[tokio::test]
async fn the_message_given_back_is_not_an_answer() {
    only_the_second_answer_is_shown(
        "Stock level for item 5127, please.",
        "Stock level for item 5127, please.",
        "I have no stock figures for item 5127.",
    )
    .await;
}

/// A tool result the model wrote itself in the chat template's markup (a run of Qwen's
/// answers held a raw `<tool_response>` block) is never shown.
#[tokio::test]
async fn a_made_up_tool_result_is_not_shown() {
    only_the_second_answer_is_shown(
        "How many units of item 15 are in stock?",
        "<tool_response>\n{\"units\": 12}\n</tool_response>",
        "I have no stock figures for item 15.",
    )
    .await;
}

/// Tags alone (Qwen2.5-Coder-1.5B in one chat, seed 13, learning off, gave "<tools></tools>"
/// to two booking questions, and both were shown) are no answer either, whatever the tags.
#[tokio::test]
async fn tags_alone_are_not_an_answer() {
    for tags in ["<tools></tools>", "<|im_end|>"] {
        only_the_second_answer_is_shown(
            "Which meeting room is taken on 2027-03-15?",
            tags,
            "I cannot see the bookings of 2027-03-15.",
        )
        .await;
    }
}

/// A call that worked, described instead of passed on ("I called current_time to get the
/// time"), is asked once more with the result in front of the model.
#[tokio::test]
async fn a_call_that_worked_described_is_asked_for_its_result() {
    let llm = FakeLlm::start(|req, _| {
        let last = last_user_text(req);
        if last.starts_with(heurist::agent::ANSWER_FROM_RESULT_PROMPT) {
            let figure = last
                .chars()
                .filter(char::is_ascii_digit)
                .take(4)
                .collect::<String>();
            return Reply::text(&format!("The clock says {figure}."));
        }
        if messages(req).last().unwrap()["role"] == "tool" {
            return Reply::text("I called current_time to get the time for you.");
        }
        Reply::tool_call("c1", "current_time", json!({}))
    })
    .await;
    let h = Harness::start_with(llm, quiet).await;
    h.tg.send_text(ALICE, "What time is it?");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let shown = sent[0].text();
    assert!(shown.starts_with("The clock says "), "{shown}");
    assert!(shown.chars().any(|c| c.is_ascii_digit()), "{shown}");
    h.stop().await;
}
