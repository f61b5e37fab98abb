//! Lessons verified before use. A lesson about a tool, learned from a failed-then-fixed call or
//! from a tool's refusal, is *on probation*: it is offered only at the moment of use, beside
//! that tool's failed result (`Agent::run` adds it there), never in the prompt's context block,
//! where a small model reads it as something to say. It is promoted when the next call to that
//! tool, made with it in view, works at once; after [`MAX_TRIAL_FAILURES`] such calls that
//! still failed it is retired (forgotten). An admin's ✅ promotes it too. A proven lesson shown
//! beside a failure is scored the same way: by what the tool then answered.
//!
//! ```
//! use heurist::learning::probation::{Trial, verdict};
//! assert_eq!(verdict(true, true, 0), Trial::Promote);
//! assert_eq!(verdict(true, false, 0), Trial::Failed);
//! assert_eq!(verdict(true, false, 1), Trial::Retire);
//! assert_eq!(verdict(false, false, 0), Trial::Failed);
//! ```

use super::{Learning, now};

/// Calls made with a lesson on probation in view that may fail before it is retired.
pub const MAX_TRIAL_FAILURES: u32 = 2;

/// What one call made with a lesson in view does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trial {
    /// It worked: a lesson on probation is proven; a proven one counts a success.
    Promote,
    /// It failed: counted against the lesson.
    Failed,
    /// It failed once too often while on probation: the lesson goes.
    Retire,
}

/// What a call that `worked` (or not), made with a lesson in view that is `on_probation` with
/// `failures` failed trials so far, does to it.
pub fn verdict(on_probation: bool, worked: bool, failures: u32) -> Trial {
    match (worked, on_probation) {
        (true, _) => Trial::Promote,
        (false, true) if failures + 1 >= MAX_TRIAL_FAILURES => Trial::Retire,
        (false, _) => Trial::Failed,
    }
}

impl Learning {
    /// After a turn: for each (lesson id, worked) of `trials` (the next call to a tool after
    /// its failed result carried the lesson), promotes, counts or retires the lesson.
    pub(crate) fn record_trials(&self, trials: &[(u64, bool)]) -> anyhow::Result<()> {
        for &(id, worked) in trials {
            let mut memory = self.write();
            let Some(mut lesson) = memory.records.get(&id).cloned() else {
                continue;
            };
            match verdict(lesson.probation, worked, lesson.trial_failures) {
                Trial::Promote => {
                    if lesson.probation {
                        tracing::info!(id, "a lesson on probation worked: promoted");
                    }
                    lesson.probation = false;
                    lesson.successes += 1;
                }
                Trial::Failed => {
                    lesson.failures += 1;
                    lesson.trial_failures += u32::from(lesson.probation);
                }
                Trial::Retire => {
                    tracing::info!(id, "a lesson on probation kept failing: retired");
                    memory.remove(&self.store, id)?;
                    continue;
                }
            }
            lesson.updated = now();
            memory.put(&self.store, lesson)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_promotes_counts_or_retires() {
        let cases = [
            ("worked on probation", true, true, 0, Trial::Promote),
            ("worked, proven already", false, true, 5, Trial::Promote),
            ("first failure on probation", true, false, 0, Trial::Failed),
            ("second failure on probation", true, false, 1, Trial::Retire),
            (
                "a proven lesson is never retired by trials",
                false,
                false,
                9,
                Trial::Failed,
            ),
        ];
        for (name, probation, worked, failures, want) in cases {
            assert_eq!(verdict(probation, worked, failures), want, "{name}");
        }
    }
}
