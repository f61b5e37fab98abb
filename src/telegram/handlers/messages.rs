//! Messages from allowed users: text becomes a turn, a photo a turn for a model that sees
//! images, a voice note, audio file or document a turn that reads it (or an answer saying why
//! not, see [`files`]), anything else a polite note. A message that looks like a command but is none gets
//! the list's pointer.

use teloxide::prelude::*;
use teloxide::types::Me;

use super::files::{self, Incoming};
use super::turns::{self, Asker, Claimed};
use super::{Deps, HandlerResult, conversation_of, reply_in_groups, sender_of, without_mention};
use crate::budget::limits::Verdict;
use crate::role::Role;
use crate::store::{Attachment, TurnRequest};
use crate::telegram::transport::listener::Handling;
use crate::telegram::transport::{media, replies};
use crate::texts::telegram as texts;
use crate::texts::turn::UNKNOWN_COMMAND;
use crate::turn::TurnInput;

/// A text message from an allowed user: queued as a turn behind the chat's earlier ones.
pub(crate) async fn text(
    deps: Deps,
    msg: Message,
    me: Me,
    role: Role,
    text: String,
    handling: Handling,
) -> HandlerResult {
    if text.starts_with('/') {
        handling.done();
        let (chat, user) = (conversation_of(&msg), sender_of(&msg));
        match deps.app.limits().check_command(user, role) {
            Verdict::TooFast(wait) => replies::refuse_too_fast(&deps, chat, user, wait),
            _ => replies::notice(&deps, chat, UNKNOWN_COMMAND),
        }
        return Ok(());
    }
    let text = without_mention(&text, &me);
    start_turn(&deps, &msg, role, text, Extra::None, &handling).await
}

/// Photos go to a vision-capable model as a turn (the caption is the request). For other
/// models a photo's caption is answered as text, after a note that the image was not seen
/// (without a caption, only the note). Voice notes, audio files and documents become turns
/// that read them, unless refused before download. Stickers and the like get a polite answer
/// and no LLM call.
pub(crate) async fn non_text(
    deps: Deps,
    msg: Message,
    me: Me,
    role: Role,
    handling: Handling,
) -> HandlerResult {
    let app = &deps.app;
    let chat = conversation_of(&msg);
    match files::incoming(&msg, app.config(), app.speech().is_some()) {
        Some(Incoming::Turn(attachment)) => {
            let caption = msg.caption().map(|c| without_mention(c, &me));
            let text = caption.unwrap_or_default();
            let extra = Extra::File(attachment);
            return start_turn(&deps, &msg, role, text, extra, &handling).await;
        }
        Some(Incoming::Refused(answer)) => {
            handling.done();
            rated_notice(&deps, &msg, role, answer);
            return Ok(());
        }
        None => {}
    }
    let max_bytes = app.config().telegram.max_image_bytes;
    let photo = msg
        .photo()
        .and_then(|sizes| media::pick_photo(sizes, max_bytes));
    let reply = match photo {
        Some(photo) if app.model_for(chat).vision => {
            let caption = msg.caption().map(|c| without_mention(c, &me));
            let text = caption.unwrap_or_else(|| texts::IMAGE_QUESTION.to_string());
            let image = Extra::Image(photo.file.id.0.clone());
            return start_turn(&deps, &msg, role, text, image, &handling).await;
        }
        Some(_) => {
            let caption = msg
                .caption()
                .map(|c| without_mention(c, &me))
                .filter(|c| !c.is_empty());
            let vision: Vec<&str> = app
                .config()
                .models
                .iter()
                .filter(|m| m.vision)
                .map(|m| m.id.as_str())
                .collect();
            let current = app.model_for(chat).id;
            let note = texts::unseen_image_note(&current, &vision, caption.is_some());
            if caption.is_some() {
                replies::notice(&deps, chat, note);
            } else {
                rated_notice(&deps, &msg, role, note);
            }
            if let Some(caption) = caption {
                let text = format!("{caption}\n\n{}", texts::UNSEEN_PHOTO);
                return start_turn(&deps, &msg, role, text, Extra::None, &handling).await;
            }
            return Ok(());
        }
        None => texts::NOT_TEXT,
    };
    handling.done();
    rated_notice(&deps, &msg, role, reply.to_string());
    Ok(())
}

/// A notice for a message that starts no turn (a sticker, a photo the model cannot see),
/// within the sender's command rate: a flood of stickers gets one refusal that is edited,
/// not a paced notice each.
fn rated_notice(deps: &Deps, msg: &Message, role: Role, text: String) {
    let (chat, user) = (conversation_of(msg), sender_of(msg));
    match deps.app.limits().check_command(user, role) {
        Verdict::TooFast(wait) => replies::refuse_too_fast(deps, chat, user, wait),
        _ => replies::notice(deps, chat, text),
    }
}

/// What a turn reads besides the message's text.
enum Extra {
    None,
    /// A photo (its file id) for a model that sees images.
    Image(String),
    /// A recording or a document.
    File(Attachment),
}

/// Starts a turn for `msg` (see [`turns`] for the path): its text, and the photo (if the
/// model can see it) or file it carries.
async fn start_turn(
    deps: &Deps,
    msg: &Message,
    role: Role,
    text: String,
    extra: Extra,
    handling: &Handling,
) -> HandlerResult {
    let (image, attachment) = match extra {
        Extra::None => (None, None),
        Extra::Image(file_id) => (Some(file_id), None),
        Extra::File(attachment) => (None, Some(attachment)),
    };
    let claim = || {
        let chat = conversation_of(msg);
        let user = sender_of(msg);
        // So `/stats` can name its top users. Dropped (logged): until a later message records
        // the name, /stats shows "unknown name" for the user; the turn goes on.
        if let Some(from) = msg.from.as_ref()
            && let Err(e) = deps
                .app
                .store()
                .people()
                .remember_name(user, &from.full_name())
        {
            tracing::debug!(%user, error = %e, "cannot remember a user's name");
        }
        let request = TurnRequest {
            image,
            topic: chat.topic,
            reply_to: reply_in_groups(chat.chat, msg.id.0),
            forwarded: msg.forward_origin().is_some(),
            attachment: attachment.clone(),
            message: Some(msg.id.0),
            ..TurnRequest::new(chat.chat, user, text)
        };
        Ok(Ok(Claimed::message(TurnInput::new(
            request,
            handling.update(),
        ))))
    };
    turns::start(deps, Asker::Message(msg), role, handling, claim).await
}
