//! Follow-ups of an answer, in the background on the turn's own request prefix: its option
//! buttons, then its reflection (one after the other, so a local server's shared context is
//! not asked for two long prompts at once), each dropped cleanly from a full follow-up queue.

use std::sync::Arc;

use crate::agent::{TurnResult, TurnStatus};
use crate::app::App;
use crate::background::Lane;
use crate::config::Caller;
use crate::llm::ChatMessage;
use crate::llm::extraction::Prefix;
use crate::options;
use crate::store::ReflectionJob;

/// Starts the turn's follow-ups in the background, on its own request prefix: option buttons
/// (for `extraction`), then the reflection (one after the other, so a local server's shared
/// context is not asked for two long prompts at once, and the second reuses the first's cached
/// prefix). The returned receiver gets the options, or nothing when there are none to wait for.
pub(super) fn follow_ups(
    app: &Arc<App>,
    result: &TurnResult,
    job: ReflectionJob,
    extraction: Option<options::Answer>,
) -> tokio::sync::oneshot::Receiver<Option<options::Attached>> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let Some(prefix) = result.prefix() else {
        return receiver;
    };
    // A turn whose LLM failed is not reflected on: the endpoint that just failed would only
    // be asked again, and there is nothing to learn from an error.
    let failed = matches!(result.status, TurnStatus::LlmFailed(_));
    let reflection = (!failed)
        .then(|| app.learning().plan_reflection(&job))
        .flatten();
    // Without its photos from here on: the reflection may wait in the queue.
    let reflection = reflection.map(|id| (id, job, without_images(&prefix)));
    let Some(answer) = extraction else {
        if let Some((id, job, prefix)) = reflection {
            queue_reflection(app, id, job, prefix);
        }
        return receiver;
    };
    let app2 = app.clone();
    let (store, planned) = (app.store().clone(), reflection.as_ref().map(|r| r.0));
    let extract = async move {
        let attached = extract_options(&app2, answer, &prefix).await;
        // The turn may have stopped waiting; the options are then simply not shown.
        let _ = sender.send(attached);
        if let Some((id, job, prefix)) = reflection {
            queue_reflection(&app2, id, job, prefix);
        }
    };
    // Dropped, the options are not shown (the turn's receiver sees the sender go) and the
    // reflection that was to follow them is forgotten with them.
    let dropped = move || {
        if let Some(id) = planned {
            forget_reflection(&store, id);
        }
    };
    app.follow_up(Lane::Options, extract, dropped);
    receiver
}

/// Extracts the answer's options and stores them as a ticket.
async fn extract_options(
    app: &App,
    answer: options::Answer,
    prefix: &Prefix,
) -> Option<options::Attached> {
    let config = app.config();
    let llm = app.agent().llm();
    // Charged call by call, so an extraction that times out still counts.
    let payer = app.ledger().payer(Some(answer.user), None);
    options::extract(
        llm,
        &payer,
        app.store(),
        &config.options,
        &config.llm,
        answer,
        prefix,
    )
    .await
}

/// Queues saved reflection `id` on `prefix` (a turn's, without its photos, or a bare one).
/// Dropped from a full queue, it is forgotten: its saved job is removed, so the backlog that
/// filled the queue does not come back at every start, and the store holds no job that nothing
/// will run. (A shutdown keeps the job; it resumes at the next start.)
pub(super) fn queue_reflection(app: &Arc<App>, id: u64, job: ReflectionJob, prefix: Prefix) {
    let app2 = app.clone();
    let store = app.store().clone();
    app.follow_up(
        Lane::Reflection,
        async move { app2.learning().reflect(id, &job, prefix).await },
        move || forget_reflection(&store, id),
    );
}

/// Removes the saved job of reflection `id`, which the follow-up queue dropped.
pub(super) fn forget_reflection(store: &crate::store::Store, id: u64) {
    tracing::warn!(
        id,
        "a reflection dropped from the full follow-up queue is forgotten"
    );
    if let Err(e) = store.finish_reflection(id) {
        tracing::warn!(id, error = %e, "cannot forget a dropped reflection");
    }
}

/// `prefix` without its photos' data (each is named instead, as in the history): what a
/// queued reflection holds, so a backlog of reflections does not hold megabytes of images, and
/// what it sends, which does not need them.
pub(super) fn without_images((request, messages): &Prefix) -> Prefix {
    let strip =
        |messages: &[ChatMessage]| messages.iter().map(ChatMessage::without_images).collect();
    let request = crate::llm::ChatRequest {
        messages: strip(&request.messages),
        ..request.clone()
    };
    (request, strip(messages))
}

/// The prefix a reflection without its turn extends, with the parameters of the job's model
/// (or the default model, if it is no longer configured): the system prompt, and for a 👎
/// the request and the answer it rated.
pub(super) fn bare_prefix(app: &App, job: &ReflectionJob) -> Prefix {
    let model = app
        .config()
        .model(&job.model)
        .cloned()
        .unwrap_or_else(|| app.config().default_model().clone());
    let mut messages = vec![app.agent().system_message()];
    if let Some(answer) = &job.answer {
        messages.push(ChatMessage::user(job.task.clone()));
        messages.push(ChatMessage::assistant(answer.clone()));
    }
    (
        app.agent().request(&model, messages.clone(), Caller::USER),
        messages,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queued reflection holds no photo data: neither its request template nor its messages.
    #[test]
    fn a_reflection_prefix_holds_no_photo() {
        let photo =
            ChatMessage::user_with_image("what is this?", "data:image/jpeg;base64,/9j/AAAA");
        let messages = vec![
            ChatMessage::user("hi"),
            photo,
            ChatMessage::assistant("a cat"),
        ];
        let request = crate::llm::ChatRequest {
            model: "m".into(),
            messages: messages[..2].to_vec(),
            tools: Vec::new(),
            temperature: 0.0,
            reasoning_effort: None,
            provider: None,
            max_tokens: None,
            max_completion_tokens: None,
            stream: false,
            stream_options: None,
            context_tokens: None,
        };
        let held = without_images(&(request, messages));
        let text =
            serde_json::to_string(&held.0).unwrap() + &serde_json::to_string(&held.1).unwrap();
        assert!(!text.contains("data:image"), "{text}");
        assert!(text.contains("what is this?") && text.contains("a cat"));
        assert_eq!(held.1.len(), 3);
    }
}
