//! User-facing texts of the turn layer (see [`crate::texts`]): the notices a turn sends when it
//! cannot answer as usual (a restart, an unreadable history, a crash), the notes a failed
//! answer carries, the 🔁 Retry toasts and the admins' setup alert.

/// What a chat is told when a crash came while its answer was being shown and the answer
/// cannot be finished in the message that shows it.
pub const RESTART_NOTICE: &str = "⚠️ I was restarted while answering; the answer above may be incomplete. Send your message again if you need the rest.";

/// What the user is told when the conversation's stored history or state cannot be read.
pub const UNREADABLE_NOTICE: &str = "⚠️ Sorry, this conversation's stored history cannot be read, so I cannot answer here without risking it. Nothing was changed; the bot's owner can see why in its log.";

/// What the user is told when their message crashed its turn.
pub const PANIC_NOTICE: &str = "⚠️ Sorry, something went wrong and this message could not be handled. Please try again or rephrase it.";

/// The answer of a turn whose LLM refused the bot's setup when there is no admin to alert (so
/// the user is not promised that one was).
pub const SETUP_BROKEN: &str =
    "Sorry, I cannot answer right now: the bot's language model settings need fixing by its owner.";

/// The admins' alert that the LLM refused the bot's setup for `model` with `error` (redacted
/// by the caller before it is sent).
pub fn setup_alert(model: &str, error: &str) -> String {
    format!(
        "⚠️ The language model refused the bot's setup for model {model}: {error}. \
         Check the API key and the model id (this alert repeats at most once an hour)."
    )
}

/// What a failed answer adds when it offers 🔁 Retry, so it promises only what it does.
pub const RETRY_KEPT: &str = "Your message is kept: 🔁 Retry sends it again.";

/// What it adds when no button could be offered (the retry could not be stored).
pub const RETRY_SEND_AGAIN: &str = "Please send your message again in a minute.";

/// The toast of a retry pressed a second time.
pub const ALREADY_RETRIED: &str = "Already retried: that message was sent again";

/// The toast of a retry pressed by someone other than the message's sender.
pub const NOT_YOURS: &str = "Only the person who sent that message can retry it";

/// The toast of a retry that names nothing live (forged, another chat's, too old or pruned).
pub const RETRY_EXPIRED: &str = "This retry has expired; please send your message again";

/// The toast of a retry that could not be claimed (the store failed).
pub const RETRY_FAILED: &str = "Sorry, I could not retry that. Please send it again.";

/// What the model reads in place of a photo that could not be fetched (`error` says why), so
/// it can tell the user it did not see it.
pub fn photo_unreadable(content: &str, error: &str) -> String {
    format!("{content}\n[a photo was attached but could not be fetched: {error}]")
}
