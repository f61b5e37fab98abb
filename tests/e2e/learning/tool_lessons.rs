//! Lessons about a tool: tied to it, shown beside its failed calls, on probation until a call
//! made with them works, and reaching another user's similar task.

use super::*;

/// A lesson about a tool, learned from one user's task (the reflection names the tool), is
/// shown to another user's turn just when its call to that tool fails: in the failed result,
/// once per turn, so even a weak model sees it when it matters, and the prompt's prefix is
/// unchanged. A lesson naming a tool its task never called is tied to no tool.
#[tokio::test]
async fn a_tool_lesson_is_shown_with_that_tools_failed_call() {
    const LESSON: &str = "When calling probe__fail, pass the id as ABC- plus six digits";
    let llm = FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return reflection_reply(&[
                (LESSON, None),
                ("When calling probe__echo, quote the text in UTF-8", None),
            ]);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let results = crate::support::mcp::tool_results(req);
        let this_turn = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .take_while(|m| m["role"] != "user")
            .filter(|m| m["role"] == "tool")
            .count();
        match this_turn {
            0 => Reply::tool_call(
                &format!("c{}", results.len()),
                "probe__fail",
                json!({"id": "4411"}),
            ),
            1 if last_user_text(req).contains("again") => {
                Reply::tool_call("c9", "probe__fail", json!({"id": "4412"}))
            }
            _ => Reply::text("done"),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        plumbing(c);
        c.mcp.servers = vec![crate::support::mcp::stdio_server("probe")];
    })
    .await;
    // Alice's task fails on the tool; its reflection teaches the lesson, tied to the tool.
    h.tg.send_text(ALICE, "look up ticket 4411");
    h.tg.wait_messages(ALICE, 1).await;
    wait_heuristics(&h, 2).await;
    assert_eq!(
        by_text(&h, "When calling probe__fail").tool.as_deref(),
        Some("probe__fail")
    );
    // A lesson naming a tool its task did not call is tied to none.
    assert_eq!(by_text(&h, "When calling probe__echo").tool, None);
    // The task read an MCP server's words: its lessons wait for an admin.
    assert_eq!(
        by_text(&h, "When calling probe__fail").review,
        ReviewState::Pending
    );
    for heuristic in h.app().store().learning().lessons() {
        assert!(h.app().learning().approve(heuristic.id).unwrap());
    }

    // Bob's turn calls the tool and it fails: the failed result carries the lesson, once.
    h.tg.send_text(BOB, "check ticket 77 and then again");
    h.tg.wait_messages(BOB, 1).await;
    let requests = h.llm.agent_requests();
    let last = requests
        .iter()
        .rev()
        .find(|r| last_user_text(r).contains("check ticket 77"))
        .unwrap();
    let results = crate::support::mcp::tool_results(last);
    let (first, second) = (&results[results.len() - 2], &results[results.len() - 1]);
    assert!(first.starts_with("error: "), "{first}");
    // Beside the model's lesson, the one the bot read from the tool's refusal itself.
    assert!(
        first.contains("Learned about this tool from earlier tasks:\n- "),
        "{first}"
    );
    assert!(first.contains(&format!("\n- {LESSON}")), "{first}");
    assert!(
        first.contains("- When calling probe__fail: its error said \"the disk is on fire\""),
        "{first}"
    );
    assert!(!first.contains("probe__echo"), "{first}");
    // Once per turn: the second failure carries only its error.
    assert!(
        second.starts_with("error: ") && !second.contains("Learned"),
        "{second}"
    );
    // The request before the failure is the prefix of the one after it.
    let before = requests
        .iter()
        .find(|r| last_user_text(r).contains("check ticket 77"))
        .unwrap();
    let n = before["messages"].as_array().unwrap().len();
    assert_eq!(
        before["messages"].as_array().unwrap()[..],
        last["messages"].as_array().unwrap()[..n]
    );
    h.stop().await;
}

/// The issue's run with Qwen2.5-Coder-1.5B, as fixtures: a ticket tool whose id has a house
/// format only its error tells. Alice's task fails, then works with the id the error gave;
/// the reflection sees the failed call, its error and the call that fixed it, and writes the
/// precise lesson (with a six-digit example, which the personal-data filter once dropped)
/// beside two vague ones (the model's own words). Only the precise one is stored, tied to the
/// tool. Bob's later task about a ticket gets it, although the two share no word: the tool is
/// offered and the message fits the tool's description.
#[tokio::test]
async fn a_lesson_from_a_tool_error_and_its_fix_reaches_another_users_similar_task() {
    const PRECISE: &str = "When calling the ticket tool, write the id as TCK- and six digits, \
                           zero-padded: 4411 is TCK-004411";
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return reflection_reply(&[
                (PRECISE, None),
                (
                    "Use the correct tool: ensure you are using the correct tool to check the \
                     status of the ticket",
                    None,
                ),
                ("Verify the ticket id is correct", None),
            ]);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let results = this_turns_results(req);
        let asked = last_user_text(req);
        match results.len() {
            // Alice's turn: the bare number first, then the id the error gave.
            0 if asked.ends_with("ticket 4411?") => {
                Reply::tool_call("c1", "desk__ticket", json!({"id": "4411"}))
            }
            1 if asked.ends_with("ticket 4411?") => {
                Reply::tool_call("c2", "desk__ticket", json!({"id": "TCK-004411"}))
            }
            0 if asked.ends_with("case 77?") => {
                Reply::tool_call("c3", "desk__ticket", json!({"id": "TCK-000077"}))
            }
            _ => Reply::text("It is waiting for a team."),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.mcp.servers = vec![desk.entry()];
    })
    .await;
    h.tg.send_text(ALICE, "What is the status of support ticket 4411?");
    h.tg.wait_messages(ALICE, 1).await;
    let reflection =
        h.tg.wait_for(|_| h.llm.reflection_requests().first().cloned())
            .await;
    let prompt = user_content(&reflection);
    assert!(
        prompt.contains("TCK- and six digits, zero-padded (this one is TCK-004411)"),
        "{prompt}"
    );
    assert!(
        prompt.contains(r#"a later call succeeded with {"id":"TCK-004411"}"#),
        "{prompt}"
    );
    // Beside the model's precise lesson, the one the calls prove by themselves.
    const PROVEN: &str = r#"When calling desk__ticket, write the arguments like {"id":"TCK-004411"}, not like {"id":"4411"}: the tool refused that ("unknown ticket id '4411': ticket ids are written TCK- and six digits, zero-padded (this one is TCK-004411)") and took this."#;
    let learned = wait_heuristics(&h, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        stored_texts(&h),
        [PROVEN, PRECISE],
        "the vague lessons are not stored"
    );
    for lesson in &learned {
        assert_eq!(lesson.tool.as_deref(), Some("desk__ticket"));
        // The desk is an MCP server: its words are a third party's, so an admin approves.
        assert_eq!(lesson.review, ReviewState::Pending);
        assert!(h.app().learning().approve(lesson.id).unwrap());
    }

    // Bob's message shares no word with the lessons; it fits the tool ("support", "status").
    let block = ask(&h, BOB, 1, "What's the status of support case 77?").await;
    assert_eq!(block.len(), 2, "{block:?}");
    assert!(block.contains(&PRECISE.to_string()) && block.contains(&PROVEN.to_string()));
    // A message that fits neither the lesson nor a tool gets nothing.
    let block = ask(&h, BOB, 2, "A haiku about autumn leaves, please").await;
    assert!(block.is_empty(), "{block:?}");
    assert_eq!(desk.calls().len(), 3, "{:?}", desk.calls());
    h.stop().await;
}

/// The desk's house forms, which the tests and the benefit benchmark check calls against.
#[test]
fn the_desks_house_forms() {
    use crate::support::desk::*;
    assert_eq!(ticket_id("4411"), "TCK-004411");
    assert_eq!(ticket_id("#98"), "TCK-000098");
    assert!(is_ticket_id("TCK-004411") && !is_ticket_id("TCK-4411"));
    assert_eq!(house_date("2026-12-14").as_deref(), Some("14.12.2026"));
    assert!(is_house_date("14.12.2026") && !is_house_date("14/12/2026"));
    assert_eq!(house_sku("item 982"), "SKU-000982");
    assert!(is_house_sku("SKU-009822") && !is_house_sku("SKU-0015") && !is_house_sku("982"));
    assert_eq!(whole_grams("2500"), Some(2500));
    assert!(whole_grams("2.5").is_none() && whole_grams("2500 g").is_none());
    assert_eq!(shipping_price(2500), "4.65");
}

/// A lesson read off a failed-then-fixed call is on probation, with `review = "none"` too: it
/// is never in a prompt's context block, only beside its tool's failed result, until the next
/// call made with it in view works; then it is proven, and the block carries it.
#[tokio::test]
async fn a_lesson_on_probation_is_shown_only_beside_a_failure_until_it_works() {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = padding_after_a_refusal().await;
    let h = alices_ticket_turn(llm, &desk).await;
    let learned = wait_heuristics(&h, 1).await;
    assert!(learned[0].probation, "{learned:?}");
    assert_eq!(learned[0].review, ReviewState::Approved);
    // An admin sees it waiting, with ✅ Approve to promote it.
    h.tg.send_text(ADMIN, "/heuristics");
    let list = h.tg.wait_messages(ADMIN, 1).await;
    let approve = format!("__act__approve|{}.", learned[0].id);
    assert!(
        list[0].buttons().iter().any(|b| b.starts_with(&approve)),
        "{:?}",
        list[0].buttons()
    );

    // Bob's question fits the lesson, but a lesson on probation is not in the block: only
    // beside the failed call, whose next call then works.
    let results = bobs_ticket_77(&h).await;
    assert!(
        results[0].contains("Learned about this tool from earlier tasks"),
        "{results:?}"
    );
    let lesson = by_text(&h, "When calling desk__ticket");
    assert!(
        !lesson.probation,
        "promoted by the call that worked: {lesson:?}"
    );
    assert_eq!(lesson.successes, 1, "{lesson:?}");

    // Proven, it reaches the block of the next similar question.
    let block = ask(&h, BOB, 2, "What's the status of support ticket 78?").await;
    assert_eq!(block.len(), 1, "{block:?}");
    h.stop().await;
}

/// A lesson the model drew from a tool's refusal without naming the tool (Qwen2.5-Coder-1.5B,
/// the benefit benchmark, fresh chats, seed 14: "check the weight of the item first …") is
/// about the turn's one tool and on probation like the bot's own: never in the context block
/// of a later question until a call made with it in view works. One that names another tool
/// waits for an admin's review.
#[tokio::test]
async fn a_lesson_from_a_refusal_that_names_no_tool_is_on_probation_too() {
    const LESSON: &str = "When an id cannot be found, write it as TCK-004411 with six digits.";
    // Names a tool the turn did not call: tied to none, it could never leave probation.
    const UNTIED: &str = "When calling crm__lookup, pass TCK-004411 as the id.";
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return reflection_reply(&[(LESSON, None), (UNTIED, None)]);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let results = this_turns_results(req);
        match results.len() {
            0 => Reply::tool_call("c1", "desk__ticket", json!({ "id": "4411" })),
            1 if results[0].starts_with("error") => {
                Reply::tool_call("c2", "desk__ticket", json!({ "id": "TCK-004411" }))
            }
            _ => Reply::text("It is waiting for a team."),
        }
    })
    .await;
    let h = alices_ticket_turn(llm, &desk).await;
    wait_heuristics(&h, 3).await;
    let untied = by_text(&h, "When calling crm__lookup");
    assert_eq!(untied.tool, None, "{untied:?}");
    assert!(!untied.probation, "{untied:?}");
    assert_eq!(untied.review, ReviewState::Pending, "waits for an admin");
    let lesson = by_text(&h, "When an id cannot be found");
    assert!(lesson.probation, "{lesson:?}");
    assert_eq!(lesson.tool.as_deref(), Some("desk__ticket"), "{lesson:?}");
    assert_eq!(lesson.review, ReviewState::Approved);
    let block = ask(
        &h,
        BOB,
        1,
        "Which id should I write when one cannot be found?",
    )
    .await;
    assert!(
        block.iter().all(|l| !l.contains("cannot be found")),
        "{block:?}"
    );
    h.stop().await;
}

/// A model that asks for a ticket by the question's bare number first, and after a refusal
/// by the id the error (or a lesson beside it) gives: `TCK-` and six digits. It reflects
/// nothing, so the only lesson is the bot's own, read off the calls.
async fn padding_after_a_refusal() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_reflection_request(req) {
            return reflection_reply(&[]);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let results = this_turns_results(req);
        let asked = last_user_text(req);
        let number = asked
            .split(|c: char| !c.is_ascii_digit())
            .rfind(|w| !w.is_empty())
            .unwrap_or("0")
            .to_string();
        match results.len() {
            0 => Reply::tool_call("c1", "desk__ticket", json!({ "id": number })),
            1 if results[0].starts_with("error") => Reply::tool_call(
                "c2",
                "desk__ticket",
                json!({ "id": format!("TCK-{:0>6}", number) }),
            ),
            _ => Reply::text("It is waiting for a team."),
        }
    })
    .await
}

/// A lesson on probation is unproven, and a file does not prove it: `heurist heuristics
/// export` leaves it out (and says so), `--include-pending` writes it marked, and an import,
/// trusted or not, keeps it on probation, so the other deployment's context block does not
/// carry it until a call made with it in view works there; a line that repeats it reinforces
/// nothing. Before, the file said `Approved` and a trusted import cleared probation.
#[tokio::test]
async fn a_lesson_on_probation_stays_on_probation_through_a_file() {
    let desk = crate::support::desk::DeskServer::start().await;
    let mut here = alices_ticket_turn(padding_after_a_refusal().await, &desk).await;
    let learned = wait_heuristics(&here, 1).await;
    assert!(learned[0].probation, "{learned:?}");
    assert_eq!(learned[0].review, ReviewState::Approved);
    let text = learned[0].text.clone();
    // Stopped, as an export wants it; the harness keeps the data directory.
    here.bot.take().unwrap().stop().await;

    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("lessons.jsonl");
    let said = heurist::ops::lessons::export(&here.config, &file, false).unwrap();
    assert!(
        said.starts_with("exported 0 lessons") && said.contains("1 pending or on probation"),
        "{said}"
    );
    let said = heurist::ops::lessons::export(&here.config, &file, true).unwrap();
    assert!(said.starts_with("exported 1 lessons"), "{said}");
    let line = std::fs::read_to_string(&file).unwrap();
    assert!(line.contains(r#""probation":true"#), "{line}");

    // Not trusted: pending, and still on probation once an admin's ✅ is the only way on.
    let untrusted = config(&here.tg, &here.llm.url, &root.path().join("untrusted"));
    let imported = heurist::ops::lessons::import(&untrusted, &file, false)
        .await
        .unwrap();
    assert_eq!(
        (imported.report.pending, imported.report.on_probation),
        (1, 0)
    );
    let (store, _) = heurist::store::Store::open_data_dir(
        &untrusted.data_dir,
        1 << 20,
        heurist::store::compaction::CompactionPolicy::NEVER,
    )
    .unwrap();
    let lessons = store.learning().lessons();
    assert!(lessons[0].probation && lessons[0].review == ReviewState::Pending);
    drop(store);

    // Trusted: approved, on probation, and said so.
    let there = tempfile::tempdir().unwrap();
    let mut h = Harness::start_with(padding_after_a_refusal().await, |c| {
        c.data_dir = there.path().to_path_buf();
        c.mcp.servers = vec![as_written(&desk)];
        c.learning.review = heurist::config::Review::None;
    })
    .await;
    // A running bot holds the store's lock: stop, import, start again.
    h.bot.take().unwrap().stop().await;
    let imported = heurist::ops::lessons::import(&h.config, &file, true)
        .await
        .unwrap();
    assert_eq!(
        (imported.report.added, imported.report.on_probation),
        (1, 1)
    );
    assert!(imported.render().contains("1 on probation"), "{imported:?}");
    let again = heurist::ops::lessons::import(&h.config, &file, true)
        .await
        .unwrap();
    assert_eq!(again.report.merged, 1);
    h.start_again().await;
    let lesson = by_text(&h, &text);
    assert!(lesson.probation, "{lesson:?}");
    assert_eq!(lesson.review, ReviewState::Approved, "trusted");
    assert_eq!(
        lesson.uses, learned[0].uses,
        "an unproven line vouches for nothing"
    );

    // Bob's question fits it, but it is not in the block: only beside the failed call, whose
    // next call then works and proves it here; then the block carries it.
    let results = bobs_ticket_77(&h).await;
    assert!(results[0].contains(&text), "{results:?}");
    let lesson = h
        .app()
        .store()
        .learning()
        .lessons()
        .into_iter()
        .find(|l| l.id == lesson.id);
    assert!(
        !lesson.unwrap().probation,
        "promoted by the call that worked"
    );
    let block = ask(&h, BOB, 2, "What's the status of support ticket 78?").await;
    assert!(block.iter().any(|l| l.contains(&text)), "{block:?}");
    h.stop().await;
}

/// Bob asks about ticket 77 (his first message); asserts that the prompt carried no lesson
/// in its context block, and returns the turn's tool results.
async fn bobs_ticket_77(h: &Harness) -> Vec<String> {
    let block = ask(h, BOB, 1, "What's the status of support ticket 77?").await;
    assert!(block.is_empty(), "{block:?}");
    let bobs = h
        .llm
        .agent_requests()
        .into_iter()
        .rfind(|r| last_user_text(r).contains("ticket 77"))
        .unwrap();
    crate::support::mcp::tool_results(&bobs)
}

/// Starts the bot on `desk` with `review = "none"`, and waits for its answer to Alice's
/// question about ticket 4411 (the desk refuses the bare id).
async fn alices_ticket_turn(llm: FakeLlm, desk: &crate::support::desk::DeskServer) -> Harness {
    let h = Harness::start_with(llm, |c| {
        c.mcp.servers = vec![as_written(desk)];
        c.learning.review = heurist::config::Review::None;
    })
    .await;
    h.tg.send_text(ALICE, "What is the status of support ticket 4411?");
    h.tg.wait_messages(ALICE, 1).await;
    h
}
