//! Personal memory, the adapter's side: `/memory` (the facts a user asked the bot to
//! remember, shown only in their private chat) here, the presses under it (◀ ▶, 🗑 Forget,
//! Forget all, 👥 in groups) in [`presses`], the list in [`view`].
//!
//! The rest of the feature sits lower, where the layers put it: a user's facts as pure values
//! and their prompt block ([`crate::memory`]), the facts put in front of a turn's message and
//! taken out again before storing (`crate::turn::memory`), the stored facts
//! (`crate::store::memories`, in the people tree), the `remember` tool the agent calls
//! (`crate::agent::remember`, through the provenance gate, [`crate::provenance`]) and the
//! sentences (`MEMORY_*` in [`crate::texts::telegram`]).

pub(crate) mod presses;
pub(crate) mod view;

use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;

/// `/memory`: the sender's facts, first page, in their private chat; in a group, only where
/// to see them (the facts are private).
pub(crate) fn command(deps: &Deps, chat: Conversation, user: UserId) {
    if !chat.chat.is_private() {
        replies::notice(deps, chat, texts::MEMORY_ASK_PRIVATELY.to_string());
        return;
    }
    let page = view::page(&deps.app, user, 0);
    replies::html(deps, chat, page.html, Some(page.keyboard));
}
