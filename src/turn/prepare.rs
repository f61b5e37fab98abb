//! Stage one, prepare: the prompt of a turn. The history window (as the user's role may see
//! it), the skills and lessons that fit the message, and the user message with its photo;
//! beside it, what the turn read that later stages need (the window's epoch, whether it held
//! third-party text, a correction of the previous answer).
//!
//! A history that cannot be read stops the turn here: answering without it would store the
//! turn over the chat's history, so the user is told and nothing is stored.

use super::messenger::SharedMessenger;
use super::state::Turn;
use super::visibility::set_state;
use crate::agent::correction::{Correction, correction};
use crate::agent::output;
use crate::app::App;
use crate::config::ModelConfig;
use crate::learning::TurnContext;
use crate::llm::{ChatMessage, ToolSpec};
use crate::metrics::TurnOutcome;
use crate::role::{Caller, Role};
use crate::store::{HistoryWindow, InboxState};
use crate::texts::turn::{UNREADABLE_NOTICE, photo_unreadable};

/// What the agent is asked: the model, the tools the caller may use, the request prefix and
/// the user message.
pub(super) struct Prompt {
    pub(super) model: ModelConfig,
    pub(super) caller: Caller,
    pub(super) specs: Vec<ToolSpec>,
    /// The constant system message, then the history window.
    pub(super) messages: Vec<ChatMessage>,
    pub(super) user_message: ChatMessage,
    /// The history window holds third-party text (see [`crate::provenance`]).
    pub(super) history_external: bool,
}

/// What the prompt was built from, for the stages after the agent.
pub(super) struct Basis {
    /// The model's id.
    pub(super) model: String,
    /// The history's clear epoch when the turn read it.
    pub(super) epoch: u64,
    /// Text a third party wrote was in the window: it taints what the turn produces.
    pub(super) external: bool,
    /// The message corrects the previous answer: evidence for the turn's reflection.
    pub(super) corrected: Option<Correction>,
    /// The skills and lessons the prompt carried.
    pub(super) context: TurnContext,
}

/// Prepares the turn's prompt; `None` when the history cannot be read (the turn is over).
pub(super) async fn prepare(turn: &Turn) -> Option<(Prompt, Basis)> {
    let (app, input) = (&turn.app, &turn.input);
    let model = app.model_for(turn.at());
    let window = read_window(turn, &model).await?;
    // What an admin-only tool returned stays with admins' turns.
    let window = if turn.role == Role::Admin {
        window
    } else {
        window.for_non_admin()
    };
    let caller = Caller::new(turn.role, input.request.chat);
    let specs = app.agent().tools().specs(caller);
    // A forwarded message is someone else's words, not the user correcting the bot.
    let corrected = (!input.request.forwarded)
        .then(|| correction(&window.messages, &input.request.text))
        .flatten();
    let context = app
        .learning()
        .context_for(&input.request.text, &window.messages, &specs, &turn.payer)
        .await;
    // The asker's own facts go in front, theirs only, whoever else writes in the chat.
    let content = super::memory::with_facts(turn, context.user_content(&input.request.text));
    let basis = Basis {
        model: model.id.clone(),
        epoch: window.epoch,
        external: window.external,
        corrected,
        context,
    };
    let prompt = Prompt {
        messages: prompt(app, window.messages),
        user_message: user_message(&turn.out, content, input.request.image.clone()).await,
        model,
        caller,
        specs,
        history_external: basis.external,
    };
    Some((prompt, basis))
}

/// The conversation's history window within the model's budget; when it cannot be read, the
/// user is told, the update is finished, and `None` ends the turn.
async fn read_window(turn: &Turn, model: &ModelConfig) -> Option<HistoryWindow> {
    let budget = turn.app.history_budget(model).await;
    let at = turn.at();
    match turn.app.store().history().window(at, budget) {
        Ok(window) => Some(window),
        Err(e) => {
            tracing::error!(%at, error = %format!("{e:#}"), "cannot read the history; the turn stops");
            turn.stop_typing();
            turn.clock.ended(TurnOutcome::Failed);
            turn.out.notice(at, UNREADABLE_NOTICE).await;
            if let Some(update) = turn.input.update {
                set_state(&turn.app, update, InboxState::Answered).await;
            }
            None
        }
    }
}

/// The user message the model gets: the text, with the photo as a `data:` URL if there is one
/// (a photo that cannot be fetched is mentioned, so the model can say it did not see it).
async fn user_message(
    out: &SharedMessenger,
    content: String,
    image: Option<String>,
) -> ChatMessage {
    let Some(file_id) = image else {
        return ChatMessage::user(content);
    };
    match out.image(&file_id).await {
        Ok(url) => ChatMessage::user_with_image(content, url),
        Err(e) => {
            tracing::warn!(error = %e, "cannot fetch a photo");
            ChatMessage::user(photo_unreadable(&content, &e.to_string()))
        }
    }
}

/// The request prefix of every turn: the constant system message, then the history window.
/// Nothing here may change between two turns unless the history window moves, so the
/// provider's prompt cache keeps hitting.
fn prompt(app: &App, history: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(app.agent().system_message());
    messages.extend(history.into_iter().map(output::without_old_frame));
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TurnProvenance;
    use crate::turn::testing::{
        ALICE, NO_LLM, Recorder, Shown, UPDATE, accept, app, damaged_chat_state, input, state, turn,
    };

    /// The prompt is the system message and the history; the message comes after it. No LLM
    /// is needed to prepare it.
    #[tokio::test]
    async fn the_prompt_is_the_system_message_then_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path(), NO_LLM);
        let earlier = [ChatMessage::user("hi"), ChatMessage::assistant("hello")];
        let at = input("").conversation();
        let provenance = TurnProvenance::default();
        assert!(
            app.store()
                .history()
                .append(at, 0, None, &earlier, &provenance)
                .unwrap()
        );
        let input = input("what now?");
        accept(&app, &input);
        let turn = turn(&app, &Recorder::new(), input).await;
        let (prompt, basis) = prepare(&turn).await.expect("prepared");
        assert_eq!(prompt.messages[0], app.agent().system_message());
        assert_eq!(prompt.messages[1..], earlier);
        assert!(prompt.user_message.content().contains("what now?"));
        assert_eq!(basis.model, app.config().default_model().id);
        assert!(!basis.external);
    }

    /// A photo that cannot be fetched is named to the model, so it can say it did not see it.
    #[tokio::test]
    async fn a_photo_that_cannot_be_fetched_is_named() {
        let out: SharedMessenger = Recorder::new();
        let message = user_message(&out, "look".into(), Some("file".into())).await;
        assert_eq!(
            message.content(),
            "look\n[a photo was attached but could not be fetched: no photos here]"
        );
    }

    /// A history that cannot be read stops the turn: the user is told, nothing is stored, and
    /// the update is done.
    #[tokio::test]
    async fn an_unreadable_history_stops_the_turn() {
        let dir = tempfile::tempdir().unwrap();
        damaged_chat_state(dir.path(), ALICE, b"{\"window_start\":").await;
        let app = app(dir.path(), NO_LLM);
        let out = Recorder::new();
        let input = input("hi");
        accept(&app, &input);
        let turn = turn(&app, &out, input).await;
        assert!(prepare(&turn).await.is_none());
        let told = Shown::Notice(turn.at(), UNREADABLE_NOTICE.to_string());
        assert_eq!(out.shown(), vec![told]);
        assert_eq!(state(&app, UPDATE), None);
    }
}
