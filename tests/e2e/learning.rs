//! Reflective learning: skills, heuristics learned from tasks, injection, feedback, admin view.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use heurist::learning::heuristics::Heuristic;
use serde_json::{Value, json};

use crate::support::*;

const TIP: &str = "Always confirm the time zone before converting times";

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

async fn wait_heuristics(h: &Harness, count: usize) -> Vec<Heuristic> {
    h.tg.wait_for(|_| {
        let all = h.app().store.heuristics();
        (all.len() >= count).then_some(all)
    })
    .await
}

fn user_content(request: &Value) -> String {
    last_user_text(request)
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

#[tokio::test]
async fn a_learned_heuristic_reaches_another_chats_prompt_and_survives_a_restart() {
    let mut h = Harness::start(
        learning_llm(|| reflection_reply(&[(TIP, None), ("", None), (&"x".repeat(600), None)]))
            .await,
    )
    .await;
    h.tg.send_text(ALICE, "convert 9am Berlin to Tokyo");
    h.tg.wait_messages(ALICE, 1).await;
    let learned = wait_heuristics(&h, 1).await;
    assert_eq!(
        learned.len(),
        1,
        "empty and overlong heuristics are dropped"
    );
    assert_eq!(learned[0].text, TIP);
    assert_eq!(learned[0].skill, None);

    // The reflection saw the task, its tools and its outcome, after the turn's own messages.
    let reflection = &h.llm.reflection_requests()[0];
    let prompt = user_content(reflection);
    assert!(prompt.contains("Task summary: convert 9am Berlin to Tokyo"));
    assert!(prompt.contains("Tool calls used: none") && prompt.contains("Outcome: success"));
    let agent = &h.llm.agent_requests()[0];
    let n = agent["messages"].as_array().unwrap().len();
    assert_eq!(
        reflection["messages"].as_array().unwrap()[..n],
        agent["messages"].as_array().unwrap()[..]
    );

    h.tg.send_text(BOB, "what time is it in Lima?");
    h.tg.wait_messages(BOB, 1).await;
    let bob = h
        .llm
        .agent_requests()
        .into_iter()
        .find(|r| user_content(r).ends_with("Lima?"))
        .unwrap();
    let content = user_content(&bob);
    assert!(
        content.contains(&format!("## Learned Heuristics\n- {TIP}\n")),
        "{content}"
    );
    assert!(content.ends_with("\n\nwhat time is it in Lima?"));
    // The system prompt never changes: learning lives in the turn's user message.
    assert_eq!(bob["messages"][0], agent["messages"][0]);

    h.restart().await;
    assert_eq!(h.app().store.heuristics(), wait_heuristics(&h, 1).await);
    h.tg.send_text(ALICE, "and to Sydney?");
    h.tg.wait_messages(ALICE, 2).await;
    let again = h
        .llm
        .agent_requests()
        .into_iter()
        .find(|r| user_content(r).ends_with("Sydney?"))
        .unwrap();
    assert!(user_content(&again).contains(TIP));
    // Turn 2 of Alice's chat begins with exactly turn 1's request: the cache prefix holds.
    let first = agent["messages"].as_array().unwrap();
    assert_eq!(
        again["messages"].as_array().unwrap()[..first.len()],
        first[..]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_near_duplicate_reinforces_instead_of_being_stored_twice() {
    let reflections = std::sync::atomic::AtomicUsize::new(0);
    let llm = learning_llm(move || match reflections.fetch_add(1, Ordering::SeqCst) {
        0 => reflection_reply(&[(TIP, None)]),
        _ => reflection_reply(&[(
            "always CONFIRM the time zone, before converting times!",
            None,
        )]),
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "first task");
    h.tg.wait_messages(ALICE, 1).await;
    wait_heuristics(&h, 1).await;
    h.tg.send_text(ALICE, "second task");
    h.tg.wait_messages(ALICE, 2).await;
    let reinforced =
        h.tg.wait_for(|_| h.app().store.heuristics().into_iter().find(|x| x.uses == 2))
            .await;
    assert_eq!(h.app().store.heuristics().len(), 1);
    assert_eq!(reinforced.text, TIP, "the known wording stays");
    assert!(reinforced.confidence > 0.5);
    h.stop().await;
}

#[tokio::test]
async fn feedback_changes_confidence_ordering_and_injection() {
    let h = Harness::start_with(learning_llm(|| reflection_reply(&[])).await, |c| {
        c.learning.max_injected = 1
    })
    .await;
    let store = &h.app().store;
    let learning = &h.app().learning;
    learning
        .learn(vec![
            serde_json::from_value(json!({"text": "alpha heuristic first", "skill_name": null}))
                .unwrap(),
            serde_json::from_value(json!({"text": "beta heuristic second", "skill_name": null}))
                .unwrap(),
        ])
        .unwrap();
    h.tg.send_text(ALICE, "one");
    let (message, up, down) = feedback_buttons(&h, ALICE, 1).await;
    assert!(up.starts_with("__act__fb|") && up.len() <= 64);
    let first = h.llm.agent_requests().pop().unwrap();
    assert!(
        user_content(&first).contains("- alpha heuristic first")
            && !user_content(&first).contains("beta")
    );

    let query = h.tg.press(ALICE, ALICE, message, &down);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "Thanks, I will learn from it."
    );
    let alpha = store
        .heuristics()
        .into_iter()
        .find(|x| x.text.starts_with("alpha"))
        .unwrap();
    assert!(
        (alpha.confidence - 0.3).abs() < 1e-6,
        "{}",
        alpha.confidence
    );
    // 👎 starts a reflection with outcome failure.
    let failure =
        h.tg.wait_for(|_| {
            h.llm.reflection_requests().into_iter().find(|r| {
                user_content(r).contains("Outcome: failure (the user rated the answer 👎)")
            })
        })
        .await;
    assert!(user_content(&failure).contains("Task summary: one"));
    // A second vote on the same answer changes nothing.
    let query = h.tg.press(ALICE, ALICE, message, &up);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "You already rated this answer"
    );

    h.tg.send_text(ALICE, "two");
    let (message, up, _) = feedback_buttons(&h, ALICE, 2).await;
    let second = h
        .llm
        .agent_requests()
        .into_iter()
        .find(|r| user_content(r).ends_with("two"))
        .unwrap();
    assert!(
        user_content(&second).contains("- beta heuristic second"),
        "beta now ranks first"
    );
    let query = h.tg.press(ALICE, ALICE, message, &up);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "Thanks!"
    );
    let beta = store
        .heuristics()
        .into_iter()
        .find(|x| x.text.starts_with("beta"))
        .unwrap();
    assert!((beta.confidence - 0.6).abs() < 1e-6);

    // Below the confidence floor a heuristic is no longer injected at all.
    learning.feedback(&[alpha.id], false).unwrap();
    h.tg.send_text(BOB, "three");
    h.tg.wait_messages(BOB, 1).await;
    let third = h
        .llm
        .agent_requests()
        .into_iter()
        .find(|r| user_content(r).ends_with("three"))
        .unwrap();
    assert!(!user_content(&third).contains("alpha"));
    // Feedback from another chat's user on Alice's answer is refused.
    let query = h.tg.press(BOB, BOB, message, &up);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "This option has expired"
    );
    h.stop().await;
}

/// A 👎 forged from another chat on an answer nobody rated yet changes nothing: the answer's own
/// chat can still rate it. The button names an unguessable ticket id.
#[tokio::test]
async fn a_vote_forged_from_another_chat_does_not_use_up_the_vote() {
    let h = Harness::start(learning_llm(|| reflection_reply(&[])).await).await;
    h.tg.send_text(ALICE, "one");
    let (message, up, down) = feedback_buttons(&h, ALICE, 1).await;
    let id = up
        .strip_prefix("__act__fb|")
        .and_then(|rest| rest.strip_suffix(".u"))
        .unwrap();
    assert_eq!(id.len(), heurist::store::TICKET_ID_CHARS, "{up}");
    assert!(down.ends_with(&format!("{id}.d")));

    let query = h.tg.press(BOB, BOB, message, &down);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "This option has expired"
    );
    let query = h.tg.press(ALICE, ALICE, message, &up);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "Thanks!"
    );
    h.stop().await;
}

#[tokio::test]
async fn admins_list_and_forget_heuristics() {
    let h = Harness::start(learning_llm(|| reflection_reply(&[])).await).await;
    h.app()
        .learning
        .learn(vec![
            serde_json::from_value(json!({"text": "cite sources <always>", "skill_name": null}))
                .unwrap(),
        ])
        .unwrap();
    let id = h.app().store.heuristics()[0].id;
    h.tg.send_text(ALICE, "/heuristics");
    assert!(
        h.tg.wait_messages(ALICE, 1).await[0].params["text"]
            .as_str()
            .unwrap()
            .contains("only the bot's admins")
    );
    h.tg.send_text(ADMIN, "/heuristics");
    let sent = h.tg.wait_messages(ADMIN, 1).await;
    let text = sent[0].params["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("#{id} [0.50, 1×] cite sources &lt;always&gt;")),
        "{text}"
    );
    let forget = sent[0].params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(forget, format!("__act__forget|{id}"));
    let message = sent[0].result["message_id"].as_i64().unwrap();

    let query = h.tg.press(ALICE, ALICE, message, &forget);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "Sorry, only the bot's admins can do that."
    );
    assert_eq!(h.app().store.heuristics().len(), 1);
    let query = h.tg.press(ADMIN, ADMIN, message, &forget);
    assert_eq!(
        h.tg.wait_for(|_| answered(&h, &query)).await["text"],
        "Forgotten"
    );
    assert!(h.app().store.heuristics().is_empty());
    h.tg.send_text(ALICE, "anything");
    h.tg.wait_messages(ALICE, 2).await;
    assert!(!user_content(&h.llm.agent_requests()[0]).contains("cite sources"));
    h.stop().await;
}

#[tokio::test]
async fn skills_match_the_right_message_and_carry_their_own_heuristics() {
    let llm = learning_llm(|| {
        reflection_reply(&[(
            "State the UTC offset next to every local time",
            Some("date-time"),
        )])
    })
    .await;
    let h = Harness::start_with(llm, shipped_skills).await;
    struct Case {
        message: &'static str,
        skill: &'static str,
    }
    let cases = [
        Case {
            message: "What time is it in Tokyo right now, which time zone?",
            skill: "date-time",
        },
        Case {
            message: "Summarize this article for me: https://example.com/post",
            skill: "page-summary",
        },
        Case {
            message: "Please proofread my email and fix the grammar",
            skill: "writing-help",
        },
        Case {
            message: "Research on the web which sources say what about Rust",
            skill: "web-research",
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        h.tg.send_text(ALICE, case.message);
        h.tg.wait_messages(ALICE, i + 1).await;
        let request = h
            .llm
            .agent_requests()
            .into_iter()
            .find(|r| user_content(r).ends_with(case.message))
            .unwrap();
        let content = user_content(&request);
        // The right skill ranks first.
        let top = content
            .split("## Skill: ")
            .nth(1)
            .and_then(|rest| rest.split([' ', '\n']).next());
        assert_eq!(top, Some(case.skill), "{}: {content}", case.message);
    }
    // The reflection filed its heuristic under the skill; the next date question gets it in
    // that skill's section, and the skill's instructions are not repeated in the same window.
    h.tg.wait_for(|_| {
        h.app()
            .store
            .heuristics()
            .into_iter()
            .find(|x| x.skill.as_deref() == Some("date-time"))
    })
    .await;
    h.tg.send_text(ALICE, "What is the time in Lima?");
    h.tg.wait_messages(ALICE, 5).await;
    let content = user_content(
        &h.llm
            .agent_requests()
            .into_iter()
            .find(|r| user_content(r).ends_with("Lima?"))
            .unwrap(),
    );
    assert!(content.contains("## Skill: date-time (instructions given earlier)\n## Learned Heuristics\n- State the UTC offset"), "{content}");

    h.tg.send_text(ADMIN, "/skills");
    let skills = h.tg.wait_messages(ADMIN, 1).await[0].params["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(skills.contains("• date-time (2):"), "{skills}");
    h.stop().await;
}

#[tokio::test]
async fn a_broken_skill_is_skipped_and_the_bot_runs() {
    let skills = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        std::fs::create_dir_all(skills.path().join(name)).unwrap();
        std::fs::write(skills.path().join(name).join("SKILL.md"), text).unwrap();
    };
    write(
        "good",
        "---\nname: good\ndescription: Bake sourdough bread\n---\nKnead, rest, bake.",
    );
    write("broken", "---\nname: [broken\n---\nbody");
    write("misnamed", "---\nname: other\ndescription: x\n---\nbody");
    let dir = skills.path().to_path_buf();
    let h = Harness::start_with(learning_llm(|| reflection_reply(&[])).await, move |c| {
        c.learning.skills_dir = dir
    })
    .await;
    h.tg.send_text(ADMIN, "/skills");
    let text = h.tg.wait_messages(ADMIN, 1).await[0].params["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("• good (0): Bake sourdough bread"), "{text}");
    assert!(
        !text.contains("broken") && !text.contains("other"),
        "{text}"
    );
    h.tg.send_text(ALICE, "how do I bake sourdough bread?");
    h.tg.wait_messages(ALICE, 1).await;
    assert!(
        user_content(&h.llm.agent_requests()[0]).contains("## Skill: good\nKnead, rest, bake.")
    );
    h.stop().await;
}

#[tokio::test]
async fn embeddings_find_a_skill_that_shares_no_word_with_the_message() {
    let message = "what does the clock say";
    for embeddings in [false, true] {
        let llm = learning_llm(|| reflection_reply(&[])).await;
        let h = Harness::start_with(llm, move |c| {
            shipped_skills(c);
            c.learning.reflect = false;
            if embeddings {
                c.learning.embedding_model = "fake-embed".into();
            }
        })
        .await;
        h.tg.send_text(ALICE, message);
        h.tg.wait_messages(ALICE, 1).await;
        let content = user_content(&h.llm.agent_requests()[0]);
        assert_eq!(
            content.contains("## Skill: date-time"),
            embeddings,
            "embeddings {embeddings}: {content}"
        );
        h.stop().await;
    }
}

#[tokio::test]
async fn a_reflection_interrupted_by_shutdown_resumes_after_restart() {
    let slow = Arc::new(AtomicBool::new(true));
    let flag = slow.clone();
    let llm = learning_llm(move || {
        let reply = reflection_reply(&[(TIP, None)]);
        if flag.load(Ordering::SeqCst) {
            reply.after(Duration::from_secs(30))
        } else {
            reply
        }
    })
    .await;
    let mut h = Harness::start_with(llm, |c| c.shutdown_grace_secs = 1).await;
    h.tg.send_text(ALICE, "a task worth learning from");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.wait_for(|_| (!h.llm.reflection_requests().is_empty()).then_some(()))
        .await;
    slow.store(false, Ordering::SeqCst);
    h.restart().await;
    let learned = wait_heuristics(&h, 1).await;
    assert_eq!(learned[0].text, TIP);
    // The resumed job is done and gone.
    h.tg.wait_for(|_| h.app().store.pending_reflections().is_empty().then_some(()))
        .await;
    h.stop().await;
}
