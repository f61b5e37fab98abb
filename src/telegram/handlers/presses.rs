//! Button presses from allowed users that belong to no feature of their own: an option or a
//! 🔁 Retry starts a turn; clear, feedback, stop, a confirmation, a chosen mark. The
//! features' presses (model, the lessons review, `/memory`, `/tasks`) are in their rooms,
//! [`crate::telegram::features`]. Every press is answered at once with its toast
//! ([`answer_press`]); an edit it causes is posted (see [`replies`]).

use teloxide::prelude::*;

use super::turns::{self, Asker, Claimed};
use super::{Deps, HandlerResult, pressed_in, reply_in_groups};
use crate::cancel::TurnId;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::options::{self, Press};
use crate::role::Role;
use crate::store::TurnRequest;
use crate::telegram::callback_data::OptionPress;
use crate::telegram::keyboards;
use crate::telegram::transport::listener::Handling;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;
use crate::texts::turn::EXPIRED;
use crate::turn::actions::{self, Outcome, Stop, Voter};
use crate::turn::confirm::Answered;
use crate::turn::{self, Keyboard, Options, SharedMessenger, TurnInput};

/// A button press from a user who is not on the allow-list.
pub(crate) async fn refuse_press(deps: Deps, query: CallbackQuery) -> HandlerResult {
    tracing::info!(
        user = query.from.id.0,
        "refused a button press from a user who is not allowed"
    );
    deps.tg.answer_press(&query, texts::PRIVATE).await?;
    Ok(())
}

/// A press whose data names nothing live: expired, forged or unknown.
pub(crate) async fn expired_press(deps: Deps, query: CallbackQuery) -> HandlerResult {
    answer_press(&deps, &query, Outcome::refuse(EXPIRED)).await
}

/// An option button: checked on the server, then the conversation continues exactly as if
/// the user had typed the option's full label (see [`turns`] for the path).
pub(crate) async fn option_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    chat: ChatId,
    press: OptionPress,
    handling: Handling,
) -> HandlerResult {
    let user = crate::ids::UserId::from(query.from.id);
    let (app, update) = (&deps.app, handling.update());
    let claim = || {
        let decided = options::decide(
            app.store(),
            crate::ids::ChatId::from(chat),
            &press.ticket,
            press.index,
            &press.label,
            Some(update),
        )?;
        let (ticket, index) = match decided {
            Press::Continue(ticket, index) => (ticket, index),
            Press::Expired => return Ok(Err(EXPIRED)),
            Press::Earlier => return Ok(Err(texts::EARLIER_CHOICE)),
            Press::AlreadyChosen => return Ok(Err(texts::ALREADY_CHOSEN)),
        };
        let label = ticket.labels[index].clone();
        let chosen = Keyboard::Answer {
            options: Options::Chosen(label.clone()),
            vote: turn::vote_on(app, ticket.feedback.as_deref()),
            feedback: ticket.feedback.clone(),
        };
        // The label's origin is in its conversation's mark (see `ChatState::external`), so
        // it is not `forwarded`.
        let request = TurnRequest {
            topic: ticket.topic,
            // In a group, the answer to a press replies to the answer that offered the option.
            reply_to: reply_in_groups(ticket.chat, ticket.message_id),
            ..TurnRequest::new(ticket.chat, user, label)
        };
        let input = TurnInput::new(request, update);
        let mark = Some((ticket.chat, ticket.message_id, chosen));
        Ok(Ok(Claimed {
            input,
            toast: "",
            mark,
        }))
    };
    turns::start(&deps, Asker::Press(&query), role, &handling, claim).await
}

/// 🧹 Clear history.
pub(crate) async fn clear_pressed(
    deps: Deps,
    query: CallbackQuery,
    chat: Conversation,
) -> HandlerResult {
    let Deps { app, tg } = &deps;
    let out: SharedMessenger = tg.clone();
    turn::retire_options(app, &out, chat);
    let outcome = Outcome::done(actions::clear(app, chat), Some(Keyboard::None));
    answer_press(&deps, &query, outcome).await
}

/// 👍 or 👎 under an answer.
pub(crate) async fn feedback_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    at: Conversation,
    (ticket, up): (String, bool),
) -> HandlerResult {
    let app = &deps.app;
    let voter = Voter {
        user: UserId::from(query.from.id),
        role,
    };
    let outcome = actions::feedback(app, at, &ticket, up, voter);
    let refused = outcome.refused;
    answer_press(&deps, &query, outcome).await?;
    // The vote shows in the keyboard (the rest of it, options included, stays as it is).
    let message = query.message.as_ref().and_then(|m| m.regular_message());
    if let (false, Some(message)) = (refused, message)
        && let Some(markup) = message.reply_markup()
    {
        let marked = keyboards::with_vote(markup, &ticket, up);
        replies::markup(&deps, at.chat, message.id, marked, "show the vote");
    }
    Ok(())
}

/// ⏹ Stop under a streaming answer: stops its own turn only, and only before that turn's
/// answer is kept. A ⏹ still on screen after its turn is over (a final edit that failed, a
/// crash) is taken away.
pub(crate) async fn stop_pressed(
    deps: Deps,
    query: CallbackQuery,
    chat: Conversation,
    turn: Option<TurnId>,
) -> HandlerResult {
    let app = &deps.app;
    // A ⏹ without an id was left by a version before turns had ids: its turn is over.
    let stop = match turn {
        Some(turn) => actions::cancel(app, chat, Some(turn)),
        None => Stop::Over,
    };
    let dead = stop == Stop::Over
        && query
            .message
            .as_ref()
            .and_then(|m| m.regular_message())
            .and_then(|m| m.reply_markup())
            .is_some_and(keyboards::only_stop);
    let outcome = match stop {
        Stop::Stopped => Outcome::done(stop.toast(), None),
        _ => Outcome {
            keyboard: dead.then_some(Keyboard::None),
            ..Outcome::refuse(stop.toast())
        },
    };
    answer_press(&deps, &query, outcome).await
}

/// 🔁 Retry under a failed answer: the failed message runs again as a new turn, once (see
/// [`turns`] for the path); the button goes.
pub(crate) async fn retry_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    chat: Conversation,
    ticket: String,
    handling: Handling,
) -> HandlerResult {
    let (user, update) = (crate::ids::UserId::from(query.from.id), handling.update());
    let claim = || {
        let retried = match turn::retry::claim(&deps.app, chat.chat, user, &ticket, update) {
            Ok(retried) => retried,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let pressed = query.message.as_ref();
        let retried = retried.request;
        let request = TurnRequest {
            // Pressed under the failed answer, in its topic: the retry answers there, replying
            // to it.
            topic: retried.topic.or(chat.topic),
            reply_to: pressed.and_then(|m| reply_in_groups(retried.chat, m.id().0)),
            // Its provenance (`forwarded`, a document read into it, a scheduled run's
            // `task_run`) stays the original's: a retry is the same message again.
            // A press has no message of the user's to react to.
            message: None,
            user,
            ..retried
        };
        let input = TurnInput::new(request, update);
        let mark = pressed.map(|m| {
            (
                crate::ids::ChatId::from(m.chat().id),
                m.id().0,
                Keyboard::None,
            )
        });
        Ok(Ok(Claimed {
            input,
            toast: texts::RETRYING,
            mark,
        }))
    };
    turns::start(&deps, Asker::Press(&query), role, &handling, claim).await
}

/// ✅ / ✖ under a fact or task the provenance gate held: only the user it asks makes it (or
/// drops it), once; the confirmation then says what happened, with no buttons left.
pub(crate) async fn confirm_pressed(
    deps: Deps,
    query: CallbackQuery,
    (id, yes): (String, bool),
) -> HandlerResult {
    let presser = UserId::from(query.from.id);
    let Some(message) = query.message.as_ref() else {
        return answer_press(&deps, &query, Outcome::refuse(EXPIRED)).await;
    };
    let chat = crate::ids::ChatId::from(message.chat().id);
    match turn::confirm::answer(&deps.app, &id, chat, presser, yes) {
        Answered::Refused(toast) => answer_press(&deps, &query, Outcome::refuse(toast)).await,
        Answered::Closed { toast, text } => {
            answer_press(&deps, &query, Outcome::done(toast, None)).await?;
            let at = pressed_in(&query).unwrap_or(Conversation::new(chat, None));
            let html = crate::telegram::render::escape_html(&text);
            replies::edit(&deps, at, message.id(), html, None, "close a confirmation");
            Ok(())
        }
    }
}

/// The mark of an option already chosen.
pub(crate) async fn chosen_pressed(deps: Deps, query: CallbackQuery) -> HandlerResult {
    answer_press(&deps, &query, Outcome::done(texts::CHOSEN_MARK, None)).await
}

/// Answers the callback query with the outcome's toast, then posts its keyboard in place of
/// the pressed one.
pub(crate) async fn answer_press(
    deps: &Deps,
    query: &CallbackQuery,
    outcome: Outcome,
) -> HandlerResult {
    let tg = &deps.tg;
    if outcome.refused {
        tracing::info!(user = query.from.id.0, data = ?query.data, toast = %outcome.toast, "button press refused");
    }
    tg.answer_press(query, &outcome.toast).await?;
    if let (Some(keyboard), Some(message)) = (outcome.keyboard, query.message.as_ref()) {
        replies::keyboard(
            deps,
            crate::ids::ChatId::from(message.chat().id),
            message.id().0,
            keyboard,
        );
    }
    Ok(())
}
