//! What the lessons review shows: the admin lists `/heuristics` (`/heuristics pending`) and
//! `/skills`, a page at a time. A page always fits one Telegram message (4096 UTF-16 units):
//! entries are shortened and a page holds a fixed number of them.

use chrono::DateTime;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use crate::app::App;
use crate::learning::lessons::ReviewState;
use crate::telegram::callback_data::{Action, List};
use crate::telegram::keyboards::{button, page_row, shorten};
use crate::telegram::render::escape_html;
use crate::telegram::views::ListPage;
use crate::texts::telegram as texts;

/// Lessons per page of `/heuristics`, and characters of each shown: with these, a page of
/// the longest lessons stays far below Telegram's 4096 units.
const LESSONS_PER_PAGE: usize = 6;
const LISTED_TEXT_CHARS: usize = 200;
/// Skills per page of `/skills`, and characters of each description.
const SKILLS_PER_PAGE: usize = 8;
const SKILL_DESCRIPTION_CHARS: usize = 200;

/// Page `page` (from 0; past the end shows the last) of `/heuristics`, or of
/// `/heuristics pending` with `pending_only`: best first, each with where it came from and
/// what happened to the answers it shaped, and its Approve / Forget buttons.
pub(crate) fn lessons_page(app: &App, pending_only: bool, page: usize) -> ListPage {
    let list = if pending_only {
        List::Pending
    } else {
        List::Lessons
    };
    let all = app.learning().listing(pending_only);
    let pages = all.len().div_ceil(LESSONS_PER_PAGE).max(1);
    let page = page.min(pages - 1);
    if all.is_empty() {
        return ListPage {
            html: texts::no_lessons(pending_only).to_string(),
            keyboard: InlineKeyboardMarkup::default(),
        };
    }
    let title = texts::lessons_title(pending_only);
    let mut html = texts::lessons_head_html(title, all.len(), page + 1, pages);
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    let shown = all
        .iter()
        .skip(page * LESSONS_PER_PAGE)
        .take(LESSONS_PER_PAGE);
    for listed in shown {
        let h = &listed.lesson;
        // A lesson on probation waits for proof or an admin's ✅ like a pending one.
        let pending = h.review == ReviewState::Pending || h.probation;
        let skill = h.skill.as_deref().unwrap_or(texts::GENERAL_SKILL);
        let learned = DateTime::from_timestamp(h.created, 0)
            .map_or_else(|| "?".to_string(), |t| t.format("%Y-%m-%d").to_string());
        let outcome = if h.origin.outcome.is_empty() {
            texts::UNKNOWN_OUTCOME.to_string()
        } else {
            shorten(&h.origin.outcome, 60)
        };
        let entry = texts::LessonLine {
            pending,
            id: h.id,
            skill: &escape_html(skill),
            text: &escape_html(&shorten(&h.text, LISTED_TEXT_CHARS)),
            score: listed.utility,
            learned: &learned,
            outcome: &escape_html(&outcome),
            external: h.origin.external,
            injected: h.injected,
            votes: (h.up, h.down),
            uses: h.uses,
        };
        html.push_str(&entry.html());
        let mut row = Vec::new();
        if pending {
            let approve = Action::Approve {
                id: h.id,
                list,
                page: page as u32,
            };
            row.extend(button(&texts::approve_button(h.id), &approve));
        }
        let forget = Action::Forget {
            id: h.id,
            list,
            page: page as u32,
        };
        row.extend(button(&texts::forget_button(h.id), &forget));
        rows.push(row);
    }
    rows.extend(navigation(list, page, pages));
    ListPage {
        html,
        keyboard: InlineKeyboardMarkup::new(rows),
    }
}

/// Page `page` of `/skills`: what is loaded and how often each skill matched a message.
pub(crate) fn skills_page(app: &App, page: usize) -> ListPage {
    let skills = app.learning().skills();
    if skills.is_empty() {
        return ListPage {
            html: texts::no_skills_html(&escape_html(
                &app.config().learning.skills_dir.display().to_string(),
            )),
            keyboard: InlineKeyboardMarkup::default(),
        };
    }
    let pages = skills.len().div_ceil(SKILLS_PER_PAGE);
    let page = page.min(pages - 1);
    let mut html = texts::skills_head_html(skills.len(), page + 1, pages);
    for skill in skills
        .iter()
        .skip(page * SKILLS_PER_PAGE)
        .take(SKILLS_PER_PAGE)
    {
        html.push_str(&format!(
            "\n• <b>{}</b> ({}×): {}",
            escape_html(&skill.name),
            app.store().learning().skill_matches(&skill.name),
            escape_html(&shorten(&skill.description, SKILL_DESCRIPTION_CHARS))
        ));
    }
    ListPage {
        html,
        keyboard: InlineKeyboardMarkup::new(navigation(List::Skills, page, pages)),
    }
}

/// The ◀ ▶ row of a list with more than one page.
fn navigation(list: List, page: usize, pages: usize) -> Option<Vec<InlineKeyboardButton>> {
    (pages >= 2).then(|| page_row(page, pages, |page| Action::Page { list, page }))
}

/// The page an admin list shows for `list`.
pub(crate) fn list_page(app: &App, list: List, page: usize) -> ListPage {
    match list {
        List::Lessons => lessons_page(app, false, page),
        List::Pending => lessons_page(app, true, page),
        List::Skills => skills_page(app, page),
    }
}
