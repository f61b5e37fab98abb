//! What `/start` and `/help` show, and what every paged list shares ([`ListPage`]; the
//! features' own views are beside them, in [`super::features`]).
//!
//! Plain functions from the bot's state to a message, so each reads on its own and the
//! handlers only send.

use teloxide::types::InlineKeyboardMarkup;

use super::commands::ChatCommand;
use super::render::escape_html;
use crate::app::App;
use crate::role::Role;
pub(crate) use crate::sizes::thousands;
use crate::texts::telegram as texts;

/// A message to send or to edit into place.
pub(crate) struct ListPage {
    pub html: String,
    pub keyboard: InlineKeyboardMarkup,
}

/// `/start`: a greeting and the first thing to try (see [`texts::start_html`]).
pub(crate) fn start_html(role: Role) -> String {
    texts::start_html(role == Role::Admin)
}

/// `/help`: how the bot behaves (memory, buttons, feedback, stopping, photos, limits), then
/// the commands `role` may use; admins also see theirs with their arguments.
pub(crate) fn help_html(app: &App, role: Role) -> String {
    let limits = &app.config().limits;
    let daily = (limits.daily_tokens > 0).then(|| thousands(limits.daily_tokens));
    let mut html = texts::help_html(&texts::help_limits(
        limits.turns_per_minute,
        daily.as_deref(),
    ));
    for command in ChatCommand::visible_to(role) {
        let name = command.command.trim_start_matches('/');
        html.push_str(&texts::help_command(
            name,
            &escape_html(&command.description),
        ));
    }
    if role == Role::Admin {
        html.push_str(texts::HELP_ADMIN_COMMANDS);
    }
    html
}
