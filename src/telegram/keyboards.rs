//! Inline keyboards: every button's callback data is built by [`super::callback_data`], so it
//! always fits Telegram's 64 bytes.

use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use super::callback_data::{encode_action, encode_option};

/// Longest button text shown; the full label still reaches the conversation.
const BUTTON_TEXT_CHARS: usize = 40;

/// Action of the mark left after an option was chosen; pressing it changes nothing.
pub const CHOSEN_ACTION: &str = "chosen";

/// One button per option (labels can be long), each naming ticket `id` and its index.
pub fn options(ticket_id: &str, labels: &[String]) -> InlineKeyboardMarkup {
    let rows = labels.iter().enumerate().filter_map(|(index, label)| {
        let data = encode_option(&format!("{ticket_id}.{index}"), label)?;
        Some(vec![InlineKeyboardButton::callback(
            button_text(label),
            data,
        )])
    });
    InlineKeyboardMarkup::new(rows)
}

/// The mark that replaces the options once one was chosen.
pub fn chosen(label: &str) -> InlineKeyboardMarkup {
    let data = encode_action(CHOSEN_ACTION, "").unwrap_or_default();
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback(
        format!("✓ {}", button_text(label)),
        data,
    )]])
}

/// A label shortened for display, on a character boundary, with an ellipsis when cut.
pub fn button_text(label: &str) -> String {
    match label.char_indices().nth(BUTTON_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", label[..cut].trim_end()),
        None => label.to_string(),
    }
}
