//! `[memory]` (each user's personal facts) and `[tasks]` (scheduled tasks): the caps per user.

use serde::Deserialize;

/// Personal memory: the facts each user asked the bot to keep (see [`crate::memory`]).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Facts kept per user; past it, the least recently used goes. 0: no memory at all.
    pub max_memories: usize,
    /// The longest fact, in characters.
    pub max_chars: usize,
}

impl MemoryConfig {
    /// Whether memory is on: the `remember` tool is offered and facts are injected.
    pub(crate) fn enabled(self) -> bool {
        self.max_memories > 0 && self.max_chars > 0
    }
}

/// Scheduled tasks and reminders (the `schedule_task` tool, `/tasks`): the caps per user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// Tasks a user may have at once.
    pub max_per_user: usize,
    /// The smallest interval between two runs of a repeating task, in minutes; at least 1
    /// (checked at load: 0 would let a task run every second).
    pub min_interval_mins: u64,
    /// Runs a user's tasks may make per day (UTC); 0: no limit.
    pub max_runs_per_day: u32,
    /// A test hook: the smallest interval in seconds, in place of `min_interval_mins`, so tests
    /// can watch a task repeat. No config file or environment variable sets it.
    #[serde(skip)]
    pub min_interval_secs: Option<u64>,
}

impl TasksConfig {
    /// The smallest interval between two runs, in seconds.
    pub(crate) fn min_interval(&self) -> i64 {
        let secs = self
            .min_interval_secs
            .unwrap_or(self.min_interval_mins.saturating_mul(60));
        i64::try_from(secs).unwrap_or(i64::MAX)
    }
}
