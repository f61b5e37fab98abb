//! `/memory`: the facts a user asked the bot to remember (see [`crate::memory`]), a page at a
//! time, each with its 🗑 Forget button, and Forget all under them. Every button names the
//! owner: a press by anyone else changes nothing (checked on the server, in
//! [`super::presses`]). A page fits one Telegram message whatever the facts: at most
//! [`FACTS_PER_PAGE`] of them, each at most `memory.max_chars` characters (and shown cut at
//! [`SHOWN_CHARS`]). The list is shown only in its owner's private chat (`/memory` in a group
//! says to ask there), and a 👥 button turns "use my memory in groups" on or off: off by
//! default, so a group's answers, which every member reads, never carry the facts.

use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use crate::app::App;
use crate::ids::UserId;
use crate::telegram::callback_data::Action;
use crate::telegram::keyboards::{button, page_row, shorten};
use crate::telegram::render::escape_html;
use crate::telegram::views::ListPage;
use crate::texts::telegram as texts;

/// Facts per page: with [`SHOWN_CHARS`] each, a page stays far below 4096 characters, and its
/// buttons far below Telegram's 100.
const FACTS_PER_PAGE: usize = 10;
/// Characters of a fact shown in the list.
const SHOWN_CHARS: usize = 300;

/// Page `page` (from 0; past the end shows the last) of `owner`'s `/memory`.
pub(crate) fn page(app: &App, owner: UserId, page: usize) -> ListPage {
    let config = app.config().memory;
    if !config.enabled() {
        return text_only(texts::MEMORY_OFF.to_string());
    }
    let kept = app.store().memories().facts(owner);
    let facts = kept.list();
    if facts.is_empty() {
        return text_only(texts::MEMORY_EMPTY_HTML.to_string());
    }
    let pages = facts.len().div_ceil(FACTS_PER_PAGE);
    let page = page.min(pages - 1);
    let mut html = texts::memory_head_html(facts.len(), config.max_memories, page + 1, pages);
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    let mut row = Vec::new();
    for (n, fact) in facts
        .iter()
        .enumerate()
        .skip(page * FACTS_PER_PAGE)
        .take(FACTS_PER_PAGE)
    {
        let shown = escape_html(&shorten(&fact.text, SHOWN_CHARS));
        html.push_str(&texts::memory_entry_html(n + 1, &shown));
        let forget = Action::MemoryForget {
            owner,
            id: fact.id,
            page: page as u32,
        };
        row.extend(button(&texts::memory_forget_button(n + 1), &forget));
        if row.len() == 5 {
            rows.push(std::mem::take(&mut row));
        }
    }
    if !row.is_empty() {
        rows.push(row);
    }
    rows.push(navigation(owner, page, pages));
    rows.extend(
        button(
            texts::MEMORY_FORGET_ALL_BUTTON,
            &Action::MemoryForgetAll { owner },
        )
        .map(|b| vec![b]),
    );
    let in_groups = kept.in_groups();
    html.push_str(texts::memory_groups_html(in_groups));
    let toggle = Action::MemoryGroups {
        owner,
        on: !in_groups,
    };
    rows.extend(button(texts::memory_groups_button(in_groups), &toggle).map(|b| vec![b]));
    rows.retain(|row| !row.is_empty());
    ListPage {
        html,
        keyboard: InlineKeyboardMarkup::new(rows),
    }
}

/// A page without buttons.
fn text_only(html: String) -> ListPage {
    ListPage {
        html,
        keyboard: InlineKeyboardMarkup::default(),
    }
}

/// The ◀ ▶ row of a list of `pages` pages (empty with one).
fn navigation(owner: UserId, page: usize, pages: usize) -> Vec<InlineKeyboardButton> {
    page_row(page, pages, |page| Action::MemoryPage { owner, page })
}
