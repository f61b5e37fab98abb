//! Reflective learning: skills matched to each message, heuristics learned from finished tasks
//! (after a task, the model names what would help next time), retrieved for the later tasks
//! they fit, and scored by what happened to the answers they shaped.
//!
//! # Retrieval
//! Every turn scores every eligible heuristic against the user's message plus the names of the
//! matched skills ([`index`]: BM25, fused with embedding cosine when
//! `learning.embedding_model` is set). A heuristic is eligible when it is approved (see
//! *Trust*) and its proven usefulness ([`utility`]) is at least `min_utility`; it fits when its
//! BM25 reaches `min_relevance` (about one distinctive shared word), when it is filed under a
//! matched skill, or, with embeddings, when its cosine reaches `min_similarity`; and it must
//! fit at least half as well as the best fitting one, so a heuristic sharing one common word
//! does not ride along with one about the message's subject. The fitting ones are ranked by
//! fit × (utility + exploration bonus), general and skill heuristics in one list, and the best
//! `max_injected` are injected. Lessons about a tool (see [`Heuristic::tool`]) also fit a
//! message that is likely to call that tool, when the turn offers it ([`likely_tools`]), and
//! come first: "what is the status of support case 77" shares no word with "write ticket ids
//! as TCK- and six digits", but it fits the ticket tool. A message that nothing fits gets no heuristics. The ranking is a pure
//! function of the store and the message (ties by id), so the same store and message give the
//! same prompt bytes.
//!
//! # Scoring and forgetting
//! A turn that carried a heuristic counts for it (or, if the turn went badly, against it); a
//! 👍 or 👎 on such an answer counts fully; being learned again from a trusted task counts
//! half. At `max_heuristics` the least useful goes, then the least recently injected, then
//! the oldest. Pending heuristics (see *Trust*) have a cap of their own, `max_pending`: a new
//! pending one evicts only pending ones, in the same order, so a flood of untrusted lessons
//! can never push out an approved one; approved ones count against `max_heuristics` only.
//!
//! # Trust
//! Heuristics are shared by all users, so a web page must not be able to plant one. With
//! `review = "external"` (the default) a heuristic learned from a turn whose context held text
//! a third party wrote (fetched pages, search results, MCP tool output) is stored *pending*:
//! never injected until an admin approves it in `/heuristics pending`. Such a turn never
//! reinforces a known heuristic either. `"all"` holds every new heuristic for review; `"none"`
//! none. Heuristics with personal data or links are never stored ([`personal`]).
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
pub mod grounding;
pub mod heuristics;
pub mod index;
pub mod personal;
pub mod probation;
pub mod quality;
pub(crate) mod reflection;
pub mod rewrite;
pub mod skill_match;
#[cfg(test)]
mod skill_precision;
pub mod skills;
pub mod text;
pub mod transfer;
pub mod utility;

pub use block::without_context;
use block::{CONTEXT_CLOSE, CONTEXT_OPEN};

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OnceCell, Semaphore};

use crate::budget::{Ledger, Payer};
use crate::config::{LearningConfig, LlmConfig, MaxTokensField, Review};
use crate::llm::{ChatMessage, LlmClient, Priority, ToolSpec};
use crate::store::Store;
use heuristics::{
    Heuristic, HeuristicEntry, Origin, ReviewState, acceptable, format_heuristics_section,
};
use index::Index;
use skill_match::SkillIndex;
use skills::Skill;
use text::{cosine, text_similarity};
use utility::{eviction_order, exploration_bonus};

/// How a lesson's specificity weighs its rank: at equal fit and proven use, a lesson that
/// names a format, a value or a tool outranks general advice (stored before the quality gate
/// was, or just above it).
fn specificity_weight(text: &str) -> f32 {
    0.5 + 0.5 * quality::specificity(text)
}

/// Lessons about one tool shown with its failed call, at most.
pub(crate) const LESSONS_PER_TOOL: usize = 2;

/// The tool a new lesson is about: the one the reflection named, if the task called it, or
/// else the first tool of the task whose name the lesson mentions (an MCP tool by its
/// server's name for it too: "ticket" for `desk__ticket`, as models write it).
fn tool_of(text: &str, named: Option<&str>, called: &[String]) -> Option<String> {
    let short = |tool: &str| tool.rsplit("__").next().unwrap_or(tool).to_lowercase();
    if let Some(named) = named.map(str::trim)
        && let Some(tool) = called
            .iter()
            .find(|t| t.as_str() == named || short(t) == named.to_lowercase())
    {
        return Some(tool.clone());
    }
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .map(str::to_lowercase)
        .collect();
    called
        .iter()
        .find(|tool| {
            words
                .iter()
                .any(|word| *word == tool.to_lowercase() || *word == short(tool))
        })
        .cloned()
}

/// How lessons about one tool are ordered: proven use (with the exploration bonus untested
/// ones get), times specificity.
fn tool_rank(heuristic: &Heuristic) -> f32 {
    (heuristic.utility() + exploration_bonus(heuristic.injected))
        * quality::specificity(&heuristic.text)
}

/// The offered `tools` that `message` is likely to call: a word of the tool's name (its MCP
/// short name split at `_` and `-`: "ticket" in `desk__ticket_status`) is a term of the
/// message, or two distinctive terms of its description are. Terms are stemmed and without
/// stopwords ([`text::terms`]), so "tickets" fits `ticket` and "what is" fits nothing.
///
/// ```
/// use heurist::learning::likely_tools;
/// use heurist::llm::ToolSpec;
/// use serde_json::json;
/// let tools = [
///     ToolSpec::function("desk__ticket", "Look up a support ticket's status", json!({})),
///     ToolSpec::function("fetch_url", "Fetch a web page and return its text", json!({})),
/// ];
/// assert_eq!(likely_tools("Can you check my tickets 5127?", &tools), ["desk__ticket"]);
/// assert_eq!(likely_tools("What is the status of my support request?", &tools), ["desk__ticket"]);
/// assert!(likely_tools("Write me a poem", &tools).is_empty());
/// ```
pub fn likely_tools<'a>(
    message: &str,
    tools: impl IntoIterator<Item = &'a ToolSpec>,
) -> Vec<String> {
    let message: std::collections::HashSet<String> = text::terms(message).into_iter().collect();
    if message.is_empty() {
        return Vec::new();
    }
    tools
        .into_iter()
        .filter(|tool| {
            let name = tool.function.name.as_ref();
            let short = name.rsplit("__").next().unwrap_or(name);
            let by_name = text::terms(&short.replace(['_', '-'], " "))
                .iter()
                .any(|term| message.contains(term));
            let mut described: Vec<String> = text::terms(&tool.function.description);
            described.sort_unstable();
            described.dedup();
            let by_description = described.iter().filter(|t| message.contains(*t)).count() >= 2;
            by_name || by_description
        })
        .map(|tool| tool.function.name.to_string())
        .collect()
}

/// A fitting heuristic is injected only if it fits at least this share as well as the best.
const RELATIVE_FIT: f32 = 0.5;

/// Cosine similarity of two heuristics' embeddings at which they count as the same lesson.
const DUPLICATE_COSINE: f32 = 0.92;

/// What learning adds to one turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct TurnContext {
    /// Skills' instructions and learned heuristics; empty when there are none.
    pub preamble: String,
    /// Names of the matched skills.
    pub skills: Vec<String>,
    /// Ids of the heuristics injected (what the turn's outcome and 👍/👎 will score).
    pub heuristics: Vec<u64>,
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

/// Where a reflection's heuristics come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// How the task went, in the words the reflection prompt got.
    pub outcome: String,
    /// The task's context held content from outside the bot.
    pub external: bool,
    /// The task was a scheduled run: its lessons wait for an admin's ✅ whatever
    /// `learning.review` says, and it reinforces nothing.
    pub untrusted: bool,
    /// What a lesson the model wrote must carry from the task's evidence (see [`grounding`]);
    /// `None` for lessons that come from no task (seeded, imported, a job saved before).
    pub grounds: Option<crate::store::Grounds>,
    /// The skills matched in the task's turn.
    pub skills: Vec<String>,
    /// The tools the task called: a lesson that names one of them is about that tool.
    pub tools: Vec<String>,
    /// The context blocks the task's prompt carried: a lesson that only repeats one is an
    /// echo, not a lesson (see [`echo`]).
    pub given: Vec<String>,
}

/// What one reflection changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LearnReport {
    /// New heuristics stored (of them, `pending` wait for review).
    pub added: usize,
    pub pending: usize,
    pub reinforced: usize,
    /// Empty, overlong or personal texts, echoes of the task's context blocks, and untrusted
    /// repetitions of known heuristics.
    pub dropped: usize,
    pub evicted: usize,
}

/// A heuristic as `/heuristics` lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub heuristic: Heuristic,
    pub utility: f32,
}

/// The heuristics in memory: every record, and the index retrieval scores.
#[derive(Default)]
struct Memory {
    records: HashMap<u64, Heuristic>,
    index: Index,
}

impl Memory {
    fn put(&mut self, store: &Store, heuristic: Heuristic) -> anyhow::Result<()> {
        store.learning().put_heuristic(&heuristic)?;
        if !self.records.contains_key(&heuristic.id) {
            self.index.insert(heuristic.id, &heuristic.text);
        }
        self.records.insert(heuristic.id, heuristic);
        Ok(())
    }

    fn remove(&mut self, store: &Store, id: u64) -> anyhow::Result<bool> {
        let existed = store.learning().delete_heuristic(id)?;
        self.index.remove(id);
        Ok(self.records.remove(&id).is_some() || existed)
    }

    /// The known heuristic that `text` (embedded as `vector`, if it could be) repeats: the
    /// closest of those sharing words with it at `threshold` (word-set Jaccard) or, with
    /// embeddings, at [`DUPLICATE_COSINE`]; ties go to the older.
    fn duplicate_of(&self, text: &str, vector: Option<&[f32]>, threshold: f32) -> Option<u64> {
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
}

/// A lesson worth learning: its text, the skill and the tool it is filed under, and its
/// embedding once it has one.
struct Lesson {
    text: String,
    skill: Option<String>,
    tool: Option<String>,
    vector: Option<Vec<f32>>,
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
    /// Learned heuristics; every change is written to sled under the write lock.
    memory: RwLock<Memory>,
    /// Bounds concurrent reflections.
    reflection_slots: Semaphore,
    /// Reflections started and not finished.
    reflections_running: AtomicUsize,
    /// Completion cap of reflection calls, and the field it goes in.
    max_tokens_reflection: u32,
    max_tokens_field: MaxTokensField,
}

/// One embeddings call charged to `payer`: a server that reports no usage is charged the
/// inputs' estimate, since the input is all an embedding costs.
async fn embed_paid(
    llm: &LlmClient,
    model: &str,
    texts: &[String],
    priority: Priority,
    payer: &Payer,
) -> Result<Vec<Vec<f32>>, crate::llm::LlmError> {
    let estimate: u64 = texts
        .iter()
        .map(|t| u64::try_from(t.len() / 3 + 1).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    let hold = payer.reserve(estimate).await?;
    let (vectors, usage) = match llm.embed(model, texts, priority).await {
        Ok(done) => done,
        Err(e) => {
            hold.release();
            return Err(e);
        }
    };
    hold.settle(usage.unwrap_or(crate::llm::Usage {
        prompt_tokens: estimate,
        completion_tokens: 0,
        cached_tokens: 0,
    }));
    Ok(vectors)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Learning {
    /// Loads the skills and the heuristics stored in sled into memory.
    pub fn new(
        config: LearningConfig,
        llm_config: &LlmConfig,
        store: Store,
        llm: LlmClient,
        ledger: Ledger,
    ) -> Self {
        let skills = skills::load_skills(&config.skills_dir);
        let mut memory = Memory::default();
        for heuristic in store.learning().heuristics() {
            memory.index.insert(heuristic.id, &heuristic.text);
            memory.records.insert(heuristic.id, heuristic);
        }
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Memory> {
        self.memory.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Memory> {
        self.memory.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The skills that fit `message`, best first: those its words give `min_skill_score` of
    /// evidence for ([`skill_match`]), or, with an embeddings model, whose similarity reaches
    /// `min_similarity`; ranked by evidence, fused with similarity when there is a model. The
    /// turn gets its skills with its heuristics ([`Self::context_for`]); this is for measuring.
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

    /// The skills' embeddings, computed once; `None` when there is no model or it failed.
    async fn skill_embeddings(&self) -> Option<&Vec<Vec<f32>>> {
        let model = self.config.embedding_model.as_str();
        self.skill_vectors
            .get_or_init(|| async {
                let texts: Vec<String> = self
                    .skills
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.description))
                    .collect();
                // Shared by every user's turns: the bot pays.
                let payer = self.ledger.payer(None, None);
                match embed_paid(&self.llm, model, &texts, Priority::Interactive, &payer).await {
                    Ok(vectors) => Some(vectors),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot embed skills; matching with BM25 only");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The embeddings of `texts`, if an embeddings model is configured and answers (and
    /// `payer`'s budget allows the call).
    async fn embed(
        &self,
        texts: &[String],
        priority: Priority,
        payer: &Payer,
    ) -> Option<Vec<Vec<f32>>> {
        let model = self.config.embedding_model.as_str();
        if model.is_empty() || texts.is_empty() {
            return None;
        }
        match embed_paid(&self.llm, model, texts, priority, payer).await {
            Ok(vectors) if vectors.len() == texts.len() => Some(vectors),
            Ok(_) => {
                tracing::warn!("the embeddings model answered with the wrong number of vectors");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot embed; matching with BM25 only");
                None
            }
        }
    }

    async fn embed_query(&self, message: &str, payer: &Payer) -> Option<Vec<f32>> {
        self.embed(&[message.to_string()], Priority::Interactive, payer)
            .await?
            .pop()
    }

    /// Skills and heuristics for a turn on `message`, given the history window it extends
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
        for heuristic in self.retrieve(&query, query_vector.as_deref(), &context.skills) {
            if !chosen.iter().any(|h| h.id == heuristic.id) {
                chosen.push(heuristic);
            }
        }
        for heuristic in chosen.into_iter().take(self.config.max_injected) {
            context.heuristics.push(heuristic.id);
            context.texts.push(heuristic.text);
        }
        context
            .preamble
            .push_str(&format_heuristics_section(&context.texts));
        context
    }

    /// The heuristics to inject for `query`, best first (see the module doc). A heuristic
    /// filed under one of the `matched` skills fits by that match (the skill was judged to fit
    /// the message), and is ranked by its own relevance like the others.
    pub fn retrieve(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        matched: &[String],
    ) -> Vec<Heuristic> {
        let config = &self.config;
        let memory = self.read();
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
        // Only heuristics that share a term, have a vector, or belong to a matched skill can
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
        // How well each eligible heuristic fits: BM25, or BM25 (as a share of the best) fused
        // with cosine when embeddings are on.
        let mut fitting: Vec<(f32, &Heuristic)> = candidates
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
                    Some(cos) if best_lexical > 0.0 => {
                        0.5 * (bm25 / best_lexical).min(1.0) + 0.5 * cos
                    }
                    Some(cos) => 0.5 * cos,
                    None => bm25,
                };
                Some((fit, h))
            })
            .collect();
        // Of those, only the ones that fit about as well as the best: a heuristic that shares
        // one common word does not ride along with one that shares the message's subject.
        let best = fitting.iter().map(|(fit, _)| *fit).fold(0.0_f32, f32::max);
        fitting.retain(|(fit, _)| *fit >= RELATIVE_FIT * best);
        let mut ranked: Vec<(f32, &Heuristic)> = fitting
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

    /// Stores what a reflection extracted. A text that repeats a known heuristic (word-set
    /// Jaccard at `dedup_threshold`, or embedding cosine at 0.92, across all skills) reinforces
    /// it, if the source is trusted; anything else is a new heuristic, pending review when
    /// `review` says so. A full store forgets first (see the module doc). The texts'
    /// embeddings are charged to nobody: this is how heuristics are seeded (a reflection
    /// learns through [`Learning::learn_for`]).
    pub async fn learn(
        &self,
        entries: Vec<HeuristicEntry>,
        source: &Source,
    ) -> anyhow::Result<LearnReport> {
        self.learn_for(entries, source, &self.ledger.payer(None, None))
            .await
    }

    /// [`Learning::learn`], with the texts' embeddings charged to `payer`.
    pub(crate) async fn learn_for(
        &self,
        entries: Vec<HeuristicEntry>,
        source: &Source,
        payer: &Payer,
    ) -> anyhow::Result<LearnReport> {
        let mut report = LearnReport::default();
        let fresh = self.acceptable_lessons(entries, source, &mut report);
        let texts: Vec<String> = fresh.iter().map(|lesson| lesson.text.clone()).collect();
        let vectors = self.embed(&texts, Priority::Background, payer).await;
        let mut memory = self.write();
        for (i, mut lesson) in fresh.into_iter().enumerate() {
            lesson.vector = vectors.as_ref().map(|v| v[i].clone());
            let duplicate = memory.duplicate_of(
                &lesson.text,
                lesson.vector.as_deref(),
                self.config.dedup_threshold,
            );
            match duplicate {
                // Outside content may not vouch for what the bot already believes.
                Some(_) if source.external || source.untrusted => report.dropped += 1,
                Some(id) => {
                    let mut known = memory.records[&id].clone();
                    known.uses += 1;
                    known.updated = now();
                    memory.put(&self.store, known)?;
                    report.reinforced += 1;
                }
                None => self.add(&mut memory, lesson, source, &mut report)?,
            }
        }
        Ok(report)
    }

    /// The entries worth learning, trimmed, each with the skill and the tool it is filed
    /// under; the rest are counted as dropped.
    fn acceptable_lessons(
        &self,
        entries: Vec<HeuristicEntry>,
        source: &Source,
        report: &mut LearnReport,
    ) -> Vec<Lesson> {
        let mut fresh = Vec::new();
        let own: Vec<String> = entries
            .iter()
            .filter(|entry| entry.proven)
            .map(|entry| entry.text.clone())
            .collect();
        for entry in entries {
            let text = entry.text.trim().to_string();
            // The model's lesson must carry its evidence; one that quotes the bot's own lesson
            // of the task adds only noise to it (see `grounding`).
            let ungrounded = !entry.proven
                && self.config.grounded_only
                && source.grounds.as_ref().is_some_and(|grounds| {
                    !grounding::grounded(&text, grounds) || grounding::quotes_proven(&text, &own)
                });
            if ungrounded
                || !acceptable(&text)
                || echo::is_echo(&text, &source.given, self.config.dedup_threshold)
            {
                report.dropped += 1;
                continue;
            }
            let skill = entry
                .skill_name
                .and_then(|name| self.file_under(&text, name.trim(), &source.skills));
            let tool = tool_of(&text, entry.tool.as_deref(), &source.tools);
            fresh.push(Lesson {
                text,
                skill,
                tool,
                vector: None,
            });
        }
        fresh
    }

    /// Stores `lesson` as a new heuristic, pending review if the configuration asks it of
    /// `source`, making room first.
    fn add(
        &self,
        memory: &mut Memory,
        lesson: Lesson,
        source: &Source,
        report: &mut LearnReport,
    ) -> anyhow::Result<()> {
        let pending = source.untrusted
            || match self.config.review {
                Review::All => true,
                Review::External => source.external,
                Review::None => false,
            };
        let review = if pending {
            ReviewState::Pending
        } else {
            ReviewState::Approved
        };
        report.evicted += self.make_room(memory, review, None)?;
        let origin = Origin {
            outcome: source.outcome.clone(),
            external: source.external,
        };
        let id = self.store.learning().new_heuristic_id()?;
        let Lesson {
            text,
            skill,
            tool,
            vector,
        } = lesson;
        // A lesson about a tool, from a task's evidence, is on probation until shown to work.
        let probation = tool.is_some() && source.grounds.is_some();
        let heuristic = Heuristic {
            vector,
            tool,
            probation,
            ..Heuristic::learned(id, skill, text, review, origin, now())
        };
        tracing::info!(id = heuristic.id, skill = ?heuristic.skill, pending, "learned a heuristic");
        memory.put(&self.store, heuristic)?;
        report.added += 1;
        report.pending += usize::from(pending);
        Ok(())
    }

    /// The skill a lesson the reflection filed under `named` is stored under: that skill if it
    /// was matched in the lesson's turn (`active`), or if the lesson itself matches it best of
    /// all skills, as a message would (evidence at `min_skill_score`); otherwise none, and the
    /// lesson is general. (Qwen2.5-Coder-1.5B filed a ticket-format lesson under
    /// `writing-help`, where no ticket task would ever find it.)
    fn file_under(&self, text: &str, named: &str, active: &[String]) -> Option<String> {
        let index = self
            .skills
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(named))?;
        let name = &self.skills[index].name;
        if active.contains(name) {
            return Some(name.clone());
        }
        let scores = self.skill_index.evidence(text);
        let own = scores[index];
        let best = scores.iter().copied().fold(0.0_f32, f32::max);
        (own >= self.config.min_skill_score && own >= best).then(|| name.clone())
    }

    /// The cap on heuristics in review state `review`.
    fn cap(&self, review: ReviewState) -> usize {
        match review {
            ReviewState::Approved => self.config.max_heuristics,
            ReviewState::Pending => self.config.max_pending,
        }
        .max(1)
    }

    /// Forgets heuristics of review state `review` (and only those), least useful first, until
    /// one more fits under its cap; `keep` is never forgotten. Returns how many went.
    fn make_room(
        &self,
        memory: &mut Memory,
        review: ReviewState,
        keep: Option<u64>,
    ) -> anyhow::Result<usize> {
        let mut evicted = 0;
        loop {
            let same = || {
                memory
                    .records
                    .values()
                    .filter(|h| h.review == review && Some(h.id) != keep)
            };
            if same().count() < self.cap(review) {
                return Ok(evicted);
            }
            let Some(victim) = same().map(Heuristic::age).min_by(eviction_order) else {
                return Ok(evicted);
            };
            tracing::info!(
                id = victim.id,
                ?review,
                "store full: forgetting the least useful heuristic of its kind"
            );
            memory.remove(&self.store, victim.id)?;
            evicted += 1;
        }
    }

    /// The approved, proven lessons about the `tools` that `message` is likely to call (see
    /// [`likely_tools`]), at most [`LESSONS_PER_TOOL`] per tool, most useful and specific
    /// first.
    fn likely_tool_lessons(&self, message: &str, tools: &[ToolSpec]) -> Vec<Heuristic> {
        let memory = self.read();
        // Only the tools with lessons to give are worth guessing at (the guess reads every
        // tool's description, each turn).
        let taught: std::collections::HashSet<&str> = memory
            .records
            .values()
            .filter(|h| self.in_block(h))
            .filter_map(|h| h.tool.as_deref())
            .collect();
        if taught.is_empty() {
            return Vec::new();
        }
        let taught_tools = tools
            .iter()
            .filter(|t| taught.contains(t.function.name.as_ref()));
        let likely = likely_tools(message, taught_tools);
        let mut lessons = Vec::new();
        for tool in likely {
            let mut about: Vec<&Heuristic> = memory
                .records
                .values()
                .filter(|h| h.tool.as_deref() == Some(tool.as_str()) && self.in_block(h))
                .collect();
            about.sort_by(|a, b| tool_rank(b).total_cmp(&tool_rank(a)).then(a.id.cmp(&b.id)));
            lessons.extend(about.into_iter().take(LESSONS_PER_TOOL).cloned());
        }
        lessons
    }

    /// Whether `heuristic` may be injected: approved, and not proven useless.
    fn usable(&self, heuristic: &Heuristic) -> bool {
        heuristic.review == ReviewState::Approved && heuristic.utility() >= self.config.min_utility
    }

    /// Whether `heuristic` may go into a prompt's context block: usable, and not on probation
    /// (see [`probation`]: such a lesson is shown only beside its tool's failed result).
    fn in_block(&self, heuristic: &Heuristic) -> bool {
        self.usable(heuristic) && !heuristic.probation
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

    /// For each of the `offered` tools, the best approved lessons about it (at most
    /// [`LESSONS_PER_TOOL`], most useful and specific first): the agent adds them to a failed
    /// call's result, just when the model needs them.
    pub(crate) fn tool_lessons(&self, offered: &[String]) -> HashMap<String, Vec<(u64, String)>> {
        let memory = self.read();
        let mut by_tool: HashMap<String, Vec<&Heuristic>> = HashMap::new();
        for heuristic in memory.records.values() {
            let Some(tool) = &heuristic.tool else {
                continue;
            };
            if self.usable(heuristic) && offered.contains(tool) {
                by_tool.entry(tool.clone()).or_default().push(heuristic);
            }
        }
        by_tool
            .into_iter()
            .map(|(tool, mut lessons)| {
                lessons.sort_by(|a, b| tool_rank(b).total_cmp(&tool_rank(a)).then(a.id.cmp(&b.id)));
                let texts = lessons
                    .into_iter()
                    .take(LESSONS_PER_TOOL)
                    .map(|h| (h.id, h.text.clone()))
                    .collect();
                (tool, texts)
            })
            .collect()
    }

    /// After a turn whose prompt carried heuristics `ids`: they were injected, and what the
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

    /// 👍 or 👎 on an answer whose prompt carried heuristics `ids`.
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

    fn update(&self, ids: &[u64], mut change: impl FnMut(&mut Heuristic)) -> anyhow::Result<()> {
        let mut memory = self.write();
        for id in ids {
            let Some(mut heuristic) = memory.records.get(id).cloned() else {
                continue;
            };
            change(&mut heuristic);
            heuristic.updated = now();
            memory.put(&self.store, heuristic)?;
        }
        Ok(())
    }

    /// Approves a pending heuristic (admin action); says whether it was pending.
    pub fn approve(&self, id: u64) -> anyhow::Result<bool> {
        let mut memory = self.write();
        let Some(mut heuristic) = memory.records.get(&id).cloned() else {
            return Ok(false);
        };
        if heuristic.review == ReviewState::Approved && !heuristic.probation {
            return Ok(false);
        }
        // An admin's ✅ also ends a probation.
        heuristic.review = ReviewState::Approved;
        heuristic.probation = false;
        heuristic.updated = now();
        // Approved, it counts against `max_heuristics`: a full store forgets another first.
        self.make_room(&mut memory, ReviewState::Approved, Some(id))?;
        memory.put(&self.store, heuristic)?;
        tracing::info!(id, "heuristic approved");
        Ok(true)
    }

    /// Forgets a heuristic (admin action); says whether it existed.
    pub(crate) fn forget(&self, id: u64) -> anyhow::Result<bool> {
        self.write().remove(&self.store, id)
    }

    /// Every heuristic (or only the pending ones), best first: by utility, then newest.
    pub fn listing(&self, pending_only: bool) -> Vec<Listed> {
        let memory = self.read();
        let mut listed: Vec<Listed> = memory
            .records
            .values()
            .filter(|h| !pending_only || h.review == ReviewState::Pending)
            .map(|h| Listed {
                utility: h.utility(),
                heuristic: h.clone(),
            })
            .collect();
        listed.sort_by(|a, b| {
            b.utility
                .total_cmp(&a.utility)
                .then(b.heuristic.id.cmp(&a.heuristic.id))
        });
        listed
    }

    /// How many heuristics are approved, and how many wait for review.
    pub(crate) fn review_counts(&self) -> (usize, usize) {
        let memory = self.read();
        let pending = memory
            .records
            .values()
            .filter(|h| h.review == ReviewState::Pending)
            .count();
        (memory.records.len() - pending, pending)
    }

    /// Reflections started and not yet finished.
    pub fn reflections_running(&self) -> usize {
        self.reflections_running.load(Ordering::SeqCst)
    }
}
