//! Reflection: after a finished turn, ask the model for transferable lessons.
//!
//! A job is saved in sled before it runs ([`Learning::plan_reflection`]) and removed when it is
//! done ([`Learning::reflect`]), so a job that a shutdown interrupted is resumed at the next
//! start. Right after a turn the reflection extends the turn's own request (same parameters,
//! the turn's messages byte for byte as prefix, so the provider's prompt cache serves all of
//! it), and the turn's evidence comes after that shared prefix, in the reflection prompt. The
//! blocks of injected skills and lessons stay in the prefix: a lesson that only repeats one
//! is dropped as an echo ([`super::echo`]), so the model cannot learn back what it was told.
//! The asker's personal memory and its `remember` calls are taken out, so one user's facts
//! never become everyone's lessons (a turn that saved a fact is not reflected on at all); a
//! user without facts keeps the whole prefix. A resumed job, whose turn is gone, and a 👎,
//! which rates one answer, are given their prefix by the caller. At most
//! `max_concurrent_reflections` run at a time.

use std::sync::atomic::Ordering;

use super::lessons::{
    Concerns, NewLesson, REFLECTION_RETRY_PROMPT, ReflectionResult, acceptable,
    build_reflection_prompt,
};
use super::{Learning, Source, echo};
use crate::llm::extraction::{ExtractionConfig, Prefix, retry_extract_structured};
use crate::llm::{ChatMessage, Priority};
use crate::memory::{REMEMBER_TOOL, without_memory};
use crate::metrics::{CallKind, ReflectionOutcome};
use crate::store::ReflectionJob;

/// The user's request in a reflection prompt is cut to this many characters.
pub(crate) const TASK_SUMMARY_CHARS: usize = 512;

/// A rated answer kept for a 👎's reflection is cut to this many characters.
pub(crate) const RATED_ANSWER_CHARS: usize = 2000;

/// Attempts when the model answers a reflection with prose instead of JSON.
const MAX_ATTEMPTS: usize = 2;

/// Lessons taken from one reflection's answer, as its prompt asks ("up to 3").
const MAX_LESSONS: usize = 3;

/// A turn summary: the request, cut on a character boundary.
pub(crate) fn task_summary(request: &str) -> String {
    request.chars().take(TASK_SUMMARY_CHARS).collect()
}

/// Counts a reflection as running until dropped (also when its turn is aborted).
struct RunningReflection<'a>(&'a Learning);

impl Drop for RunningReflection<'_> {
    fn drop(&mut self) {
        self.0.reflections_running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `messages` as the reflection sees them: user messages without the asker's personal
/// memory, and without every turn that called `remember` (its message, calls and answer): one
/// user's facts are never material for a lesson every user gets. Everything else is kept byte
/// for byte (the provider's cache serves it), the context blocks of skills and lessons too.
fn without_memory_turns(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let remembers = |m: &ChatMessage| {
        matches!(m, ChatMessage::Assistant { tool_calls, .. }
            if tool_calls.iter().any(|c| c.function.name == REMEMBER_TOOL))
    };
    // Turns start at user messages; what comes before the first (the system message) is kept.
    let mut turns: Vec<&[ChatMessage]> = Vec::new();
    let mut start = 0;
    for (i, m) in messages.iter().enumerate() {
        if matches!(m, ChatMessage::User { .. }) && i > start {
            turns.push(&messages[start..i]);
            start = i;
        }
    }
    turns.push(&messages[start..]);
    turns
        .into_iter()
        .filter(|turn| !turn.iter().any(remembers))
        .flatten()
        .map(|m| match m {
            ChatMessage::User { .. } if without_memory(m.content()).len() < m.content().len() => {
                ChatMessage::user(without_memory(m.content()))
            }
            _ => m.clone(),
        })
        .collect()
}

impl Learning {
    /// Saves a reflection job so that a restart can resume it; its id, or `None` when
    /// reflection is off or the job cannot be saved (then it is skipped).
    pub(crate) fn plan_reflection(&self, job: &ReflectionJob) -> Option<u64> {
        // A turn that saved a personal fact is about one user: nothing in it is for everyone.
        if !self.config.reflect || job.tools.iter().any(|tool| tool == REMEMBER_TOOL) {
            return None;
        }
        // Handled: a job that cannot be saved is not run (see above), never run unsaved.
        self.store
            .learning()
            .save_reflection(job)
            .inspect_err(
                |e| tracing::warn!(error = %e, "cannot save a reflection job; skipping it"),
            )
            .ok()
    }

    /// Reflections saved by an earlier run and not finished.
    pub fn pending_reflections(&self) -> Vec<(u64, ReflectionJob)> {
        self.store.learning().pending_reflections()
    }

    /// Runs saved reflection `id` on `prefix`, stores what it learned, and removes the job.
    pub(crate) async fn reflect(&self, id: u64, job: &ReflectionJob, prefix: Prefix) {
        self.reflections_running.fetch_add(1, Ordering::SeqCst);
        let _running = RunningReflection(self);
        let Ok(_slot) = self.reflection_slots.acquire().await else {
            return;
        };
        let outcome = self.run_reflection(job, prefix).await;
        self.llm.metrics().reflection(outcome);
        // Dropped (logged): a job left on record only runs once more after a restart.
        if let Err(e) = self.store.learning().finish_reflection(id) {
            tracing::warn!(id, error = %e, "cannot mark a reflection done");
        }
    }

    /// The reflection prompt of `job`: the seed prompt, then the guidance that concerns it
    /// (`given`: its prompt carried skills or lessons).
    fn prompt_for(&self, job: &ReflectionJob, given: bool) -> String {
        let tools = if job.tools.is_empty() {
            "none".to_string()
        } else {
            job.tools.join(", ")
        };
        let skills: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
        let concerns = Concerns {
            tools: !job.tools.is_empty(),
            outside: job.external,
            given,
        };
        build_reflection_prompt(
            &job.request,
            &tools,
            &job.outcome,
            &skills,
            &job.evidence,
            concerns,
        )
    }

    async fn run_reflection(
        &self,
        job: &ReflectionJob,
        (template, history): Prefix,
    ) -> ReflectionOutcome {
        let history = without_memory_turns(&history);
        let given = echo::given_blocks(&history);
        let prompt = self.prompt_for(job, !given.is_empty());
        // The reflection is part of what the user's turn cost: it counts in their budget.
        let payer = self.ledger.payer(job.user, None);
        let extraction = retry_extract_structured::<ReflectionResult>(
            &history,
            &prompt,
            REFLECTION_RETRY_PROMPT,
            ExtractionConfig {
                llm: &self.llm,
                meter: &payer,
                template: &template,
                max_attempts: MAX_ATTEMPTS,
                max_tokens: self.max_tokens_reflection,
                max_tokens_field: self.max_tokens_field,
                priority: Priority::Background,
                kind: CallKind::Reflection,
            },
        )
        .await;
        // Dropped (logged): the counters are statistics; the reflection's lessons still count.
        if let Err(e) = self.store.usage().charge(
            job.chat,
            &template.model,
            0,
            extraction.calls,
            extraction.usage,
        ) {
            tracing::warn!(error = %e, "cannot record usage");
        }
        let source = Source {
            outcome: job.outcome.clone(),
            external: job.external,
            untrusted: job.untrusted,
            grounds: job.grounds.clone(),
            skills: job.skills.clone(),
            tools: job.tools.clone(),
            given,
        };
        match extraction.result {
            Ok(result) => {
                // What the calls prove first: at equal rank, the older lesson is shown.
                let mut entries = proven_entries(job);
                entries.extend(chosen(result.lessons));
                match self.learn_for(entries, &source, &payer).await {
                    Ok(report) => {
                        tracing::info!(chat = %job.chat, ?report, "reflection done");
                        if report.added + report.reinforced > 0 {
                            ReflectionOutcome::Learned
                        } else {
                            ReflectionOutcome::Nothing
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot store heuristics");
                        ReflectionOutcome::Failed
                    }
                }
            }
            Err(e) => {
                tracing::info!(chat = %job.chat, error = %e, "reflection gave nothing usable");
                // What the calls prove needs no model.
                let entries = proven_entries(job);
                if !entries.is_empty()
                    && let Err(e) = self.learn_for(entries, &source, &payer).await
                {
                    tracing::error!(error = %e, "cannot store heuristics");
                }
                ReflectionOutcome::Failed
            }
        }
    }
}

/// What the store is offered of the lessons the model wrote: a list written as one lesson
/// counts as its items ([`NewLesson::items`]), and of those the first that can be lessons at
/// all ([`acceptable`]; the rest are not counted as dropped), up to the prompt's three.
fn chosen(lessons: Vec<NewLesson>) -> impl Iterator<Item = NewLesson> {
    lessons
        .into_iter()
        .flat_map(NewLesson::items)
        .filter(|entry| acceptable(&entry.text))
        .take(MAX_LESSONS)
}

/// The lessons `job`'s calls proved (a failed call, then one that worked), each tied to its
/// tool: learned beside the model's, through the same gates.
fn proven_entries(job: &ReflectionJob) -> Vec<NewLesson> {
    job.proven
        .iter()
        .map(|(tool, text)| NewLesson {
            text: text.clone(),
            skill_name: None,
            tool: Some(tool.clone()),
            proven: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{FunctionCall, ToolCall};
    use crate::memory::{Facts, block};

    #[test]
    fn the_first_three_items_that_can_be_lessons_are_chosen() {
        let lesson = |text: &str| NewLesson {
            text: text.into(),
            skill_name: None,
            tool: None,
            proven: false,
        };
        let texts = |lessons: Vec<NewLesson>| -> Vec<String> {
            chosen(lessons).map(|lesson| lesson.text).collect()
        };
        assert_eq!(
            texts(vec![
                lesson("Be careful."),
                lesson("Consider the following:\n1. Always double-check.\n2. Write TCK-004411."),
                lesson("Write 1500 for 1.5 kg."),
                lesson("Dates are written 14.12.2026."),
                lesson("SKU-004411 is item 4411."),
            ]),
            [
                "Write TCK-004411.",
                "Write 1500 for 1.5 kg.",
                "Dates are written 14.12.2026."
            ]
        );
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    /// What the reflection reads holds neither the asker's facts nor the turns that saved
    /// one; everything else of the turn stays.
    #[test]
    fn the_reflection_never_sees_personal_memory() {
        let mut facts = Facts::default();
        facts.remember("my cat is called Tofu", 1, 5);
        let with_block = format!("{}what time is it?", block(facts.list()));
        let messages = vec![
            ChatMessage::system("s"),
            ChatMessage::user("remember that I'm vegetarian"),
            ChatMessage::Assistant {
                content: "saving".into(),
                tool_calls: vec![
                    call("r1", REMEMBER_TOOL, r#"{"fact":"I'm vegetarian"}"#),
                    call("t0", "current_time", "{}"),
                ],
            },
            ChatMessage::tool_result("r1", "Saved: \"I'm vegetarian\"."),
            ChatMessage::tool_result("t0", "UTC: 11:00"),
            ChatMessage::assistant("Noted: you are vegetarian."),
            ChatMessage::user(with_block),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![call("t1", "current_time", "{}")],
            },
            ChatMessage::tool_result("t1", "UTC: 12:00"),
            ChatMessage::assistant("It is noon."),
        ];
        let seen = without_memory_turns(&messages);
        let text = serde_json::to_string(&seen).unwrap();
        for personal in ["Tofu", "vegetarian", "personal memory", REMEMBER_TOOL] {
            assert!(!text.contains(personal), "{personal} in {text}");
        }
        let mut expected = vec![
            ChatMessage::system("s"),
            ChatMessage::user("what time is it?"),
        ];
        expected.extend(messages[7..].iter().cloned());
        assert_eq!(seen, expected);
    }
}
