//! The lessons in memory: every stored record, and the BM25 index retrieval scores. Every
//! change goes to sled first ([`LessonSet::put`], [`LessonSet::remove`]), so the set and the
//! store agree; the queries here (a duplicate, an eviction victim) are pure.

use std::collections::HashMap;

use super::index::Index;
use super::lessons::{Lesson, ReviewState};
use super::text::{cosine, text_similarity};
use super::utility::eviction_order;
use crate::store::Store;

/// Cosine similarity of two lessons' embeddings at which they count as the same lesson.
const DUPLICATE_COSINE: f32 = 0.92;

/// The lessons in memory: every record, and the index retrieval scores.
#[derive(Default)]
pub(super) struct LessonSet {
    pub(super) records: HashMap<u64, Lesson>,
    pub(super) index: Index,
}

impl LessonSet {
    /// The set of `lessons` as loaded from the store.
    pub(super) fn load(lessons: impl IntoIterator<Item = Lesson>) -> Self {
        let mut set = Self::default();
        for lesson in lessons {
            set.index.insert(lesson.id, &lesson.text);
            set.records.insert(lesson.id, lesson);
        }
        set
    }

    pub(super) fn put(&mut self, store: &Store, lesson: Lesson) -> anyhow::Result<()> {
        store.learning().put_lesson(&lesson)?;
        if !self.records.contains_key(&lesson.id) {
            self.index.insert(lesson.id, &lesson.text);
        }
        self.records.insert(lesson.id, lesson);
        Ok(())
    }

    pub(super) fn remove(&mut self, store: &Store, id: u64) -> anyhow::Result<bool> {
        let existed = store.learning().delete_lesson(id)?;
        self.index.remove(id);
        Ok(self.records.remove(&id).is_some() || existed)
    }

    /// The known lesson that `text` (embedded as `vector`, if it could be) repeats: the
    /// closest of those sharing words with it at `threshold` (word-set Jaccard) or, with
    /// embeddings, at [`DUPLICATE_COSINE`]; ties go to the older.
    pub(super) fn duplicate_of(
        &self,
        text: &str,
        vector: Option<&[f32]>,
        threshold: f32,
    ) -> Option<u64> {
        // A duplicate shares words with the text (the index finds those) or, with
        // embeddings, is close to it.
        let mut candidates: Vec<u64> = self
            .index
            .relevance(text)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        if vector.is_some() {
            candidates.extend(
                self.records
                    .values()
                    .filter(|h| h.vector.is_some())
                    .map(|h| h.id),
            );
        }
        candidates
            .iter()
            .filter_map(|id| self.records.get(id))
            .filter_map(|h| {
                let words = text_similarity(&h.text, text);
                let cos = match (&h.vector, vector) {
                    (Some(a), Some(b)) => cosine(a, b),
                    _ => 0.0,
                };
                (words >= threshold || cos >= DUPLICATE_COSINE).then_some((words.max(cos), h.id))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, id)| id)
    }

    /// The lesson of review state `review` to forget before one more fits under `cap` (none
    /// while there is room): the least useful, then the least recently injected, then the
    /// oldest (see [`eviction_order`]); `keep` is never chosen.
    pub(super) fn victim(&self, review: ReviewState, keep: Option<u64>, cap: usize) -> Option<u64> {
        let same = || {
            self.records
                .values()
                .filter(|h| h.review == review && Some(h.id) != keep)
        };
        if same().count() < cap {
            return None;
        }
        same()
            .map(Lesson::age)
            .min_by(eviction_order)
            .map(|age| age.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Origin;

    fn lesson(id: u64, text: &str, review: ReviewState) -> Lesson {
        Lesson::learned(
            id,
            None,
            text.into(),
            review,
            Origin::default(),
            100 + id as i64,
        )
    }

    fn set(lessons: Vec<Lesson>) -> LessonSet {
        LessonSet::load(lessons)
    }

    #[test]
    fn a_repeat_in_other_words_order_is_the_duplicate_and_the_older_wins_ties() {
        let known = set(vec![
            lesson(
                1,
                "When upgrading dependencies, read the changelog first.",
                ReviewState::Approved,
            ),
            lesson(
                2,
                "When a page times out, retry it once with a longer timeout.",
                ReviewState::Approved,
            ),
            lesson(
                3,
                "When upgrading dependencies, read the changelog first!",
                ReviewState::Pending,
            ),
        ]);
        let repeat = "read the changelog first when upgrading dependencies";
        assert_eq!(
            known.duplicate_of(repeat, None, 0.8),
            Some(1),
            "ties go to the older"
        );
        assert_eq!(
            known.duplicate_of("Write ticket ids as TCK- and six digits.", None, 0.8),
            None
        );
        assert_eq!(
            known.duplicate_of("When a page times out, retry it.", None, 0.99),
            None,
            "below the threshold, sharing words is not repeating"
        );
    }

    #[test]
    fn close_embeddings_make_a_duplicate_without_shared_words() {
        let mut first = lesson(
            1,
            "Prefer the package registry to GitHub.",
            ReviewState::Approved,
        );
        first.vector = Some(vec![1.0, 0.0]);
        let mut other = lesson(2, "Quote shell arguments.", ReviewState::Approved);
        other.vector = Some(vec![0.0, 1.0]);
        let known = set(vec![first, other]);
        let text = "Look packages up on crates.io, not in repositories.";
        assert_eq!(known.duplicate_of(text, Some(&[0.99, 0.05]), 0.8), Some(1));
        assert_eq!(
            known.duplicate_of(text, Some(&[0.7, 0.7]), 0.8),
            None,
            "cosine under 0.92"
        );
        assert_eq!(
            known.duplicate_of(text, None, 0.8),
            None,
            "no vector, no shared words"
        );
    }

    #[test]
    fn the_victim_is_the_least_useful_of_its_review_state_and_never_the_kept_one() {
        let mut voted_down = lesson(
            2,
            "When a build fails, read the first error.",
            ReviewState::Approved,
        );
        voted_down.down = 3;
        let mut pending = lesson(
            4,
            "When in doubt, ask the user a question.",
            ReviewState::Pending,
        );
        pending.down = 9;
        let known = set(vec![
            lesson(
                1,
                "When upgrading, read the changelog.",
                ReviewState::Approved,
            ),
            voted_down,
            lesson(
                3,
                "When a page times out, retry once.",
                ReviewState::Approved,
            ),
            pending,
        ]);
        let approved = ReviewState::Approved;
        assert_eq!(known.victim(approved, None, 4), None, "room for one more");
        assert_eq!(
            known.victim(approved, None, 3),
            Some(2),
            "the voted-down one"
        );
        assert_eq!(
            known.victim(approved, Some(2), 3),
            None,
            "the kept one does not count against the cap"
        );
        assert_eq!(
            known.victim(approved, Some(2), 2),
            Some(1),
            "then, at equal use, the older"
        );
        assert_eq!(known.victim(ReviewState::Pending, None, 1), Some(4));
        assert_eq!(known.victim(ReviewState::Pending, None, 2), None);
    }
}
