//! What scheduled tasks say: the `schedule_task` tool's results (which the model relays), a
//! run's message, `/tasks` and `/timezone`. Times come in already formatted in the task's zone.

/// The tool's description, for the model.
pub(crate) const TOOL_DESCRIPTION: &str = "Schedule a reminder or a task for the user: once at \
    a local date-time (`when`), or repeating by a cron expression (`cron`), in the user's time \
    zone. A reminder sends `request` as it is at that time; a task runs `request` as the \
    user's message then (to look something up, summarise, …). Call current_time first to \
    know today's date.";

/// The tool's error when its arguments are unusable (`detail` says why).
pub(crate) fn bad_arguments(detail: &str) -> String {
    format!(
        "schedule_task needs {{\"request\": \"…\", \"kind\": \"reminder\" or \"task\", and \
         either \"when\": \"YYYY-MM-DD HH:MM\" or \"cron\": \"m h dom mon dow\"}}: {detail}"
    )
}

/// Both or neither of `when` and `cron`.
pub(crate) const WHEN_OR_CRON: &str =
    "give exactly one of \"when\" (once) and \"cron\" (repeating)";

/// An empty request.
pub(crate) const EMPTY_REQUEST: &str = "\"request\" is empty: say what to do or remind of";

/// A request longer than the tool takes (`chars` of at most `max`).
pub(crate) fn long_request(chars: usize, max: usize) -> String {
    format!("\"request\" has {chars} characters, more than {max}: say it shorter")
}

/// A cron expression that never runs again.
pub(crate) const NEVER_RUNS: &str = "this cron expression never runs again";

/// The user has `max` tasks already.
pub(crate) fn too_many(max: usize) -> String {
    format!(
        "the user already has {max} scheduled tasks, the most allowed; they can cancel one \
         with /tasks"
    )
}

/// A repeating task that runs `gap` seconds apart, under `min`.
pub(crate) fn too_often(gap: i64, min: i64) -> String {
    format!(
        "this schedule runs every {}, more often than allowed (at least {} apart); choose a \
         longer interval",
        duration(gap),
        duration(min)
    )
}

/// The store failed.
pub(crate) const NOT_SAVED: &str = "the task could not be saved; try again later";

/// The tool's success: what was scheduled, and its first run.
pub(crate) fn scheduled(kind: &str, repeating: Option<&str>, first: &str, zone: &str) -> String {
    match repeating {
        Some(cron) => format!(
            "Scheduled a repeating {kind} ({cron}); first run {first} ({zone}). The user can \
             list and cancel it with /tasks."
        ),
        None => format!(
            "Scheduled a {kind} for {first} ({zone}). The user can list and cancel it with \
             /tasks."
        ),
    }
}

/// A reminder, as sent at its time (`late`: the time it was due, when the bot was down then).
pub(crate) fn reminder(request: &str, late: Option<&str>) -> String {
    match late {
        Some(due) => {
            format!("⏰ Reminder (late: it was due {due}, while I was offline): {request}")
        }
        None => format!("⏰ Reminder: {request}"),
    }
}

/// A task's turn, as the model reads it: the request, what it is, and (`late`) when it was due.
pub(crate) fn task_turn(request: &str, late: Option<&str>) -> String {
    let when = match late {
        Some(due) => format!(
            "It runs late: it was due {due}, while the bot was offline; say so in the answer."
        ),
        None => "It runs on time.".to_string(),
    };
    format!(
        "⏰ Scheduled task (set earlier with schedule_task; do it now, do not schedule it \
         again). {when}\nRequest: {request}"
    )
}

/// The first run skipped in a day past the budget of `max` runs.
pub(crate) fn daily_runs_spent(max: u32) -> String {
    format!(
        "⏰ Your scheduled tasks reached today's limit of {max} runs; the rest of today's runs \
         are skipped (they go on tomorrow)."
    )
}

/// `/tasks` with none.
pub(crate) const NO_TASKS: &str =
    "You have no scheduled tasks here. Ask me, e.g. \"remind me tomorrow at 9 to call Anna\".";

/// `/tasks`'s head: `count` tasks, page `page` of `pages`.
pub(crate) fn tasks_head_html(count: usize, page: usize, pages: usize) -> String {
    format!("<b>Your scheduled tasks</b> ({count}, page {page}/{pages})\n")
}

/// One task of `/tasks` (all parts escaped): its number, kind, when it runs, what it does.
pub(crate) fn task_entry_html(
    n: usize,
    reminder: bool,
    schedule: &str,
    next: &str,
    request: &str,
) -> String {
    let kind = if reminder {
        "⏰ reminder"
    } else {
        "⚙️ task"
    };
    format!("\n<b>{n}.</b> {kind}, {schedule}; next: {next}\n{request}\n")
}

/// How a repeating task's schedule is shown.
pub(crate) fn repeating(cron: &str) -> String {
    format!("repeats <code>{cron}</code>")
}

/// How a once-task's schedule is shown.
pub(crate) const ONCE: &str = "once";

/// The ❌ button of task number `n`.
pub(crate) fn cancel_button(n: usize) -> String {
    format!("❌ Cancel {n}")
}

/// The toast of a cancelled task.
pub(crate) const CANCELLED: &str = "Cancelled.";

/// The toast of a press on a task that is gone (run, or cancelled already).
pub(crate) const GONE: &str = "That task is gone already.";

/// The toast of a press by someone else than the task's owner (or an admin).
pub(crate) const NOT_YOURS: &str = "Only the one who made this task (or an admin) can cancel it.";

/// `/timezone` alone: the zone in use, and whether it is the user's own.
pub(crate) fn zone_now(zone: &str, own: bool) -> String {
    if own {
        format!(
            "Your time zone is {zone}. Change it with /timezone Area/City, e.g. /timezone Europe/Berlin."
        )
    } else {
        format!(
            "You have not set a time zone, so I use the bot's: {zone}. Set yours with /timezone Area/City, e.g. /timezone Europe/Berlin."
        )
    }
}

/// `/timezone <zone>` accepted.
pub(crate) fn zone_set(zone: &str, now: &str) -> String {
    format!(
        "Your time zone is now {zone} (it is {now} there). Reminders you set from now on use it."
    )
}

/// `/timezone <text>` that names no zone.
pub(crate) fn zone_unknown(text: &str) -> String {
    format!(
        "{text:?} is not a time zone I know. Use an IANA name such as Europe/Berlin, America/New_York or Asia/Tokyo."
    )
}

/// `secs` in words: "90 s", "15 min", "2 h".
fn duration(secs: i64) -> String {
    if secs % 3600 == 0 {
        format!("{} h", secs / 3600)
    } else if secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}
