//! Reactions: the 👀 a user's message carries while its turn runs, and emoji on the bot's
//! answers as votes that do exactly what the answer's 👍/👎 buttons do.

use std::time::Duration;

use heurist::learning::Source;
use heurist::learning::lessons::{Lesson, NewLesson};
use serde_json::json;

use crate::support::telegram::Call;
use crate::support::*;

const LESSON: &str = "Name the unit of every number in a recipe";

/// Agent calls get "done", reflections learn nothing, options calls offer none.
async fn llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            Reply::text(r#"{"heuristics": []}"#)
        } else if is_options_request(req) {
            Reply::text(r#"{"options": []}"#)
        } else {
            Reply::text("done")
        }
    })
    .await
}

/// The calls of `method`, once there are `count`.
async fn wait_calls(h: &Harness, method: &str, count: usize) -> Vec<Call> {
    h.tg.wait_for(|t| {
        let calls = t.calls(method);
        (calls.len() >= count).then_some(calls)
    })
    .await
}

/// The emoji a setMessageReaction call sets (empty: it takes the reaction off).
fn reaction_of(call: &Call) -> Vec<String> {
    call.params["reaction"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["emoji"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn the_working_reaction_is_set_before_the_answer_and_taken_off_after() {
    // A model that takes a while: the 👀 comes after 100 ms, the answer after 600 ms.
    let llm = FakeLlm::start(|_, _| Reply::text("done").after(Duration::from_millis(600))).await;
    let h = Harness::start_with(llm, |c| c.telegram.working_reaction_after_ms = 100).await;
    let update = h.tg.send_text(ALICE, "hello");
    let asked = h.tg.message_id_of(update);
    let answer = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let calls = wait_calls(&h, "setMessageReaction", 2).await;
    for call in &calls {
        assert_eq!(call.params["chat_id"], ALICE);
        assert_eq!(call.params["message_id"], asked, "on the user's message");
    }
    assert_eq!(reaction_of(&calls[0]), ["👀"]);
    assert!(reaction_of(&calls[1]).is_empty(), "taken off: {calls:?}");
    assert!(calls[0].at <= answer.at, "set before the answer");
    assert!(answer.at <= calls[1].at, "taken off after the answer");
    // Telegram sends reactions only to a bot that asks for them.
    let polled = h.tg.calls("getUpdates").remove(0);
    let allowed = polled.params["allowed_updates"].as_array().unwrap().clone();
    assert!(allowed.contains(&json!("message_reaction")), "{allowed:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.tg.calls("setMessageReaction").len(), 2, "one call each");
    h.stop().await;
}

#[tokio::test]
async fn a_refused_reaction_costs_nothing_and_a_failed_turn_clears_it_too() {
    let llm = FakeLlm::start(|req, _| {
        if last_user_text(req).contains("break") {
            Reply::error(400, "bad request")
        } else {
            Reply::text("done")
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.telegram.working_reaction_after_ms = 0;
    })
    .await;
    // A chat where reactions are off: Telegram refuses; the answer comes all the same.
    h.tg.script(
        "setMessageReaction",
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: REACTION_INVALID"}),
    );
    h.tg.send_text(ALICE, "hello");
    assert_eq!(h.tg.wait_messages(ALICE, 1).await[0].text(), "done");
    wait_calls(&h, "setMessageReaction", 1).await;
    // A reaction Telegram refused is not there to take off: no second call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.tg.calls("setMessageReaction").len(), 1);
    // A turn whose model fails still takes its reaction off.
    h.tg.send_text(ALICE, "break it");
    h.tg.wait_messages(ALICE, 2).await;
    let calls = wait_calls(&h, "setMessageReaction", 3).await;
    assert_eq!(reaction_of(&calls[1]), ["👀"]);
    assert!(reaction_of(&calls[2]).is_empty());
    h.stop().await;
}

/// An answer quicker than `working_reaction_after_ms` needs no 👀 and costs no call.
#[tokio::test]
async fn a_quick_answer_gets_no_working_reaction() {
    let h = Harness::start(FakeLlm::answering("done").await).await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(h.tg.calls("setMessageReaction").is_empty());
    h.stop().await;
}

#[tokio::test]
async fn an_empty_working_reaction_sets_none() {
    let h = Harness::start_with(FakeLlm::answering("done").await, |c| {
        c.telegram.working_reaction = String::new();
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    h.tg.wait_messages(ALICE, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(h.tg.calls("setMessageReaction").is_empty());
    h.stop().await;
}

/// Learns [`LESSON`] through the real learning code, so the next recipe question carries it.
async fn learn(h: &Harness) {
    let source = Source {
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        skills: Vec::new(),
        tools: Vec::new(),
        given: Vec::new(),
    };
    let entry: NewLesson = serde_json::from_value(json!({"text": LESSON})).unwrap();
    h.app()
        .learning()
        .learn(vec![entry], &source)
        .await
        .unwrap();
}

fn lesson(h: &Harness) -> Lesson {
    h.app()
        .store()
        .learning()
        .lessons()
        .into_iter()
        .find(|x| x.text == LESSON)
        .unwrap()
}

/// A bot that learned [`LESSON`] and answered a recipe question with it.
struct Rated {
    h: Harness,
    /// The user's question.
    asked: i64,
    /// The answer.
    message: i64,
    up: String,
    down: String,
}

async fn rated_answer() -> Rated {
    let h = Harness::start(llm().await).await;
    learn(&h).await;
    let update = h.tg.send_text(ALICE, "a recipe for pancakes");
    let answer = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let buttons = answer.buttons();
    let [up, down] = &buttons[buttons.len() - 2..] else {
        panic!("no 👍/👎 under the answer: {buttons:?}");
    };
    Rated {
        asked: h.tg.message_id_of(update),
        message: answer.result["message_id"].as_i64().unwrap(),
        up: up.clone(),
        down: down.clone(),
        h,
    }
}

/// What a vote left on [`LESSON`]: its 👍 and 👎 counts and its utility.
fn scored(h: &Harness) -> (u32, u32, f32) {
    let lesson = lesson(h);
    (lesson.up, lesson.down, lesson.utility())
}

/// The 👍/👎 texts of the last keyboard edit of `message`, once there are `count` edits.
async fn vote_row(h: &Harness, message: i64, count: usize) -> (String, String) {
    let edits =
        h.tg.wait_for(|t| {
            let edits: Vec<Call> = t
                .calls("editMessageReplyMarkup")
                .into_iter()
                .filter(|c| c.params["message_id"] == message)
                .collect();
            (edits.len() >= count).then_some(edits)
        })
        .await;
    let rows = edits[count - 1].params["reply_markup"]["inline_keyboard"].clone();
    let row = rows.as_array().unwrap().last().unwrap().clone();
    let text = |i: usize| row[i]["text"].as_str().unwrap().to_string();
    (text(0), text(1))
}

/// A 👎 reaction scores the answer's heuristics exactly as its 👎 button does, and reflects on
/// the rated answer.
#[tokio::test]
async fn a_thumbs_down_reaction_does_what_the_button_does() {
    let Rated {
        h: pressed,
        message,
        down,
        ..
    } = rated_answer().await;
    let before = scored(&pressed);
    pressed.tg.press(ALICE, ALICE, message, &down);
    pressed
        .tg
        .wait_for(|_| (lesson(&pressed).down == 1).then_some(()))
        .await;
    let by_button = scored(&pressed);
    pressed.stop().await;

    let Rated { h, message, .. } = rated_answer().await;
    assert_eq!(scored(&h), before, "the same start");
    h.tg.react(ALICE, ALICE, message, &[], &["👎"]);
    h.tg.wait_for(|_| (lesson(&h).down == 1).then_some(()))
        .await;
    let by_reaction = scored(&h);
    assert_ne!(by_reaction, before, "the reaction scored");
    assert_eq!(by_reaction, by_button, "as the button scores");
    // 👎 reflects on the rated answer, as the button does.
    let failure =
        h.tg.wait_for(|_| {
            h.llm.reflection_requests().into_iter().find(|r| {
                last_user_text(r).contains("Outcome: failure (the user rated the answer 👎)")
            })
        })
        .await;
    assert!(last_user_text(&failure).contains("Task summary: a recipe for pancakes"));
    let messages = failure["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "done"),
        "the rated answer is in the reflection: {messages:?}"
    );
    // The vote shows in the answer's keyboard.
    assert_eq!(vote_row(&h, message, 1).await, ("👍".into(), "👎 ✓".into()));
    h.stop().await;
}

/// Only an allowed user's listed emoji on an answer votes; a vote changes once; a reaction
/// taken off changes nothing.
#[tokio::test]
async fn reactions_vote_once_change_once_and_ignore_the_rest() {
    let Rated {
        h,
        asked,
        message,
        up,
        ..
    } = rated_answer().await;
    // Ignored: a stranger's 👍, an emoji in neither list, a 👍 on the user's own message.
    h.tg.react(STRANGER, ALICE, message, &[], &["👍"]);
    h.tg.react(ALICE, ALICE, message, &[], &["🤔"]);
    h.tg.react(ALICE, ALICE, asked, &[], &["👍"]);
    // Counted: Alice's 👎 (handled after the ones above: one chat's updates go in order).
    h.tg.react(ALICE, ALICE, message, &["🤔"], &["👎"]);
    h.tg.wait_for(|_| (lesson(&h).down == 1).then_some(()))
        .await;
    assert_eq!(vote_row(&h, message, 1).await, ("👍".into(), "👎 ✓".into()));
    assert_eq!(
        (lesson(&h).up, lesson(&h).down),
        (0, 1),
        "the stranger's 👍 did not count"
    );
    // A change of mind, by another emoji of the other list: taken once.
    h.tg.react(ALICE, ALICE, message, &["👎"], &["❤"]);
    assert_eq!(vote_row(&h, message, 2).await, ("👍 ✓".into(), "👎".into()));
    assert_eq!(
        (lesson(&h).up, lesson(&h).down),
        (1, 0),
        "the 👎 was taken back"
    );
    // No second change; taking the reaction off undoes nothing.
    h.tg.react(ALICE, ALICE, message, &["❤"], &["💩"]);
    h.tg.react(ALICE, ALICE, message, &["💩"], &[]);
    // A 👍 button press after them: refused the same way, and handled after them.
    let query = h.tg.press(ALICE, ALICE, message, &up);
    let toast =
        h.tg.wait_for(|t| {
            t.calls("answerCallbackQuery")
                .into_iter()
                .find(|c| c.params["callback_query_id"] == query.as_str())
        })
        .await;
    assert_eq!(toast.params["text"], "You already rated this answer");
    assert_eq!((lesson(&h).up, lesson(&h).down), (1, 0));
    let edits = h.tg.calls("editMessageReplyMarkup").len();
    assert_eq!(edits, 2, "no edit for what changed nothing");
    h.stop().await;
}

/// A vote by reaction keeps the answer's live option buttons in the keyboard it edits.
#[tokio::test]
async fn a_vote_by_reaction_keeps_the_options_shown() {
    let llm = FakeLlm::start(|req, _| {
        if is_options_request(req) {
            Reply::text(r#"{"options": ["Tea", "Coffee"]}"#)
        } else if is_reflection_request(req) {
            Reply::text(r#"{"heuristics": []}"#)
        } else {
            Reply::text("Tea or coffee?")
        }
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "a drink, please");
    let answer = h.tg.wait_messages(ALICE, 1).await.remove(0);
    let message = answer.result["message_id"].as_i64().unwrap();
    let sent = answer.buttons();
    assert_eq!(sent.len(), 4, "two options and 👍/👎: {sent:?}");
    h.tg.react(ALICE, ALICE, message, &[], &["🔥"]);
    assert_eq!(vote_row(&h, message, 1).await, ("👍 ✓".into(), "👎".into()));
    let edit = h.tg.calls("editMessageReplyMarkup").remove(0);
    assert_eq!(edit.buttons(), sent, "the same buttons, the vote marked");
    h.stop().await;
}

/// A group where Alice asked: [`LESSON`] learned, reflections learn nothing.
const GROUP: i64 = -5151;

/// Alice's question `n` in [`GROUP`] and the answer's message id and 👎 button data, once the
/// group has `n` answers.
async fn asked_in_group(h: &Harness, n: usize) -> (i64, String) {
    h.tg.send_in_chat(
        GROUP,
        ALICE,
        &format!("@heurist_test_bot recipe number {n}"),
    );
    let answer = h.tg.wait_messages(GROUP, n).await.remove(n - 1);
    let buttons = answer.buttons();
    let down = buttons.last().expect("👍/👎 under the answer").clone();
    (answer.result["message_id"].as_i64().unwrap(), down)
}

/// The reflections a 👎 started, as the task each one follows.
fn failure_reflections(h: &Harness) -> Vec<String> {
    h.llm
        .reflection_requests()
        .iter()
        .map(last_user_text)
        .filter(|text| text.contains("Outcome: failure (the user rated the answer 👎)"))
        .collect()
}

/// In a group, another member's 👎 (button or reaction) counts as a vote but starts no
/// reflection, so it charges the asker nothing; the asker's own 👎 and an admin's do.
#[tokio::test]
async fn in_a_group_only_the_askers_or_an_admins_thumbs_down_reflects() {
    let h = Harness::start(llm().await).await;
    learn(&h).await;
    let alice = heurist::ids::UserId(ALICE as u64);
    let (first, down) = asked_in_group(&h, 1).await;
    let (second, _) = asked_in_group(&h, 2).await;
    // Alice's own turns' reflections are hers to pay: measured once they are done.
    h.tg.wait_for(|_| {
        let done =
            h.llm.reflection_requests().len() >= 2 && h.app().learning().reflections_running() == 0;
        done.then_some(())
    })
    .await;
    let spent = h.app().store().usage().user_tokens_today(alice);

    let query = h.tg.press(BOB, GROUP, first, &down);
    h.tg.wait_for(|_| (lesson(&h).down == 1).then_some(()))
        .await;
    let toast =
        h.tg.wait_for(|t| {
            t.calls("answerCallbackQuery")
                .into_iter()
                .find(|c| c.params["callback_query_id"] == query.as_str())
        })
        .await;
    assert_eq!(toast.params["text"], "Thanks!", "no promise to learn");
    h.tg.react(BOB, GROUP, second, &[], &["👎"]);
    h.tg.wait_for(|_| (lesson(&h).down == 2).then_some(()))
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(failure_reflections(&h), Vec::<String>::new());
    assert_eq!(
        h.app().store().usage().user_tokens_today(alice),
        spent,
        "Bob's votes charged Alice nothing"
    );

    // An admin's 👎 reflects; so does Alice's own.
    let (third, _) = asked_in_group(&h, 3).await;
    h.tg.react(ADMIN, GROUP, third, &[], &["👎"]);
    let (fourth, down) = asked_in_group(&h, 4).await;
    h.tg.press(ALICE, GROUP, fourth, &down);
    let reflected =
        h.tg.wait_for(|_| {
            let found = failure_reflections(&h);
            (found.len() >= 2).then_some(found)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(failure_reflections(&h).len(), 2, "{reflected:?}");
    assert!(reflected[0].contains("recipe number 3"), "{reflected:?}");
    assert!(reflected[1].contains("recipe number 4"), "{reflected:?}");
    h.stop().await;
}
