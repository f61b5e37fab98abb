//! The lessons review (admins), the adapter's side: `/heuristics` (`/heuristics pending`) and
//! `/skills` here, a page at a time; the presses under them (◀ ▶, ✅ Approve, 🗑 Forget) in
//! [`presses`], the pages in [`view`].
//!
//! The rest of the feature sits lower, where the layers put it: the lessons, their ranking,
//! review state and probation ([`crate::learning`]), the decisions a press or a command makes
//! (`approve`, `forget` in [`crate::turn::actions`]), the stored lessons
//! (`crate::store::learning`), export and import (`heurist heuristics`, `crate::ops::lessons`)
//! and the sentences ([`crate::texts::telegram`]).

pub(crate) mod presses;
pub(crate) mod view;

use crate::conversation::Conversation;
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;

/// `/heuristics` (or `/heuristics pending`: only those waiting for review), first page.
pub(crate) fn list(deps: &Deps, chat: Conversation, which: &str) {
    let pending = which.trim().eq_ignore_ascii_case("pending");
    let page = view::lessons_page(&deps.app, pending, 0);
    replies::html(deps, chat, page.html, Some(page.keyboard));
}

/// `/skills`: the skills loaded and how often each matched, first page.
pub(crate) fn skills(deps: &Deps, chat: Conversation) {
    let page = view::skills_page(&deps.app, 0);
    replies::html(deps, chat, page.html, Some(page.keyboard));
}
