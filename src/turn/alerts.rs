//! Admin alerts: when the language model refuses the bot's own setup (a bad key, a model id it
//! does not know), no user can fix it, so the admins are told in their private chats, at most
//! once an hour (see [`App::claim_admin_alert`]), with secrets redacted.

use super::messenger::SharedMessenger;
use crate::app::App;
use crate::llm::LlmError;
use crate::texts::turn::setup_alert;

/// Tells the admins (in their private chats) that the LLM refused the bot's setup, at most
/// once an hour; `false` if there is no admin to tell, so the user is not promised one was.
pub(super) async fn alert_admins(
    app: &App,
    out: &SharedMessenger,
    model: &str,
    error: &LlmError,
) -> bool {
    let admins = &app.config().access.admins;
    if admins.is_empty() {
        return false;
    }
    if app.claim_admin_alert() {
        let text = setup_alert(model, &error.to_string());
        let text = crate::logging::redact(&text, &app.config().secrets());
        for admin in admins {
            let Some(chat) = admin.private_chat() else {
                continue;
            };
            out.notice(crate::conversation::Conversation::new(chat, None), &text)
                .await;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::testing::{ADMIN, NO_LLM, Recorder, Shown, app};

    /// The admins are told once an hour, in their private chats; the alert names the model.
    #[tokio::test]
    async fn the_admins_are_alerted_once_an_hour() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path(), NO_LLM);
        let out = Recorder::new();
        let out_: SharedMessenger = out.clone();
        let error = LlmError::Rejected {
            status: 401,
            message: "bad key".into(),
        };
        assert!(alert_admins(&app, &out_, "m", &error).await);
        assert!(
            alert_admins(&app, &out_, "m", &error).await,
            "still an admin"
        );
        let shown = out.shown();
        assert_eq!(shown.len(), 1, "once: {shown:?}");
        let Shown::Notice(chat, text) = &shown[0] else {
            panic!("{shown:?}");
        };
        assert_eq!(chat.chat, crate::ids::ChatId(ADMIN));
        assert!(text.contains("model m"), "{text}");
    }
}
