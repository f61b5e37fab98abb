//! What a turn's `schedule_task` calls act for ([`for_turn`]): the turn's user and conversation,
//! read in the user's time zone (theirs from `/timezone`, else the bot's), within `[tasks]`'s
//! caps.

use super::state::Turn;
use crate::agent::scheduling::TaskScheduler;
use crate::app::App;
use crate::conversation::Conversation;
use crate::ids::UserId;

/// `user`'s time zone: theirs from `/timezone`, else the bot's.
pub(crate) fn zone_of(app: &App, user: UserId) -> chrono_tz::Tz {
    app.store()
        .zones()
        .of(user)
        .unwrap_or_else(|| bot_zone(app))
}

/// The bot's time zone (`agent.time_zone`, checked at start-up).
pub(crate) fn bot_zone(app: &App) -> chrono_tz::Tz {
    app.config()
        .agent
        .time_zone
        .parse()
        .unwrap_or(chrono_tz::UTC)
}

/// What `schedule_task` acts for in `turn`: its user's tasks, in its conversation.
pub(super) fn for_turn(turn: &Turn) -> TaskScheduler {
    for_user(&turn.app, turn.input.request.user, turn.at())
}

/// `user`'s tasks in `at`, read in their zone, within the caps.
pub(super) fn for_user(app: &App, user: UserId, at: Conversation) -> TaskScheduler {
    TaskScheduler {
        store: app.store().clone(),
        owner: user,
        at,
        zone: zone_of(app, user),
        caps: TaskScheduler::caps(&app.config().tasks),
    }
}
