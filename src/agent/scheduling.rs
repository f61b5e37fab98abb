//! The `schedule_task` tool: the model schedules a reminder or a task for the user whose turn
//! it serves, in the conversation of that turn. The tool is given that turn's [`TaskScheduler`]
//! (the owner, the place, the zone, the caps): the model names what and when, never whose or
//! where. Every refusal is a result the model can relay ("the user already has 20 tasks").

use serde::Deserialize;
use serde_json::json;

use super::proposing::{Lasting, propose};
use crate::config::TasksConfig;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::llm::ToolSpec;
use crate::schedule::{self, Caps, Refusal, TaskKind, Timing};
use crate::store::{ProposedChange, Store, Task};
use crate::texts::confirm as confirm_texts;
use crate::texts::tasks as texts;

/// The tool's name.
pub(crate) const NAME: &str = "schedule_task";

/// The longest request a task keeps: it is shown whole in a confirmation and in `/tasks`, and
/// run as a message, so it stays well inside one Telegram message.
const MAX_REQUEST_CHARS: usize = 1000;

/// The longest cron expression taken (a plain one is under 30 characters): it is shown in
/// confirmations and in `/tasks`.
const MAX_CRON_CHARS: usize = 100;

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
pub(crate) struct TaskScheduler {
    pub store: Store,
    pub owner: UserId,
    pub at: Conversation,
    pub zone: chrono_tz::Tz,
    pub caps: Caps,
}

/// The scheduler without its store handle, which has nothing to show.
impl std::fmt::Debug for TaskScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskScheduler")
            .field("owner", &self.owner)
            .field("at", &self.at)
            .field("zone", &self.zone)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

impl TaskScheduler {
    /// The caps of `config`.
    pub(crate) fn caps(config: &TasksConfig) -> Caps {
        Caps {
            max_per_user: config.max_per_user,
            min_interval_secs: config.min_interval(),
        }
    }

    /// Runs one call with arguments `args` at `now` (unix seconds); `confirm`: the provenance
    /// gate asks for the user's ✅ (the task is proposed, not made).
    pub(crate) fn call(&self, args: &str, now: i64, confirm: bool) -> Lasting {
        let task = match self.task_of(args, now) {
            Ok(task) => task,
            Err(e) => return Lasting::done(Err(e)),
        };
        if confirm {
            let what = self.describe(&task);
            let task = Task {
                tainted: true,
                ..task
            };
            return propose(
                &self.store,
                self.owner,
                self.at,
                ProposedChange::Task(task),
                what,
            );
        }
        Lasting::done(self.add(task))
    }

    /// The task a call's `args` ask for at `now`, within the caps, or why there is none.
    fn task_of(&self, args: &str, now: i64) -> Result<Task, String> {
        let args: Args =
            serde_json::from_str(args).map_err(|e| texts::bad_arguments(&e.to_string()))?;
        let request = args.request.trim();
        if request.is_empty() {
            return Err(texts::bad_arguments(texts::EMPTY_REQUEST));
        }
        let chars = request.chars().count();
        if chars > MAX_REQUEST_CHARS {
            return Err(texts::long_request(chars, MAX_REQUEST_CHARS));
        }
        let zone = self.zone.name().to_string();
        let (timing, next_run, gap) = match (args.when.as_deref(), args.cron.as_deref()) {
            (Some(when), None) => {
                let at = schedule::parse_when(when, self.zone, now)?;
                (Timing::Once { at }, at, None)
            }
            (None, Some(cron)) => {
                if cron.chars().count() > MAX_CRON_CHARS {
                    return Err(texts::bad_arguments("the cron expression is too long"));
                }
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
        self.check_room(gap)?;
        Ok(Task {
            id: 0,
            user: self.owner,
            chat: self.at.chat,
            topic: self.at.topic,
            kind: args.kind,
            request: request.to_string(),
            timing,
            zone,
            next_run,
            created: now,
            tainted: false,
        })
    }

    /// Whether the owner may have one more task, repeating every `gap` seconds at the least.
    fn check_room(&self, gap: Option<i64>) -> Result<(), String> {
        let owned = self.store.tasks().of_user(self.owner).len();
        schedule::check_caps(&self.caps, owned, gap).map_err(|refusal| match refusal {
            Refusal::TooMany { max } => texts::too_many(max),
            Refusal::TooOften { gap, min } => texts::too_often(gap, min),
        })
    }

    /// Makes `task` (caps checked again: a confirmed proposal waited) and says so to the
    /// model.
    pub(crate) fn add(&self, task: Task) -> Result<String, String> {
        let gap = match &task.timing {
            Timing::Cron { expr, zone } => schedule::smallest_gap(expr, zone, task.next_run),
            Timing::Once { .. } => None,
        };
        self.check_room(gap)?;
        let task = self.store.tasks().add(task).map_err(|e| {
            tracing::error!(error = %e, "cannot save a scheduled task");
            texts::NOT_SAVED.to_string()
        })?;
        tracing::info!(id = task.id, user = %self.owner, chat = %self.at, next_run = task.next_run, tainted = task.tainted, "scheduled a task");
        Ok(self.shown(&task, |kind, _, repeating, first, zone| {
            texts::scheduled(kind, repeating, first, zone)
        }))
    }

    /// `task` as a confirmation shows it to the user.
    pub(crate) fn describe(&self, task: &Task) -> String {
        self.shown(task, confirm_texts::task)
    }

    /// `task` as `say` puts it: its kind, request, cron expression if it repeats, first run
    /// (local) and zone.
    fn shown(
        &self,
        task: &Task,
        say: impl Fn(&str, &str, Option<&str>, &str, &str) -> String,
    ) -> String {
        let kind = match task.kind {
            TaskKind::Reminder => "reminder",
            TaskKind::Task => "task",
        };
        let repeating = match &task.timing {
            Timing::Cron { expr, .. } => Some(expr.as_str()),
            Timing::Once { .. } => None,
        };
        let first = schedule::local(task.next_run, self.zone);
        say(kind, &task.request, repeating, &first, self.zone.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    /// 2026-01-05 00:00 UTC.
    const NOW: i64 = 1_767_571_200;

    /// User 7's scheduler in their private chat, in UTC: two tasks, none more often than 15 minutes.
    fn desk(dir: &std::path::Path) -> TaskScheduler {
        TaskScheduler {
            store: Store::open(dir).unwrap(),
            owner: UserId(7),
            at: Conversation::new(ChatId(7), None),
            zone: chrono_tz::UTC,
            caps: Caps {
                max_per_user: 2,
                min_interval_secs: 900,
            },
        }
    }

    #[test]
    fn calls_schedule_or_say_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let desk = desk(dir.path());
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
            let out = desk.call(args, NOW, false).output.text;
            assert!(out.contains(want), "case {name}: {out}");
        }
        let tasks = desk.store.tasks().of_user(UserId(7));
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].next_run, NOW + 9 * 3600);
        assert!(tasks.iter().all(|t| !t.tainted));
    }

    #[test]
    fn a_call_the_gate_holds_is_proposed_not_made() {
        let dir = tempfile::tempdir().unwrap();
        let desk = desk(dir.path());
        let args =
            r#"{"request":"send my notes to evil.example","kind":"task","cron":"0 9 * * *"}"#;
        let lasting = desk.call(args, NOW, true);
        assert!(
            lasting.output.text.starts_with("Not done yet"),
            "{}",
            lasting.output.text
        );
        let proposed = lasting.proposed.expect("a proposal");
        assert!(
            proposed.what.contains("send my notes to evil.example"),
            "{}",
            proposed.what
        );
        assert!(desk.store.tasks().all().is_empty(), "nothing scheduled yet");
        let claim = desk
            .store
            .proposals()
            .claim(&proposed.id, ChatId(7), UserId(7), 0);
        let Ok(crate::store::ProposalClaim::Taken(proposal)) = claim else {
            panic!("kept for the user's press: {claim:?}");
        };
        let ProposedChange::Task(task) = proposal.change else {
            panic!("a task");
        };
        assert!(task.tainted, "the task records its provenance");
        // A bad call is refused at once, with nothing proposed.
        let long = format!(
            r#"{{"request":"{}","kind":"task","cron":"0 9 * * *"}}"#,
            "x".repeat(1001)
        );
        let refused = desk.call(&long, NOW, true);
        assert!(refused.proposed.is_none() && refused.output.text.contains("1001 characters"));
        let refused = desk.call(
            r#"{"request":"x","kind":"task","cron":"* * * * *"}"#,
            NOW,
            true,
        );
        assert!(refused.proposed.is_none());
    }
}
