//! Lessons about tools: which offered tools a message is likely to call, and the best lessons
//! about each, for the turn's context block and beside a tool's failed call.

use std::collections::{HashMap, HashSet};

use super::lessons::Lesson;
use super::likely_tools::likely_tools;
use super::utility::exploration_bonus;
use super::{Learning, quality};
use crate::llm::ToolSpec;

/// Lessons about one tool shown with its failed call, at most.
pub(crate) const LESSONS_PER_TOOL: usize = 2;

/// How lessons about one tool are ordered: proven use (with the exploration bonus untested
/// ones get), times specificity.
fn tool_rank(lesson: &Lesson) -> f32 {
    (lesson.utility() + exploration_bonus(lesson.injected)) * quality::specificity(&lesson.text)
}

/// Of `lessons`, those about `tool`, best first (ties by id), at most [`LESSONS_PER_TOOL`].
fn best_about<'a>(tool: &str, lessons: impl IntoIterator<Item = &'a Lesson>) -> Vec<&'a Lesson> {
    let mut about: Vec<&Lesson> = lessons
        .into_iter()
        .filter(|h| h.tool.as_deref() == Some(tool))
        .collect();
    about.sort_by(|a, b| tool_rank(b).total_cmp(&tool_rank(a)).then(a.id.cmp(&b.id)));
    about.truncate(LESSONS_PER_TOOL);
    about
}

impl Learning {
    /// The approved, proven lessons about the `tools` that `message` is likely to call (see
    /// [`likely_tools`]), at most [`LESSONS_PER_TOOL`] per tool, most useful and specific
    /// first.
    pub(super) fn likely_tool_lessons(&self, message: &str, tools: &[ToolSpec]) -> Vec<Lesson> {
        let memory = self.read();
        // Only the tools with lessons to give are worth guessing at (the guess reads every
        // tool's description, each turn).
        let taught: HashSet<&str> = memory
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
            let usable = memory.records.values().filter(|h| self.in_block(h));
            lessons.extend(best_about(&tool, usable).into_iter().cloned());
        }
        lessons
    }

    /// For each of the `offered` tools, the best approved lessons about it (at most
    /// [`LESSONS_PER_TOOL`], most useful and specific first): the agent adds them to a failed
    /// call's result, just when the model needs them.
    pub(crate) fn tool_lessons(&self, offered: &[String]) -> HashMap<String, Vec<(u64, String)>> {
        let memory = self.read();
        let mut by_tool: HashMap<String, Vec<&Lesson>> = HashMap::new();
        for lesson in memory.records.values() {
            let Some(tool) = &lesson.tool else {
                continue;
            };
            if self.usable(lesson) && offered.contains(tool) {
                by_tool.entry(tool.clone()).or_default().push(lesson);
            }
        }
        by_tool
            .into_iter()
            .map(|(tool, lessons)| {
                let texts = best_about(&tool, lessons)
                    .into_iter()
                    .map(|h| (h.id, h.text.clone()))
                    .collect();
                (tool, texts)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Origin, ReviewState};

    fn about(id: u64, tool: &str, text: &str) -> Lesson {
        Lesson {
            tool: Some(tool.into()),
            ..Lesson::learned(
                id,
                None,
                text.into(),
                ReviewState::Approved,
                Origin::default(),
                0,
            )
        }
    }

    #[test]
    fn the_best_lessons_about_a_tool_come_first_and_at_most_two() {
        let mut proven = about(
            1,
            "desk__ticket",
            "When calling desk__ticket, write ids as TCK-000123.",
        );
        proven.successes = 5;
        let mut failed = about(
            2,
            "desk__ticket",
            "When calling desk__ticket, write ids as TCK-000123.",
        );
        failed.failures = 5;
        let vague = about(3, "desk__ticket", "Be careful with the ticket tool.");
        let specific = about(
            4,
            "desk__ticket",
            "When calling desk__ticket, write ids as TCK-000123.",
        );
        let other = about(5, "fetch_url", "When calling fetch_url, use https://.");
        let lessons = [failed, vague, specific, proven, other];
        let best: Vec<u64> = best_about("desk__ticket", &lessons)
            .iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(best, [1, 4], "proven, then untested and specific");
        let fetch: Vec<u64> = best_about("fetch_url", &lessons)
            .iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(fetch, [5]);
        assert!(best_about("shell", &lessons).is_empty());
    }
}
