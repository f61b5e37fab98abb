//! Lessons to move between deployments: every lesson as one JSON line ([`Exported`]), and
//! an import that learns them the way a reflection learns a lesson, so a file can never
//! bypass what guards the store.
//!
//! A line keeps the lesson's text, skill and tool, its review state and whether it is on
//! probation (see [`super::probation`]), its provenance (the outcome of the turn it came
//! from, and whether that turn read outside content) and its utility evidence (how often it was learned and injected, how those turns went, 👍 and 👎,
//! when it was created, updated and last injected). It leaves out the id (ids belong to one
//! store) and the embedding (it belongs to one embeddings model: the importing deployment
//! computes its own).
//!
//! An import passes the quality gate ([`super::lessons::acceptable`]: vague, overlong or
//! personal lessons are refused), then the dedupe (word-set Jaccard at `dedup_threshold`, or
//! embedding cosine): a lesson the store already knows is merged into it, never stored twice,
//! and only a trusted import reinforces it. New lessons are pending review unless the import
//! is trusted (`--trust`), which keeps the review state they were exported with: a lesson
//! exported pending (only on request: `heurist heuristics export` writes the reviewed ones
//! by default) stays pending, so unreviewed text is never approved through a file. A lesson
//! on probation is unproven like a pending one: left out by default, and exported with
//! `"probation": true`, which every import keeps, so a file never moves an unproven lesson
//! into the context block of another deployment (only a call to its tool that works there
//! with it in view, or an admin's ✅, ends its probation). A line about a tool that does not
//! say (an export from before probation was written, or a line written by hand) is unproven
//! too. An unproven or pending line that repeats a known lesson reinforces nothing. Pending
//! and
//! approved lessons each stay under their cap (see the module doc of [`super`]).
//!
//! ```
//! use heurist::learning::transfer::parse_lines;
//! let (lessons, errors) = parse_lines("{\"text\": \"When converting dates, use ISO 8601\"}\n{\n");
//! assert_eq!(lessons.len(), 1);
//! assert_eq!(errors[0].0, 2, "a malformed line is reported by its number");
//! ```

use serde::{Deserialize, Serialize};

use super::lessons::{Lesson, Origin, ReviewState, acceptable};
use super::{Learning, now};
use crate::llm::Priority;

/// One lesson as a line of an export file. Only `text` is required, so a lesson written by
/// hand imports too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exported {
    pub text: String,
    #[serde(default)]
    pub skill: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub review: ReviewState,
    /// Unproven: offered only beside its tool's failed result until a call works with it.
    /// Missing: see [`Exported::unproven`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probation: Option<bool>,
    #[serde(default)]
    pub origin: Origin,
    #[serde(default = "once")]
    pub uses: u32,
    #[serde(default)]
    pub injected: u32,
    #[serde(default)]
    pub successes: u32,
    #[serde(default)]
    pub failures: u32,
    #[serde(default)]
    pub up: u32,
    #[serde(default)]
    pub down: u32,
    #[serde(default)]
    pub last_injected: i64,
    #[serde(default)]
    pub created: i64,
    #[serde(default)]
    pub updated: i64,
}

fn once() -> u32 {
    1
}

impl Exported {
    /// Whether the lesson is on probation: as the line says, or, where it does not (a file
    /// from before probation was exported, or written by hand), whenever it is about a tool:
    /// such a lesson is proven by a call to that tool here, never by a file.
    pub fn unproven(&self) -> bool {
        self.probation.unwrap_or(self.tool.is_some())
    }
}

impl From<&Lesson> for Exported {
    fn from(h: &Lesson) -> Self {
        Self {
            text: h.text.clone(),
            skill: h.skill.clone(),
            tool: h.tool.clone(),
            review: h.review,
            probation: Some(h.probation),
            origin: h.origin.clone(),
            uses: h.uses,
            injected: h.injected,
            successes: h.successes,
            failures: h.failures,
            up: h.up,
            down: h.down,
            last_injected: h.last_injected,
            created: h.created,
            updated: h.updated,
        }
    }
}

/// The export file's text: one JSON line per lesson, in the order given.
pub fn export_lines(lessons: &[Lesson]) -> String {
    lessons
        .iter()
        .map(|h| {
            let line = serde_json::to_string(&Exported::from(h))
                .unwrap_or_else(|e| unreachable!("a lesson always serialises: {e}"));
            line + "\n"
        })
        .collect()
}

/// The lessons of an export file, and the lines that are not one as (line number from 1,
/// why); blank lines are skipped.
pub fn parse_lines(text: &str) -> (Vec<Exported>, Vec<(usize, String)>) {
    let mut lessons = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Exported>(line) {
            Ok(lesson) => lessons.push(lesson),
            Err(e) => errors.push((index + 1, e.to_string())),
        }
    }
    (lessons, errors)
}

/// What one import changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// New lessons stored (of them, `pending` wait for review).
    pub added: usize,
    pub pending: usize,
    /// New lessons approved but on probation (see [`super::probation`]).
    pub on_probation: usize,
    /// Lessons the store already knew (reinforced only by a trusted import of a reviewed,
    /// proven line).
    pub merged: usize,
    /// Refused by the quality gate.
    pub refused: usize,
    /// Forgotten to make room under a cap.
    pub evicted: usize,
}

impl Learning {
    /// Learns `lessons` from another deployment (see the module doc): gated, deduplicated,
    /// and pending review unless `trust`. Their embeddings are charged to nobody.
    pub async fn import(
        &self,
        lessons: Vec<Exported>,
        trust: bool,
    ) -> anyhow::Result<ImportReport> {
        let mut report = ImportReport::default();
        let lessons: Vec<Exported> = lessons
            .into_iter()
            .filter_map(|mut lesson| {
                lesson.text = lesson.text.trim().to_string();
                let pass = acceptable(&lesson.text);
                report.refused += usize::from(!pass);
                pass.then_some(lesson)
            })
            .collect();
        let texts: Vec<String> = lessons.iter().map(|l| l.text.clone()).collect();
        let payer = self.ledger.payer(None, None);
        let vectors = self.embed(&texts, Priority::Background, &payer).await;
        let mut memory = self.write();
        for (i, lesson) in lessons.into_iter().enumerate() {
            let vector = vectors.as_ref().map(|v| v[i].clone());
            let threshold = self.config.dedup_threshold;
            if let Some(id) = memory.duplicate_of(&lesson.text, vector.as_deref(), threshold) {
                report.merged += 1;
                // Only a line trusted, reviewed and proven may vouch for what the store knows.
                if trust && lesson.review == ReviewState::Approved && !lesson.unproven() {
                    let mut known = memory.records[&id].clone();
                    known.uses = known.uses.saturating_add(1);
                    known.updated = now();
                    memory.put(&self.store, known)?;
                }
                continue;
            }
            let review = if trust {
                lesson.review
            } else {
                ReviewState::Pending
            };
            report.evicted += self.make_room(&mut memory, review, None)?;
            let lesson = Lesson {
                id: self.store.learning().new_lesson_id()?,
                skill: lesson.skill.as_deref().and_then(|s| self.skill_named(s)),
                review,
                vector,
                ..self.imported(lesson)
            };
            tracing::info!(id = lesson.id, ?review, "imported a heuristic");
            report.added += 1;
            report.pending += usize::from(review == ReviewState::Pending);
            report.on_probation += usize::from(review == ReviewState::Approved && lesson.probation);
            memory.put(&self.store, lesson)?;
        }
        drop(memory);
        self.store.db().flush()?;
        Ok(report)
    }

    /// The name of this deployment's skill called `name` (any case), if it has one: a lesson
    /// filed under a skill it lacks is general here.
    fn skill_named(&self, name: &str) -> Option<String> {
        self.skills
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
            .map(|s| s.name.clone())
    }

    /// The lesson `lesson` describes, with its evidence and dates, before it gets an id,
    /// a skill of this deployment, a review state and an embedding.
    fn imported(&self, lesson: Exported) -> Lesson {
        let at = now();
        let probation = lesson.unproven();
        Lesson {
            id: 0,
            skill: None,
            text: lesson.text,
            uses: lesson.uses.max(1),
            review: ReviewState::Pending,
            origin: lesson.origin,
            injected: lesson.injected,
            successes: lesson.successes,
            failures: lesson.failures,
            up: lesson.up,
            down: lesson.down,
            last_injected: lesson.last_injected,
            created: if lesson.created > 0 {
                lesson.created
            } else {
                at
            },
            updated: if lesson.updated > 0 {
                lesson.updated
            } else {
                at
            },
            vector: None,
            tool: lesson.tool,
            // Unproven there is unproven here: whatever the review state, an import never
            // ends a probation, and a lesson that failed trials there gets fresh ones here.
            probation,
            trial_failures: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_malformed_ones_are_numbered() {
        let lesson = Lesson {
            up: 2,
            probation: true,
            tool: Some("desk__ticket".into()),
            vector: Some(vec![0.5]),
            ..Lesson::learned(
                7,
                Some("support".into()),
                "When looking up tickets, write ids as TCK-000123".into(),
                ReviewState::Pending,
                Origin {
                    outcome: "success".into(),
                    external: true,
                },
                1_700_000_000,
            )
        };
        let text = export_lines(std::slice::from_ref(&lesson));
        assert!(
            !text.contains("vector") && !text.contains("\"id\""),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1);
        for (name, file, lessons, errors) in [
            ("an export", text.clone(), 1, vec![]),
            ("blank lines", format!("\n{text}\n  \n"), 1, vec![]),
            ("not JSON", format!("{text}{{\n"), 1, vec![2]),
            ("no text", format!("{{\"up\": 1}}\n{text}"), 1, vec![1]),
            (
                "a hand-written lesson",
                "{\"text\": \"t\"}".into(),
                1,
                vec![],
            ),
        ] {
            let (parsed, failed) = parse_lines(&file);
            assert_eq!(parsed.len(), lessons, "{name}");
            let lines: Vec<usize> = failed.iter().map(|(line, _)| *line).collect();
            assert_eq!(lines, errors, "{name}");
        }
        let (parsed, _) = parse_lines(&text);
        assert_eq!(parsed[0], Exported::from(&lesson));
        let (hand, _) = parse_lines("{\"text\": \"t\"}");
        assert_eq!((hand[0].uses, hand[0].review), (1, ReviewState::Approved));
        assert!(parsed[0].unproven(), "written on probation");
        // A line that does not say is unproven where it is about a tool (a file from before
        // probation was written, or by hand), and proven where it is about none.
        for (line, unproven) in [
            (r#"{"text": "t"}"#, false),
            (r#"{"text": "t", "tool": "desk__ticket"}"#, true),
            (
                r#"{"text": "t", "tool": "desk__ticket", "probation": false}"#,
                false,
            ),
            (r#"{"text": "t", "probation": true}"#, true),
        ] {
            let (parsed, _) = parse_lines(line);
            assert_eq!(parsed[0].unproven(), unproven, "{line}");
        }
    }
}
