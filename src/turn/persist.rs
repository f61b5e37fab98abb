//! Stage three, persist: the whole turn is appended to the history with its provenance (it
//! read third-party text; which tool results are for admins only), its update marked stored,
//! its usage recorded, the lessons it carried scored by how it went, and the argument forms
//! its tools taught kept (`learning::rewrite`). This comes before
//! the answer is shown, so an answer the user saw is always in the history.

use super::prepare::Basis;
use super::state::Turn;
use super::think::Thought;
use crate::agent::{TurnResult, TurnStatus};
use crate::llm::ChatMessage;
use crate::provenance::{self, Decision, Effect, decide};
use crate::store::TurnProvenance;

/// Stores the turn and ends its typing indicator; returns the turn's provenance, which the
/// provenance gate decides its lessons by.
pub(super) fn persist(turn: &Turn, basis: &Basis, thought: &Thought) -> provenance::Provenance {
    let result = &thought.result;
    let gate = provenance_of(turn, basis, result);
    // Text a third party wrote anywhere in what this turn read taints what it produced.
    let stored = TurnProvenance {
        external: gate.third_party_text(),
        admin_only: result.admin_only_calls.clone(),
    };
    store_turn(turn, basis, result, &stored);
    turn.stop_typing();
    // Dropped (logged): the answer is shown; the lessons' counts only miss this turn.
    if !matches!(result.status, TurnStatus::LlmFailed(_)) {
        let learning = turn.app.learning();
        let scored = learning
            .record_outcome(&basis.context.lessons, |tool| result.first_call(tool))
            .and_then(|()| learning.record_trials(&result.trials));
        if let Err(e) = scored {
            let chat = turn.input.request.chat;
            tracing::warn!(%chat, error = %e, "cannot score the lessons a turn carried");
        }
    }
    keep_forms(turn, result, &gate);
    gate
}

/// Keeps the argument forms the turn's tools taught and how the calls the bot rewrote went,
/// where the provenance gate allows it (someone else's message neither teaches a form nor
/// retires one).
fn keep_forms(turn: &Turn, result: &TurnResult, gate: &provenance::Provenance) {
    if decide(Effect::TeachForm, gate) != Decision::Allow {
        return;
    }
    let taught: Vec<_> = result
        .taught
        .iter()
        .map(|t| (t.tool.clone(), t.argument.clone(), t.example.clone()))
        .collect();
    turn.app.learning().keep_forms(&taught, &result.rewritten);
}

/// Where the turn's text came from: its message, its history window and what it read.
pub(super) fn provenance_of(
    turn: &Turn,
    basis: &Basis,
    result: &TurnResult,
) -> provenance::Provenance {
    provenance::Provenance {
        message: turn.input.request.origin(),
        read_external: result.external_content(),
        history_external: basis.external,
    }
}

/// Appends the turn to the history (moving the window past turns an overflow dropped), marks
/// its update stored (if the history took it), and records its usage per chat (the user's
/// budget was charged per call).
fn store_turn(turn: &Turn, basis: &Basis, result: &TurnResult, provenance: &TurnProvenance) {
    let (input, store) = (&turn.input, turn.app.store());
    let chat = input.request.chat;
    // Dropped (logged): the next turn's window still holds the turns the overflow dropped; it
    // overflows once more and drops them again.
    if result.dropped_turns > 0
        && let Err(e) = store
            .history()
            .skip(input.conversation(), result.dropped_turns)
    {
        tracing::warn!(%chat, error = %e, "cannot move the history window");
    }
    // Without the asker's facts: the history is the chat's, and other members read it.
    let stored = super::memory::without_facts(
        result
            .messages
            .iter()
            .map(ChatMessage::without_images)
            .collect(),
    );
    // Dropped (logged): the answer is still shown, but this exchange is missing from the history
    // later turns read (see below for its update).
    let appended = store.history().append(
        input.conversation(),
        basis.epoch,
        input.update,
        &stored,
        provenance,
    );
    match &appended {
        Ok(true) => {}
        Ok(false) => tracing::info!(%chat, "chat was cleared during the turn; not stored"),
        Err(e) => tracing::error!(%chat, error = %e, "cannot store the turn"),
    }
    // Handled: a turn the history refused stays Pending, so a crash before its answer is shown
    // runs it again (marked stored, recovery would close it unanswered). A failed mark is
    // dropped (logged): recovery finds the answer in the history and sends it, never reruns.
    if let Some(update) = input.update.filter(|_| appended.is_ok())
        && let Err(e) = store.inbox().mark_stored(update)
    {
        tracing::warn!(%update, error = %e, "cannot record an update's progress");
    }
    // Dropped (logged): the per-chat statistics miss this turn; the user's budget was charged
    // call by call already.
    if let Err(e) = store
        .usage()
        .charge(chat, &basis.model, 1, result.calls, result.usage)
    {
        tracing::warn!(%chat, error = %e, "cannot record usage");
    }
    for fallback in &result.fallbacks {
        // Dropped (logged): the count is a statistic; the turn is stored.
        if let Err(e) = store.fallbacks().record(chat, &fallback.from) {
            tracing::warn!(%chat, error = %e, "cannot count a fallback");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::InboxState;

    use crate::turn::testing::{
        ALICE, NO_LLM, Recorder, UPDATE, accept, app, basis, damaged_chat_state, input, state,
        thought, turn,
    };

    /// The turn is in the history before its answer is shown, its update stored, and marked
    /// as holding third-party text when anything it read did.
    #[tokio::test]
    async fn the_turn_is_stored_with_its_provenance() {
        let cases = [
            ("own words", false, false, false),
            ("forwarded", true, false, true),
            ("a window with third-party text", false, true, true),
        ];
        for (name, forwarded, window_external, external) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let mut input = input("question");
            input.request.forwarded = forwarded;
            accept(&app, &input);
            let turn = turn(&app, &Recorder::new(), input).await;
            let basis = basis(window_external);
            let thought = thought(TurnStatus::Answered, "question", "answer");
            let provenance = persist(&turn, &basis, &thought);
            assert_eq!(provenance.third_party_text(), external, "{name}");
            let window = app.store().history().window(turn.at(), 100_000).unwrap();
            assert_eq!(window.messages, thought.result.messages, "{name}");
            assert_eq!(window.external, external, "{name}: the window's mark");
            assert_eq!(state(&app, UPDATE), Some(InboxState::Stored), "{name}");
        }
    }

    /// A turn the history refuses is not marked stored: after a crash recovery runs it again
    /// rather than closing it as stored without an answer to send.
    #[tokio::test]
    async fn a_turn_the_history_refuses_stays_pending() {
        let dir = tempfile::tempdir().unwrap();
        // An unreadable chat state, which every history write refuses.
        damaged_chat_state(dir.path(), ALICE, b"{").await;
        let app = app(dir.path(), NO_LLM);
        let input = input("question");
        accept(&app, &input);
        let turn = turn(&app, &Recorder::new(), input).await;
        let basis = basis(false);
        let thought = thought(TurnStatus::Answered, "question", "answer");
        persist(&turn, &basis, &thought);
        assert_eq!(state(&app, UPDATE), Some(InboxState::Pending));
    }
}
