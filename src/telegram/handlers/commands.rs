//! The command endpoint: `/start`, `/help`, `/clear`, `/cancel`, `/stats`, `/memory`,
//! `/tasks`, `/timezone`, `/voice` for everyone, and the admins' `/model`, `/heuristics`,
//! `/skills`, `/tools`, `/backup` (in a private chat only). A feature's commands are in its
//! room ([`crate::telegram::features`]); this endpoint checks the rate and the role, then
//! dispatches. Each reply is posted (see [`replies`]), so the handler returns without waiting
//! for a paced send.

use teloxide::prelude::*;

use super::{Deps, HandlerResult, conversation_of, sender_of};
use crate::budget::limits::Verdict;
use crate::role::Role;
use crate::telegram::commands::ChatCommand;
use crate::telegram::features::{backup, lessons, memory, model, stats, tasks, tools, voice};
use crate::telegram::transport::replies;
use crate::telegram::views;
use crate::texts::turn::ADMINS_ONLY;
use crate::turn::actions::{self, Stop};
use crate::turn::{self, SharedMessenger};

/// A command: within the sender's command rate, its action now and its reply posted.
pub(crate) async fn command(
    deps: Deps,
    msg: Message,
    role: Role,
    cmd: ChatCommand,
) -> HandlerResult {
    let Deps { app, tg } = &deps;
    let chat = conversation_of(&msg);
    let user = sender_of(&msg);
    if let Verdict::TooFast(wait) = app.limits().check_command(user, role) {
        replies::refuse_too_fast(&deps, chat, user, wait);
        return Ok(());
    }
    if cmd.min_role() > role {
        tracing::info!(%user, command = ?cmd, "refused a command for admins");
        replies::notice(&deps, chat, ADMINS_ONLY);
        return Ok(());
    }
    match cmd {
        ChatCommand::Start => replies::html(&deps, chat, views::start_html(role), None),
        ChatCommand::Help => replies::html(&deps, chat, views::help_html(app, role), None),
        ChatCommand::Clear => {
            let out: SharedMessenger = tg.clone();
            turn::retire_options(app, &out, chat);
            replies::notice(&deps, chat, actions::clear(app, chat));
        }
        ChatCommand::Cancel => {
            // Asked before the stop: a live message on screen confirms it itself.
            let live = tg.shows_live(chat);
            match actions::cancel(app, chat, None) {
                Stop::Stopped if live => {}
                stop => replies::notice(&deps, chat, stop.reply()),
            }
        }
        ChatCommand::Stats => stats::command(&deps, chat, user, role).await?,
        ChatCommand::Model(id) => model::command(&deps, chat, id.trim()),
        ChatCommand::Lessons(which) => lessons::list(&deps, chat, &which),
        ChatCommand::Skills => lessons::skills(&deps, chat),
        ChatCommand::Memory => memory::command(&deps, chat, user),
        ChatCommand::Tools => tools::command(&deps, chat),
        ChatCommand::Backup => backup::command(&deps, chat).await,
        ChatCommand::Tasks => tasks::list(&deps, chat, user),
        ChatCommand::Timezone(zone) => tasks::timezone(&deps, chat, user, zone.trim()),
        ChatCommand::Voice(choice) => voice::command(&deps, chat, user, choice.trim()),
    }
    Ok(())
}
