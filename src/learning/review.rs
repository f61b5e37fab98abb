//! What happens to a lesson after it is learned: turns' outcomes and 👍/👎 score it, an admin
//! approves or forgets it (`/heuristics`), and the listing shows it.

use super::lessons::{Lesson, ReviewState};
use super::{Learning, Listed, now};

impl Learning {
    /// After a turn whose prompt carried lessons `ids`: they were injected, and what the
    /// tools confirmed scores them: a lesson about a tool the turn called counts a success
    /// when its first call to that tool worked (`first_call(tool)`: `Some(true)`), a failure
    /// when it did not; one about no tool, or a tool not called, is scored only by votes
    /// (an answer given proves nothing: a lesson scored 4 of 4 while every answer was wrong).
    pub fn record_outcome(
        &self,
        ids: &[u64],
        first_call: impl Fn(&str) -> Option<bool>,
    ) -> anyhow::Result<()> {
        self.update(ids, |h| {
            h.injected += 1;
            h.last_injected = now();
            match h.tool.as_deref().and_then(&first_call) {
                Some(true) => h.successes += 1,
                Some(false) => h.failures += 1,
                None => {}
            }
        })
    }

    /// 👍 or 👎 on an answer whose prompt carried lessons `ids`.
    pub fn feedback(&self, ids: &[u64], up: bool) -> anyhow::Result<()> {
        self.update(ids, |h| {
            if up {
                h.up += 1;
            } else {
                h.down += 1;
            }
        })
    }

    /// A 👍 or 👎 replaced by the other: the first vote is taken back.
    pub(crate) fn change_vote(&self, ids: &[u64], up: bool) -> anyhow::Result<()> {
        self.update(ids, |h| {
            if up {
                h.down = h.down.saturating_sub(1);
                h.up += 1;
            } else {
                h.up = h.up.saturating_sub(1);
                h.down += 1;
            }
        })
    }

    fn update(&self, ids: &[u64], mut change: impl FnMut(&mut Lesson)) -> anyhow::Result<()> {
        let mut memory = self.write();
        for id in ids {
            let Some(mut lesson) = memory.records.get(id).cloned() else {
                continue;
            };
            change(&mut lesson);
            lesson.updated = now();
            memory.put(&self.store, lesson)?;
        }
        Ok(())
    }

    /// Approves a pending lesson (admin action); says whether it was pending.
    pub fn approve(&self, id: u64) -> anyhow::Result<bool> {
        let mut memory = self.write();
        let Some(mut lesson) = memory.records.get(&id).cloned() else {
            return Ok(false);
        };
        if lesson.review == ReviewState::Approved && !lesson.probation {
            return Ok(false);
        }
        // An admin's ✅ also ends a probation.
        lesson.review = ReviewState::Approved;
        lesson.probation = false;
        lesson.updated = now();
        // Approved, it counts against `max_lessons`: a full store forgets another first.
        self.make_room(&mut memory, ReviewState::Approved, Some(id))?;
        memory.put(&self.store, lesson)?;
        tracing::info!(id, "lesson approved");
        Ok(true)
    }

    /// Forgets a lesson (admin action); says whether it existed.
    pub(crate) fn forget(&self, id: u64) -> anyhow::Result<bool> {
        self.write().remove(&self.store, id)
    }

    /// Every lesson (or only the pending ones), best first: by utility, then newest.
    pub fn listing(&self, pending_only: bool) -> Vec<Listed> {
        let memory = self.read();
        let mut listed: Vec<Listed> = memory
            .records
            .values()
            .filter(|h| !pending_only || h.review == ReviewState::Pending)
            .map(|h| Listed {
                utility: h.utility(),
                lesson: h.clone(),
            })
            .collect();
        listed.sort_by(|a, b| {
            b.utility
                .total_cmp(&a.utility)
                .then(b.lesson.id.cmp(&a.lesson.id))
        });
        listed
    }

    /// How many lessons are approved, and how many wait for review.
    pub(crate) fn review_counts(&self) -> (usize, usize) {
        let memory = self.read();
        let pending = memory
            .records
            .values()
            .filter(|h| h.review == ReviewState::Pending)
            .count();
        (memory.records.len() - pending, pending)
    }
}
