//! Reactions from allowed users on the bot's answers: a configured emoji is a vote, exactly
//! as the answer's 👍/👎 would be (see [`crate::turn::reactions`]); the vote then shows in
//! the answer's keyboard (in a group, another member's 👎 is a vote that starts no reflection,
//! as with the button). A reaction on any other message, an emoji in neither list, or a
//! reaction taken off does nothing; a refused vote (the same again, no change left) is only
//! logged, as a reaction has no toast to say it.

use teloxide::types::MessageReactionUpdated;

use super::{Deps, HandlerResult};
use crate::ids::{ChatId, UserId};
use crate::role::Role;
use crate::telegram::transport::{reactions, replies};
use crate::turn::actions::Voter;
use crate::turn::reactions::{vote_by_reaction, vote_of};

/// A user changed their reactions on a message.
pub(crate) async fn reacted(
    deps: Deps,
    reaction: MessageReactionUpdated,
    role: Role,
) -> HandlerResult {
    let app = &deps.app;
    let telegram = &app.config().telegram;
    let added = reactions::added(&reaction);
    let Some(up) = vote_of(&added, &telegram.reaction_up, &telegram.reaction_down) else {
        return Ok(());
    };
    // An anonymous reaction (a channel or an anonymous admin) has no user; the routes let
    // only a known user's through, so this never refuses one.
    let Some(user) = reaction.user() else {
        return Ok(());
    };
    let voter = Voter {
        user: UserId::from(user.id),
        role,
    };
    let (chat, message) = (ChatId::from(reaction.chat.id), reaction.message_id.0);
    let Some((outcome, shows, keyboard)) = vote_by_reaction(app, chat, message, up, voter) else {
        tracing::debug!(%chat, message, "a reaction on no rated answer; ignored");
        return Ok(());
    };
    if outcome.refused {
        tracing::info!(%chat, message, toast = %outcome.toast, "a vote by reaction changed nothing");
        return Ok(());
    }
    tracing::info!(%chat, message, up, "a vote by reaction");
    replies::keyboard(&deps, chat, shows, keyboard);
    Ok(())
}
