//! The `schedule_task` tool: the model schedules a reminder or a task for the user whose turn
//! it serves, in the conversation of that turn. The tool is given that turn's [`TaskDesk`]
//! (the owner, the place, the zone, the caps): the model names what and when, never whose or
//! where. Every refusal is a result the model can relay ("the user already has 20 tasks").

use serde::Deserialize;
use serde_json::json;

use super::output::{ERROR_PREFIX, ToolOutput};
use crate::config::TasksConfig;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::llm::ToolSpec;
use crate::schedule::{self, Caps, Refusal, TaskKind, Timing};
use crate::store::{Store, Task};
use crate::texts::tasks as texts;

/// The tool's name.
pub(crate) const NAME: &str = "schedule_task";

/// The tool's schema.
pub(crate) fn spec() -> ToolSpec {
    ToolSpec::function(
        NAME,
        texts::TOOL_DESCRIPTION,
        json!({
            "type": "object",
            "properties": {
                "request": {"type": "string", "description": "What to remind of, or what to do, in the user's words"},
                "kind": {"type": "string", "enum": ["reminder", "task"], "description": "reminder: the request is sent as it is; task: it runs as the user's message at that time"},
                "when": {"type": "string", "description": "Once: local date and time, \"YYYY-MM-DD HH:MM\""},
                "cron": {"type": "string", "description": "Repeating: a cron expression, minute hour day-of-month month day-of-week (e.g. \"0 9 * * MON\")"}
            },
            "required": ["request", "kind"],
            "additionalProperties": false
        }),
    )
}

#[derive(Deserialize)]
struct Args {
    request: String,
    kind: TaskKind,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    cron: Option<String>,
}

/// What a turn's `schedule_task` calls act for: whose tasks, where, read in which zone.
#[derive(Clone)]
pub(crate) struct TaskDesk {
    pub store: Store,
    pub owner: UserId,
    pub at: Conversation,
    pub zone: chrono_tz::Tz,
    pub caps: Caps,
}

/// The desk without its store handle, which has nothing to show.
impl std::fmt::Debug for TaskDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskDesk")
            .field("owner", &self.owner)
            .field("at", &self.at)
            .field("zone", &self.zone)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl TaskDesk {
    /// The caps of `config`.
    pub(crate) fn caps(config: &TasksConfig) -> Caps {
        Caps {
            max_per_user: config.max_per_user,
            min_interval_secs: config.min_interval(),
        }
    }

    /// Runs one call with arguments `args` at `now` (unix seconds).
    pub(crate) fn call(&self, args: &str, now: i64) -> ToolOutput {
        let text = match self.schedule(args, now) {
            Ok(text) => text,
            Err(e) => format!("{ERROR_PREFIX}{e}"),
        };
        ToolOutput::own(text)
    }

    fn schedule(&self, args: &str, now: i64) -> Result<String, String> {
        let args: Args =
            serde_json::from_str(args).map_err(|e| texts::bad_arguments(&e.to_string()))?;
        let request = args.request.trim();
        if request.is_empty() {
            return Err(texts::bad_arguments(texts::EMPTY_REQUEST));
        }
        let zone = self.zone.name().to_string();
        let (timing, next_run, gap) = match (args.when.as_deref(), args.cron.as_deref()) {
            (Some(when), None) => {
                let at = schedule::parse_when(when, self.zone, now)?;
                (Timing::Once { at }, at, None)
            }
            (None, Some(cron)) => {
                schedule::parse_cron(cron)?;
                let expr = cron.trim().to_string();
                let next = schedule::next_after(&expr, &zone, now).ok_or(texts::NEVER_RUNS)?;
                let gap = schedule::smallest_gap(&expr, &zone, now);
                let timing = Timing::Cron {
                    expr,
                    zone: zone.clone(),
                };
                (timing, next, gap)
            }
            _ => return Err(texts::bad_arguments(texts::WHEN_OR_CRON)),
        };
        let owned = self.store.tasks().of_user(self.owner).len();
        schedule::check_caps(&self.caps, owned, gap).map_err(|refusal| match refusal {
            Refusal::TooMany { max } => texts::too_many(max),
            Refusal::TooOften { gap, min } => texts::too_often(gap, min),
        })?;
        let task = Task {
            id: 0,
            user: self.owner,
            chat: self.at.chat,
            topic: self.at.topic,
            kind: args.kind,
            request: request.to_string(),
            timing,
            zone: zone.clone(),
            next_run,
            created: now,
        };
        let task = self.store.tasks().add(task).map_err(|e| {
            tracing::error!(error = %e, "cannot save a scheduled task");
            texts::NOT_SAVED.to_string()
        })?;
        tracing::info!(id = task.id, user = %self.owner, chat = %self.at, next_run, "scheduled a task");
        let kind = match task.kind {
            TaskKind::Reminder => "reminder",
            TaskKind::Task => "task",
        };
        let repeating = match &task.timing {
            Timing::Cron { expr, .. } => Some(expr.as_str()),
            Timing::Once { .. } => None,
        };
        let first = schedule::local(next_run, self.zone);
        Ok(texts::scheduled(kind, repeating, &first, &zone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    /// 2026-01-05 00:00 UTC.
    const NOW: i64 = 1_767_571_200;

    #[test]
    fn calls_schedule_or_say_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let desk = TaskDesk {
            store: Store::open(dir.path()).unwrap(),
            owner: UserId(7),
            at: Conversation::new(ChatId(7), None),
            zone: chrono_tz::UTC,
            caps: Caps {
                max_per_user: 2,
                min_interval_secs: 900,
            },
        };
        let cases = [
            (
                "a reminder",
                r#"{"request":"tea","kind":"reminder","when":"2026-01-05 09:00"}"#,
                "Scheduled a reminder for 2026-01-05 09:00",
            ),
            (
                "too often",
                r#"{"request":"x","kind":"task","cron":"* * * * *"}"#,
                "more often than allowed",
            ),
            (
                "both times",
                r#"{"request":"x","kind":"task","cron":"0 9 * * *","when":"2026-01-05 09:00"}"#,
                "exactly one",
            ),
            (
                "no kind",
                r#"{"request":"x","when":"2026-01-05 09:00"}"#,
                "schedule_task needs",
            ),
            (
                "a bad cron",
                r#"{"request":"x","kind":"task","cron":"every day"}"#,
                "not a cron expression",
            ),
            (
                "a daily task",
                r#"{"request":"news","kind":"task","cron":"0 9 * * *"}"#,
                "Scheduled a repeating task",
            ),
            (
                "a third",
                r#"{"request":"x","kind":"reminder","when":"2026-01-06 09:00"}"#,
                "already has 2",
            ),
        ];
        for (name, args, want) in cases {
            let out = desk.call(args, NOW).text;
            assert!(out.contains(want), "case {name}: {out}");
        }
        let tasks = desk.store.tasks().of_user(UserId(7));
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].next_run, NOW + 9 * 3600);
    }
}
