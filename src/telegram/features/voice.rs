//! `/voice`: whether a user's voice notes are answered by a voice note too (see
//! `crate::llm::synthesis` for the speech, `crate::store::voices` for the choice kept).

use crate::conversation::Conversation;
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;
use crate::texts::media;

/// `/voice on|off`: whether the sender's voice notes are answered by a voice note too (their
/// own choice, stored); without an argument, what it is now.
pub(crate) fn command(deps: &Deps, chat: Conversation, user: crate::ids::UserId, choice: &str) {
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
