//! The presses under the lessons review (admins): ◀ ▶ through a list, ✅ Approve a pending
//! lesson, 🗑 Forget one. Each is answered, then the list's message is edited into the page
//! as it is now. The decisions are [`crate::turn::actions`]' `approve` and `forget`.

use teloxide::prelude::*;

use super::view;
use crate::conversation::Conversation;
use crate::role::Role;
use crate::telegram::callback_data::List;
use crate::telegram::handlers::presses::answer_press;
use crate::telegram::handlers::{Deps, HandlerResult, pressed_in};
use crate::telegram::transport::replies;
use crate::texts::turn::ADMINS_ONLY;
use crate::turn::actions::{self, Outcome};

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
        let page = view::list_page(app, list, page as usize);
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
