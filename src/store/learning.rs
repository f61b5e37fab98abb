//! The learning trees: `heuristics` (the lessons: what the bot learned; the tree keeps its
//! first name), `reflections` (reflections saved
//! before they run, so a restart resumes them) and `skill_matches` (how often each skill was
//! picked for a turn). The rules for learning live in `crate::learning`; this file only keeps
//! the records.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::Result;
use super::records::{decode_count, decode_json, read};
use crate::ids::{ChatId, UserId};

const LESSONS_TREE: &str = db::LESSONS;
const REFLECTIONS_TREE: &str = db::REFLECTIONS;
const SKILL_MATCHES_TREE: &str = db::SKILL_MATCHES;

/// A stored lesson, with where it came from and what happened to the answers it shaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lesson {
    pub id: u64,
    /// The skill it belongs to; `None` for a general lesson.
    pub skill: Option<String>,
    pub text: String,
    /// How often it was learned (1, plus once for each time a trusted turn taught it again).
    pub uses: u32,
    /// Whether it may be injected yet.
    #[serde(default)]
    pub review: ReviewState,
    /// How the turn it was learned from went, and whether that turn read outside content.
    #[serde(default)]
    pub origin: Origin,
    /// Turns whose prompt carried it, and how those turns went.
    #[serde(default)]
    pub injected: u32,
    #[serde(default)]
    pub successes: u32,
    #[serde(default)]
    pub failures: u32,
    /// 👍 and 👎 on answers that carried it.
    #[serde(default)]
    pub up: u32,
    #[serde(default)]
    pub down: u32,
    /// Unix seconds; 0 for never.
    #[serde(default)]
    pub last_injected: i64,
    /// Unix seconds.
    pub created: i64,
    pub updated: i64,
    /// Its embedding, computed once when stored (when an embeddings model is configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
    /// The tool it is about (a tool the turn called), if any: it is shown with that tool's
    /// errors, just when a call to it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// On probation: learned from a failed-then-fixed call or a tool's refusal, and not yet
    /// shown to work. It is offered only beside that tool's failed result, never in the
    /// context block, until a call made with it in view works (see `learning::probation`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probation: bool,
    /// Calls made with it in view, on probation, that still failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trial_failures: u32,
}

/// `serde`'s test for leaving a zero count out.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Lesson {
    /// A lesson just learned at `at` (unix seconds): taught once, never injected, scored
    /// or voted on, without an embedding yet.
    pub(crate) fn learned(
        id: u64,
        skill: Option<String>,
        text: String,
        review: ReviewState,
        origin: Origin,
        at: i64,
    ) -> Self {
        Self {
            id,
            skill,
            text,
            uses: 1,
            review,
            origin,
            injected: 0,
            successes: 0,
            failures: 0,
            up: 0,
            down: 0,
            last_injected: 0,
            created: at,
            updated: at,
            vector: None,
            tool: None,
            probation: false,
            trial_failures: 0,
        }
    }
}

/// Whether a lesson may be injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewState {
    #[default]
    Approved,
    /// Learned from a turn that read text a third party wrote (or review is "all"): stored,
    /// never injected until an admin approves it.
    Pending,
}

/// Where a lesson came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The outcome of the turn it was learned from, as the reflection prompt said it.
    pub outcome: String,
    /// That turn's context held content from outside the bot (web pages, search results,
    /// MCP tool results).
    pub external: bool,
}

/// A reflection to run: the turn, the tools it used and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReflectionJob {
    pub chat: ChatId,
    /// The user whose turn the reflection follows, charged for its tokens (`None` in jobs
    /// stored before this was recorded).
    #[serde(default)]
    pub user: Option<UserId>,
    pub model: String,
    /// The user's request, cut to 512 characters (stored as `task`, its first name).
    #[serde(rename = "task")]
    pub request: String,
    pub tools: Vec<String>,
    pub outcome: String,
    /// The turn's context held content from outside the bot (web pages, search results, MCP
    /// tool output): what it teaches waits for review.
    #[serde(default)]
    pub external: bool,
    /// The task was a scheduled run: what it teaches is never trusted by itself, pending an
    /// admin's ✅ whatever `learning.review` says (see [`crate::provenance`]). Written only
    /// when set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
    /// The answer a 👎 rated, cut to 2,000 characters: the reflection reads the request and
    /// this answer instead of the turn's whole request.
    #[serde(default)]
    pub answer: Option<String>,
    /// The skills matched in the turn: a lesson is filed under one of them, or under another
    /// skill only if it fits that skill better than the general bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// The turn's tool calls, their errors and fixes, and the previous answer its message
    /// corrected (see [`crate::agent::evidence`]); empty when it called no tool and corrected
    /// nothing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evidence: String,
    /// Lessons the turn's calls prove by themselves, as (tool, lesson): a failed call, then
    /// one to the same tool that worked (the agent's `evidence::proven_lessons`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proven: Vec<(String, String)>,
    /// What a lesson the model writes must carry from this turn's evidence to be stored (see
    /// `learning::grounding`); `None` in jobs saved before lessons had to be grounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grounds: Option<Grounds>,
}

/// The concrete things a turn's evidence states, which a lesson learned from it must carry
/// (see `learning::grounding`): the values and formats a tool's own refusal stated and the
/// arguments of the call that then worked (lower-cased; never the failed call's own values),
/// and the content words (stemmed) of those refusals and of the user's correction, less the
/// words of the request itself; and the values of the calls the tool refused, which ground
/// nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grounds {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Content words of the tools' refusals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stated: Vec<String>,
    /// Content words of the user's correction of the previous answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrected: Vec<String>,
    /// The argument values of the turn's refused calls that no call that worked used
    /// (lower-cased): a lesson that carries one teaches the value that failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// Lessons, pending reflections and skill-match counts:
/// [`Store::learning`], a borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct LearningTree<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Lessons, reflections and skill matches.
    pub fn learning(&self) -> LearningTree<'_> {
        LearningTree { store: self }
    }
}

impl LearningTree<'_> {
    /// Every stored lesson, in id order.
    pub fn lessons(&self) -> Vec<Lesson> {
        self.store
            .lessons
            .iter()
            .filter_map(|entry| match entry {
                Ok((key, value)) => decode_json(LESSONS_TREE, &key, &value),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read lessons");
                    None
                }
            })
            .collect()
    }

    pub(crate) fn new_lesson_id(&self) -> Result<u64> {
        self.store.db().next_id()
    }

    pub(crate) fn put_lesson(&self, lesson: &Lesson) -> Result<()> {
        self.store
            .lessons
            .insert(lesson.id.to_be_bytes(), serde_json::to_vec(lesson)?)?;
        Ok(())
    }

    /// Removes a lesson; says whether it existed.
    pub(crate) fn delete_lesson(&self, id: u64) -> Result<bool> {
        Ok(self.store.lessons.remove(id.to_be_bytes())?.is_some())
    }

    /// Persists a reflection before it runs, so a restart can resume it.
    pub(crate) fn save_reflection(&self, job: &ReflectionJob) -> Result<u64> {
        let id = self.store.db().next_id()?;
        self.store
            .reflections
            .insert(id.to_be_bytes(), serde_json::to_vec(job)?)?;
        Ok(id)
    }

    pub(crate) fn finish_reflection(&self, id: u64) -> Result<()> {
        self.store.reflections.remove(id.to_be_bytes())?;
        Ok(())
    }

    /// Reflections saved but not finished (a previous run stopped first). An unreadable job
    /// cannot run: it is logged and kept (it may be repaired), never deleted.
    pub fn pending_reflections(&self) -> Vec<(u64, ReflectionJob)> {
        self.store
            .reflections
            .iter()
            .filter_map(Result::ok)
            .filter_map(|(key, value)| {
                let id = u64::from_be_bytes(key.as_ref().try_into().ok()?);
                Some((id, decode_json(REFLECTIONS_TREE, &key, &value)?))
            })
            .collect()
    }

    pub(crate) fn count_skill_match(&self, skill: &str) -> Result<()> {
        self.store
            .skill_matches
            .fetch_and_update(skill.as_bytes(), |old| {
                // An unreadable count is kept as it is, not restarted from 0.
                match old {
                    Some(old) if old.len() != 8 => {
                        decode_count(SKILL_MATCHES_TREE, skill.as_bytes(), Some(old));
                        Some(old.to_vec())
                    }
                    old => {
                        let count = decode_count(SKILL_MATCHES_TREE, skill.as_bytes(), old);
                        Some(count.saturating_add(1).to_be_bytes().to_vec())
                    }
                }
            })?;
        Ok(())
    }

    pub(crate) fn skill_matches(&self, skill: &str) -> u64 {
        let bytes = read(
            &self.store.skill_matches,
            SKILL_MATCHES_TREE,
            skill.as_bytes(),
        );
        decode_count(SKILL_MATCHES_TREE, skill.as_bytes(), bytes.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    fn job(task: &str) -> ReflectionJob {
        super::super::fixtures::job(ChatId(1), task)
    }

    #[test]
    fn unreadable_learning_records_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lesson = super::super::fixtures::lesson(
            store.learning().new_lesson_id().unwrap(),
            "check the units",
        );
        store.learning().put_lesson(&lesson).unwrap();
        store.lessons.insert(u64::MAX.to_be_bytes(), "{").unwrap();
        assert_eq!(store.learning().lessons(), vec![lesson]);

        let kept = store.learning().save_reflection(&job("kept")).unwrap();
        store
            .reflections
            .insert(u64::MAX.to_be_bytes(), "[")
            .unwrap();
        assert_eq!(
            store.learning().pending_reflections(),
            vec![(kept, job("kept"))]
        );
        assert_eq!(store.reflections.len(), 2, "the unreadable job is kept");

        store.skill_matches.insert("weather", "odd").unwrap();
        assert_eq!(store.learning().skill_matches("weather"), 0);
        store.learning().count_skill_match("weather").unwrap();
        assert_eq!(
            store.skill_matches.get("weather").unwrap().as_deref(),
            Some(&b"odd"[..]),
            "an unreadable count is not restarted"
        );
        store.learning().count_skill_match("sailing").unwrap();
        store.learning().count_skill_match("sailing").unwrap();
        assert_eq!(store.learning().skill_matches("sailing"), 2);
    }
}
