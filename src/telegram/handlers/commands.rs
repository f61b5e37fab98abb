//! The command endpoint: `/start`, `/help`, `/clear`, `/cancel`, `/stats`, `/memory`,
//! `/tasks`, `/timezone`, `/voice` for everyone, and the admins' `/model`, `/heuristics`,
//! `/skills`, `/tools`, `/backup` (in a private chat only). A feature's commands are in its
//! room ([`crate::telegram::features`]); this endpoint checks the rate and the role, then
//! dispatches. Each reply is posted (see [`replies`]), so the handler returns without waiting
//! for a paced send.

use teloxide::prelude::*;

use super::{Deps, HandlerResult, conversation_of, sender_of};
use crate::budget::limits::Verdict;
use crate::conversation::Conversation;
use crate::role::Role;
use crate::sizes::{Unit, size};
use crate::telegram::commands::ChatCommand;
use crate::telegram::features::{lessons, memory, model, stats, tasks};
use crate::telegram::transport::replies;
use crate::telegram::{tool_list, views};
use crate::texts::media;
use crate::texts::telegram as texts;
use crate::texts::turn::ADMINS_ONLY;
use crate::turn::actions::{self, Stop};
use crate::turn::{self, Out};

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
            let out: Out = tg.clone();
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
        ChatCommand::Tools => {
            let catalog = app.agent().tools().catalog();
            for part in tool_list::render(&catalog, chrono::Utc::now()) {
                replies::notice(&deps, chat, part);
            }
        }
        ChatCommand::Backup => backup_command(&deps, chat).await,
        ChatCommand::Tasks => tasks::list(&deps, chat, user),
        ChatCommand::Timezone(zone) => tasks::timezone(&deps, chat, user, zone.trim()),
        ChatCommand::Voice(choice) => voice_command(&deps, chat, user, choice.trim()),
    }
    Ok(())
}

/// `/voice on|off`: whether the sender's voice notes are answered by a voice note too (their
/// own choice, stored); without an argument, what it is now.
fn voice_command(deps: &Deps, chat: Conversation, user: crate::ids::UserId, choice: &str) {
    let app = &deps.app;
    if app.voice().is_none() {
        replies::notice(deps, chat, media::VOICE_NOT_SET_UP);
        return;
    }
    let voices = app.store().voices();
    let on = match choice.to_ascii_lowercase().as_str() {
        "" => {
            replies::notice(deps, chat, media::voice_now(voices.wanted_by(user)));
            return;
        }
        "on" => true,
        "off" => false,
        _ => {
            replies::notice(deps, chat, media::VOICE_USAGE);
            return;
        }
    };
    let said = match voices.set_wanted(user, on) {
        Ok(()) => media::voice_set(on),
        Err(e) => {
            tracing::error!(%user, error = %e, "cannot store a /voice choice");
            crate::texts::tasks::NOT_SAVED.to_string()
        }
    };
    replies::notice(deps, chat, said);
}

/// `/backup` (an admin's, checked by the caller): a backup written now, answered with its file
/// name and size; in a group, only where to ask (the answer names a file on the server).
async fn backup_command(deps: &Deps, chat: Conversation) {
    if !chat.chat.is_private() {
        replies::notice(deps, chat, texts::BACKUP_ASK_PRIVATELY.to_string());
        return;
    }
    let said = match crate::maintenance::back_up(&deps.app).await {
        Ok(written) => {
            let name = written
                .path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy();
            texts::backup_written(&name, &size(written.bytes, Unit::Binary))
        }
        Err(_) => texts::BACKUP_FAILED.to_string(),
    };
    replies::notice(deps, chat, said);
}
