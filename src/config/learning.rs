//! `[learning]`: skills, lessons, reflection and their review.

use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearningConfig {
    pub skills_dir: PathBuf,
    pub max_active_skills: usize,
    /// The evidence a message must give for a skill (see `learning::skill_match`): 2 is two
    /// words of the skill's name or description.
    pub min_skill_score: f32,
    pub embedding_model: String,
    pub min_similarity: f32,
    pub reflect: bool,
    pub max_concurrent_reflections: usize,
    pub dedup_threshold: f32,
    pub max_injected: usize,
    pub min_relevance: f32,
    pub min_utility: f32,
    /// Approved lessons kept at most (the file's key keeps its first name, `max_heuristics`).
    #[serde(rename = "max_heuristics")]
    pub max_lessons: usize,
    /// Lessons held for review kept at most, apart from `max_lessons`: a new pending one
    /// evicts only pending ones, so untrusted lessons never push out approved ones.
    pub max_pending: usize,
    pub review: Review,
    /// A lesson the model writes is stored only if it carries something concrete from its
    /// task's evidence (see `learning::grounding`); off, the other gates alone decide.
    pub grounded_only: bool,
    pub feedback_buttons: bool,
}

/// Which new lessons wait for an admin's approval before they are injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Review {
    /// Those learned from turns whose context held text a third party wrote.
    External,
    All,
    None,
}
