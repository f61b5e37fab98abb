//! Scheduled tasks and reminders, the adapter's side: `/tasks` (a user's tasks, a page at a
//! time, with ❌ Cancel) and `/timezone` (the zone their times are read in) here, the presses
//! under `/tasks` in [`presses`], the list in [`view`].
//!
//! The rest of the feature sits lower, where the layers put it: when a task runs
//! ([`crate::schedule`], pure values), the `schedule` tool the agent calls
//! (`crate::agent::scheduling`), the scheduler and a task's own turn
//! ([`crate::turn::scheduled`], `crate::turn::reminder`, [`crate::turn::task_scheduler`]), the
//! stored tasks and zones (`crate::store::tasks`, `crate::store::zones`) and their sentences
//! ([`crate::texts::tasks`]).

pub(crate) mod presses;
pub(crate) mod view;

use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::schedule;
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;
use crate::texts::tasks as texts;
use crate::turn::task_scheduler::bot_zone;

/// `/tasks`: the sender's tasks, first page.
pub(crate) fn list(deps: &Deps, chat: Conversation, user: UserId) {
    let page = view::page(&deps.app, user, chat.chat, 0);
    replies::html(deps, chat, page.html, Some(page.keyboard));
}

/// `/timezone`: the sender's zone; `/timezone <zone>`: sets it, if it is an IANA zone.
pub(crate) fn timezone(deps: &Deps, chat: Conversation, user: UserId, zone: &str) {
    let app = &deps.app;
    if zone.is_empty() {
        let own = app.store().zones().of(user);
        let shown = own.unwrap_or_else(|| bot_zone(app));
        replies::notice(deps, chat, texts::zone_now(shown.name(), own.is_some()));
        return;
    }
    let Ok(parsed) = zone.parse::<chrono_tz::Tz>() else {
        replies::notice(deps, chat, texts::zone_unknown(zone));
        return;
    };
    let text = match app.store().zones().set(user, parsed) {
        Ok(()) => {
            let now = schedule::local(chrono::Utc::now().timestamp(), parsed);
            texts::zone_set(parsed.name(), &now)
        }
        Err(e) => {
            tracing::error!(%user, error = %e, "cannot store a time zone");
            crate::texts::tasks::NOT_SAVED.to_string()
        }
    };
    replies::notice(deps, chat, text);
}
