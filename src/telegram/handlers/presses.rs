//! Button presses from allowed users: an option or a 🔁 Retry starts a turn, the rest are
//! actions (model, clear, feedback, admin lists, stop, `/memory`). Every press is answered at
//! once with its toast; an edit it causes is posted (see [`replies`]).

use teloxide::prelude::*;

use super::turns::{self, Asker, Claimed};
use super::{Deps, HandlerResult, pressed_in, reply_in_groups};
use crate::cancel::TurnId;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::memory::Facts;
use crate::options::{self, Press};
use crate::role::Role;
use crate::store::TurnRequest;
use crate::telegram::callback_data::{List, OptionPress};
use crate::telegram::keyboards::{self, model_key};
use crate::telegram::listener::Handling;
use crate::telegram::{memory_list, replies, views};
use crate::texts::telegram as texts;
use crate::texts::turn::{ADMINS_ONLY, EXPIRED};
use crate::turn::actions::{self, Outcome, Stop, Voter};
use crate::turn::confirm::Answered;
use crate::turn::{self, Keyboard, Options, Out, TurnInput};

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

/// A model button (admins): switch the chat to the model whose key the button carries.
pub(crate) async fn set_model_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    chat: Conversation,
    key: String,
) -> HandlerResult {
    let app = &deps.app;
    let models = &app.config().models;
    let id = models
        .iter()
        .find(|m| model_key(&m.id) == key)
        .map(|m| &m.id);
    let mut outcome = actions::choose_model(app, role, chat, id.map(String::as_str));
    // The header names the model too: one edit puts the new text and the moved ✓ in place.
    let switched = outcome.keyboard.take().filter(|_| !outcome.refused);
    answer_press(&deps, &query, outcome).await?;
    if let (Some(keyboard), Some(message)) = (switched, query.message.as_ref()) {
        let html = views::model_header_html(&app.model_for(chat).id);
        let markup = Some(keyboards::markup(&keyboard));
        let what = "update the /model message";
        replies::edit(&deps, chat, message.id(), html, markup, what);
    }
    Ok(())
}

/// 🧹 Clear history.
pub(crate) async fn clear_pressed(
    deps: Deps,
    query: CallbackQuery,
    chat: Conversation,
) -> HandlerResult {
    let Deps { app, tg } = &deps;
    let out: Out = tg.clone();
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

/// ◀ ▶ under an admin list.
pub(crate) async fn page_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    (list, page): (List, u32),
) -> HandlerResult {
    let outcome = if role < Role::Admin {
        Outcome::refuse(ADMINS_ONLY)
    } else {
        Outcome::done("", None)
    };
    review_press(&deps, &query, outcome, list, page).await
}

/// ✅ Approve under `/heuristics` (admins).
pub(crate) async fn approve_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    (id, list, page): (u64, List, u32),
) -> HandlerResult {
    let app = &deps.app;
    let outcome = actions::approve(app, role, id);
    review_press(&deps, &query, outcome, list, page).await
}

/// 🗑 Forget under `/heuristics` (admins).
pub(crate) async fn forget_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    (id, list, page): (u64, List, u32),
) -> HandlerResult {
    let app = &deps.app;
    let outcome = actions::forget(app, role, id);
    review_press(&deps, &query, outcome, list, page).await
}

/// Answers a press on an admin list, then (unless it was refused) edits the list's message
/// into page `page` as it is now, so the message always shows the current state.
async fn review_press(
    deps: &Deps,
    query: &CallbackQuery,
    outcome: Outcome,
    list: List,
    page: u32,
) -> HandlerResult {
    let app = &deps.app;
    let refused = outcome.refused;
    answer_press(deps, query, outcome).await?;
    if refused {
        return Ok(());
    }
    if let Some(message) = query.message.as_ref() {
        let page = views::list_page(app, list, page as usize);
        let at = pressed_in(query).unwrap_or(Conversation::new(
            crate::ids::ChatId::from(message.chat().id),
            None,
        ));
        let markup = Some(page.keyboard);
        replies::edit(
            deps,
            at,
            message.id(),
            page.html,
            markup,
            "update an admin list",
        );
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

/// ◀ ▶ under `/memory`: only its owner's press shows another page.
pub(crate) async fn memory_page_pressed(
    deps: Deps,
    query: CallbackQuery,
    (owner, page): (UserId, u32),
) -> HandlerResult {
    memory_press(&deps, &query, owner, page, None).await
}

/// 🗑 Forget under `/memory`: only its owner's press forgets, and only their own fact.
pub(crate) async fn memory_forget_pressed(
    deps: Deps,
    query: CallbackQuery,
    (owner, id, page): (UserId, u64, u32),
) -> HandlerResult {
    let forget = |facts: &mut Facts| {
        let toast = if facts.forget(id) {
            texts::MEMORY_FORGOTTEN
        } else {
            texts::MEMORY_ALREADY_GONE
        };
        toast.to_string()
    };
    memory_press(&deps, &query, owner, page, Some(&forget)).await
}

/// 🗑 Forget all under `/memory`: only its owner's press forgets their facts.
pub(crate) async fn memory_forget_all_pressed(
    deps: Deps,
    query: CallbackQuery,
    owner: UserId,
) -> HandlerResult {
    let forget_all = |facts: &mut Facts| texts::memory_all_forgotten(facts.forget_all());
    memory_press(&deps, &query, owner, 0, Some(&forget_all)).await
}

/// A press on `owner`'s `/memory`: anyone else's press only gets its answer; the owner's
/// applies `change` (if any) to their own facts, is answered with the toast it returns, and
/// shows page `page` as it is now in the pressed message, when that message really carries
/// the pressed button (forged data names any message the bot wrote).
async fn memory_press(
    deps: &Deps,
    query: &CallbackQuery,
    owner: UserId,
    page: u32,
    change: Option<&(dyn Fn(&mut Facts) -> String + Sync)>,
) -> HandlerResult {
    let presser = UserId::from(query.from.id);
    if presser != owner {
        tracing::info!(%presser, %owner, "refused a press on someone else's memory");
        return answer_press(deps, query, Outcome::refuse(texts::MEMORY_NOT_YOURS)).await;
    }
    // Facts are shown only in their owner's private chat: a list posted in a group before
    // this rule is not brought up to date there.
    let private = query
        .message
        .as_ref()
        .is_some_and(|m| owner.private_chat() == Some(crate::ids::ChatId::from(m.chat().id)));
    if !private {
        return answer_press(deps, query, Outcome::refuse(texts::MEMORY_PRIVATE_ONLY)).await;
    }
    let app = &deps.app;
    let toast = match change.filter(|_| app.config().memory.enabled()) {
        None => String::new(),
        Some(change) => match app.store().memories().change(owner, change) {
            Ok(toast) => toast,
            Err(e) => {
                tracing::warn!(%owner, error = %e, "cannot change a user's memory");
                texts::MEMORY_FAILED.to_string()
            }
        },
    };
    answer_press(deps, query, Outcome::done(toast, None)).await?;
    let data = query.data.as_deref().unwrap_or_default();
    let pressed = query.message.as_ref().filter(|message| {
        message
            .regular_message()
            .and_then(|m| m.reply_markup())
            .is_some_and(|markup| keyboards::carries(markup, data))
    });
    if let Some(message) = pressed {
        let at = pressed_in(query).unwrap_or(Conversation::new(
            crate::ids::ChatId::from(message.chat().id),
            None,
        ));
        let page = memory_list::page(app, owner, page as usize);
        let markup = Some(page.keyboard);
        replies::edit(deps, at, message.id(), page.html, markup, "update /memory");
    }
    Ok(())
}

/// 👥 under `/memory`: only its owner turns "use my memory in groups" on or off.
pub(crate) async fn memory_groups_pressed(
    deps: Deps,
    query: CallbackQuery,
    (owner, on): (UserId, bool),
) -> HandlerResult {
    let set = move |facts: &mut Facts| {
        facts.set_in_groups(on);
        texts::memory_in_groups(on).to_string()
    };
    memory_press(&deps, &query, owner, 0, Some(&set)).await
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
async fn answer_press(deps: &Deps, query: &CallbackQuery, outcome: Outcome) -> HandlerResult {
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
