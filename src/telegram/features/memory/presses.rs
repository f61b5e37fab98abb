//! The presses under `/memory`: ◀ ▶, 🗑 Forget one fact, 🗑 Forget all, 👥 use in groups.
//! Only the owner's press acts, and only in their private chat; the list is then shown again
//! as it is now.

use teloxide::prelude::*;

use super::view;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::memory::Facts;
use crate::telegram::handlers::presses::answer_press;
use crate::telegram::handlers::{Deps, HandlerResult, pressed_in};
use crate::telegram::keyboards;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;
use crate::turn::actions::Outcome;

/// ◀ ▶ under `/memory`: only its owner's press shows another page.
pub(crate) async fn page_pressed(
    deps: Deps,
    query: CallbackQuery,
    (owner, page): (UserId, u32),
) -> HandlerResult {
    memory_press(&deps, &query, owner, page, None).await
}

/// 🗑 Forget under `/memory`: only its owner's press forgets, and only their own fact.
pub(crate) async fn forget_pressed(
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
pub(crate) async fn forget_all_pressed(
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
        let page = view::page(app, owner, page as usize);
        let markup = Some(page.keyboard);
        replies::edit(deps, at, message.id(), page.html, markup, "update /memory");
    }
    Ok(())
}

/// 👥 under `/memory`: only its owner turns "use my memory in groups" on or off.
pub(crate) async fn groups_pressed(
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
