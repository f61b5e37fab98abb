//! Inline keyboards: every button's callback data is built by [`super::callback_data`], so it
//! always fits Telegram's 64 bytes.

use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use super::actions::{CLEAR, FEEDBACK, FORGET, SET_MODEL, STOP};
use super::callback_data::{encode_action, encode_option};
use crate::config::ModelConfig;

/// Longest button text shown; the full label still reaches the conversation.
const BUTTON_TEXT_CHARS: usize = 40;

/// Action of the mark left after an option was chosen; pressing it changes nothing.
pub const CHOSEN_ACTION: &str = "chosen";

/// The keyboard under an answer: one row per option (labels can be long), each naming
/// `<ticket id>.<index>`, then the 👍/👎 row of feedback ticket `feedback`.
pub fn answer(options: Option<(&str, &[String])>, feedback: Option<&str>) -> InlineKeyboardMarkup {
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    if let Some((ticket_id, labels)) = options {
        rows.extend(labels.iter().enumerate().filter_map(|(index, label)| {
            let data = encode_option(&format!("{ticket_id}.{index}"), label)?;
            Some(vec![InlineKeyboardButton::callback(
                button_text(label),
                data,
            )])
        }));
    }
    rows.extend(feedback.and_then(feedback_row));
    InlineKeyboardMarkup::new(rows)
}

/// The mark that replaces the options once one was chosen (the 👍/👎 row stays).
pub fn chosen(label: &str, feedback: Option<&str>) -> InlineKeyboardMarkup {
    let data = encode_action(CHOSEN_ACTION, "").unwrap_or_default();
    let mut rows = vec![vec![InlineKeyboardButton::callback(
        format!("✓ {}", button_text(label)),
        data,
    )]];
    rows.extend(feedback.and_then(feedback_row));
    InlineKeyboardMarkup::new(rows)
}

/// 👍 / 👎 for feedback ticket `id`: `__act__fb|<id>.u` and `.d`.
fn feedback_row(id: &str) -> Option<Vec<InlineKeyboardButton>> {
    let up = encode_action(FEEDBACK, &format!("{id}.u"))?;
    let down = encode_action(FEEDBACK, &format!("{id}.d"))?;
    Some(vec![
        InlineKeyboardButton::callback("👍", up),
        InlineKeyboardButton::callback("👎", down),
    ])
}

/// One "forget" button per heuristic, for `/heuristics`.
pub fn forget(heuristics: &[(u64, String)]) -> InlineKeyboardMarkup {
    let rows = heuristics.iter().filter_map(|(id, text)| {
        let data = encode_action(FORGET, &id.to_string())?;
        Some(vec![InlineKeyboardButton::callback(
            format!("🗑 #{id} {}", button_text(text)),
            data,
        )])
    });
    InlineKeyboardMarkup::new(rows)
}

/// A label shortened for a button.
pub fn button_text(label: &str) -> String {
    shorten(label, BUTTON_TEXT_CHARS)
}

/// `text` cut to `max` characters on a character boundary, with an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", text[..cut].trim_end()),
        None => text.to_string(),
    }
}

/// A short, stable key for a model id: 8 hex digits of its FNV-1a hash. Callback data carries
/// the key, never the slug (slugs can exceed 64 bytes); a key that matches no configured model
/// changes nothing.
pub fn model_key(id: &str) -> String {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{:08x}", hash >> 32)
}

/// The configured models, one per row, the current one marked ✓.
pub fn models(models: &[ModelConfig], current: &str) -> InlineKeyboardMarkup {
    let rows = models.iter().filter_map(|model| {
        let data = encode_action(SET_MODEL, &model_key(&model.id))?;
        let mark = if model.id == current { "✓ " } else { "" };
        Some(vec![InlineKeyboardButton::callback(
            format!("{mark}{}", button_text(&model.id)),
            data,
        )])
    });
    InlineKeyboardMarkup::new(rows)
}

/// The Stop button under a streaming answer.
pub fn stop() -> InlineKeyboardMarkup {
    let data = encode_action(STOP, "").unwrap_or_default();
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback("⏹ Stop", data)]])
}

/// A single "clear history" button.
pub fn clear() -> InlineKeyboardMarkup {
    let data = encode_action(CLEAR, "").unwrap_or_default();
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback("🧹 Clear history", data)]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_keys_are_short_stable_and_distinct() {
        let long = "openrouter/some-provider/a-very-long-model-slug-that-breaks-callback-data:free";
        assert_eq!(model_key(long).len(), 8);
        assert_eq!(model_key(long), model_key(long));
        assert_ne!(model_key("a"), model_key("b"));
        let keyboard = models(&[ModelConfig::with_id(long)], long);
        let json = serde_json::to_value(&keyboard).unwrap();
        let data = json["inline_keyboard"][0][0]["callback_data"]
            .as_str()
            .unwrap();
        assert!(data.len() <= 64);
        assert!(
            json["inline_keyboard"][0][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("✓ ")
        );
    }
}
