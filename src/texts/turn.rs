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

/// Under [`gave_up`] when the message was a scheduled task's run: the task is cancelled.
pub const TASK_CANCELLED: &str = "It was a scheduled task's run, so the task is cancelled: ask \
     for it again if you still want it (see /tasks).";

/// The apology of an update given up after its turn started `starts` times and the bot stopped
/// each time (see `turn::quarantine`): it is never run again, so the user is asked to send it
/// again, in other words if it was what stopped the bot.
pub fn gave_up(starts: u32) -> String {
    let times = match starts {
        0 | 1 => "while".to_string(),
        2 => "twice while".to_string(),
        n => format!("{n} times while"),
    };
    format!(
        "⚠️ I could not answer this message: the bot stopped {times} handling it, so I will not \
         try it again. Please send it again, in other words if you can."
    )
}

/// The answer of a turn whose LLM refused the bot's setup when there is no admin to alert (so
/// the user is not promised that one was).
pub(crate) const SETUP_BROKEN: &str =
    "Sorry, I cannot answer right now: the bot's language model settings need fixing by its owner.";

/// The admins' alert that the LLM refused the bot's setup for `model` with `error` (redacted
/// by the caller before it is sent).
pub(crate) fn setup_alert(model: &str, error: &str) -> String {
    format!(
        "⚠️ The language model refused the bot's setup for model {model}: {error}. \
         Check the API key and the model id (this alert repeats at most once an hour)."
    )
}

/// What a failed answer adds when it offers 🔁 Retry, so it promises only what it does.
pub(crate) const RETRY_KEPT: &str = "Your message is kept: 🔁 Retry sends it again.";

/// What it adds when no button could be offered (the retry could not be stored).
pub(crate) const RETRY_SEND_AGAIN: &str = "Please send your message again in a minute.";

/// The toast of a retry pressed a second time.
pub(crate) const ALREADY_RETRIED: &str = "Already retried: that message was sent again";

/// The toast of a retry pressed by someone other than the message's sender.
pub(crate) const NOT_YOURS: &str = "Only the person who sent that message can retry it";

/// The toast of a retry that names nothing live (forged, another chat's, too old or pruned).
pub(crate) const RETRY_EXPIRED: &str = "This retry has expired; please send your message again";

/// The toast of a retry that could not be claimed (the store failed).
pub(crate) const RETRY_FAILED: &str = "Sorry, I could not retry that. Please send it again.";

/// What the model reads in place of a photo that could not be fetched (`error` says why), so
/// it can tell the user it did not see it.
pub(crate) fn photo_unreadable(content: &str, error: &str) -> String {
    format!("{content}\n[a photo was attached but could not be fetched: {error}]")
}

// The chat-level actions that commands and buttons share (`turn::actions`).

/// The toast of a press whose data names nothing live (an expired, forged or unknown button).
pub(crate) const EXPIRED: &str = "This option has expired";

/// What the user is told when an admin-only action is refused.
pub(crate) const ADMINS_ONLY: &str = "Sorry, only the bot's admins can do that.";

/// What a command the bot does not know gets.
pub(crate) const UNKNOWN_COMMAND: &str = "I do not know that command. /help lists what I can do.";

/// The reply to `/cancel` that stopped a turn before anything of it was kept.
pub(crate) const STOPPED: &str = "Stopped. Nothing of that request was kept.";

/// The toast of a ⏹ that stopped its turn.
pub(crate) const STOPPED_TOAST: &str = "Stopped";

/// The reply to `/cancel` when no turn runs.
pub(crate) const NOTHING_RUNNING: &str = "Nothing is running.";

/// The toast of a ⏹ whose answer is on screen already (or whose turn is over).
pub(crate) const ALREADY_COMPLETE: &str = "That answer is already complete";

/// What a stop that came too late says: the answer was stored before it, and stays.
pub(crate) const TOO_LATE_TO_STOP: &str =
    "Too late to stop: the answer was already saved, so it is kept.";

/// The reply to a clear that worked.
pub(crate) const CLEARED: &str = "Done: I forgot this chat's conversation.";

/// The reply to a clear the store refused.
pub(crate) const CLEAR_FAILED: &str = "Sorry, I could not clear the history. Please try again.";

/// The reply to a switch to model `id`, which is not among the configured `known` ones.
pub(crate) fn unknown_model(id: &str, known: &str) -> String {
    format!("Unknown model {id:?}. Configured: {known}")
}

/// The toast of a model button that names no configured model.
pub(crate) const MODEL_NOT_CONFIGURED: &str = "That model is not configured";

/// The toast of a model switched to `id`.
pub(crate) fn model_set(id: &str) -> String {
    format!("Model: {id}")
}

/// The toast of a vote on an answer whose vote was already changed once.
pub(crate) const ALREADY_RATED: &str = "You already rated this answer";

/// The toast of a vote the store could not record (`error` says why).
pub(crate) fn vote_failed(error: &str) -> String {
    format!("Cannot record that: {error}")
}

/// The toast of a first 👍, or of a first 👎 that starts no reflection (a group member's on
/// an answer to someone else).
pub(crate) const THANKS: &str = "Thanks!";

/// The toast of a first 👎, which starts a reflection.
pub(crate) const THANKS_LEARNING: &str = "Thanks, I will learn from it.";

/// The toast of a vote changed to 👍.
pub(crate) const CHANGED_UP: &str = "Changed to 👍";

/// The toast of a vote changed to 👎, which starts a reflection.
pub(crate) const CHANGED_DOWN: &str = "Changed to 👎: I will learn from it.";

/// A vote changed to 👎 by a group member who did not ask: counted, nothing learned from it.
pub(crate) const CHANGED_DOWN_COUNTED: &str = "Changed to 👎";

/// The toast of a pending lesson approved.
pub(crate) const APPROVED: &str = "Approved: it can be used from now on";

/// The toast of an Approve for a lesson that is not pending.
pub(crate) const NOT_PENDING: &str = "That heuristic is not waiting for approval";

/// The toast of an approval the store refused (`error` says why).
pub(crate) fn approve_failed(error: &str) -> String {
    format!("Cannot approve it: {error}")
}

/// The toast of a lesson forgotten.
pub(crate) const FORGOTTEN: &str = "Forgotten";

/// The toast of a forget for a lesson that is gone.
pub(crate) const ALREADY_GONE: &str = "That heuristic is gone already";

/// The toast of a forget the store refused (`error` says why).
pub(crate) fn forget_failed(error: &str) -> String {
    format!("Cannot forget it: {error}")
}
