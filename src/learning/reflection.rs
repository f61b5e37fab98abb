//! Reflection: after a finished task, ask the model for transferable heuristics (ERL).
//!
//! Runs in the background (it never delays a reply), at most `max_concurrent_reflections` at a
//! time. Each job is saved in sled before it starts and removed when it is done, so a job that
//! a shutdown interrupted is resumed at the next start. Right after a turn the reflection reuses
//! the turn's request (same parameters, the turn's messages as prefix), so the provider's prompt
//! cache serves most of it; a resumed job, whose turn is gone, asks with the system prompt only.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::app::App;
use crate::learning::heuristics::{
    REFLECTION_RETRY_PROMPT, ReflectionResult, build_reflection_extract_prompt,
};
use crate::llm::extraction::{ExtractionConfig, retry_extract_structured};
use crate::llm::{ChatMessage, ChatRequest, Priority};
use crate::store::ReflectionJob;

/// The user's request in a reflection prompt is cut to this many characters.
pub const TASK_SUMMARY_CHARS: usize = 512;

/// Attempts when the model answers a reflection with prose instead of JSON.
const MAX_ATTEMPTS: usize = 2;

/// The request the reflection extends: the turn's last request and its messages so far.
pub type Prefix = (ChatRequest, Vec<ChatMessage>);

/// A task summary: the request, cut on a character boundary.
pub fn task_summary(request: &str) -> String {
    request.chars().take(TASK_SUMMARY_CHARS).collect()
}

/// Saves and starts a reflection (if reflection is on).
pub fn spawn(app: &Arc<App>, job: ReflectionJob, prefix: Option<Prefix>) {
    if !app.config.learning.reflect {
        return;
    }
    match app.store.save_reflection(&job) {
        Ok(id) => start(app.clone(), id, job, prefix),
        Err(e) => tracing::warn!(error = %e, "cannot save a reflection job; skipping it"),
    }
}

/// Starts the reflections a previous run left unfinished.
pub fn resume_pending(app: &Arc<App>) {
    for (id, job) in app.store.pending_reflections() {
        tracing::info!(id, chat = job.chat, "resuming an unfinished reflection");
        start(app.clone(), id, job, None);
    }
}

/// Counts a reflection as running until dropped (also when its task is aborted).
struct Running(Arc<App>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0
            .learning
            .reflections_running
            .fetch_sub(1, Ordering::SeqCst);
    }
}

fn start(app: Arc<App>, id: u64, job: ReflectionJob, prefix: Option<Prefix>) {
    app.learning
        .reflections_running
        .fetch_add(1, Ordering::SeqCst);
    let running = Running(app.clone());
    app.spawn(async move {
        let app = running.0.clone();
        let Ok(_slot) = app.learning.reflection_slots.acquire().await else {
            return;
        };
        run(&app, &job, prefix).await;
        if let Err(e) = app.store.finish_reflection(id) {
            tracing::warn!(id, error = %e, "cannot mark a reflection done");
        }
        drop(running);
    });
}

async fn run(app: &App, job: &ReflectionJob, prefix: Option<Prefix>) {
    let model = app
        .config
        .model(&job.model)
        .cloned()
        .unwrap_or_else(|| app.config.default_model().clone());
    let (template, history) = prefix.unwrap_or_else(|| {
        let messages = vec![app.agent.system_message()];
        (app.agent.request(&model, messages.clone()), messages)
    });
    let tools = if job.tools.is_empty() {
        "none".to_string()
    } else {
        job.tools.join(", ")
    };
    let prompt = build_reflection_extract_prompt(&job.task, &tools, &job.outcome);
    let extraction = retry_extract_structured::<ReflectionResult>(
        &history,
        &prompt,
        REFLECTION_RETRY_PROMPT,
        ExtractionConfig {
            llm: app.agent.llm(),
            template: &template,
            max_attempts: MAX_ATTEMPTS,
            max_tokens: app.config.llm.max_tokens_reflection,
            max_tokens_field: app.config.llm.max_tokens_field,
            priority: Priority::Background,
        },
    )
    .await;
    if extraction.calls > 0
        && let Err(e) = app.store.record_usage(
            job.chat,
            &template.model,
            0,
            extraction.calls,
            extraction.usage,
        )
    {
        tracing::warn!(error = %e, "cannot record usage");
    }
    match extraction.result {
        Ok(result) => {
            let entries = result.heuristics.into_iter().take(3).collect();
            match app.learning.learn(entries) {
                Ok(report) => tracing::info!(chat = job.chat, ?report, "reflection done"),
                Err(e) => tracing::error!(error = %e, "cannot store heuristics"),
            }
        }
        Err(e) => tracing::info!(chat = job.chat, error = %e, "reflection gave nothing usable"),
    }
}
