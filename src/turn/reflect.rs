//! A turn's reflection, queued as a follow-up: on the turn's own request prefix (without its
//! photos, so a backlog does not hold megabytes of images), or on a bare prefix for one that
//! resumes after a restart or follows a 👎. Dropped from a full follow-up queue, it is
//! forgotten cleanly.

use std::sync::Arc;

use crate::app::App;
use crate::background::Lane;
use crate::llm::ChatMessage;
use crate::llm::extraction::Prefix;
use crate::role::Caller;
use crate::store::ReflectionJob;

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
    // Dropped (logged): the saved job stays, and the next start resumes the reflection.
    if let Err(e) = store.learning().finish_reflection(id) {
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
        messages.push(ChatMessage::user(job.request.clone()));
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
