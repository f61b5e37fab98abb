//! Scheduled tasks: the model schedules them through `schedule_task`, and at their time they
//! run in the chat and topic they were made in, through the same gate and queue as a typed
//! message: once, late after downtime, never twice across `kill -9`, never for a user no longer
//! allowed; `/tasks` lists them and ❌ Cancel stops them.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Value, json};

use crate::support::telegram::{BOT_USERNAME, Call};
use crate::support::*;

const FORUM: i64 = -100_888;
const TOPIC: i64 = 31;

/// A model that schedules what the user's message asks: a message that is the JSON of the
/// tool's arguments, with `in_secs` in place of `when` (the time that many seconds from now, in
/// UTC, the zone of these bots). A task's run is answered with "done: <its request line>".
async fn scheduling_llm() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        let messages = req["messages"].as_array().unwrap();
        if messages.last().is_some_and(|m| m["role"] == "tool") {
            let result = messages.last().unwrap()["content"].as_str().unwrap_or("");
            return Reply::text(&format!("tool said: {result}"));
        }
        let text = last_user_text(req);
        if let Some(request) = text.lines().find_map(|l| l.strip_prefix("Request: ")) {
            return Reply::text(&format!("done: {request}"));
        }
        let Some(json_at) = text.find('{') else {
            return Reply::text("nothing to schedule");
        };
        let mut args: Value = serde_json::from_str(&text[json_at..]).unwrap();
        if let Some(secs) = args["in_secs"].as_i64() {
            // In the user's zone when the message names it, else in UTC.
            let zone: chrono_tz::Tz = args["tz"].as_str().unwrap_or("UTC").parse().unwrap();
            let when = (Utc::now() + chrono::Duration::seconds(secs)).with_timezone(&zone);
            args["when"] = json!(when.format("%Y-%m-%d %H:%M:%S").to_string());
            let args = args.as_object_mut().unwrap();
            args.remove("in_secs");
            args.remove("tz");
        }
        Reply::tool_call("call_1", "schedule_task", args)
    })
    .await
}

fn quiet(c: &mut heurist::Config) {
    c.options.enabled = false;
    c.learning.reflect = false;
    c.learning.feedback_buttons = false;
    c.agent.time_zone = "UTC".into();
}

/// The messages sent to `chat` whose text starts with `start`.
fn starting(tg: &FakeTelegram, chat: i64, start: &str) -> Vec<Call> {
    tg.messages_to(chat)
        .into_iter()
        .filter(|c| c.text().starts_with(start))
        .collect()
}

/// Waits (at most `limit`) until `chat` got `count` messages starting with `start`.
async fn wait_starting(
    tg: &FakeTelegram,
    chat: i64,
    start: &str,
    count: usize,
    limit: Duration,
) -> Vec<Call> {
    let until = Instant::now() + limit;
    loop {
        let sent = starting(tg, chat, start);
        if sent.len() >= count {
            return sent;
        }
        assert!(
            Instant::now() < until,
            "{chat} got {} of {count} messages starting {start:?}: {:#?}",
            sent.len(),
            tg.messages_to(chat)
                .iter()
                .map(Call::text)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Moves `h`'s clock `by` forward and waits until the scheduler has looked at every task as
/// of then, and until what it fired has been shown (the chats idle again): whatever was due
/// by then has run or been skipped, in moments instead of a sleep through the task's time.
async fn pass(h: &Harness, by: Duration) {
    h.clock.advance(by);
    h.clock.scheduler_caught_up().await;
    h.settled().await;
}

/// Sends `ask` (the fake model's `schedule_task` arguments) to `chat` and waits until the
/// tool's answer starting with `said` comes back.
async fn schedule(tg: &FakeTelegram, chat: i64, ask: &Value, said: &str) -> Vec<Call> {
    tg.send_text(chat, &ask.to_string());
    wait_starting(tg, chat, said, 1, Duration::from_secs(10)).await
}

#[tokio::test]
async fn a_reminder_set_through_the_tool_fires_at_its_time_in_its_chat_and_topic() {
    let h = Harness::start_with(scheduling_llm().await, quiet).await;
    let ask = json!({"request": "stretch your legs", "kind": "reminder", "in_secs": 4});
    let set_at = Instant::now();
    h.tg.send_in_topic(FORUM, TOPIC, ALICE, &format!("@{BOT_USERNAME} {ask}"));
    // In a group other members' words are in the window: the reminder waits for Alice's ✅,
    // asked in the topic.
    let asked = wait_starting(&h.tg, FORUM, "⚠️ Confirm", 1, Duration::from_secs(10)).await;
    assert_eq!(asked[0].params["message_thread_id"], json!(TOPIC));
    let yes = asked[0]
        .buttons()
        .into_iter()
        .find(|b| b.ends_with(".y"))
        .unwrap();
    let message = asked[0].result["message_id"].as_i64().unwrap();
    h.tg.press(ALICE, FORUM, message, &yes);
    h.tg.wait_for(|tg| {
        tg.screen(FORUM)
            .iter()
            .any(|text| text.contains("Scheduled (see /tasks)"))
            .then_some(())
    })
    .await;

    let fired = wait_starting(
        &h.tg,
        FORUM,
        "⏰ Reminder: stretch your legs",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert!(
        set_at.elapsed() >= Duration::from_secs(1),
        "not before its time"
    );
    assert_eq!(
        fired[0].params["message_thread_id"],
        json!(TOPIC),
        "in its topic"
    );
    assert!(h.tg.messages_to(ALICE).is_empty(), "nowhere else");
    // A reminder is sent as it is: no model call for it.
    let reminded = h
        .llm
        .agent_requests()
        .iter()
        .filter(|r| last_user_text(r).contains("Reminder"))
        .count();
    assert_eq!(reminded, 0);
    pass(&h, Duration::from_secs(2)).await;
    assert_eq!(starting(&h.tg, FORUM, "⏰ Reminder").len(), 1, "once");
    assert!(
        h.app().store().tasks().all().is_empty(),
        "a once-task is done"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_repeating_task_fires_on_schedule_until_cancelled_from_tasks() {
    let h = Harness::start_with(scheduling_llm().await, |c| {
        quiet(c);
        c.tasks.min_interval_secs = Some(1);
    })
    .await;
    let ask = json!({"request": "ping", "kind": "reminder", "cron": "*/2 * * * * *"});
    schedule(
        &h.tg,
        ALICE,
        &ask,
        "tool said: Scheduled a repeating reminder",
    )
    .await;
    let first = wait_starting(
        &h.tg,
        ALICE,
        "⏰ Reminder: ping",
        2,
        Duration::from_secs(10),
    )
    .await;
    let gap = first[1].at - first[0].at;
    assert!(gap >= Duration::from_millis(1500), "every 2 s: {gap:?}");

    h.tg.send_text(ALICE, "/tasks");
    let list = wait_starting(
        &h.tg,
        ALICE,
        "<b>Your scheduled tasks</b>",
        1,
        Duration::from_secs(10),
    )
    .await;
    let list = &list[0];
    assert!(list.text().contains("ping"), "{}", list.text());
    let cancel = list
        .buttons()
        .into_iter()
        .find(|d| d.contains("untask"))
        .expect("a ❌ Cancel");
    assert!(cancel.len() <= 64);
    let message = list.result["message_id"].as_i64().unwrap();

    // Someone else's press is refused on the server, whatever the data says.
    h.tg.press(BOB, ALICE, message, &cancel);
    h.tg.wait_for(|t| {
        t.calls("answerCallbackQuery")
            .iter()
            .any(|c| {
                c.params["text"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("Only the one"))
            })
            .then_some(())
    })
    .await;
    assert_eq!(h.app().store().tasks().all().len(), 1, "still there");

    h.tg.press(ALICE, ALICE, message, &cancel);
    h.tg.wait_for(|t| {
        t.calls("answerCallbackQuery")
            .iter()
            .any(|c| c.params["text"] == "Cancelled.")
            .then_some(())
    })
    .await;
    assert!(h.app().store().tasks().all().is_empty());
    // The list is edited to show none left.
    h.tg.wait_for(|t| {
        t.calls("editMessageText")
            .iter()
            .any(|c| c.text().starts_with("You have no scheduled tasks"))
            .then_some(())
    })
    .await;
    // A run fired just before the press may still be on its way.
    h.settled().await;
    let runs = starting(&h.tg, ALICE, "⏰ Reminder: ping").len();
    pass(&h, Duration::from_secs(5)).await;
    assert_eq!(
        starting(&h.tg, ALICE, "⏰ Reminder: ping").len(),
        runs,
        "no run after the cancel"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_task_missed_while_the_bot_was_down_runs_once_after_the_restart_marked_late() {
    let mut h = Harness::start_with(scheduling_llm().await, quiet).await;
    let ask = json!({"request": "summarise the news", "kind": "task", "in_secs": 2});
    schedule(&h.tg, ALICE, &ask, "tool said: Scheduled a task").await;
    h.bot.take().unwrap().stop().await;
    // Down past the task's time.
    h.clock.advance(Duration::from_secs(4));
    assert!(starting(&h.tg, ALICE, "done:").is_empty(), "not while down");

    h.start_again().await;
    let done = wait_starting(
        &h.tg,
        ALICE,
        "done: summarise the news",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(done.len(), 1);
    let runs: Vec<Value> = h
        .llm
        .agent_requests()
        .into_iter()
        .filter(|r| last_user_text(r).contains("Scheduled task"))
        .collect();
    assert_eq!(runs.len(), 1, "it ran once");
    assert!(
        last_user_text(&runs[0]).contains("It runs late"),
        "{}",
        last_user_text(&runs[0])
    );
    pass(&h, Duration::from_secs(2)).await;
    assert_eq!(
        starting(&h.tg, ALICE, "done:").len(),
        1,
        "once, and only once"
    );
    assert!(h.app().store().tasks().all().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_task_of_a_user_no_longer_allowed_does_not_run() {
    let mut h = Harness::start_with(scheduling_llm().await, quiet).await;
    let ask = json!({"request": "call mum", "kind": "reminder", "in_secs": 3});
    schedule(&h.tg, BOB, &ask, "tool said: Scheduled a reminder").await;
    // The operator takes Bob off the allow-list and restarts the bot.
    h.bot.take().unwrap().stop().await;
    h.config.access.allowed_users.retain(|u| u.0 != BOB as u64);
    h.start_again().await;
    pass(&h, Duration::from_secs(5)).await;
    assert!(starting(&h.tg, BOB, "⏰").is_empty(), "no reminder for Bob");
    assert!(
        h.app().store().tasks().all().is_empty(),
        "the run was spent, not kept"
    );
    h.stop().await;
}

#[tokio::test]
async fn timezone_is_kept_per_user_and_reminder_times_are_read_in_it() {
    let h = Harness::start_with(scheduling_llm().await, quiet).await;
    let replies = |h: &Harness| {
        h.tg.messages_to(ALICE)
            .iter()
            .map(Call::text)
            .collect::<Vec<_>>()
    };
    for (n, (command, reply)) in [
        (
            "/timezone",
            "You have not set a time zone, so I use the bot's: UTC",
        ),
        (
            "/timezone Mars/Base",
            "\"Mars/Base\" is not a time zone I know",
        ),
        ("/timezone Asia/Tokyo", "Your time zone is now Asia/Tokyo"),
        ("/timezone", "Your time zone is Asia/Tokyo"),
    ]
    .into_iter()
    .enumerate()
    {
        h.tg.send_text(ALICE, command);
        h.tg.wait_messages(ALICE, n + 1).await;
        let last = replies(&h).pop().unwrap();
        assert!(last.starts_with(reply), "{command}: {last}");
    }
    assert!(replies(&h)[0].ends_with("e.g. /timezone Europe/Berlin."));
    // Two seconds from now in Tokyo, nine hours ahead of UTC: due in two seconds, not nine hours.
    let ask = json!({"request": "tea", "kind": "reminder", "in_secs": 2, "tz": "Asia/Tokyo"});
    let scheduled = schedule(&h.tg, ALICE, &ask, "tool said: Scheduled").await;
    assert!(
        scheduled[0].text().contains("(Asia/Tokyo)"),
        "{}",
        scheduled[0].text()
    );
    wait_starting(&h.tg, ALICE, "⏰ Reminder: tea", 1, Duration::from_secs(10)).await;
    // Bob's zone is his own: still the bot's.
    h.tg.send_text(BOB, "/timezone");
    let bob = h.tg.wait_messages(BOB, 1).await;
    assert!(
        bob[0].text().contains("the bot's: UTC"),
        "{}",
        bob[0].text()
    );
    h.stop().await;
}

/// `kill -9` around the moment a reminder fires, at several offsets: each run happens once,
/// its reminder shown at most once (never lost: if the crash came between its send and its
/// record, the restart notice says so, as for any answer).
#[tokio::test]
async fn kill_9_at_the_firing_moment_runs_a_task_exactly_once() {
    const FIRST: i64 = 7000;
    let offsets_ms: [i64; 5] = [-40, 0, 15, 40, 120];
    let users: Vec<String> = (FIRST..FIRST + offsets_ms.len() as i64)
        .map(|u| u.to_string())
        .collect();
    let users = users.join(",");
    let toml = "[llm]\nretry_base_ms = 20\n[learning]\nskills_dir = \"/nonexistent\"\nreflect = false\n\
        feedback_buttons = false\n[options]\nenabled = false\n[agent]\ntime_zone = \"UTC\"\n\
        [telegram]\npoll_timeout_secs = 1\nstreaming = false\n";
    let llm = scheduling_llm().await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    for (i, offset) in offsets_ms.iter().enumerate() {
        let user = FIRST + i as i64;
        let before = tg.calls("getWebhookInfo").len();
        let mut bot = BotProcess::spawn_with(
            &tg,
            &llm.url,
            dir.path(),
            &[("HEURIST_ALLOWED_USERS", &users)],
            toml,
        );
        bot.started(&tg, before, Duration::from_secs(20)).await;
        let ask = json!({"request": format!("r{i}"), "kind": "reminder", "in_secs": 3});
        tg.send_text(user, &ask.to_string());
        wait_starting(
            &tg,
            user,
            "tool said: Scheduled",
            1,
            Duration::from_secs(15),
        )
        .await;
        // The tool's answer names the minute only; the log names the second it is due.
        let due_ms = next_run_ms(&bot).await;
        let kill_at = due_ms + offset;
        let wait = kill_at - Utc::now().timestamp_millis();
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
        bot.kill();
    }
    let before = tg.calls("getWebhookInfo").len();
    let bot = BotProcess::spawn_with(
        &tg,
        &llm.url,
        dir.path(),
        &[("HEURIST_ALLOWED_USERS", &users)],
        toml,
    );
    bot.started(&tg, before, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for (i, offset) in offsets_ms.iter().enumerate() {
        let user = FIRST + i as i64;
        let reminders = starting(&tg, user, "⏰ Reminder").len();
        let notices = starting(&tg, user, heurist::texts::turn::RESTART_NOTICE).len();
        // A crash between the reminder's send and its record leaves the restart notice the
        // inbox gives every answer that may be on screen: never a second reminder.
        assert!(
            reminders <= 1 && notices <= 1 && reminders + notices >= 1,
            "user {user}, killed {offset} ms after the due time: {reminders} reminders, \
             {notices} notices; log:\n{}",
            bot.logs()
        );
    }
    drop(bot);
}

/// The due time (unix ms) of the task `bot` scheduled last, from its log line "scheduled a
/// task" (the store is the running bot's, locked).
async fn next_run_ms(bot: &BotProcess) -> i64 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = without_colours(&bot.logs());
        if let Some(line) = logs.lines().rev().find(|l| l.contains("scheduled a task")) {
            let next = line
                .split("next_run=")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<i64>().ok())
                .expect("next_run in the log line");
            return next * 1000;
        }
        assert!(
            Instant::now() < until,
            "no 'scheduled a task' in the log:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `text` without its ANSI colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
