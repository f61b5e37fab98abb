//! What the informational commands show: `/help`, `/stats`, and the admin lists
//! `/heuristics` (`/heuristics pending`) and `/skills`, a page at a time.
//!
//! Plain functions from the bot's state to a message, so each reads on its own and the
//! handlers only send. A page always fits one Telegram message (4096 UTF-16 units): entries
//! are shortened and a page holds a fixed number of them.

use chrono::DateTime;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use super::callback_data::{Action, List};
use super::commands::Command;
use super::keyboards::{button, shorten};
use super::render::escape_html;
use crate::app::App;
use crate::config::Role;
use crate::learning::heuristics::ReviewState;
use crate::store::UsageTotals;

/// Heuristics per page of `/heuristics`, and characters of each shown: with these, a page of
/// the longest heuristics stays far below Telegram's 4096 units.
const HEURISTICS_PER_PAGE: usize = 6;
const LISTED_TEXT_CHARS: usize = 200;
/// Skills per page of `/skills`, and characters of each description.
const SKILLS_PER_PAGE: usize = 8;
const SKILL_DESCRIPTION_CHARS: usize = 200;

/// A message to send or to edit into place.
pub struct Page {
    pub html: String,
    pub keyboard: InlineKeyboardMarkup,
}

/// `/start` and `/help`: what the bot is, and the commands `role` may use.
pub fn help_text(role: Role) -> String {
    let commands: String = Command::visible_to(role)
        .iter()
        .map(|c| format!("{} — {}\n", c.command, c.description))
        .collect();
    format!(
        "I am Heurist, an AI assistant. Write to me and I answer, using tools when they help \
         (the current time, reading public web pages). Tap a suggested option under an answer \
         instead of typing. In groups, mention me or reply to my messages.\n\n{commands}"
    )
}

/// `/stats`: this chat's usage per model, and the whole bot's for admins.
pub fn stats_text(app: &App, chat: i64, role: Role) -> String {
    fn lines(rows: Vec<(String, UsageTotals)>) -> String {
        if rows.is_empty() {
            return "  nothing yet\n".to_string();
        }
        rows.iter()
            .map(|(model, t)| {
                format!(
                    "  {model}: {} turns, {} calls; tokens {} prompt ({} cached), {} completion\n",
                    t.turns, t.calls, t.prompt_tokens, t.cached_tokens, t.completion_tokens
                )
            })
            .collect()
    }
    let mut text = format!("This chat:\n{}", lines(app.store().usage(Some(chat))));
    if role == Role::Admin {
        text.push_str(&format!("\nWhole bot:\n{}", lines(app.store().usage(None))));
    }
    text
}

/// Page `page` (from 0; past the end shows the last) of `/heuristics`, or of
/// `/heuristics pending` with `pending_only`: best first, each with where it came from and
/// what happened to the answers it shaped, and its Approve / Forget buttons.
pub fn heuristics_page(app: &App, pending_only: bool, page: usize) -> Page {
    let list = if pending_only {
        List::Pending
    } else {
        List::Heuristics
    };
    let all = app.learning().listing(pending_only);
    let pages = all.len().div_ceil(HEURISTICS_PER_PAGE).max(1);
    let page = page.min(pages - 1);
    let title = if pending_only {
        "Heuristics waiting for approval"
    } else {
        "Learned heuristics"
    };
    if all.is_empty() {
        let html = if pending_only {
            "No heuristics are waiting for approval."
        } else {
            "No heuristics learned yet."
        };
        return Page {
            html: html.to_string(),
            keyboard: InlineKeyboardMarkup::default(),
        };
    }
    let mut html = format!(
        "<b>{title}</b> ({}), best first. Page {}/{pages}.\n",
        all.len(),
        page + 1
    );
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    let shown = all
        .iter()
        .skip(page * HEURISTICS_PER_PAGE)
        .take(HEURISTICS_PER_PAGE);
    for listed in shown {
        let h = &listed.heuristic;
        let pending = h.review == ReviewState::Pending;
        let mark = if pending { "⏳" } else { "✅" };
        let skill = h.skill.as_deref().unwrap_or("general");
        let learned = DateTime::from_timestamp(h.created, 0)
            .map_or_else(|| "?".to_string(), |t| t.format("%Y-%m-%d").to_string());
        let source = if h.origin.external {
            "from external content"
        } else {
            "trusted"
        };
        let outcome = if h.origin.outcome.is_empty() {
            "unknown outcome".to_string()
        } else {
            shorten(&h.origin.outcome, 60)
        };
        html.push_str(&format!(
            "\n{mark} <b>#{}</b> [{}] {}\n<i>score {:.2} · learned {learned} ({}, {source}) · \
             used {}× · 👍 {} 👎 {} · learned {}×</i>\n",
            h.id,
            escape_html(skill),
            escape_html(&shorten(&h.text, LISTED_TEXT_CHARS)),
            listed.utility,
            escape_html(&outcome),
            h.injected,
            h.up,
            h.down,
            h.uses,
        ));
        let mut row = Vec::new();
        if pending {
            let approve = Action::Approve {
                id: h.id,
                list,
                page: page as u32,
            };
            row.extend(button(&format!("✅ Approve #{}", h.id), &approve));
        }
        let forget = Action::Forget {
            id: h.id,
            list,
            page: page as u32,
        };
        row.extend(button(&format!("🗑 Forget #{}", h.id), &forget));
        rows.push(row);
    }
    rows.extend(navigation(list, page, pages));
    Page {
        html,
        keyboard: InlineKeyboardMarkup::new(rows),
    }
}

/// Page `page` of `/skills`: what is loaded and how often each skill matched a message.
pub fn skills_page(app: &App, page: usize) -> Page {
    let skills = app.learning().skills();
    if skills.is_empty() {
        return Page {
            html: format!(
                "No skills loaded (folder: {}).",
                escape_html(&app.config().learning.skills_dir.display().to_string())
            ),
            keyboard: InlineKeyboardMarkup::default(),
        };
    }
    let pages = skills.len().div_ceil(SKILLS_PER_PAGE);
    let page = page.min(pages - 1);
    let mut html = format!(
        "<b>Skills</b> ({}), with the times each matched a message. Page {}/{pages}.\n",
        skills.len(),
        page + 1
    );
    for skill in skills
        .iter()
        .skip(page * SKILLS_PER_PAGE)
        .take(SKILLS_PER_PAGE)
    {
        html.push_str(&format!(
            "\n• <b>{}</b> ({}×): {}",
            escape_html(&skill.name),
            app.store().skill_matches(&skill.name),
            escape_html(&shorten(&skill.description, SKILL_DESCRIPTION_CHARS))
        ));
    }
    Page {
        html,
        keyboard: InlineKeyboardMarkup::new(navigation(List::Skills, page, pages)),
    }
}

/// The ◀ ▶ row of a list with more than one page.
fn navigation(list: List, page: usize, pages: usize) -> Option<Vec<InlineKeyboardButton>> {
    if pages < 2 {
        return None;
    }
    let to = |page: usize| Action::Page {
        list,
        page: page as u32,
    };
    let mut row = Vec::new();
    if page > 0 {
        row.extend(button("◀", &to(page - 1)));
    }
    if page + 1 < pages {
        row.extend(button("▶", &to(page + 1)));
    }
    Some(row)
}

/// The page an admin list shows for `list`.
pub fn list_page(app: &App, list: List, page: usize) -> Page {
    match list {
        List::Heuristics => heuristics_page(app, false, page),
        List::Pending => heuristics_page(app, true, page),
        List::Skills => skills_page(app, page),
    }
}
