//! Reflective learning: skills matched to each message, lessons learned from finished turns
//! (after a turn, the model names what would help next time), retrieved for the later turns
//! they fit, and scored by what happened to the answers they shaped.
//!
//! # Retrieval
//! Every turn scores every eligible lesson against the user's message plus the names of the
//! matched skills ([`index`]: BM25, fused with embedding cosine when
//! `learning.embedding_model` is set). A lesson is eligible when it is approved (see
//! *Trust*) and its proven usefulness ([`utility`]) is at least `min_utility`; it fits when its
//! BM25 reaches `min_relevance` (about one distinctive shared word), when it is filed under a
//! matched skill, or, with embeddings, when its cosine reaches `min_similarity`; and it must
//! fit at least half as well as the best fitting one, so a lesson sharing one common word
//! does not ride along with one about the message's subject. The fitting ones are ranked by
//! fit × (utility + exploration bonus), general and skill lessons in one list, and the best
//! `max_injected` are injected. Lessons about a tool (see [`Lesson::tool`]) also fit a
//! message that is likely to call that tool, when the turn offers it ([`likely_tools()`]), and
//! come first: "what is the status of support case 77" shares no word with "write ticket ids
//! as TCK- and six digits", but it fits the ticket tool. A message that nothing fits gets no lessons. The ranking is a pure
//! function of the store and the message (ties by id), so the same store and message give the
//! same prompt bytes.
//!
//! # Scoring and forgetting
//! A turn that carried a lesson counts for it (or, if the turn went badly, against it); a
//! 👍 or 👎 on such an answer counts fully; being learned again from a trusted turn counts
//! half. At `max_lessons` the least useful goes, then the least recently injected, then
//! the oldest. Pending lessons (see *Trust*) have a cap of their own, `max_pending`: a new
//! pending one evicts only pending ones, in the same order, so a flood of untrusted lessons
//! can never push out an approved one; approved ones count against `max_lessons` only.
//!
//! # Trust
//! Lessons are shared by all users, so a web page must not be able to plant one. With
//! `review = "external"` (the default) a lesson learned from a turn whose context held text
//! a third party wrote (fetched pages, search results, MCP tool output) is stored *pending*:
//! never injected until an admin approves it in `/heuristics pending`. Such a turn never
//! reinforces a known lesson either. `"all"` holds every new lesson for review; `"none"`
//! none. Lessons with personal data or links are never stored ([`personal`]).
//!
//! # Where the learned block lives, and why
//! Matched skills' instructions and the `## Learned Heuristics` section are prepended to the
//! *current turn's user message* (see [`TurnContext::user_content`]), which is stored in the
//! history like any user message. The system prompt never changes, and a turn's request is
//! always the previous request plus new messages, so providers' prompt caches keep hitting even
//! right after something new was learned. A skill's instructions already present in the history
//! window are not repeated (only named), which keeps the token cost of long skills to once per
//! window. Reflections see the conversation with these blocks, byte for byte (the cache serves
//! them too); a lesson that only repeats one is dropped as an echo ([`echo`]), so a model
//! cannot learn back what it was told.

pub mod block;
pub mod echo;
mod embedding;
pub mod grounding;
pub mod index;
mod learn;
mod lesson_set;
pub mod lessons;
mod likely_tools;
mod listed;
pub mod personal;
pub mod probation;
pub mod quality;
mod rank;
pub(crate) mod reflection;
mod review;
pub mod rewrite;
pub mod skill_match;
#[cfg(test)]
mod skill_precision;
pub mod skills;
pub mod text;
mod tool_lessons;
pub mod transfer;
pub mod utility;

pub use block::without_context;
use block::{CONTEXT_CLOSE, CONTEXT_OPEN};
pub use likely_tools::likely_tools;

use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OnceCell, Semaphore};

use crate::budget::Ledger;
use crate::config::{LearningConfig, LlmConfig, MaxTokensField};
use crate::llm::LlmClient;
use crate::store::Store;
use lesson_set::LessonSet;
use lessons::Lesson;
use skill_match::SkillIndex;
use skills::Skill;

/// What learning adds to one turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct TurnContext {
    /// Skills' instructions and learned lessons; empty when there are none.
    pub preamble: String,
    /// Names of the matched skills.
    pub skills: Vec<String>,
    /// Ids of the lessons injected (what the turn's outcome and 👍/👎 will score).
    pub lessons: Vec<u64>,
    /// Their texts, in the order injected.
    pub texts: Vec<String>,
}

impl TurnContext {
    /// The user message the model sees: the preamble, clearly marked, then the user's text.
    pub(crate) fn user_content(&self, text: &str) -> String {
        if self.preamble.is_empty() {
            return text.to_string();
        }
        format!("{CONTEXT_OPEN}{}{CONTEXT_CLOSE}{text}", self.preamble)
    }
}

/// Where a reflection's lessons come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// How the turn went, in the words the reflection prompt got.
    pub outcome: String,
    /// The turn's context held content from outside the bot.
    pub external: bool,
    /// The task was a scheduled run: its lessons wait for an admin's ✅ whatever
    /// `learning.review` says, and it reinforces nothing.
    pub untrusted: bool,
    /// What a lesson the model wrote must carry from the turn's evidence (see [`grounding`]);
    /// `None` for lessons that come from no turn (seeded, imported, a job saved before).
    pub grounds: Option<crate::store::Grounds>,
    /// The skills matched in the turn.
    pub skills: Vec<String>,
    /// The tools the turn called: a lesson that names one of them is about that tool.
    pub tools: Vec<String>,
    /// The context blocks the turn's prompt carried: a lesson that only repeats one is an
    /// echo, not a lesson (see [`echo`]).
    pub given: Vec<String>,
}

/// What one reflection changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LearnReport {
    /// New lessons stored (of them, `pending` wait for review).
    pub added: usize,
    pub pending: usize,
    pub reinforced: usize,
    /// Empty, overlong or personal texts, echoes of the turn's context blocks, and untrusted
    /// repetitions of known lessons.
    pub dropped: usize,
    pub evicted: usize,
}

/// A lesson as `/heuristics` lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub lesson: Lesson,
    pub utility: f32,
}

/// The learning service; one per bot.
pub struct Learning {
    config: LearningConfig,
    skills: Vec<Skill>,
    skill_index: SkillIndex,
    store: Store,
    llm: LlmClient,
    /// Charges reflections and embeddings to the user whose turn they serve.
    ledger: Ledger,
    /// Skill embeddings, computed on first use; `None` inside when that failed.
    skill_vectors: OnceCell<Option<Vec<Vec<f32>>>>,
    /// Learned lessons; every change is written to sled under the write lock.
    memory: RwLock<LessonSet>,
    /// Bounds concurrent reflections.
    reflection_slots: Semaphore,
    /// Reflections started and not finished.
    reflections_running: AtomicUsize,
    /// Completion cap of reflection calls, and the field it goes in.
    max_tokens_reflection: u32,
    max_tokens_field: MaxTokensField,
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Learning {
    /// Loads the skills and the lessons stored in sled into memory.
    pub fn new(
        config: LearningConfig,
        llm_config: &LlmConfig,
        store: Store,
        llm: LlmClient,
        ledger: Ledger,
    ) -> Self {
        let skills = skills::load_skills(&config.skills_dir);
        let memory = LessonSet::load(store.learning().lessons());
        Self {
            skill_index: SkillIndex::new(&skills),
            reflection_slots: Semaphore::new(config.max_concurrent_reflections.max(1)),
            config,
            skills,
            store,
            llm,
            ledger,
            skill_vectors: OnceCell::new(),
            memory: RwLock::new(memory),
            reflections_running: AtomicUsize::new(0),
            max_tokens_reflection: llm_config.max_tokens_reflection,
            max_tokens_field: llm_config.max_tokens_field,
        }
    }

    pub(crate) fn skills(&self) -> &[Skill] {
        &self.skills
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, LessonSet> {
        self.memory.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, LessonSet> {
        self.memory.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The argument forms each of `tools` taught (see [`rewrite`]), per argument; empty when
    /// the bot does not learn (`learning.reflect` off).
    pub(crate) fn forms(&self, tools: &[String]) -> Vec<(String, rewrite::ToolForms)> {
        if !self.config.reflect {
            return Vec::new();
        }
        tools
            .iter()
            .map(|tool| (tool.clone(), rewrite::forms_of(&self.store, tool)))
            .collect()
    }

    /// Keeps what a turn taught of its tools' argument forms and how its rewritten calls went
    /// (see [`rewrite::keep`]).
    pub(crate) fn keep_forms(
        &self,
        taught: &[(String, String, rewrite::Example)],
        rewritten: &[(String, String, bool)],
    ) {
        if self.config.reflect {
            rewrite::keep(&self.store, taught, rewritten);
        }
    }

    /// Reflections started and not yet finished.
    pub fn reflections_running(&self) -> usize {
        self.reflections_running.load(Ordering::SeqCst)
    }
}
