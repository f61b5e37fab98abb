//! Bounded storage: the inbox and the option and feedback tickets grow with every turn, and so
//! do turns that fell out of their history window, so
//! [`Db::prune`] runs at start and then at a fixed interval while the bot runs (the
//! turn layer schedules it) with the cutoff computed here.

use super::db::Db;
use super::error::Result;

/// What one [`Db::prune`] removed, per tree.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PruneReport {
    pub inbox: usize,
    pub tickets: usize,
    pub feedback: usize,
    pub retries: usize,
    /// Strangers' refusal days (`people` tree).
    pub refusals: usize,
    /// Turns before their conversation's history window (`history` and `topic_history`).
    pub history: usize,
    /// Users' per-day token counts (`usage` tree).
    pub usage_days: usize,
    /// Answers' messages (`answers` tree), which reactions vote through.
    pub answers: usize,
    /// Facts and tasks never confirmed (`proposals` tree).
    pub proposals: usize,
}

impl Db<'_> {
    /// Bounds the storage that grows with every turn: removes answered inbox entries received
    /// before `older_than_unix` (unix seconds), and option and feedback tickets and retries
    /// created before it (an unreadable record is kept, and logged), strangers' refusal days
    /// and users' per-day token counts before the cutoff's day. It also removes every turn
    /// before its conversation's history window, whatever its age: the LLM never sees those again. A pending or stored
    /// inbox entry is never removed: its turn is not finished. A button whose ticket was
    /// pruned answers "expired".
    pub fn prune(&self, older_than_unix: i64) -> Result<PruneReport> {
        let (tickets, feedback) = self.store.tickets().prune(older_than_unix)?;
        Ok(PruneReport {
            inbox: self.store.inbox().prune(older_than_unix)?,
            tickets,
            feedback,
            retries: self.store.retries().prune(older_than_unix)?,
            refusals: self.store.people().prune_refusals(older_than_unix)?,
            history: self.store.history().prune()?,
            usage_days: self.store.usage().prune_days(older_than_unix)?,
            answers: self.store.answers().prune(older_than_unix)?,
            proposals: self.store.proposals().prune(older_than_unix)?,
        })
    }
}

/// The unix second before which records are old enough to prune, for a retention in days.
pub(crate) fn cutoff(now_unix: i64, retention_days: u32) -> i64 {
    now_unix.saturating_sub(i64::from(retention_days) * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_the_retention_before_now() {
        struct Case {
            name: &'static str,
            now: i64,
            days: u32,
            cutoff: i64,
        }
        let cases = [
            Case {
                name: "thirty days",
                now: 100 * 86_400,
                days: 30,
                cutoff: 70 * 86_400,
            },
            Case {
                name: "zero days prunes everything up to now",
                now: 5_000,
                days: 0,
                cutoff: 5_000,
            },
            Case {
                name: "no overflow near the minimum",
                now: i64::MIN + 1,
                days: u32::MAX,
                cutoff: i64::MIN,
            },
        ];
        for case in cases {
            assert_eq!(
                cutoff(case.now, case.days),
                case.cutoff,
                "case {}",
                case.name
            );
        }
    }
}
