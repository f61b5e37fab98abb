//! What the provenance gate's confirmations say (see `crate::provenance`): the model's result
//! when a fact or task waits for the user's ✅, the message that shows it, and how a press ends.

/// The tool result the model gets when the change waits for the user's ✅ (`what`: the change
/// as the user reads it).
pub(crate) fn waiting(what: &str) -> String {
    format!(
        "Not done yet: this conversation holds text someone other than the user wrote (a web \
         page, search results, a document, a forwarded message, another member of a group), so \
         nothing lasting is made \
         without the user's own confirmation. They are shown exactly this, with ✅ / ✖ buttons: \
         {what}. Tell them to check it and press ✅ only if they asked for it."
    )
}

/// The longest change a confirmation shows whole: with the words around it, far inside one
/// Telegram message (a task's request is capped below it; a fact by `memory.max_chars`).
const SHOWN_CHARS: usize = 3000;

/// The message under which ✅ / ✖ stand (`what`: the change as the user reads it, cut at
/// [`SHOWN_CHARS`] with a mark, should a deployment allow longer facts).
pub(crate) fn ask(what: &str) -> String {
    let what = shown(what);
    format!(
        "⚠️ Confirm before I save this. The request came with text someone else may have written \
         (a page, a document, a forwarded message, another member's message in a group), so \
         please check it is what you asked for:\n\n{what}\n\n\
         Only you can confirm it."
    )
}

/// `what` as a confirmation shows it: cut at [`SHOWN_CHARS`] with a mark.
fn shown(what: &str) -> String {
    match what.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!(
            "{}… (cut: {} characters in all)",
            &what[..at],
            what.chars().count()
        ),
        None => what.to_string(),
    }
}

/// A fact, as a confirmation shows it.
pub(crate) fn fact(text: &str) -> String {
    format!("Remember about you: “{text}”")
}

/// A task, as a confirmation shows it (`kind`: reminder or task; `repeating`: its cron
/// expression; `first`: its first run, local; `zone`: its time zone's name).
pub(crate) fn task(
    kind: &str,
    request: &str,
    repeating: Option<&str>,
    first: &str,
    zone: &str,
) -> String {
    match repeating {
        Some(cron) => format!("A repeating {kind} ({cron}, first run {first} {zone}): “{request}”"),
        None => format!("A {kind} at {first} ({zone}): “{request}”"),
    }
}

/// The ✅ button.
pub(crate) const YES_BUTTON: &str = "✅ Yes, save it";
/// The ✖ button.
pub(crate) const NO_BUTTON: &str = "✖ No";

/// The confirmation once ✅ made it (`what`, then what saving it said).
pub(crate) fn done(what: &str, said: &str) -> String {
    format!("✅ {}\n\n{said}", shown(what))
}

/// The confirmation once ✖ dropped it.
pub(crate) fn declined(what: &str) -> String {
    format!("✖ Not saved: {}", shown(what))
}

/// The confirmation once ✅ could not make it (`why`).
pub(crate) fn failed(what: &str, why: &str) -> String {
    format!("⚠️ Not saved: {}\n\n{why}", shown(what))
}

/// A press by anyone but the user the confirmation asks.
pub(crate) const NOT_YOURS: &str = "Only the person who asked can confirm this.";
/// A press on a confirmation already answered, pruned, or forged.
pub(crate) const EXPIRED: &str = "This confirmation has expired.";
/// What a fact saved on ✅ says.
pub(crate) const FACT_SAVED: &str = "Saved in your personal memory (see /memory).";
/// What a task made on ✅ says.
pub(crate) const TASK_SAVED: &str = "Scheduled (see /tasks).";
/// A once-task confirmed after its time.
pub(crate) const TIME_PASSED: &str = "Its time has passed; ask again for a new time.";
/// Memory turned off since the proposal.
pub(crate) const MEMORY_OFF: &str = "Personal memory is turned off on this bot.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_fits_one_telegram_message() {
        for (name, chars) in [("short", 10), ("at the cut", 3000), ("far past it", 50_000)] {
            let asked = ask(&"é".repeat(chars));
            assert!(asked.encode_utf16().count() <= 4096, "{name}");
            let closed = failed(&"é".repeat(chars), "a reason");
            assert!(closed.encode_utf16().count() <= 4096, "{name}: closed");
            assert_eq!(asked.contains("(cut:"), chars > 3000, "{name}");
        }
    }
}
