//! The presses under `/tasks` (◀ ▶, ❌ Cancel). Who may act is checked here, on the server:
//! a task is cancelled only by its owner or an admin, and a list is paged only by its owner or
//! an admin, whatever the button's data says.

use teloxide::prelude::*;

use super::view;
use crate::ids::UserId;
use crate::role::Role;
use crate::telegram::handlers::{Deps, HandlerResult, pressed_in};
use crate::telegram::transport::replies;
use crate::texts::tasks as texts;

/// ◀ ▶ under `/tasks`: only its owner (or an admin) turns its pages.
pub(crate) async fn page_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    (owner, page): (UserId, u32),
) -> HandlerResult {
    let presser = UserId::from(query.from.id);
    if presser != owner && role < Role::Admin {
        deps.tg.answer_press(&query, texts::NOT_YOURS).await?;
        return Ok(());
    }
    deps.tg.answer_press(&query, "").await?;
    show(&deps, &query, owner, page);
    Ok(())
}

/// ❌ Cancel under `/tasks`: the task's owner or an admin removes it; the list is shown again.
pub(crate) async fn cancel_pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    (id, page): (u64, u32),
) -> HandlerResult {
    let presser = UserId::from(query.from.id);
    let app = &deps.app;
    let Some(task) = app.store().tasks().get(id) else {
        deps.tg.answer_press(&query, texts::GONE).await?;
        show(&deps, &query, presser, page);
        return Ok(());
    };
    if task.user != presser && role < Role::Admin {
        tracing::info!(%presser, task = id, "refused to cancel another user's task");
        deps.tg.answer_press(&query, texts::NOT_YOURS).await?;
        return Ok(());
    }
    let toast = match app.store().tasks().remove(id) {
        Ok(true) => {
            tracing::info!(%presser, task = id, "a scheduled task was cancelled");
            texts::CANCELLED
        }
        Ok(false) => texts::GONE,
        Err(e) => {
            tracing::error!(task = id, error = %e, "cannot cancel a task");
            texts::NOT_SAVED
        }
    };
    deps.tg.answer_press(&query, toast).await?;
    show(&deps, &query, task.user, page);
    Ok(())
}

/// Edits the pressed message into page `page` of `owner`'s list as it is now.
fn show(deps: &Deps, query: &CallbackQuery, owner: UserId, page: u32) {
    let (Some(message), Some(at)) = (query.message.as_ref(), pressed_in(query)) else {
        return;
    };
    let page = view::page(&deps.app, owner, at.chat, page as usize);
    let markup = Some(page.keyboard);
    replies::edit(deps, at, message.id(), page.html, markup, "update /tasks");
}
