//! A reaction on an answer as another way to press its 👍/👎.
//!
//! A reaction on any part of an answer with 👍/👎 is looked up in the `answers` tree (every
//! part of a rated answer is recorded as it is shown, see `working`) and goes through
//! [`actions::feedback`], exactly as the button does: the same lessons scored, a 👎's
//! reflection (the asker's or an admin's only), one change of mind; the vote then shows in the answer's keyboard. Which emoji
//! count is configured ([`vote_of`] decides); a reaction taken off changes nothing, as a
//! button cannot be un-pressed.

use std::sync::Arc;

use super::actions::{self, Outcome, Voter};
use super::messenger::{Keyboard, Options};
use crate::app::App;
use crate::conversation::Conversation;
use crate::ids::ChatId;
use crate::store::AnswerRecord;

/// The vote a change of reactions casts: the last emoji `added` that is in `up` or `down`
/// (`None`: none counts). Telegram writes some emoji with a variation selector and some
/// without (❤ and ❤️); both count alike.
///
/// ```
/// # use heurist::turn::reactions::vote_of;
/// let (up, down) = (vec!["👍".to_string(), "❤".to_string()], vec!["👎".to_string()]);
/// assert_eq!(vote_of(&["❤️"], &up, &down), Some(true));
/// assert_eq!(vote_of(&["🤔"], &up, &down), None);
/// ```
pub fn vote_of(added: &[&str], up: &[String], down: &[String]) -> Option<bool> {
    let plain = |emoji: &str| emoji.replace('\u{fe0f}', "");
    let listed = |list: &[String], emoji: &str| list.iter().any(|e| plain(e) == plain(emoji));
    added.iter().rev().find_map(|emoji| {
        if listed(up, emoji) {
            Some(true)
        } else if listed(down, emoji) {
            Some(false)
        } else {
            None
        }
    })
}

/// A vote by reaction on message `message` of `chat`: what the answer's button would do,
/// and the keyboard that shows the vote with the message that carries it. `None` when the
/// message is no answer with 👍/👎.
pub(crate) fn vote_by_reaction(
    app: &Arc<App>,
    chat: ChatId,
    message: i32,
    up: bool,
    voter: Voter,
) -> Option<(Outcome, i32, Keyboard)> {
    let answer = app.store().answers().get(chat, message)?;
    let at = Conversation::new(chat, answer.topic);
    let outcome = actions::feedback(app, at, &answer.feedback, up, voter);
    let keyboard = Keyboard::Answer {
        options: options_shown(app, at, &answer),
        vote: Some(up),
        feedback: Some(answer.feedback.clone()),
    };
    Some((outcome, answer.keyboard, keyboard))
}

/// The option buttons `answer` shows now: the mark of the option chosen, the options while
/// they are the conversation's live ones, else none (retired by a later turn or a clear).
fn options_shown(app: &App, at: Conversation, answer: &AnswerRecord) -> Options {
    let store = app.store();
    let Some(ticket) = answer.options.as_deref() else {
        return Options::None;
    };
    let Some(offered) = store.tickets().get(ticket) else {
        return Options::None;
    };
    if let Some(chosen) = offered.chosen {
        return offered
            .labels
            .get(chosen)
            .map_or(Options::None, |label| Options::Chosen(label.clone()));
    }
    let live = store
        .chats()
        .state(at)
        .ok()
        .and_then(|state| state.offered)
        .is_some_and(|live| live.ticket == ticket);
    if live {
        Options::Offered {
            ticket: ticket.to_string(),
            labels: offered.labels,
        }
    } else {
        Options::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_added_emoji_that_is_listed_votes() {
        struct Case {
            name: &'static str,
            added: &'static [&'static str],
            vote: Option<bool>,
        }
        let up: Vec<String> = ["👍", "❤", "🔥", "👏"].map(String::from).to_vec();
        let down: Vec<String> = ["👎", "💩", "🤮"].map(String::from).to_vec();
        let cases = [
            Case {
                name: "a thumbs-up",
                added: &["👍"],
                vote: Some(true),
            },
            Case {
                name: "a heart, as Telegram writes it",
                added: &["❤"],
                vote: Some(true),
            },
            Case {
                name: "a heart with a variation selector",
                added: &["❤\u{fe0f}"],
                vote: Some(true),
            },
            Case {
                name: "fire and applause",
                added: &["🔥", "👏"],
                vote: Some(true),
            },
            Case {
                name: "a thumbs-down",
                added: &["👎"],
                vote: Some(false),
            },
            Case {
                name: "poo",
                added: &["💩"],
                vote: Some(false),
            },
            Case {
                name: "vomiting",
                added: &["🤮"],
                vote: Some(false),
            },
            Case {
                name: "an emoji in neither list",
                added: &["🤔"],
                vote: None,
            },
            Case {
                name: "nothing added (a reaction taken off)",
                added: &[],
                vote: None,
            },
            Case {
                name: "the last listed one wins",
                added: &["👍", "🤮", "🤔"],
                vote: Some(false),
            },
        ];
        for case in cases {
            assert_eq!(vote_of(case.added, &up, &down), case.vote, "{}", case.name);
        }
    }

    #[test]
    fn empty_lists_count_nothing() {
        assert_eq!(vote_of(&["👍"], &[], &[]), None);
    }
}
