//! Scheduled tasks' pure logic: when a task runs, whether a run is late, and the caps.
//!
//! A task runs once at a local date-time, or repeatedly by a cron expression, in a time zone
//! (the user's from `/timezone`, else the bot's `agent.time_zone`). Its one stored clock is
//! `next_run` (unix seconds). When that time comes the run [`fire`]s: a once-task is done, a
//! repeating one moves to its first time *after now*, so a bot that was down for a week runs
//! a daily task once at start (marked late, as it was due before this run of the bot began),
//! never seven times. Everything here is a function of its arguments, the clock included, so
//! it is tested without a runtime; the store and the scheduler loop do the I/O.
//!
//! ```
//! use heurist::schedule::{Timing, fire, parse_when};
//! let zone: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
//! let now = 1_767_225_600; // 2026-01-01 00:00 UTC
//! let at = parse_when("2026-01-01 09:00", zone, now).unwrap();
//! assert_eq!(at, now + 8 * 3600); // 09:00 in Berlin is 08:00 UTC in winter
//! let once = Timing::Once { at };
//! let run = fire(&once, at, at, now);
//! assert_eq!((run.late, run.next), (false, None));
//! let daily = Timing::Cron { expr: "0 9 * * *".into(), zone: "Europe/Berlin".into() };
//! // Down for three days: one late run, then the next 09:00 after now.
//! let run = fire(&daily, at, at + 3 * 86_400 + 60, at + 3 * 86_400 + 60);
//! assert!(run.late);
//! assert_eq!(run.next, Some(at + 4 * 86_400));
//! ```

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde::{Deserialize, Serialize};

/// What a task does when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    /// Its text is sent as it is: no model call.
    Reminder,
    /// Its request runs as a turn of the user who made it.
    Task,
}

/// When a task runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Timing {
    /// Once, at `at` (unix seconds).
    Once { at: i64 },
    /// Whenever the cron expression `expr` matches, in IANA time zone `zone`.
    Cron { expr: String, zone: String },
}

/// The caps on a user's tasks (`[tasks]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Tasks a user may have at once.
    pub max_per_user: usize,
    /// The smallest gap between two runs of a repeating task, in seconds.
    pub min_interval_secs: i64,
}

/// Why a task cannot be scheduled, in words the model can relay to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The user has `max` tasks already.
    TooMany { max: usize },
    /// The expression repeats every `gap` seconds, under the smallest interval `min`.
    TooOften { gap: i64, min: i64 },
}

/// One run, decided when its time came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Firing {
    /// It was due before this run of the bot began: the bot was down at its time.
    pub late: bool,
    /// The task's next run (unix seconds); `None`: it is done.
    pub next: Option<i64>,
}

/// The run of a task due at `due`, firing at `now`, in a bot that began at `started` (all
/// unix seconds). A run due before the bot began was missed while it was down: it runs once,
/// marked late, and a repeating task goes on from now, skipping the times it missed.
#[must_use]
pub fn fire(timing: &Timing, due: i64, now: i64, started: i64) -> Firing {
    Firing {
        late: due < started,
        next: match timing {
            Timing::Once { .. } => None,
            Timing::Cron { expr, zone } => next_after(expr, zone, now.max(due)),
        },
    }
}

/// The first time after `after` (unix seconds) that cron expression `expr` matches in `zone`;
/// `None` for an expression or zone that does not parse, or one that never matches again.
#[must_use]
pub fn next_after(expr: &str, zone: &str, after: i64) -> Option<i64> {
    let cron = parse_cron(expr).ok()?;
    let zone: Tz = zone.parse().ok()?;
    let from = zone.timestamp_opt(after, 0).single()?;
    let next = cron.find_next_occurrence(&from, false).ok()?;
    Some(next.timestamp())
}

/// A cron expression: five fields (minute hour day-of-month month day-of-week, Sunday 0 or 7,
/// names allowed), or six with seconds first.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    Cron::from_str(expr.trim()).map_err(|e| {
        format!("{expr:?} is not a cron expression ({e}); use five fields: minute hour day-of-month month day-of-week, e.g. \"0 9 * * MON\"")
    })
}

/// The smallest gap, in seconds, between the next runs of `expr` in `zone` after `now`
/// (sampled over its next 64 runs); `None` when it runs fewer than twice.
#[must_use]
pub fn smallest_gap(expr: &str, zone: &str, now: i64) -> Option<i64> {
    let mut at = next_after(expr, zone, now)?;
    let mut smallest: Option<i64> = None;
    for _ in 0..64 {
        let Some(next) = next_after(expr, zone, at) else {
            break;
        };
        smallest = Some(smallest.map_or(next - at, |s| s.min(next - at)));
        at = next;
    }
    smallest
}

/// The unix time of `text`, a local date-time in `zone` ("2026-12-24 18:00", seconds and a
/// `T` allowed; an RFC 3339 time with its own offset is taken as it says); it must lie after
/// `now`. A time a clock change skips is refused; one it repeats is its first.
pub fn parse_when(text: &str, zone: Tz, now: i64) -> Result<i64, String> {
    let text = text.trim();
    let at = match DateTime::parse_from_rfc3339(text) {
        Ok(at) => at.timestamp(),
        Err(_) => {
            let naive = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
                .iter()
                .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
                .ok_or_else(|| {
                    format!("{text:?} is not a date and time; write it as \"YYYY-MM-DD HH:MM\" in the user's time zone ({})", zone.name())
                })?;
            match zone.from_local_datetime(&naive) {
                LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => at.timestamp(),
                LocalResult::None => {
                    return Err(format!(
                        "{text} does not exist in {} (the clocks skip it); pick another time",
                        zone.name()
                    ));
                }
            }
        }
    };
    if at <= now {
        return Err(format!(
            "{text} is in the past: it is now {} in {}",
            local(now, zone),
            zone.name()
        ));
    }
    Ok(at)
}

/// Whether one more task may be scheduled: the user has `owned` tasks, and a repeating one
/// runs at least `gap` seconds apart (`None`: a once-task).
pub fn check_caps(caps: &Caps, owned: usize, gap: Option<i64>) -> Result<(), Refusal> {
    if owned >= caps.max_per_user {
        return Err(Refusal::TooMany {
            max: caps.max_per_user,
        });
    }
    match gap {
        Some(gap) if gap < caps.min_interval_secs => Err(Refusal::TooOften {
            gap,
            min: caps.min_interval_secs,
        }),
        _ => Ok(()),
    }
}

/// Whether the run that would be the user's `nth` of the day (from 1) runs: within the daily
/// budget `max` it does (0: no budget); the first one past it is told; later ones are quiet.
#[must_use]
pub fn within_daily_runs(nth: u32, max: u32) -> DailyRuns {
    if max == 0 || nth <= max {
        DailyRuns::Run
    } else if nth == max + 1 {
        DailyRuns::Tell
    } else {
        DailyRuns::Quiet
    }
}

/// What the daily run budget says about one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DailyRuns {
    Run,
    /// Skipped, and the user told the budget is spent for today.
    Tell,
    /// Skipped without a word (the user was told already today).
    Quiet,
}

/// `at` (unix seconds) as a local time in `zone`: "2026-12-24 18:00".
#[must_use]
pub fn local(at: i64, zone: Tz) -> String {
    DateTime::<Utc>::from_timestamp(at, 0)
        .map(|t| t.with_timezone(&zone).format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| at.to_string())
}

/// The day (since the epoch, UTC) of `at`: the unit of the daily run budget.
#[must_use]
pub fn day_of(at: i64) -> i64 {
    at.div_euclid(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-05 00:00 UTC, a Monday.
    const MONDAY: i64 = 1_767_571_200;

    fn berlin() -> Tz {
        "Europe/Berlin".parse().unwrap()
    }

    #[test]
    fn next_runs_follow_the_expression_in_the_zone() {
        struct Case {
            name: &'static str,
            expr: &'static str,
            zone: &'static str,
            after: i64,
            next: Option<i64>,
        }
        let cases = [
            Case {
                name: "daily at 9 in Berlin is 8 UTC in winter",
                expr: "0 9 * * *",
                zone: "Europe/Berlin",
                after: MONDAY,
                next: Some(MONDAY + 8 * 3600),
            },
            Case {
                name: "Monday is 1, as in standard cron",
                expr: "0 9 * * 1",
                zone: "UTC",
                after: MONDAY + 10 * 3600,
                next: Some(MONDAY + 7 * 86_400 + 9 * 3600),
            },
            Case {
                name: "names work",
                expr: "30 7 * * SUN",
                zone: "UTC",
                after: MONDAY,
                next: Some(MONDAY + 6 * 86_400 + 7 * 3600 + 1800),
            },
            Case {
                name: "six fields carry seconds",
                expr: "*/5 * * * * *",
                zone: "UTC",
                after: MONDAY,
                next: Some(MONDAY + 5),
            },
            Case {
                name: "strictly after",
                expr: "0 9 * * *",
                zone: "UTC",
                after: MONDAY + 9 * 3600,
                next: Some(MONDAY + 86_400 + 9 * 3600),
            },
            Case {
                name: "garbage",
                expr: "every monday",
                zone: "UTC",
                after: MONDAY,
                next: None,
            },
            Case {
                name: "an unknown zone",
                expr: "0 9 * * *",
                zone: "Mars/Base",
                after: MONDAY,
                next: None,
            },
        ];
        for case in cases {
            assert_eq!(
                next_after(case.expr, case.zone, case.after),
                case.next,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn a_run_is_late_only_when_it_was_due_before_the_bot_began() {
        struct Case {
            name: &'static str,
            timing: Timing,
            due: i64,
            now: i64,
            started: i64,
            want: Firing,
        }
        let hourly = Timing::Cron {
            expr: "0 * * * *".into(),
            zone: "UTC".into(),
        };
        let cases = [
            Case {
                name: "a once-task on time is done",
                timing: Timing::Once { at: MONDAY },
                due: MONDAY,
                now: MONDAY,
                started: MONDAY - 60,
                want: Firing {
                    late: false,
                    next: None,
                },
            },
            Case {
                name: "a once-task missed while down runs late",
                timing: Timing::Once { at: MONDAY },
                due: MONDAY,
                now: MONDAY + 5000,
                started: MONDAY + 4990,
                want: Firing {
                    late: true,
                    next: None,
                },
            },
            Case {
                name: "a repeating task on time goes on to its next time",
                timing: hourly.clone(),
                due: MONDAY,
                now: MONDAY,
                started: MONDAY - 60,
                want: Firing {
                    late: false,
                    next: Some(MONDAY + 3600),
                },
            },
            Case {
                name: "a repeating task down for a day runs once, then from now",
                timing: hourly,
                due: MONDAY,
                now: MONDAY + 86_400 + 120,
                started: MONDAY + 86_400 + 100,
                want: Firing {
                    late: true,
                    next: Some(MONDAY + 86_400 + 3600),
                },
            },
        ];
        for case in cases {
            let got = fire(&case.timing, case.due, case.now, case.started);
            assert_eq!(got, case.want, "case {}", case.name);
        }
    }

    #[test]
    fn local_times_are_read_in_the_zone_and_must_be_ahead() {
        struct Case {
            name: &'static str,
            text: &'static str,
            want: Result<i64, &'static str>,
        }
        let cases = [
            Case {
                name: "a local time",
                text: "2026-01-05 09:30",
                want: Ok(MONDAY + 8 * 3600 + 1800),
            },
            Case {
                name: "with seconds and a T",
                text: "2026-01-05T09:30:15",
                want: Ok(MONDAY + 8 * 3600 + 1815),
            },
            Case {
                name: "an explicit offset wins",
                text: "2026-01-05T09:30:00Z",
                want: Ok(MONDAY + 9 * 3600 + 1800),
            },
            Case {
                name: "the past",
                text: "2026-01-04 09:30",
                want: Err("in the past"),
            },
            Case {
                name: "not a time",
                text: "tomorrow at nine",
                want: Err("YYYY-MM-DD HH:MM"),
            },
            Case {
                name: "skipped by the spring clock change",
                text: "2026-03-29 02:30",
                want: Err("does not exist"),
            },
        ];
        for case in cases {
            let got = parse_when(case.text, berlin(), MONDAY);
            match (got, case.want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "case {}", case.name),
                (Err(got), Err(want)) => assert!(got.contains(want), "case {}: {got}", case.name),
                (got, want) => panic!("case {}: {got:?}, want {want:?}", case.name),
            }
        }
    }

    #[test]
    fn caps_refuse_too_many_and_too_often() {
        let caps = Caps {
            max_per_user: 2,
            min_interval_secs: 900,
        };
        let cases = [
            ("a first once-task", 0, None, Ok(())),
            ("an hourly task", 1, Some(3600), Ok(())),
            (
                "every minute",
                1,
                Some(60),
                Err(Refusal::TooOften { gap: 60, min: 900 }),
            ),
            ("a third task", 2, None, Err(Refusal::TooMany { max: 2 })),
        ];
        for (name, owned, gap, want) in cases {
            assert_eq!(check_caps(&caps, owned, gap), want, "{name}");
        }
        assert_eq!(smallest_gap("*/10 * * * *", "UTC", MONDAY), Some(600));
        assert_eq!(smallest_gap("0 9 * * 1-5", "UTC", MONDAY), Some(86_400));
    }

    #[test]
    fn the_daily_budget_tells_once() {
        let cases = [
            ("within", 3, 3, DailyRuns::Run),
            ("first past", 4, 3, DailyRuns::Tell),
            ("later", 5, 3, DailyRuns::Quiet),
            ("no budget", 500, 0, DailyRuns::Run),
        ];
        for (name, nth, max, want) in cases {
            assert_eq!(within_daily_runs(nth, max), want, "{name}");
        }
    }
}
