//! ERL heuristics: the reflection prompt, its JSON shape, the `## Learned Heuristics` block,
//! and the rules for storing, reinforcing, ranking and evicting heuristics.
//!
//! Re-expresses zeph-skills' `erl.rs`, keeping its prompt, JSON shape and section format, and
//! fixing its gaps: words are compared lower-cased without punctuation; a duplicate reinforces
//! the existing heuristic instead of being dropped silently; confidence moves with use and
//! feedback; and each skill keeps at most a fixed number, evicting the least confident.
//!
//! ```
//! use heurist::learning::heuristics::{build_reflection_extract_prompt, format_heuristics_section};
//! let prompt = build_reflection_extract_prompt("Searched for Rust crates", "fetch_url", "success");
//! assert!(prompt.contains("Searched for Rust crates"));
//! let section = format_heuristics_section(&["prefer the package registry over GitHub".into()]);
//! assert!(section.starts_with("## Learned Heuristics"));
//! ```

use serde::Deserialize;

/// The LLM's reply to [`REFLECTION_EXTRACT_PROMPT_TEMPLATE`].
#[derive(Debug, Clone, Deserialize)]
pub struct ReflectionResult {
    pub heuristics: Vec<HeuristicEntry>,
}

/// One extracted heuristic and the skill it most applies to (`None`: general).
#[derive(Debug, Clone, Deserialize)]
pub struct HeuristicEntry {
    pub text: String,
    #[serde(default)]
    pub skill_name: Option<String>,
}

/// Prompt template for ERL heuristic extraction (Zeph's, verbatim).
///
/// Placeholders: `{task_summary}`, `{tool_calls}`, `{outcome}`, substituted by
/// [`build_reflection_extract_prompt`].
pub const REFLECTION_EXTRACT_PROMPT_TEMPLATE: &str = "\
A task was completed. Extract transferable heuristics that could help future similar tasks.

Task summary: {task_summary}
Tool calls used: {tool_calls}
Outcome: {outcome}

Extract up to 3 concise, actionable heuristics. For each heuristic, optionally name the \
skill it most applies to (or leave skill_name null for general heuristics).

Respond in JSON:
{\"heuristics\": [{\"text\": \"string\", \"skill_name\": \"string or null\"}, ...]}";

/// Sent after a reflection reply that was not the JSON asked for.
pub const REFLECTION_RETRY_PROMPT: &str = "\
That was not the JSON I asked for. Respond with only \
{\"heuristics\": [{\"text\": \"string\", \"skill_name\": \"string or null\"}, ...]}, \
without tool calls or any other text.";

/// Builds an ERL reflection prompt.
#[must_use]
pub fn build_reflection_extract_prompt(
    task_summary: &str,
    tool_calls: &str,
    outcome: &str,
) -> String {
    REFLECTION_EXTRACT_PROMPT_TEMPLATE
        .replace("{task_summary}", task_summary)
        .replace("{tool_calls}", tool_calls)
        .replace("{outcome}", outcome)
}

/// Formats heuristics as a Markdown `## Learned Heuristics` section (empty for none).
#[must_use]
pub fn format_heuristics_section(heuristics: &[String]) -> String {
    if heuristics.is_empty() {
        return String::new();
    }
    let mut out = String::from("## Learned Heuristics\n");
    for h in heuristics {
        out.push_str("- ");
        out.push_str(h);
        out.push('\n');
    }
    out
}

/// The stored record; it lives with its sled tree, and is named here too because the rules
/// below are about it.
pub use crate::store::Heuristic;

/// Confidence of a newly learned heuristic.
pub const INITIAL_CONFIDENCE: f32 = 0.5;
/// Added when the same heuristic is learned again.
pub const REINFORCE_STEP: f32 = 0.05;
/// Added on 👍 for each heuristic that was in the answer's prompt.
pub const UPVOTE_STEP: f32 = 0.1;
/// Subtracted on 👎.
pub const DOWNVOTE_STEP: f32 = 0.2;
/// Longest heuristic kept; longer ones are essays, not heuristics.
pub const MAX_HEURISTIC_CHARS: usize = 512;

/// Whether an extracted text is worth storing at all.
pub fn acceptable(text: &str) -> bool {
    let text = text.trim();
    !text.is_empty() && text.chars().count() <= MAX_HEURISTIC_CHARS
}

/// The injection order: confidence, then use count (both descending), then id, so the same
/// store always yields the same text (and the same prompt bytes).
pub fn rank(heuristics: &mut [Heuristic]) {
    heuristics.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then(b.uses.cmp(&a.uses))
            .then(a.id.cmp(&b.id))
    });
}

/// The one to evict when a skill is full: the least confident (then least used, then oldest).
pub fn eviction_candidate(heuristics: &[Heuristic]) -> Option<&Heuristic> {
    heuristics.iter().min_by(|a, b| {
        a.confidence
            .total_cmp(&b.confidence)
            .then(a.uses.cmp(&b.uses))
            .then(b.id.cmp(&a.id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(id: u64, confidence: f32, uses: u32) -> Heuristic {
        Heuristic {
            id,
            skill: None,
            text: format!("h{id}"),
            confidence,
            uses,
            created: 0,
            updated: 0,
        }
    }

    #[test]
    fn prompt_substitutes_and_result_parses() {
        let prompt = build_reflection_extract_prompt("Fix the bug", "shell, git", "success");
        assert!(prompt.contains("Task summary: Fix the bug"));
        assert!(prompt.contains("Tool calls used: shell, git"));
        assert!(prompt.contains("Outcome: success"));
        let r: ReflectionResult =
            serde_json::from_str(r#"{"heuristics": [{"text": "always test", "skill_name": "git"}, {"text": "be careful", "skill_name": null}, {"text": "x"}]}"#)
                .unwrap();
        assert_eq!(r.heuristics[0].skill_name.as_deref(), Some("git"));
        assert!(r.heuristics[1].skill_name.is_none() && r.heuristics[2].skill_name.is_none());
    }

    #[test]
    fn section_format() {
        assert!(format_heuristics_section(&[]).is_empty());
        let s = format_heuristics_section(&["tip one".into(), "tip two".into()]);
        assert_eq!(s, "## Learned Heuristics\n- tip one\n- tip two\n");
    }

    #[test]
    fn ordering_is_total_and_deterministic() {
        let mut list = vec![h(3, 0.5, 1), h(1, 0.9, 0), h(2, 0.5, 4), h(4, 0.5, 1)];
        rank(&mut list);
        let ids: Vec<u64> = list.iter().map(|h| h.id).collect();
        assert_eq!(ids, [1, 2, 3, 4]);
        assert_eq!(eviction_candidate(&list).unwrap().id, 4);
    }

    #[test]
    fn acceptance() {
        assert!(acceptable("check the docs first"));
        assert!(!acceptable("   "));
        assert!(!acceptable(&"x".repeat(513)));
        assert!(acceptable(&"é".repeat(512)));
    }
}
