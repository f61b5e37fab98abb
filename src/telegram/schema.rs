//! Every route of the bot, in one place: the one dptree schema the dispatcher runs.
//!
//! The sender's role is computed once, then messages (strangers refused first, then commands,
//! text, anything else) and button presses (their data parsed once by
//! [`CallbackData::parse`]; a stranger's "Request access" first, then strangers refused; then
//! an option, or one branch per action; anything else is expired), and reactions (allowed
//! users' only).

use std::sync::Arc;

use dptree::case;
use teloxide::dispatching::UpdateHandler;
use teloxide::prelude::*;
use teloxide::types::Me;

use super::access;
use super::callback_data::{Action, CallbackData};
use super::commands::ChatCommand;
use super::features::{lessons, memory, model, tasks};
use super::handlers::{self, Deps, presses};
use super::transport::listener::Intake;
use crate::role::Role;

/// Every route of the bot, in one place.
pub(crate) fn schema() -> UpdateHandler<anyhow::Error> {
    let messages = Update::filter_message()
        .filter(|msg: Message, me: Me| handlers::addressed(&msg, &me))
        .map(|msg: Message| handlers::conversation_of(&msg))
        .branch(
            dptree::filter(|role: Role| role == Role::Stranger).endpoint(access::refuse_stranger),
        )
        .branch(
            dptree::entry()
                .filter_command::<ChatCommand>()
                .endpoint(handlers::commands::command),
        )
        .branch(
            dptree::filter_map(|msg: Message| msg.text().map(str::to_string))
                .endpoint(handlers::messages::text),
        )
        .branch(dptree::endpoint(handlers::messages::non_text));
    let actions = actions();
    let options = case![CallbackData::Option(press)].endpoint(presses::option_pressed);
    let presses = Update::filter_callback_query()
        // The data, parsed once for every route: `None` if forged, garbled or unknown.
        .map(|query: CallbackQuery| query.data.as_deref().and_then(CallbackData::parse))
        .branch(
            // The one button strangers may press: "Request access" under their refusal.
            dptree::filter_map(|data: Option<CallbackData>| match data? {
                CallbackData::Action(Action::RequestAccess(user)) => Some(user),
                _ => None,
            })
            .endpoint(access::request_pressed),
        )
        .branch(dptree::filter(|role: Role| role == Role::Stranger).endpoint(presses::refuse_press))
        .branch(
            // The chat the button was pressed in (none for inline messages: nothing to do).
            dptree::filter_map(|query: CallbackQuery| Some(query.message.as_ref()?.chat().id))
                // And the forum topic in it, if any.
                .filter_map(|query: CallbackQuery| handlers::pressed_in(&query))
                .filter_map(|data: Option<CallbackData>| data)
                .branch(options)
                .branch(actions),
        )
        .endpoint(presses::expired_press);
    // Reactions from allowed users on the bot's answers; strangers' are ignored.
    let reactions = Update::filter_message_reaction_updated()
        .filter(|role: Role| role != Role::Stranger)
        .endpoint(handlers::reactions::reacted);
    let routes = dptree::filter_map(|update: Update, deps: Deps| {
        Some(
            deps.app
                .config()
                .role_of(crate::ids::UserId(update.from()?.id.0)),
        )
    })
    .branch(messages)
    .branch(presses)
    .branch(reactions);
    // Telegram gets the update confirmed only once its handler is done (see `listener`).
    dptree::map(|update: Update, intake: Arc<Intake>| intake.handling(&update)).chain(routes)
}

/// One branch per action button (the data parsed by [`CallbackData::parse`]); the features'
/// presses are in their rooms ([`super::features`]), the rest in [`presses`].
fn actions() -> UpdateHandler<anyhow::Error> {
    case![CallbackData::Action(action)]
        .branch(case![Action::SetModel(key)].endpoint(model::pressed))
        .branch(case![Action::Clear].endpoint(presses::clear_pressed))
        .branch(case![Action::Feedback { ticket, up }].endpoint(presses::feedback_pressed))
        .branch(case![Action::Page { list, page }].endpoint(lessons::presses::page_pressed))
        .branch(
            case![Action::Approve { id, list, page }].endpoint(lessons::presses::approve_pressed),
        )
        .branch(case![Action::Forget { id, list, page }].endpoint(lessons::presses::forget_pressed))
        .branch(case![Action::Stop(turn)].endpoint(presses::stop_pressed))
        .branch(case![Action::Chosen].endpoint(presses::chosen_pressed))
        .branch(case![Action::Retry { ticket }].endpoint(presses::retry_pressed))
        .branch(case![Action::MemoryPage { owner, page }].endpoint(memory::presses::page_pressed))
        .branch(
            case![Action::MemoryForget { owner, id, page }]
                .endpoint(memory::presses::forget_pressed),
        )
        .branch(
            case![Action::MemoryForgetAll { owner }].endpoint(memory::presses::forget_all_pressed),
        )
        .branch(case![Action::MemoryGroups { owner, on }].endpoint(memory::presses::groups_pressed))
        .branch(case![Action::Confirm { id, yes }].endpoint(presses::confirm_pressed))
        .branch(case![Action::TasksPage { owner, page }].endpoint(tasks::presses::page_pressed))
        .branch(case![Action::CancelTask { id, page }].endpoint(tasks::presses::cancel_pressed))
}
