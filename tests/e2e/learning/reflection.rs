//! The reflection: what it is shown (evidence, corrections), when it runs (after the answer,
//! resumed after a restart, bounded), and what it may store.

use super::*;

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
    let mut h = Harness::start_with(llm, |c| {
        plumbing(c);
        c.shutdown_grace_secs = 1;
    })
    .await;
    h.tg.send_text(ALICE, "a task worth learning from");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.wait_for(|_| (!h.llm.reflection_requests().is_empty()).then_some(()))
        .await;
    slow.store(false, Ordering::SeqCst);
    h.restart().await;
    let learned = wait_heuristics(&h, 1).await;
    assert_eq!(learned[0].text, TIP);
    // The resumed job is done and gone.
    h.tg.wait_for(|_| {
        h.app()
            .store()
            .learning()
            .pending_reflections()
            .is_empty()
            .then_some(())
    })
    .await;
    h.stop().await;
}

/// The lesson Qwen2.5-Coder-1.5B wrote that would have fixed a tool's argument format held a
/// six-digit identifier in its worked example, and the personal-data filter of the time
/// dropped it. Technical detail is kept now; a phone number and an e-mail address still go.
#[tokio::test]
async fn a_format_rule_with_an_identifier_is_kept_and_personal_data_dropped() {
    const FORMAT_RULE: &str = "When calling ticket_lookup, write the id as ABC- plus six \
                               digits, zero-padded: 4411 becomes ABC-004411";
    let h = Harness::start_with(
        learning_llm(|| {
            reflection_reply(&[
                (FORMAT_RULE, None),
                (
                    "Call the help desk at +1 (555) 123-4567 when a lookup fails",
                    None,
                ),
                ("Send the summary to ops@example.com", None),
            ])
        })
        .await,
        plumbing,
    )
    .await;
    h.tg.send_text(ALICE, "look up ticket 4411");
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.wait_for(|_| (h.llm.reflection_requests().len() == 1).then_some(()))
        .await;
    wait_heuristics(&h, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let learned = stored_texts(&h);
    assert_eq!(learned, [FORMAT_RULE]);
    h.stop().await;
}

/// Follow-ups are bounded: with one reflection at a time and one waiting, a burst of answers
/// while a reflection is slow keeps the running one and the newest; the ones between are
/// dropped and forgotten (their saved jobs removed), and the answers never wait for any.
#[tokio::test]
async fn the_oldest_waiting_reflection_is_dropped_and_forgotten_when_the_queue_is_full() {
    let reflections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = reflections.clone();
    let llm = FakeLlm::start(move |req, _| {
        if is_reflection_request(req) {
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            let delay = Duration::from_millis(if first { 4000 } else { 0 });
            return reflection_reply(&[]).after(delay);
        }
        Reply::text("done")
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.learning.max_concurrent_reflections = 1;
        c.max_queued_follow_ups = 1;
    })
    .await;
    for i in 0..4 {
        h.tg.send_text(ALICE, &format!("task {i}"));
        h.tg.wait_messages(ALICE, i + 1).await;
    }
    h.tg.wait_for(|_| (reflections.load(Ordering::SeqCst) == 1).then_some(()))
        .await;
    // A reflection is queued once its answer is on screen, a moment after the fake saw the
    // send: the last one drops the one before it from the full queue only then.
    let saved = || -> Vec<String> {
        let pending = h.app().learning().pending_reflections();
        pending.into_iter().map(|(_, job)| job.request).collect()
    };
    let settled =
        h.tg.wait_for(|_| {
            let saved = saved();
            (saved.len() <= 2).then_some(saved)
        })
        .await;
    assert_eq!(
        settled,
        ["task 0", "task 3"],
        "the running one and the newest"
    );
    h.tg.wait_for(|_| {
        let learning = h.app().learning();
        learning.pending_reflections().is_empty().then_some(())
    })
    .await;
    let asked: Vec<String> = h
        .llm
        .reflection_requests()
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(asked.len(), 2, "the dropped ones never reached the model");
    assert!(asked[1].contains("task 3"));
    h.stop().await;
}

/// A reflection is shown the evidence of its task: each tool call with its arguments, the
/// error it gave, and the later call to the same tool that worked; and it is asked for
/// concrete "When <situation>, <action>." lessons, or none.
#[tokio::test]
async fn a_reflection_sees_each_failed_call_its_error_and_the_call_that_fixed_it() {
    let page = serve_html("<html><body><p>Opening hours: 9 to 5.</p></body></html>").await;
    let llm = FakeLlm::start(move |req, _| {
        if is_reflection_request(req) {
            return reflection_reply(&[]);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        match crate::support::mcp::tool_results(req).len() {
            0 => Reply::tool_call("c1", "fetch_url", json!({"link": page})),
            1 => Reply::tool_call("c2", "fetch_url", json!({"url": page})),
            _ => Reply::text("Open 9 to 5."),
        }
    })
    .await;
    let h = Harness::start(llm).await;
    h.tg.send_text(ALICE, "when is the shop open?");
    h.tg.wait_messages(ALICE, 1).await;
    let reflection =
        h.tg.wait_for(|_| h.llm.reflection_requests().first().cloned())
            .await;
    let prompt = user_content(&reflection);
    let evidence = prompt
        .lines()
        .find(|l| l.starts_with("1. fetch_url"))
        .unwrap_or_else(|| panic!("no evidence in {prompt}"));
    assert!(evidence.contains(r#"{"link":"#), "{evidence}");
    assert!(evidence.contains("→ failed: fetch_url needs"), "{evidence}");
    assert!(
        evidence.contains(r#"a later call succeeded with {"url":"#),
        "{evidence}"
    );
    assert!(prompt.contains("2. fetch_url {\"url\":"), "{prompt}");
    assert!(
        prompt.contains("\"When <situation>, <action>.\""),
        "{prompt}"
    );
    // The seed prompt stays the prefix of what the reflection asks.
    assert!(
        prompt.starts_with(&heurist::learning::lessons::REFLECTION_EXTRACT_PROMPT_TEMPLATE[..40])
    );
    h.stop().await;
}

/// A message that corrects the answer before it is evidence for its own turn's reflection:
/// the answer and the correction, quoted, with the lesson that would have avoided it asked for;
/// and the lesson it gives is stored. A plain follow-up is no correction.
#[tokio::test]
async fn a_correction_in_the_next_message_is_evidence_for_its_reflection() {
    const CORRECTION: &str = "No, always give temperatures in Celsius";
    const LESSON: &str = "When giving a temperature, give it in degrees Celsius";
    const CORRECTED: &str = "Evidence: the user's message corrects the previous answer";
    let llm = FakeLlm::start(|req, _| {
        let last = last_user_text(req);
        if is_reflection_request(req) {
            let lessons: &[(&str, Option<&str>)] = if last.contains(CORRECTED) {
                &[(LESSON, None)]
            } else {
                &[]
            };
            return reflection_reply(lessons);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        Reply::text(if last.ends_with("Paris?") {
            "It is 68°F in Paris."
        } else if last.ends_with(CORRECTION) {
            "Sorry: it is 20°C in Paris."
        } else {
            "It is 24°C in Rome."
        })
    })
    .await;
    let h = Harness::start(llm).await;
    let reflection_of = |task: &str| {
        let summary = format!("Task summary: {task}\n");
        h.llm
            .reflection_requests()
            .into_iter()
            .map(|r| user_content(&r))
            .find(|prompt| prompt.contains(&summary))
    };
    for (n, text) in ["how warm is it in Paris?", CORRECTION, "and in Rome?"]
        .into_iter()
        .enumerate()
    {
        h.tg.send_text(ALICE, text);
        h.tg.wait_messages(ALICE, n + 1).await;
        h.tg.wait_for(|_| reflection_of(text)).await;
    }

    let corrected = reflection_of(CORRECTION).unwrap();
    assert!(corrected.contains(CORRECTED), "{corrected}");
    assert!(
        corrected.contains("Previous answer: \"It is 68°F in Paris.\"\n"),
        "{corrected}"
    );
    assert!(
        corrected.contains(&format!("The user's correction: \"{CORRECTION}\"\n")),
        "{corrected}"
    );
    assert!(corrected.contains("a lesson that would have avoided this correction"));
    assert!(
        corrected
            .starts_with(&heurist::learning::lessons::REFLECTION_EXTRACT_PROMPT_TEMPLATE[..40])
    );
    for plain in ["how warm is it in Paris?", "and in Rome?"] {
        let prompt = reflection_of(plain).unwrap();
        assert!(!prompt.contains(CORRECTED), "{prompt}");
    }
    let stored = wait_heuristics(&h, 1).await;
    assert_eq!(stored[0].text, LESSON);
    assert_eq!(stored[0].review, ReviewState::Approved, "{stored:?}");
    h.stop().await;
}

/// A turn's reflection is sent only once its answer is on screen, options or not: building
/// and sending its long prompt never competes with the answer's way to the user (with a slow
/// sendMessage, the reflection waits for its reply).
#[tokio::test]
async fn a_reflection_waits_until_its_answer_is_on_screen() {
    for options in [true, false] {
        let h = Harness::start_with(learning_llm(|| reflection_reply(&[])).await, |c| {
            c.options.enabled = options;
        })
        .await;
        h.tg.slow_answer("sendMessage", Duration::from_millis(500));
        h.tg.send_text(ALICE, "what is the time in Tokyo?");
        let sent =
            h.tg.wait_for(|tg| {
                let sends = tg.calls("sendMessage");
                (!h.llm.reflection_requests().is_empty()).then(|| sends.first().map(|c| c.at))?
            })
            .await;
        let requests = h.llm.requests();
        let reflected = requests
            .iter()
            .zip(h.llm.arrivals())
            .find_map(|(r, at)| is_reflection_request(r).then_some(at))
            .unwrap();
        assert!(
            reflected >= sent + Duration::from_millis(500),
            "options {options}: the reflection came {:?} after the answer's send began, before its reply",
            reflected.saturating_duration_since(sent)
        );
        h.stop().await;
    }
}

/// Issue 34's lessons, as the reflection of Qwen2.5-Coder-1.5B wrote them (the stock tool's
/// words put on the desk's ticket tool, which states its rule the same way), at production
/// settings: the two vague ones are refused whatever their wording, and the one that merged
/// the tool's quoted error with advice keeps only its concrete part, the bot's own lesson of
/// that error. A model that never fixed the call teaches nothing but what the tool said.
#[tokio::test]
async fn vague_and_merged_lessons_never_reach_the_store() {
    const VAGUE: [&str; 2] = [
        "When the tool reports an error, change the arguments to ensure the ticket id is \
         correctly formatted.",
        "When the tool fails repeatedly with the same error, consider changing the ticket id \
         or using a different tool.",
    ];
    const MERGED: &str = "When calling desk__ticket: its error said 'unknown ticket id '4411': \
        ticket ids are written TCK- and six digits, zero-padded (this one is TCK-004411)', \
        consider changing the ticket id or using a different tool.";
    // Two tries in the wrong form, then the answer the issue saw.
    let (h, stored) = lessons_after_one_turn(
        "What is the status of support ticket 4411?",
        vec![
            ("desk__ticket", json!({"id": "4411"})),
            ("desk__ticket", json!({"id": "#4411"})),
        ],
        "The tool reported an error.".into(),
        vec![VAGUE[0], VAGUE[1], MERGED],
        1,
    )
    .await;
    assert_eq!(
        stored,
        [
            "When calling desk__ticket: its error said \"unknown ticket id '4411': ticket ids \
             are written TCK- and six digits, zero-padded (this one is TCK-004411)\""
        ],
        "only the concrete part"
    );
    h.stop().await;
}

/// One chat, seed 6 (Qwen2.5-Coder-1.5B, learning on, the benefit benchmark): the stock call
/// with `SKU-0005127` was refused and nothing worked; the reflection's lesson gave that value
/// as "the format" and was stored, grounded by the `SKU-` inside it, and a later answer gave
/// it back. The value that failed grounds nothing: only the bot's own lesson, the tool's
/// words, reaches the store.
#[tokio::test]
async fn a_lesson_that_teaches_the_refused_value_never_reaches_the_store() {
    const TAUGHT_WRONG: &str = "When calling desk__stock_level with a valid SKU, ensure the SKU \
        is in the format 'SKU-0005127'. If the tool reports an error, try using the correct SKU \
        format or contact the support team for help.";
    let (h, stored) = lessons_after_one_turn(
        "Stock level for item 5127, please",
        vec![("desk__stock_level", json!({"sku": "SKU-0005127"}))],
        "I could not read the stock of item 5127.".into(),
        vec![TAUGHT_WRONG],
        1,
    )
    .await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(
        stored[0].starts_with("When calling desk__stock_level: its error said"),
        "{stored:?}"
    );
    assert!(
        !stored.iter().any(|s| s.contains("support team")),
        "{stored:?}"
    );
    h.stop().await;
}

/// One chat, seed 14 (Qwen2.5-Coder-1.5B, learning on, `review = "none"`, the benefit
/// benchmark on c2db0a1): asked to reflect after a refused shipping quote and the call that
/// worked, the model wrote a list, and asked again for JSON put the whole list in one lesson.
/// Stored whole, its one concrete item carried two items of general advice and the line that
/// introduced them. The items are judged one by one: the concrete one is kept, the advice is
/// refused.
#[tokio::test]
async fn a_list_written_as_one_lesson_keeps_only_its_concrete_items() {
    const QWEN: &str = "To extract transferable heuristics for future similar tasks, consider \
        the following:\n1. When a task involves shipping a parcel, ensure the correct weight is \
        used, as whole grams with no unit (e.g., 300 g) is required.\n2. Always check the \
        availability of tools or resources to provide accurate information.\n3. Learn from \
        previous failures and use them to improve future queries.";
    let (h, stored) = lessons_after_one_turn(
        "What does it cost to ship a 1.5 kg parcel?",
        vec![
            ("desk__shipping_quote", json!({"weight": 1.5})),
            ("desk__shipping_quote", json!({"weight": 1500})),
        ],
        format!(
            "Shipping a 1.5 kg parcel costs EUR {}.",
            crate::support::desk::shipping_price(1500)
        ),
        vec![QWEN],
        2,
    )
    .await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(
        stored
            .iter()
            .any(|s| s.starts_with("When calling desk__shipping_quote, write the arguments like")),
        "the bot's own lesson: {stored:?}"
    );
    assert!(
        stored.contains(
            &"When a task involves shipping a parcel, ensure the correct weight is used, as \
              whole grams with no unit (e.g., 300 g) is required."
                .to_string()
        ),
        "the concrete item alone: {stored:?}"
    );
    h.stop().await;
}

/// Alice asks `message` of a bot on the desk whose model makes `calls` one after the other,
/// then answers `answer`, and reflects with `lessons`: the lessons stored once `count` are
/// (and a moment later, for any that would follow).
async fn lessons_after_one_turn(
    message: &str,
    calls: Vec<(&'static str, Value)>,
    answer: String,
    lessons: Vec<&'static str>,
    count: usize,
) -> (Harness, Vec<String>) {
    let desk = crate::support::desk::DeskServer::start().await;
    let llm = FakeLlm::start(move |req, _| {
        if is_reflection_request(req) {
            let entries: Vec<(&str, Option<&str>)> = lessons.iter().map(|l| (*l, None)).collect();
            return reflection_reply(&entries);
        }
        if is_options_request(req) {
            return Reply::text(r#"{"options": []}"#);
        }
        let done = this_turns_results(req).len();
        match calls.get(done) {
            Some((tool, arguments)) => {
                Reply::tool_call(&format!("c{}", done + 1), tool, arguments.clone())
            }
            None => Reply::text(&answer),
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| c.mcp.servers = vec![as_written(&desk)]).await;
    h.tg.send_text(ALICE, message);
    h.tg.wait_messages(ALICE, 1).await;
    h.tg.wait_for(|_| (!h.llm.reflection_requests().is_empty()).then_some(()))
        .await;
    wait_heuristics(&h, count).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stored = stored_texts(&h);
    (h, stored)
}
