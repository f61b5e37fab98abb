//! Inline keyboards: the domain's [`Keyboard`] as Telegram buttons. Every button's callback
//! data is built by [`super::callback_data`], so it always fits Telegram's 64 bytes.

use teloxide::types::{InlineKeyboardButton, InlineKeyboardButtonKind, InlineKeyboardMarkup};

use super::callback_data::{Action, CallbackData, OptionPress};
use crate::cancel::TurnId;
use crate::texts::confirm as confirm_texts;
use crate::texts::telegram as texts;
use crate::turn::{Keyboard, Options};

/// Longest button text shown; the full label still reaches the conversation.
const BUTTON_TEXT_CHARS: usize = 40;

/// The inline keyboard that shows `keyboard` (an empty one for [`Keyboard::None`], which
/// removes what was there).
pub(crate) fn markup(keyboard: &Keyboard) -> InlineKeyboardMarkup {
    let rows: Vec<Vec<InlineKeyboardButton>> = match keyboard {
        Keyboard::None => Vec::new(),
        Keyboard::Answer {
            options,
            feedback,
            vote,
        } => {
            let mut rows = option_rows(options);
            rows.extend(feedback.as_deref().and_then(feedback_row));
            let keyboard = InlineKeyboardMarkup::new(rows);
            return match (feedback, vote) {
                (Some(ticket), Some(up)) => with_vote(&keyboard, ticket, *up),
                _ => keyboard,
            };
        }
        Keyboard::Clear => button(texts::CLEAR_BUTTON, &Action::Clear)
            .map(|b| vec![b])
            .into_iter()
            .collect(),
        Keyboard::Retry(ticket) => button(
            texts::RETRY_BUTTON,
            &Action::Retry {
                ticket: ticket.clone(),
            },
        )
        .map(|b| vec![b])
        .into_iter()
        .collect(),
        Keyboard::Confirm(id) => {
            let yes = Action::Confirm {
                id: id.clone(),
                yes: true,
            };
            let no = Action::Confirm {
                id: id.clone(),
                yes: false,
            };
            let row: Vec<InlineKeyboardButton> = [
                button(confirm_texts::YES_BUTTON, &yes),
                button(confirm_texts::NO_BUTTON, &no),
            ]
            .into_iter()
            .flatten()
            .collect();
            vec![row]
        }
        Keyboard::Models { models, current } => models
            .iter()
            .filter_map(|id| {
                let mark = if id == current { "✓ " } else { "" };
                button(
                    &format!("{mark}{}", button_text(id)),
                    &Action::SetModel(model_key(id)),
                )
                .map(|b| vec![b])
            })
            .collect(),
    };
    InlineKeyboardMarkup::new(rows)
}

/// One row per option (labels can be long), or the mark of the one chosen.
fn option_rows(options: &Options) -> Vec<Vec<InlineKeyboardButton>> {
    match options {
        Options::None => Vec::new(),
        Options::Offered { ticket, labels } => labels
            .iter()
            .enumerate()
            .filter_map(|(index, label)| {
                let data = OptionPress::encode(ticket, index, label)?;
                Some(vec![InlineKeyboardButton::callback(
                    button_text(label),
                    data,
                )])
            })
            .collect(),
        Options::Chosen(label) => button(&format!("✓ {}", button_text(label)), &Action::Chosen)
            .map(|b| vec![b])
            .into_iter()
            .collect(),
    }
}

/// `markup` with the vote on feedback ticket `ticket` shown: `👍 ✓` (or `👎 ✓`) on the pressed
/// button, the other one plain, so the user sees the vote and can still change it.
pub(crate) fn with_vote(
    markup: &InlineKeyboardMarkup,
    ticket: &str,
    up: bool,
) -> InlineKeyboardMarkup {
    let data = |up| {
        Action::Feedback {
            ticket: ticket.to_string(),
            up,
        }
        .encode()
    };
    let (up_data, down_data) = (data(true), data(false));
    let mut marked = markup.clone();
    for button in marked.inline_keyboard.iter_mut().flatten() {
        let InlineKeyboardButtonKind::CallbackData(data) = &button.kind else {
            continue;
        };
        if Some(data) == up_data.as_ref() {
            button.text = if up { "👍 ✓" } else { "👍" }.to_string();
        } else if Some(data) == down_data.as_ref() {
            button.text = if up { "👎" } else { "👎 ✓" }.to_string();
        }
    }
    marked
}

/// 👍 / 👎 for feedback ticket `ticket`.
fn feedback_row(ticket: &str) -> Option<Vec<InlineKeyboardButton>> {
    let vote = |up| Action::Feedback {
        ticket: ticket.to_string(),
        up,
    };
    Some(vec![
        button("👍", &vote(true))?,
        button("👎", &vote(false))?,
    ])
}

/// The ◀ ▶ row of page `page` of a list of `pages` pages (empty with one page); `to` is the
/// action that shows a page.
pub(crate) fn page_row(
    page: usize,
    pages: usize,
    to: impl Fn(u32) -> Action,
) -> Vec<InlineKeyboardButton> {
    let to = |page: usize| to(u32::try_from(page).unwrap_or(u32::MAX));
    let mut row = Vec::new();
    if page > 0 {
        row.extend(button("◀", &to(page - 1)));
    }
    if page + 1 < pages {
        row.extend(button("▶", &to(page + 1)));
    }
    row
}

/// A button that performs `action`; `None` if its data cannot fit (logged: a programming
/// error, never the user's).
pub(crate) fn button(text: &str, action: &Action) -> Option<InlineKeyboardButton> {
    let Some(data) = action.encode() else {
        tracing::error!(
            ?action,
            "button data does not fit 64 bytes; button left out"
        );
        return None;
    };
    Some(InlineKeyboardButton::callback(text, data))
}

/// The Stop button under turn `turn`'s streaming answer.
pub(crate) fn stop(turn: TurnId) -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(
        button(texts::STOP_BUTTON, &Action::Stop(Some(turn))).map(|b| vec![b]),
    )
}

/// Whether `markup` is nothing but ⏹ buttons: the live keyboard of a turn that is over (a
/// final edit that failed, or a crash), which a press then takes away.
pub(crate) fn only_stop(markup: &InlineKeyboardMarkup) -> bool {
    let mut buttons = markup.inline_keyboard.iter().flatten().peekable();
    buttons.peek().is_some()
        && buttons.all(|button| match &button.kind {
            InlineKeyboardButtonKind::CallbackData(data) => matches!(
                CallbackData::parse(data),
                Some(CallbackData::Action(Action::Stop(_)))
            ),
            _ => false,
        })
}

/// Whether `markup` has a button whose callback data is `data`: a press edits its message
/// only when the message really carries the pressed button (callback data can be forged and
/// sent against any message the bot wrote).
pub(crate) fn carries(markup: &InlineKeyboardMarkup, data: &str) -> bool {
    markup.inline_keyboard.iter().flatten().any(
        |button| matches!(&button.kind, InlineKeyboardButtonKind::CallbackData(d) if d == data),
    )
}

/// A label shortened for a button.
pub(crate) fn button_text(label: &str) -> String {
    shorten(label, BUTTON_TEXT_CHARS)
}

/// `text` cut to `max` characters on a character boundary, with an ellipsis when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_keyboard_of_stop_buttons_is_a_dead_live_keyboard() {
        struct Case {
            name: &'static str,
            markup: InlineKeyboardMarkup,
            only_stop: bool,
        }
        let cases = [
            Case {
                name: "the live keyboard",
                markup: stop(TurnId(7)),
                only_stop: true,
            },
            Case {
                name: "an answer's 👍/👎",
                markup: markup(&Keyboard::answer(Some("t".into()))),
                only_stop: false,
            },
            Case {
                name: "no buttons",
                markup: markup(&Keyboard::None),
                only_stop: false,
            },
            Case {
                name: "a ⏹ next to something else",
                markup: InlineKeyboardMarkup::new([
                    stop(TurnId(7)).inline_keyboard[0].clone(),
                    vec![InlineKeyboardButton::callback("x", "__act__clear|")],
                ]),
                only_stop: false,
            },
        ];
        for case in cases {
            assert_eq!(
                only_stop(&case.markup),
                case.only_stop,
                "case: {}",
                case.name
            );
        }
    }

    #[test]
    fn model_keys_are_short_stable_and_distinct() {
        let long = "openrouter/some-provider/a-very-long-model-slug-that-breaks-callback-data:free";
        assert_eq!(model_key(long).len(), 8);
        assert_eq!(model_key(long), model_key(long));
        assert_ne!(model_key("a"), model_key("b"));
        let keyboard = markup(&Keyboard::Models {
            models: vec![long.to_string()],
            current: long.to_string(),
        });
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
