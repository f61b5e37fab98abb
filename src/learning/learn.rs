//! Learning a lesson: the quality gates a reflection's lessons pass (grounded, acceptable, no
//! echo), the skill and tool each is filed under, dedupe against what is known (a repeat
//! reinforces it), and eviction when the store is full (see the module doc of [`super`],
//! *Scoring and forgetting* and *Trust*).

use super::lesson_set::LessonSet;
use super::lessons::{Lesson, NewLesson, Origin, ReviewState, acceptable};
use super::{LearnReport, Learning, Source, echo, grounding, now};
use crate::budget::Payer;
use crate::config::Review;
use crate::llm::Priority;

/// The tool a new lesson is about: the one the reflection named, if the turn called it, or
/// else the first tool of the turn whose name the lesson mentions (an MCP tool by its
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

/// Whether `source`'s turn had a call an MCP tool refused (the evidence's refusal words or
/// refused values): its lessons come from a failure, and are on probation until a call made
/// with them in view works, or wait for review where they are tied to no tool.
fn from_a_refusal(source: &Source) -> bool {
    source
        .grounds
        .as_ref()
        .is_some_and(|grounds| !grounds.stated.is_empty() || !grounds.refused.is_empty())
}

/// The tool a lesson drawn from a refusal is about when it names none: the turn's one tool.
/// Qwen2.5-Coder-1.5B (the benefit benchmark, fresh chats, seed 14) wrote, after a shipping
/// quote was refused, "When you have a question about shipping a package, check the weight of
/// the item first. A 1.5 kg parcel is equivalent to 300 grams, so you can use the same tool
/// with the correct weight."; untied, it skipped probation and went into every prompt's
/// context block, where a later answer met it and told the user to quote "a weight of 300
/// grams" for a 0.75 kg parcel, without a call. With more than one tool called, the lesson
/// stays untied and waits for an admin's review (see `Learning::add`).
fn refused_tool(source: &Source) -> Option<String> {
    if !from_a_refusal(source) {
        return None;
    }
    let mut tools = source.tools.clone();
    tools.sort();
    tools.dedup();
    match tools.as_slice() {
        [tool] => Some(tool.clone()),
        _ => None,
    }
}

/// A lesson worth learning, not stored yet: its text, the skill and the tool it is filed under, and its
/// embedding once it has one.
struct Candidate {
    text: String,
    skill: Option<String>,
    tool: Option<String>,
    vector: Option<Vec<f32>>,
}

impl Learning {
    /// Stores what a reflection extracted. A text that repeats a known lesson (word-set
    /// Jaccard at `dedup_threshold`, or embedding cosine at 0.92, across all skills) reinforces
    /// it, if the source is trusted; anything else is a new lesson, pending review when
    /// `review` says so. A full store forgets first (see the module doc). The texts'
    /// embeddings are charged to nobody: this is how lessons are seeded (a reflection
    /// learns through [`Learning::learn_for`]).
    pub async fn learn(
        &self,
        entries: Vec<NewLesson>,
        source: &Source,
    ) -> anyhow::Result<LearnReport> {
        self.learn_for(entries, source, &self.ledger.payer(None, None))
            .await
    }

    /// [`Learning::learn`], with the texts' embeddings charged to `payer`.
    pub(crate) async fn learn_for(
        &self,
        entries: Vec<NewLesson>,
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
        entries: Vec<NewLesson>,
        source: &Source,
        report: &mut LearnReport,
    ) -> Vec<Candidate> {
        let mut fresh = Vec::new();
        let own: Vec<String> = entries
            .iter()
            .filter(|entry| entry.proven)
            .map(|entry| entry.text.clone())
            .collect();
        for entry in entries {
            let text = entry.text.trim().to_string();
            // The model's lesson must carry its evidence; one that quotes the bot's own lesson
            // of the turn adds only noise to it (see `grounding`).
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
            // A lesson that names a tool (by the reflection's field, or a name such as
            // `probe__echo` in its text) the turn did not call is about that tool, not this one.
            let names_a_tool =
                entry.tool.is_some() || text.split_whitespace().any(|w| w.contains('_'));
            let tool = tool_of(&text, entry.tool.as_deref(), &source.tools)
                .or_else(|| refused_tool(source).filter(|_| !names_a_tool));
            fresh.push(Candidate {
                text,
                skill,
                tool,
                vector: None,
            });
        }
        fresh
    }

    /// Stores `lesson` as a new lesson, pending review if the configuration asks it of
    /// `source`, making room first.
    fn add(
        &self,
        memory: &mut LessonSet,
        lesson: Candidate,
        source: &Source,
        report: &mut LearnReport,
    ) -> anyhow::Result<()> {
        // A lesson drawn from a refusal but tied to no tool can be shown beside no failed call,
        // so probation could never end: it waits for an admin in the pending list instead.
        let untied_from_a_refusal = lesson.tool.is_none() && from_a_refusal(source);
        let pending = source.untrusted
            || untied_from_a_refusal
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
        let id = self.store.learning().new_lesson_id()?;
        let Candidate {
            text,
            skill,
            tool,
            vector,
        } = lesson;
        // A lesson about a tool, from a turn's evidence, is on probation until shown to work.
        let probation = tool.is_some() && source.grounds.is_some();
        let lesson = Lesson {
            vector,
            tool,
            probation,
            ..Lesson::learned(id, skill, text, review, origin, now())
        };
        tracing::info!(id = lesson.id, skill = ?lesson.skill, pending, "learned a heuristic");
        memory.put(&self.store, lesson)?;
        report.added += 1;
        report.pending += usize::from(pending);
        Ok(())
    }

    /// The skill a lesson the reflection filed under `named` is stored under: that skill if it
    /// was matched in the lesson's turn (`active`), or if the lesson itself matches it best of
    /// all skills, as a message would (evidence at `min_skill_score`); otherwise none, and the
    /// lesson is general. (Qwen2.5-Coder-1.5B filed a ticket-format lesson under
    /// `writing-help`, where no question about a ticket would ever find it.)
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

    /// The cap on lessons in review state `review`.
    fn cap(&self, review: ReviewState) -> usize {
        match review {
            ReviewState::Approved => self.config.max_lessons,
            ReviewState::Pending => self.config.max_pending,
        }
        .max(1)
    }

    /// Forgets lessons of review state `review` (and only those), least useful first, until
    /// one more fits under its cap; `keep` is never forgotten. Returns how many went.
    pub(super) fn make_room(
        &self,
        memory: &mut LessonSet,
        review: ReviewState,
        keep: Option<u64>,
    ) -> anyhow::Result<usize> {
        let mut evicted = 0;
        while let Some(victim) = memory.victim(review, keep, self.cap(review)) {
            tracing::info!(
                id = victim,
                ?review,
                "store full: forgetting the least useful heuristic of its kind"
            );
            memory.remove(&self.store, victim)?;
            evicted += 1;
        }
        Ok(evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lesson_is_about_the_tool_named_or_mentioned_if_the_task_called_it() {
        let called = ["desk__ticket".to_string(), "fetch_url".to_string()];
        let cases = [
            (
                "named exactly",
                "Write ids as TCK-.",
                Some("desk__ticket"),
                Some("desk__ticket"),
            ),
            (
                "named by short name",
                "Write ids as TCK-.",
                Some(" Ticket "),
                Some("desk__ticket"),
            ),
            (
                "mentioned by short name",
                "Give the ticket tool TCK- ids.",
                None,
                Some("desk__ticket"),
            ),
            (
                "mentioned in full",
                "Call fetch_url with https.",
                None,
                Some("fetch_url"),
            ),
            ("named but not called", "Quote paths.", Some("shell"), None),
            (
                "named but not called, mentioned",
                "Use fetch_url.",
                Some("shell"),
                Some("fetch_url"),
            ),
            (
                "about no tool",
                "Answer in French when asked in French.",
                None,
                None,
            ),
        ];
        for (name, text, named, expected) in cases {
            assert_eq!(tool_of(text, named, &called).as_deref(), expected, "{name}");
        }
    }
}
