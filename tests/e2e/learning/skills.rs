//! Skills: which message each fits, its own lessons, a broken skill skipped, embeddings.

use super::*;

#[tokio::test]
async fn skills_match_the_right_message_and_carry_their_own_heuristics() {
    let llm = learning_llm(|| {
        // Not what the skill says already (that would be an echo, dropped).
        reflection_reply(&[(
            "Name the city's IANA zone id (like Asia/Tokyo) next to its local time",
            Some("date-time"),
        )])
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        plumbing(c);
        shipped_skills(c);
    })
    .await;
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
            .store()
            .learning()
            .lessons()
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
    assert!(
        content.contains("## Skill: date-time (instructions given earlier)\n"),
        "{content}"
    );
    assert_eq!(
        injected(&request_ending(&h, "Lima?")),
        ["Name the city's IANA zone id (like Asia/Tokyo) next to its local time"],
        "a heuristic of a matched skill fits its messages"
    );

    h.tg.send_text(ADMIN, "/skills");
    let skills = h.tg.wait_messages(ADMIN, 1).await[0].params["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(skills.contains("• <b>date-time</b> (2×):"), "{skills}");
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
    assert!(
        text.contains("• <b>good</b> (0×): Bake sourdough bread"),
        "{text}"
    );
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

/// A word shared in passing injects no skill: a real run gave a stock question the date-time
/// skill because its body says "how many days until"; "how many" is no evidence of a date.
#[tokio::test]
async fn a_skill_is_injected_only_into_the_messages_it_fits() {
    let llm = learning_llm(|| reflection_reply(&[])).await;
    let h = Harness::start_with(llm, |c| {
        shipped_skills(c);
        c.learning.reflect = false;
    })
    .await;
    let stock = "How many units of SKU-4411 are in stock?";
    let days = "How many days until New Year?";
    for (i, message) in [stock, days].into_iter().enumerate() {
        h.tg.send_text(ALICE, message);
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    assert_eq!(
        user_content(&request_ending(&h, stock)),
        stock,
        "no skill (and no context block) for the stock question"
    );
    let content = user_content(&request_ending(&h, days));
    assert!(content.contains("## Skill: date-time\n"), "{content}");
    assert_eq!(content.matches("## Skill: ").count(), 1, "{content}");

    h.tg.send_text(ADMIN, "/skills");
    let skills = h.tg.wait_messages(ADMIN, 1).await[0].params["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(skills.contains("• <b>date-time</b> (1×):"), "{skills}");
    h.stop().await;
}

/// A lesson is filed under a skill only when that skill was matched in its turn or the lesson
/// itself fits the skill best; Qwen2.5-Coder-1.5B filed a ticket-format lesson under
/// `writing-help`, where no ticket task would ever find it.
#[tokio::test]
async fn a_lesson_is_filed_under_a_skill_only_where_it_fits() {
    const TICKETS: &str = "When calling ticket_lookup, write the id as ABC- plus six digits";
    const ZONES: &str = "Convert to the user's time zone with its DST offset, not a fixed one";
    let mut h = Harness::start_with(
        learning_llm(|| {
            reflection_reply(&[(TICKETS, Some("writing-help")), (ZONES, Some("date-time"))])
        })
        .await,
        |c| {
            plumbing(c);
            shipped_skills(c);
        },
    )
    .await;
    // A ticket question matches neither skill; the zone lesson fits date-time on its own.
    h.tg.send_text(ALICE, "look up ticket 4411");
    h.tg.wait_messages(ALICE, 1).await;
    wait_heuristics(&h, 2).await;
    assert_eq!(by_text(&h, "When calling ticket_lookup").skill, None);
    assert_eq!(
        by_text(&h, "Convert to the user's").skill.as_deref(),
        Some("date-time")
    );
    h.stop().await;

    // Matched in the turn: filed there, whatever its words.
    h = Harness::start_with(
        learning_llm(|| reflection_reply(&[(TICKETS, Some("writing-help"))])).await,
        |c| {
            plumbing(c);
            shipped_skills(c);
        },
    )
    .await;
    h.tg.send_text(
        ALICE,
        "please proofread and edit my essay draft for grammar",
    );
    h.tg.wait_messages(ALICE, 1).await;
    wait_heuristics(&h, 1).await;
    assert_eq!(
        by_text(&h, "When calling ticket_lookup").skill.as_deref(),
        Some("writing-help")
    );
    h.stop().await;
}
