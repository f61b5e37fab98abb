//! Retrieval: the skills and lessons that fit a turn's message, ranked (see the module doc of
//! [`super`], *Retrieval*). [`rank`] is a pure function of the lessons, the configuration and
//! the message, so the same store and message give the same prompt bytes.

use std::collections::HashMap;

use super::lesson_set::LessonSet;
use super::lessons::{Lesson, ReviewState, format_lessons_section};
use super::skills::Skill;
use super::text::cosine;
use super::utility::exploration_bonus;
use super::{Learning, TurnContext, quality};
use crate::budget::Payer;
use crate::config::LearningConfig;
use crate::llm::{ChatMessage, ToolSpec};

/// How a lesson's specificity weighs its rank: at equal fit and proven use, a lesson that
/// names a format, a value or a tool outranks general advice (stored before the quality gate
/// was, or just above it).
fn specificity_weight(text: &str) -> f32 {
    0.5 + 0.5 * quality::specificity(text)
}

/// A fitting lesson is injected only if it fits at least this share as well as the best.
const RELATIVE_FIT: f32 = 0.5;

impl Learning {
    /// The skills that fit `message`, best first: those its words give `min_skill_score` of
    /// evidence for ([`skill_match`]), or, with an embeddings model, whose similarity reaches
    /// `min_similarity`; ranked by evidence, fused with similarity when there is a model. The
    /// turn gets its skills with its lessons ([`Self::context_for`]); this is for measuring.
    #[cfg(test)]
    pub(crate) async fn match_skills(&self, message: &str) -> Vec<&Skill> {
        let query = self
            .embed_query(message, &self.ledger.payer(None, None))
            .await;
        self.match_skills_with(message, query.as_deref()).await
    }

    async fn match_skills_with(&self, message: &str, query: Option<&[f32]>) -> Vec<&Skill> {
        if self.skills.is_empty() {
            return Vec::new();
        }
        let evidence = self.skill_index.evidence(message);
        let similarity = match query {
            Some(query) => self
                .skill_embeddings()
                .await
                .map(|skills| skills.iter().map(|v| cosine(query, v)).collect::<Vec<_>>()),
            None => None,
        };
        let best = evidence.iter().copied().fold(0.0_f32, f32::max);
        let mut ranked: Vec<(usize, f32)> = evidence
            .iter()
            .enumerate()
            .filter_map(|(i, &score)| {
                let cos = similarity.as_ref().map_or(0.0, |s| s[i].max(0.0));
                let lexical = score >= self.config.min_skill_score;
                let semantic = similarity.is_some() && cos >= self.config.min_similarity;
                if !(lexical || semantic) {
                    return None;
                }
                let normalised = if best > 0.0 { score / best } else { 0.0 };
                let fused = if similarity.is_some() {
                    0.5 * normalised + 0.5 * cos
                } else {
                    score
                };
                Some((i, fused))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
            .into_iter()
            .take(self.config.max_active_skills)
            .map(|(i, _)| &self.skills[i])
            .collect()
    }

    /// Skills and lessons for a turn on `message`, given the history window it extends
    /// and the `tools` the turn offers; the message's embedding is charged to `payer`.
    pub(crate) async fn context_for(
        &self,
        message: &str,
        history: &[ChatMessage],
        tools: &[ToolSpec],
        payer: &Payer,
    ) -> TurnContext {
        let query_vector = self.embed_query(message, payer).await;
        let matched = self
            .match_skills_with(message, query_vector.as_deref())
            .await;
        let mut context = TurnContext::default();
        for skill in &matched {
            // Dropped (logged): a lost count only ranks the skill a little lower; the turn goes on.
            if let Err(e) = self.store.learning().count_skill_match(&skill.name) {
                tracing::debug!(error = %e, "cannot count a skill match");
            }
            let marker = format!("## Skill: {}\n", skill.name);
            let seen = history
                .iter()
                .any(|m| matches!(m, ChatMessage::User { .. }) && m.content().contains(&marker));
            if seen {
                context.preamble.push_str(&format!(
                    "## Skill: {} (instructions given earlier)\n",
                    skill.name
                ));
            } else {
                context.preamble.push_str(&marker);
                context.preamble.push_str(&skill.body);
                context.preamble.push('\n');
            }
            context.preamble.push('\n');
            context.skills.push(skill.name.clone());
        }
        let mut query = message.to_string();
        for skill in &context.skills {
            query.push(' ');
            query.push_str(skill);
        }
        // Lessons about a tool the message is likely to need come first: they fit by the tool
        // even when the message shares no word with them ("check ticket 5127" and "write
        // desk ids as TCK-"); the rest of the block is the best fitting lessons.
        let mut chosen = self.likely_tool_lessons(message, tools);
        for lesson in self.retrieve(&query, query_vector.as_deref(), &context.skills) {
            if !chosen.iter().any(|h| h.id == lesson.id) {
                chosen.push(lesson);
            }
        }
        for lesson in chosen.into_iter().take(self.config.max_injected) {
            context.lessons.push(lesson.id);
            context.texts.push(lesson.text);
        }
        context
            .preamble
            .push_str(&format_lessons_section(&context.texts));
        context
    }

    /// The lessons to inject for `query`, best first (see the module doc). A lesson
    /// filed under one of the `matched` skills fits by that match (the skill was judged to fit
    /// the message), and is ranked by its own relevance like the others.
    pub fn retrieve(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        matched: &[String],
    ) -> Vec<Lesson> {
        rank(&self.read(), &self.config, query, query_vector, matched)
    }

    /// Whether `lesson` may be injected: approved, and not proven useless.
    pub(super) fn usable(&self, lesson: &Lesson) -> bool {
        lesson.review == ReviewState::Approved && lesson.utility() >= self.config.min_utility
    }

    /// Whether `lesson` may go into a prompt's context block: usable, and not on probation
    /// (see [`super::probation`]: such a lesson is shown only beside its tool's failed result).
    pub(super) fn in_block(&self, lesson: &Lesson) -> bool {
        self.usable(lesson) && !lesson.probation
    }
}

/// The lessons of `lessons` to inject for `query` (embedded as `query_vector`), best first,
/// under `config`'s thresholds; see [`Learning::retrieve`].
pub(super) fn rank(
    memory: &LessonSet,
    config: &LearningConfig,
    query: &str,
    query_vector: Option<&[f32]>,
    matched: &[String],
) -> Vec<Lesson> {
    let lexical: HashMap<u64, f32> = memory.index.relevance(query).into_iter().collect();
    let semantic: HashMap<u64, f32> = match query_vector {
        Some(query) => memory
            .records
            .values()
            .filter_map(|h| Some((h.id, cosine(query, h.vector.as_ref()?).max(0.0))))
            .collect(),
        None => HashMap::new(),
    };
    let best_lexical = lexical.values().copied().fold(0.0_f32, f32::max);
    // Only lessons that share a term, have a vector, or belong to a matched skill can
    // fit: the rest of the store is not looked at.
    let mut candidates: Vec<u64> = lexical.keys().chain(semantic.keys()).copied().collect();
    if !matched.is_empty() {
        candidates.extend(
            memory
                .records
                .values()
                .filter(|h| h.skill.as_ref().is_some_and(|s| matched.contains(s)))
                .map(|h| h.id),
        );
    }
    candidates.sort_unstable();
    candidates.dedup();
    // How well each eligible lesson fits: BM25, or BM25 (as a share of the best) fused
    // with cosine when embeddings are on.
    let mut fitting: Vec<(f32, &Lesson)> = candidates
        .iter()
        .filter_map(|id| memory.records.get(id))
        // A lesson on probation is offered only beside its tool's failed result.
        .filter(|h| h.review == ReviewState::Approved && h.utility() >= config.min_utility)
        .filter(|h| !h.probation)
        .filter_map(|h| {
            let mut bm25 = lexical.get(&h.id).copied().unwrap_or(0.0);
            if h.skill.as_ref().is_some_and(|s| matched.contains(s)) {
                bm25 = bm25.max(config.min_relevance);
            }
            let cos = semantic.get(&h.id).copied();
            let fits =
                bm25 >= config.min_relevance || cos.is_some_and(|c| c >= config.min_similarity);
            if !fits {
                return None;
            }
            let fit = match cos {
                Some(cos) if best_lexical > 0.0 => 0.5 * (bm25 / best_lexical).min(1.0) + 0.5 * cos,
                Some(cos) => 0.5 * cos,
                None => bm25,
            };
            Some((fit, h))
        })
        .collect();
    // Of those, only the ones that fit about as well as the best: a lesson that shares
    // one common word does not ride along with one that shares the message's subject.
    let best = fitting.iter().map(|(fit, _)| *fit).fold(0.0_f32, f32::max);
    fitting.retain(|(fit, _)| *fit >= RELATIVE_FIT * best);
    let mut ranked: Vec<(f32, &Lesson)> = fitting
        .into_iter()
        .map(|(fit, h)| {
            let worth = h.utility() + exploration_bonus(h.injected);
            (fit * worth * specificity_weight(&h.text), h)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    ranked
        .into_iter()
        .take(config.max_injected)
        .map(|(_, h)| h.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::store::Origin;

    fn config() -> LearningConfig {
        let mut config = Config::from_toml(None, Path::new("x.toml"))
            .expect("the defaults")
            .learning;
        config.min_relevance = 1.0;
        config.max_injected = 3;
        config
    }

    fn lesson(id: u64, skill: Option<&str>, text: &str) -> Lesson {
        let skill = skill.map(str::to_string);
        Lesson::learned(
            id,
            skill,
            text.into(),
            ReviewState::Approved,
            Origin::default(),
            0,
        )
    }

    fn ids(ranked: &[Lesson]) -> Vec<u64> {
        ranked.iter().map(|h| h.id).collect()
    }

    fn store() -> Vec<Lesson> {
        vec![
            lesson(
                1,
                None,
                "When upgrading cargo dependencies, read each crate's changelog first.",
            ),
            lesson(
                2,
                None,
                "When a cargo build fails after upgrading dependencies, run cargo update -p on the crate.",
            ),
            lesson(
                3,
                None,
                "When writing a sonnet, keep fourteen lines of iambic pentameter.",
            ),
            lesson(
                4,
                Some("git-help"),
                "When rebasing, run git rebase --interactive with autosquash.",
            ),
            lesson(
                5,
                None,
                "When a web page times out, retry once with a 30 s timeout.",
            ),
            lesson(
                6,
                None,
                "When a spreadsheet formula breaks, check for circular references.",
            ),
        ]
    }

    #[test]
    fn the_fitting_lessons_come_best_first_and_the_rest_are_left_out() {
        let set = LessonSet::load(store());
        let query = "the cargo build fails after upgrading dependencies";
        let ranked = rank(&set, &config(), query, None, &[]);
        assert_eq!(
            ids(&ranked),
            [2, 1],
            "the closer fit first; nothing unrelated"
        );
        assert!(rank(&set, &config(), "hello there", None, &[]).is_empty());
    }

    #[test]
    fn a_lesson_filed_under_a_matched_skill_fits_by_the_match() {
        let set = LessonSet::load(store());
        let query = "tidy my branch history";
        assert!(rank(&set, &config(), query, None, &[]).is_empty());
        let matched = ["git-help".to_string()];
        assert_eq!(ids(&rank(&set, &config(), query, None, &matched)), [4]);
    }

    #[test]
    fn pending_useless_and_probation_lessons_are_not_injected() {
        let mut lessons = store();
        lessons[0].review = ReviewState::Pending;
        lessons[1].probation = true;
        let set = LessonSet::load(lessons.clone());
        let query = "the cargo build fails after upgrading dependencies";
        assert!(rank(&set, &config(), query, None, &[]).is_empty());
        lessons[0].review = ReviewState::Approved;
        lessons[0].down = 20;
        let set = LessonSet::load(lessons);
        assert!(
            rank(&set, &config(), query, None, &[]).is_empty(),
            "proven useless"
        );
    }

    #[test]
    fn a_weak_fit_does_not_ride_along_and_at_most_max_injected_go() {
        let set = LessonSet::load(store());
        let mut config = config();
        // "timeout" is shared with lesson 5 only, the cargo words with 1 and 2: 5 fits by
        // far less than half as well as the best.
        let query = "cargo build fails after upgrading dependencies changelog crate timeout";
        let ranked = ids(&rank(&set, &config, query, None, &[]));
        assert!(!ranked.contains(&5), "{ranked:?}");
        config.max_injected = 1;
        assert_eq!(rank(&set, &config, query, None, &[]).len(), 1);
    }

    #[test]
    fn the_ranking_is_the_same_for_the_same_store_and_message() {
        let query = "the cargo build fails after upgrading dependencies";
        let first = ids(&rank(
            &LessonSet::load(store()),
            &config(),
            query,
            None,
            &[],
        ));
        let mut reversed = store();
        reversed.reverse();
        let second = ids(&rank(
            &LessonSet::load(reversed),
            &config(),
            query,
            None,
            &[],
        ));
        assert_eq!(first, second);
    }
}
