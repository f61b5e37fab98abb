//! Reflective learning: skills, heuristics learned from tasks and retrieved for the tasks they
//! fit, scored by outcomes and feedback, held for review when outside content taught them,
//! and reviewed by admins.

mod reflection;
mod retrieval;
mod review;
mod skills;
mod tool_lessons;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use heurist::learning::Source;
use heurist::learning::lessons::{Lesson, NewLesson, ReviewState};
use serde_json::{Value, json};

use crate::support::mcp::this_turns_results;
use crate::support::*;

const TIP: &str = "Always confirm the time zone before converting times";

/// For the tests of what happens to a lesson once learned (retrieval, review, skills,
/// dedupe): their fake reflections write lessons that no evidence grounds, so the grounding
/// gate (tested on its own) is off.
fn plumbing(config: &mut heurist::Config) {
    config.learning.grounded_only = false;
}

fn shipped_skills(config: &mut heurist::Config) {
    config.learning.skills_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/skills").into();
}

fn reflection_reply(entries: &[(&str, Option<&str>)]) -> Reply {
    let heuristics: Vec<Value> = entries
        .iter()
        .map(|(text, skill)| json!({"text": text, "skill_name": skill}))
        .collect();
    Reply::text(&format!(
        "Here you go:\n```json\n{}\n```",
        json!({"heuristics": heuristics})
    ))
}

/// Agent calls get "done"; reflections get `reflect()`; options calls get no options.
async fn learning_llm(reflect: impl Fn() -> Reply + Send + Sync + 'static) -> FakeLlm {
    FakeLlm::start(move |req, _| {
        if is_reflection_request(req) {
            reflect()
        } else if is_options_request(req) {
            Reply::text(r#"{"options": []}"#)
        } else {
            Reply::text("done")
        }
    })
    .await
}

fn entry(text: &str, skill: Option<&str>) -> NewLesson {
    serde_json::from_value(json!({"text": text, "skill_name": skill})).unwrap()
}

/// Learns `texts` (general, from a trusted successful task) through the real learning code.
async fn learn(h: &Harness, texts: &[&str]) {
    let source = Source {
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        skills: Vec::new(),
        tools: Vec::new(),
        given: Vec::new(),
    };
    let entries = texts.iter().map(|t| entry(t, None)).collect();
    h.app().learning().learn(entries, &source).await.unwrap();
}

/// The texts of every stored heuristic, in id order.
fn stored_texts(h: &Harness) -> Vec<String> {
    h.app()
        .store()
        .learning()
        .lessons()
        .into_iter()
        .map(|x| x.text)
        .collect()
}

fn by_text(h: &Harness, prefix: &str) -> Lesson {
    h.app()
        .store()
        .learning()
        .lessons()
        .into_iter()
        .find(|x| x.text.starts_with(prefix))
        .unwrap_or_else(|| panic!("no heuristic {prefix:?}"))
}

async fn wait_heuristics(h: &Harness, count: usize) -> Vec<Lesson> {
    h.tg.wait_for(|_| {
        let all = h.app().store().learning().lessons();
        (all.len() >= count).then_some(all)
    })
    .await
}

fn user_content(request: &Value) -> String {
    last_user_text(request)
}

/// The agent request whose user message ends with `text`.
fn request_ending(h: &Harness, text: &str) -> Value {
    h.llm
        .agent_requests()
        .into_iter()
        .find(|r| user_content(r).ends_with(text))
        .unwrap_or_else(|| panic!("no agent request ending with {text:?}"))
}

/// The learned heuristics a request's user message carries (empty: none).
fn injected(request: &Value) -> Vec<String> {
    let content = user_content(request);
    let Some(section) = content.split("## Learned Heuristics\n").nth(1) else {
        return Vec::new();
    };
    section
        .lines()
        .map_while(|line| line.strip_prefix("- "))
        .map(str::to_string)
        .collect()
}

/// Sends `text` as `chat`'s `nth` message and returns the heuristics its prompt carried.
async fn ask(h: &Harness, chat: i64, nth: usize, text: &str) -> Vec<String> {
    h.tg.send_text(chat, text);
    h.tg.wait_messages(chat, nth).await;
    injected(&request_ending(h, text))
}

fn answered(h: &Harness, query: &str) -> Option<Value> {
    h.tg.calls("answerCallbackQuery")
        .into_iter()
        .find(|c| c.params["callback_query_id"] == query)
        .map(|c| c.params)
}

/// The 👍 and 👎 callback data under the `nth` message sent to `chat`.
async fn feedback_buttons(h: &Harness, chat: i64, nth: usize) -> (i64, String, String) {
    let sent = h.tg.wait_messages(chat, nth).await;
    let call = &sent[nth - 1];
    let rows = call.params["reply_markup"]["inline_keyboard"]
        .as_array()
        .expect("a keyboard")
        .clone();
    let row = rows.last().unwrap();
    assert_eq!(row[0]["text"], "👍");
    (
        call.result["message_id"].as_i64().unwrap(),
        row[0]["callback_data"].as_str().unwrap().to_string(),
        row[1]["callback_data"].as_str().unwrap().to_string(),
    )
}

/// The desk, with every call sent as the model wrote it: these tests are about the lessons,
/// which the bot's own rewrites (tests/e2e/rewrites.rs) would leave nothing to do.
fn as_written(desk: &crate::support::desk::DeskServer) -> heurist::config::McpServerConfig {
    heurist::config::McpServerConfig {
        rewrite_arguments: false,
        ..desk.entry()
    }
}
