//! `/model` (admins): which configured model answers in this chat. The command shows the
//! chat's model and a keyboard of the others (or switches directly, `/model <id>`); a press
//! on a model button switches and edits the message in place. The decisions (who may, which
//! models) are [`crate::turn::actions`]' `set_model` and `choose_model`, shared by the command
//! and the button; the button's data (`Action::SetModel`, a model *key*) is parsed with every
//! other in [`crate::telegram::callback_data`].

use teloxide::prelude::*;

use crate::conversation::Conversation;
use crate::role::Role;
use crate::telegram::handlers::presses::answer_press;
use crate::telegram::handlers::{Deps, HandlerResult};
use crate::telegram::keyboards::{self, model_key};
use crate::telegram::render::escape_html;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;
use crate::turn::actions;

/// `/model`: the model keyboard; `/model <id>`: switch directly.
pub(crate) fn command(deps: &Deps, chat: Conversation, id: &str) {
    let app = &deps.app;
    if id.is_empty() {
        let current = app.model_for(chat).id;
        let markup = keyboards::markup(&actions::models_keyboard(app, &current));
        let text = header_html(&current);
        replies::html(deps, chat, text, Some(markup));
        return;
    }
    let text = match actions::set_model(app, chat, id) {
        Ok(model) => texts::model_switched(&model),
        Err(e) => e.to_string(),
    };
    replies::notice(deps, chat, text);
}

/// A model button (admins): switch the chat to the model whose key the button carries.
pub(crate) async fn pressed(
    deps: Deps,
    query: CallbackQuery,
    role: Role,
    chat: Conversation,
    key: String,
) -> HandlerResult {
    let app = &deps.app;
    let models = &app.config().models;
    let id = models
        .iter()
        .find(|m| model_key(&m.id) == key)
        .map(|m| &m.id);
    let mut outcome = actions::choose_model(app, role, chat, id.map(String::as_str));
    // The header names the model too: one edit puts the new text and the moved ✓ in place.
    let switched = outcome.keyboard.take().filter(|_| !outcome.refused);
    answer_press(&deps, &query, outcome).await?;
    if let (Some(keyboard), Some(message)) = (switched, query.message.as_ref()) {
        let html = header_html(&app.model_for(chat).id);
        let markup = Some(keyboards::markup(&keyboard));
        let what = "update the /model message";
        replies::edit(&deps, chat, message.id(), html, markup, what);
    }
    Ok(())
}

/// The text of `/model`'s message: the chat's model now, above the buttons to choose another.
pub(crate) fn header_html(current: &str) -> String {
    texts::model_header_html(&escape_html(current))
}
