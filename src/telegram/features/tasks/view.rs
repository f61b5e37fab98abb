//! `/tasks`: a user's scheduled tasks, a page at a time, each with its ❌ Cancel button. In a
//! private chat the list holds all of the user's tasks; in a group only those made in that
//! group, so a group never reads what someone scheduled in private.

use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup};

use crate::app::App;
use crate::ids::{ChatId, UserId};
use crate::schedule::{self, TaskKind, Timing};
use crate::store::Task;
use crate::telegram::callback_data::Action;
use crate::telegram::keyboards::{button, page_row, shorten};
use crate::telegram::render::escape_html;
use crate::telegram::views::ListPage;
use crate::texts::tasks as texts;

/// Tasks per page, and characters shown of each request: a page stays far below Telegram's
/// 4096 units.
const TASKS_PER_PAGE: usize = 5;
const REQUEST_CHARS: usize = 300;

/// `owner`'s tasks as listed in `chat`.
fn listed(app: &App, owner: UserId, chat: ChatId) -> Vec<Task> {
    let mut tasks = app.store().tasks().of_user(owner);
    if !chat.is_private() {
        tasks.retain(|t| t.chat == chat);
    }
    tasks
}

/// Page `page` (from 0; past the end shows the last) of `owner`'s `/tasks` in `chat`.
pub(crate) fn page(app: &App, owner: UserId, chat: ChatId, page: usize) -> ListPage {
    let tasks = listed(app, owner, chat);
    if tasks.is_empty() {
        return ListPage {
            html: escape_html(texts::NO_TASKS),
            keyboard: InlineKeyboardMarkup::default(),
        };
    }
    let pages = tasks.len().div_ceil(TASKS_PER_PAGE);
    let page = page.min(pages - 1);
    let mut html = texts::tasks_head_html(tasks.len(), page + 1, pages);
    let mut rows: Vec<Vec<InlineKeyboardButton>> = Vec::new();
    let first = page * TASKS_PER_PAGE;
    for (i, task) in tasks.iter().enumerate().skip(first).take(TASKS_PER_PAGE) {
        let zone: chrono_tz::Tz = task.zone.parse().unwrap_or(chrono_tz::UTC);
        let when = match &task.timing {
            Timing::Once { .. } => texts::ONCE.to_string(),
            Timing::Cron { expr, .. } => texts::repeating(&escape_html(expr)),
        };
        let next = format!("{} ({})", schedule::local(task.next_run, zone), zone.name());
        html.push_str(&texts::task_entry_html(
            i + 1,
            task.kind == TaskKind::Reminder,
            &when,
            &escape_html(&next),
            &escape_html(&shorten(&task.request, REQUEST_CHARS)),
        ));
        let cancel = Action::CancelTask {
            id: task.id,
            page: page as u32,
        };
        rows.extend(button(&texts::cancel_button(i + 1), &cancel).map(|b| vec![b]));
    }
    let navigation = page_row(page, pages, |page| Action::TasksPage { owner, page });
    if !navigation.is_empty() {
        rows.push(navigation);
    }
    ListPage {
        html,
        keyboard: InlineKeyboardMarkup::new(rows),
    }
}
