//! A scheduled reminder at its time: its text shown as its turn's answer, with no model call.

use std::sync::Arc;

use super::input::TurnInput;
use super::messenger::{Keyboard, Live, SharedMessenger};
use super::visibility::{record_visible, set_state};
use crate::app::App;
use crate::store::InboxState;

/// Shows a reminder's text as the answer of its turn (recorded visible, then answered, so a
/// crash never shows it twice); no model call.
pub(super) async fn remind(app: &Arc<App>, out: &SharedMessenger, input: &TurnInput) {
    let at = input.conversation();
    let on_visible = record_visible(app, input.update, false);
    let text = &input.request.text;
    out.answer(at, None, Live::default(), text, Keyboard::None, on_visible)
        .await;
    if let Some(update) = input.update {
        set_state(app, update, InboxState::Answered).await;
    }
}
