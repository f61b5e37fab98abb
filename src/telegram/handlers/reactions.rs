//! Reactions from allowed users on the bot's answers: a configured emoji is a vote, exactly
//! as the answer's 👍/👎 would be (see [`crate::turn::reactions`]); the vote then shows in
//! the answer's keyboard. A reaction on any other message, an emoji in neither list, or a
//! reaction taken off does nothing; a refused vote (the same again, no change left) is only
//! logged, as a reaction has no toast to say it.

use teloxide::types::MessageReactionUpdated;

use super::{Deps, HandlerResult};
use crate::ids::ChatId;
use crate::telegram::{reactions, replies};
use crate::turn::reactions::{vote_by_reaction, vote_of};

/// A user changed their reactions on a message.
pub(crate) async fn reacted(deps: Deps, reaction: MessageReactionUpdated) -> HandlerResult {
    let app = &deps.app;
    let telegram = &app.config().telegram;
    let added = reactions::added(&reaction);
    let Some(up) = vote_of(&added, &telegram.reaction_up, &telegram.reaction_down) else {
        return Ok(());
    };
    let (chat, message) = (ChatId(reaction.chat.id.0), reaction.message_id.0);
    let Some((outcome, shows, keyboard)) = vote_by_reaction(app, chat, message, up) else {
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
