//! 🔁 Retry under a failed answer: a turn whose language model failed for a passing reason
//! (unreachable, overloaded, timed out, an unreadable answer, no answer at all) keeps its message in a retry
//! ticket, and the button runs that message again, once, as a new turn through the chat's
//! queue with the same access and limit checks as a typed message.
//!
//! Failures that trying again cannot fix get no button: a configuration error (the admins are
//! told), a refused request, and a conversation too long for the model (which offers 🧹 Clear).

use crate::agent::{TurnResult, TurnStatus};
use crate::app::App;
use crate::ids::{ChatId, UpdateId, UserId};
use crate::llm::LlmError;
use crate::store::{RetryClaim, RetryTicket, TurnRequest};
use crate::texts::turn::{
    ALREADY_RETRIED, NOT_YOURS, RETRY_EXPIRED, RETRY_FAILED, RETRY_KEPT, RETRY_SEND_AGAIN,
};

/// How long a retry stays usable: a message a day old is no longer part of the conversation,
/// and answering it then would answer out of context.
const RETRY_LIFETIME_SECS: i64 = 24 * 3600;

/// Whether trying the same request again may work: the failure was the provider's, not the
/// bot's setup or the request itself.
pub(crate) fn retryable(error: &LlmError) -> bool {
    matches!(error, LlmError::Unavailable { .. } | LlmError::Malformed(_))
}

/// For a turn whose LLM failed for a passing reason: stores its `request` (the message, who
/// sent it, where) for one retry and says so in the answer.
/// Returns the retry ticket to put under the answer (`None` for any other turn, or when the
/// ticket cannot be stored: the answer then asks to send it again).
pub(crate) fn offer(app: &App, result: &mut TurnResult, request: &TurnRequest) -> Option<String> {
    let passing = match &result.status {
        TurnStatus::LlmFailed(error) => retryable(error),
        // A model that gave no answer may well give one on another try.
        TurnStatus::NoAnswer => true,
        TurnStatus::Answered | TurnStatus::IterationCap => false,
    };
    if !passing {
        return None;
    }
    let ticket = RetryTicket {
        request: request.clone(),
        used: false,
        claimed_by: None,
        created: chrono::Utc::now().timestamp(),
    };
    // Handled: without a ticket the answer offers no 🔁 Retry and tells the user to send the
    // message again (failure_text).
    let id = app
        .store()
        .retries()
        .create(&ticket)
        .inspect_err(|e| tracing::warn!(chat = %request.chat, error = %e, "cannot store a retry"))
        .ok();
    result.answer = failure_text(&result.answer, id.is_some());
    id
}

/// The failed answer's text with what the user can do now.
fn failure_text(failure: &str, offered: bool) -> String {
    let next = if offered {
        RETRY_KEPT
    } else {
        RETRY_SEND_AGAIN
    };
    format!("{failure} {next}")
}

/// 🔁 Retry pressed by `user` in `chat` (update `update`): claims retry ticket `id` (atomically, so a double press runs the
/// message once). Returns the message to run again, or the toast that refuses the press.
pub(crate) fn claim(
    app: &App,
    chat: ChatId,
    user: UserId,
    id: &str,
    update: UpdateId,
) -> Result<RetryTicket, &'static str> {
    let oldest = chrono::Utc::now().timestamp() - RETRY_LIFETIME_SECS;
    match app
        .store()
        .retries()
        .claim(id, chat, user, oldest, Some(update))
    {
        Ok(RetryClaim::Claimed(ticket)) => Ok(*ticket),
        Ok(RetryClaim::AlreadyUsed) => Err(ALREADY_RETRIED),
        Ok(RetryClaim::NotYours) => Err(NOT_YOURS),
        Ok(RetryClaim::Expired) => Err(RETRY_EXPIRED),
        Err(e) => {
            tracing::error!(%chat, error = %e, "cannot claim a retry");
            Err(RETRY_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_passing_failures_are_retried() {
        let cases = [
            (
                "unreachable",
                LlmError::Unavailable {
                    attempts: 4,
                    last: "HTTP 503".into(),
                },
                true,
            ),
            ("unreadable answer", LlmError::Malformed("eof".into()), true),
            (
                "bad key",
                LlmError::Rejected {
                    status: 401,
                    message: "no".into(),
                },
                false,
            ),
            (
                "refused request",
                LlmError::Rejected {
                    status: 400,
                    message: "no".into(),
                },
                false,
            ),
            (
                "too long",
                LlmError::ContextOverflow {
                    message: "too long".into(),
                },
                false,
            ),
        ];
        for (name, error, want) in cases {
            assert_eq!(retryable(&error), want, "{name}");
        }
    }

    #[test]
    fn the_failure_text_says_what_happens_next() {
        let cases = [
            (
                "offered",
                true,
                "Sorry. Your message is kept: 🔁 Retry sends it again.",
            ),
            (
                "not offered",
                false,
                "Sorry. Please send your message again in a minute.",
            ),
        ];
        for (name, offered, want) in cases {
            assert_eq!(failure_text("Sorry.", offered), want, "{name}");
        }
    }
}
