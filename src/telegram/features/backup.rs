//! `/backup` (admins, in a private chat): a backup of everything the bot keeps, written now
//! (see `crate::store::backup` for the format, `crate::maintenance` for the schedule).

use crate::conversation::Conversation;
use crate::sizes::{Unit, size};
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;

/// `/backup` (an admin's, checked by the caller): a backup written now, answered with its file
/// name and size; in a group, only where to ask (the answer names a file on the server).
pub(crate) async fn command(deps: &Deps, chat: Conversation) {
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
