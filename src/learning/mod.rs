//! Reflective learning: skills matched to each message, heuristics learned from finished tasks
//! (experiential reflective learning: after a task, the model names what would help next
//! time), injected into later prompts, and tuned by users' 👍/👎.
//!
//! # Where the learned block lives, and why
//! Matched skills' instructions and the `## Learned Heuristics` sections are prepended to the
//! *current turn's user message* (see [`TurnContext::user_content`]), which is stored in the
//! history like any user message. The system prompt never changes, and a turn's request is
//! always the previous request plus new messages, so providers' prompt caches keep hitting even
//! right after something new was learned. A skill's instructions already present in the history
//! window are not repeated (only named), which keeps the token cost of long skills to once per
//! window.

pub mod heuristics;
pub mod index;
pub mod reflection;
pub mod skills;
pub mod text;
pub mod utility;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OnceCell, Semaphore};

use crate::config::{LearningConfig, LlmConfig, MaxTokensField};
use crate::llm::{ChatMessage, LlmClient};
use crate::store::Store;
use heuristics::{
    DOWNVOTE_STEP, Heuristic, HeuristicEntry, INITIAL_CONFIDENCE, REINFORCE_STEP, UPVOTE_STEP,
    acceptable, eviction_candidate, format_heuristics_section, rank,
};
use skills::Skill;
use text::{Bm25, cosine, text_similarity};

/// What learning adds to one turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TurnContext {
    /// Skills' instructions and learned heuristics; empty when there are none.
    pub preamble: String,
    /// Names of the matched skills.
    pub skills: Vec<String>,
    /// Ids of the heuristics injected (what 👍/👎 on the answer will adjust).
    pub heuristics: Vec<u64>,
}

impl TurnContext {
    /// The user message the model sees: the preamble, clearly marked, then the user's text.
    pub fn user_content(&self, text: &str) -> String {
        if self.preamble.is_empty() {
            return text.to_string();
        }
        format!(
            "[Context from Heurist for this message: skills and learned heuristics, not written \
             by the user]\n{}[End of context]\n\n{text}",
            self.preamble
        )
    }
}

/// What one reflection changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LearnReport {
    pub added: usize,
    pub reinforced: usize,
    pub dropped: usize,
}

/// The learning service; one per bot.
pub struct Learning {
    config: LearningConfig,
    skills: Vec<Skill>,
    index: Bm25,
    store: Store,
    llm: LlmClient,
    /// Skill embeddings, computed on first use; `None` inside when that failed.
    skill_vectors: OnceCell<Option<Vec<Vec<f32>>>>,
    /// Serialises read-modify-write of heuristics (reflections run concurrently).
    writing: Mutex<()>,
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
    pub fn new(
        config: LearningConfig,
        llm_config: &LlmConfig,
        store: Store,
        llm: LlmClient,
    ) -> Self {
        let skills = skills::load_skills(&config.skills_dir);
        let documents: Vec<String> = skills
            .iter()
            .map(|s| format!("{} {} {} {}", s.name, s.name, s.description, s.body))
            .collect();
        Self {
            index: Bm25::new(&documents),
            reflection_slots: Semaphore::new(config.max_concurrent_reflections.max(1)),
            config,
            skills,
            store,
            llm,
            skill_vectors: OnceCell::new(),
            writing: Mutex::new(()),
            reflections_running: AtomicUsize::new(0),
            max_tokens_reflection: llm_config.max_tokens_reflection,
            max_tokens_field: llm_config.max_tokens_field,
        }
    }

    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The skills that fit `message`, best first: BM25 over name, description and body
    /// (k1 = 1.2, b = 0.75), fused with embedding similarity when an embeddings model is set.
    pub async fn match_skills(&self, message: &str) -> Vec<&Skill> {
        if self.skills.is_empty() {
            return Vec::new();
        }
        let bm25 = self.index.scores(message);
        let similarity = self.similarities(message).await;
        let best = bm25.iter().copied().fold(0.0_f32, f32::max);
        let mut ranked: Vec<(usize, f32)> = bm25
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

    /// Cosine similarity of `message` to each skill, if an embeddings model is configured and
    /// answers; otherwise `None` (BM25 alone decides).
    async fn similarities(&self, message: &str) -> Option<Vec<f32>> {
        let model = self.config.embedding_model.as_str();
        if model.is_empty() {
            return None;
        }
        let skills = self
            .skill_vectors
            .get_or_init(|| async {
                let texts: Vec<String> = self
                    .skills
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.description))
                    .collect();
                match self.llm.embed(model, &texts).await {
                    Ok(vectors) => Some(vectors),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot embed skills; matching with BM25 only");
                        None
                    }
                }
            })
            .await
            .as_ref()?;
        match self.llm.embed(model, &[message.to_string()]).await {
            Ok(mut vectors) => {
                let query = vectors.pop()?;
                Some(skills.iter().map(|v| cosine(&query, v)).collect())
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot embed the message; matching with BM25 only");
                None
            }
        }
    }

    /// The top heuristics to inject for `skill` (`None`: general), from `all`.
    fn top(&self, all: &[Heuristic], skill: Option<&str>) -> Vec<Heuristic> {
        let mut chosen: Vec<Heuristic> = all
            .iter()
            .filter(|h| h.skill.as_deref() == skill && h.confidence >= self.config.min_confidence)
            .cloned()
            .collect();
        rank(&mut chosen);
        chosen.truncate(self.config.max_injected);
        chosen
    }

    /// Skills and heuristics for a turn on `message`, given the history window it extends.
    pub async fn context_for(&self, message: &str, history: &[ChatMessage]) -> TurnContext {
        let matched = self.match_skills(message).await;
        let all = self.store.heuristics();
        let mut context = TurnContext::default();
        let inject = |context: &mut TurnContext, heuristics: Vec<Heuristic>| {
            let texts: Vec<String> = heuristics.iter().map(|h| h.text.clone()).collect();
            context
                .preamble
                .push_str(&format_heuristics_section(&texts));
            context.heuristics.extend(heuristics.iter().map(|h| h.id));
        };
        for skill in matched {
            if let Err(e) = self.store.count_skill_match(&skill.name) {
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
            inject(&mut context, self.top(&all, Some(&skill.name)));
            context.preamble.push('\n');
            context.skills.push(skill.name.clone());
        }
        inject(&mut context, self.top(&all, None));
        context
    }

    /// Stores what a reflection extracted: de-duplicated by word-set Jaccard within the same
    /// skill (a duplicate reinforces the known heuristic), capped per skill.
    pub fn learn(&self, entries: Vec<HeuristicEntry>) -> anyhow::Result<LearnReport> {
        let _guard = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.store.heuristics();
        let mut report = LearnReport::default();
        for entry in entries {
            let text = entry.text.trim().to_string();
            if !acceptable(&text) {
                report.dropped += 1;
                continue;
            }
            let skill = entry.skill_name.and_then(|name| {
                self.skills
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
                    .map(|s| s.name.clone())
            });
            let duplicate = all
                .iter_mut()
                .filter(|h| h.skill == skill)
                .map(|h| (text_similarity(&h.text, &text), h))
                .filter(|(similarity, _)| *similarity >= self.config.dedup_threshold)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, h)| h);
            if let Some(known) = duplicate {
                known.uses += 1;
                known.confidence = (known.confidence + REINFORCE_STEP).min(1.0);
                known.updated = now();
                self.store.put_heuristic(known)?;
                report.reinforced += 1;
                continue;
            }
            let bucket: Vec<Heuristic> = all.iter().filter(|h| h.skill == skill).cloned().collect();
            if bucket.len() >= self.config.max_per_skill
                && let Some(evicted) = eviction_candidate(&bucket)
            {
                tracing::info!(id = evicted.id, skill = ?skill, "evicting the least confident heuristic");
                self.store.delete_heuristic(evicted.id)?;
                all.retain(|h| h.id != evicted.id);
            }
            let heuristic = Heuristic {
                id: self.store.new_heuristic_id()?,
                skill,
                text,
                confidence: INITIAL_CONFIDENCE,
                uses: 1,
                created: now(),
                updated: now(),
            };
            self.store.put_heuristic(&heuristic)?;
            tracing::info!(id = heuristic.id, skill = ?heuristic.skill, "learned a heuristic");
            all.push(heuristic);
            report.added += 1;
        }
        Ok(report)
    }

    /// 👍 raises, 👎 lowers the confidence of the heuristics an answer's prompt carried.
    pub fn feedback(&self, ids: &[u64], up: bool) -> anyhow::Result<()> {
        let _guard = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        for mut heuristic in self
            .store
            .heuristics()
            .into_iter()
            .filter(|h| ids.contains(&h.id))
        {
            heuristic.confidence = if up {
                (heuristic.confidence + UPVOTE_STEP).min(1.0)
            } else {
                (heuristic.confidence - DOWNVOTE_STEP).max(0.0)
            };
            heuristic.updated = now();
            self.store.put_heuristic(&heuristic)?;
        }
        Ok(())
    }

    /// Forgets a heuristic (admin action); says whether it existed.
    pub fn forget(&self, id: u64) -> anyhow::Result<bool> {
        let _guard = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.store.delete_heuristic(id)
    }

    /// Reflections started and not yet finished.
    pub fn reflections_running(&self) -> usize {
        self.reflections_running.load(Ordering::SeqCst)
    }
}
