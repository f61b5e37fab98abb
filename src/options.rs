//! Option buttons: after an answer, the choices a user can tap instead of typing.
//!
//! After the answer is sent, a structured extraction asks the model in the same conversation
//! (same request parameters, same message prefix, so its prompt cache is reused) for up to
//! `max_count` short options ([`extract`]). Non-empty options are stored as a ticket in sled;
//! the turn attaches them to the answer. A failed, empty or late extraction attaches nothing;
//! the answer never waits for it.
//!
//! A press is checked on the server ([`decide`]): the ticket belongs to the chat the press came
//! from, was not expired by /clear, and has this option; the choice is recorded atomically, so
//! a second press does nothing. The conversation then continues exactly as if the user had
//! typed the full label.

use std::time::Duration;

use serde::Deserialize;

use crate::budget::Payer;
use crate::config::{LlmConfig, OptionsConfig};
use crate::conversation::Conversation;
use crate::ids::{ChatId, TopicId, UpdateId, UserId};
use crate::llm::extraction::{ExtractionConfig, Prefix, retry_extract_structured};
use crate::llm::{LlmClient, Priority};
use crate::metrics::CallKind;
use crate::store::{Choice, OptionTicket, Store};

/// The extraction prompt. Placeholder: `{max_count}`.
pub const OPTIONS_PROMPT_TEMPLATE: &str = "\
If your last answer asks me to choose, or suggests next steps, list up to {max_count} short \
options I could reply with (a few words each, in the language of our conversation). \
Otherwise give an empty list.

Respond in JSON only:
{\"options\": [\"label\", ...]}";

/// Sent after a reply that was not the JSON asked for.
pub const OPTIONS_RETRY_PROMPT: &str = "\
That was not the JSON I asked for. Respond with only {\"options\": [\"label\", ...]}, \
without tool calls or any other text.";

/// Longest label kept; longer ones are model rambling, not options.
const MAX_LABEL_CHARS: usize = 200;

#[derive(Deserialize)]
struct OptionsReply {
    options: Vec<String>,
}

/// Trimmed, non-empty, not overlong, without duplicates, at most `max`.
pub(crate) fn clean_labels(raw: Vec<String>, max: usize) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for label in raw {
        let label = label.trim().to_string();
        if label.is_empty() || label.chars().count() > MAX_LABEL_CHARS || labels.contains(&label) {
            continue;
        }
        labels.push(label);
        if labels.len() == max {
            break;
        }
    }
    labels
}

/// Options ready to attach: the stored ticket's id and its labels, in button order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attached {
    pub ticket: String,
    pub labels: Vec<String>,
}

/// The answer options are extracted for: its chat, the chat's clear epoch when the turn
/// started (a clear expires the options), and its feedback ticket, whose 👍/👎 stay beside
/// the options. The message that shows them is recorded once it is sent
/// ([`Tickets::set_message`](crate::store::Tickets::set_message)): the options may go into that very send.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub chat: ChatId,
    /// The forum topic of the answer, if any: a press continues that topic.
    pub topic: Option<TopicId>,
    /// The user whose turn it answered, who pays for the extraction.
    pub user: UserId,
    pub epoch: u64,
    pub feedback: Option<String>,
}

/// Extracts options for `answer` and stores them as a ticket; `None` when there is nothing to
/// attach. `prefix` is the agent's last request and its messages followed by the answer. Each
/// call is charged to `payer` as it completes, also when the extraction then times out.
pub(crate) async fn extract(
    llm: &LlmClient,
    payer: &Payer,
    store: &Store,
    config: &OptionsConfig,
    llm_config: &LlmConfig,
    answer: Answer,
    prefix: &Prefix,
) -> Option<Attached> {
    let Answer {
        chat,
        topic,
        user: _,
        epoch,
        feedback,
    } = answer;
    let (template, history) = prefix;
    let prompt = OPTIONS_PROMPT_TEMPLATE.replace("{max_count}", &config.max_count.to_string());
    let extraction = retry_extract_structured::<OptionsReply>(
        history,
        &prompt,
        OPTIONS_RETRY_PROMPT,
        ExtractionConfig {
            llm,
            meter: payer,
            template,
            max_attempts: config.max_attempts,
            max_tokens: llm_config.max_tokens_extraction,
            max_tokens_field: llm_config.max_tokens_field,
            priority: Priority::Background,
            kind: CallKind::Extraction,
        },
    );
    let Ok(extraction) =
        tokio::time::timeout(Duration::from_secs(config.timeout_secs), extraction).await
    else {
        tracing::info!(chat = chat.0, "options extraction timed out; no buttons");
        return None;
    };
    // Dropped (logged): the counters are statistics; a lost count must not cost the buttons.
    if let Err(e) =
        store
            .usage()
            .charge(chat, &template.model, 0, extraction.calls, extraction.usage)
    {
        tracing::warn!(error = %e, "cannot record usage");
    }
    let labels = match extraction.result {
        Ok(reply) => clean_labels(reply.options, config.max_count),
        Err(e) => {
            tracing::info!(chat = chat.0, error = %e, "options extraction failed; no buttons");
            return None;
        }
    };
    if labels.is_empty() {
        return None;
    }
    let ticket = OptionTicket {
        chat,
        message_id: 0,
        labels,
        epoch,
        chosen: None,
        feedback,
        created: chrono::Utc::now().timestamp(),
        topic,
        chosen_by: None,
    };
    store_ticket(store, ticket)
}

/// Stores `ticket` and returns it ready to attach; `None` (logged) if the store refuses it.
fn store_ticket(store: &Store, ticket: OptionTicket) -> Option<Attached> {
    // Handled: without its ticket a button could not be pressed, so no buttons are shown.
    match store.tickets().create(&ticket) {
        Ok(id) => Some(Attached {
            ticket: id,
            labels: ticket.labels,
        }),
        Err(e) => {
            tracing::error!(error = %e, "cannot store option ticket");
            None
        }
    }
}

/// What a press may do, decided on the server.
#[derive(Debug, PartialEq)]
pub(crate) enum Press {
    /// Continue the conversation with this ticket's option `index`.
    Continue(OptionTicket, usize),
    /// Nothing to continue: the ticket is unknown or of another chat, or the option does not
    /// exist.
    Expired,
    /// An option of this answer was chosen before.
    AlreadyChosen,
    /// The options of an answer the chat has moved on from (a newer turn, or a /clear).
    Earlier,
}

/// The server-side checks of a press of option `index` (whose button carried `label`, a
/// prefix of the full label) of ticket `id` in `chat`, then the atomic choice. `update` is the
/// press's update: the same press re-delivered after a crash that came between the choice and
/// the turn's inbox entry goes on (the inbox then keeps it from running twice).
pub(crate) fn decide(
    store: &Store,
    chat: ChatId,
    id: &str,
    index: usize,
    label: &str,
    update: Option<UpdateId>,
) -> anyhow::Result<Press> {
    let Some(ticket) = store.tickets().get(id) else {
        return Ok(Press::Expired);
    };
    let exists = ticket.chat == chat
        && ticket
            .labels
            .get(index)
            .is_some_and(|full| full.starts_with(label));
    if !exists {
        return Ok(Press::Expired);
    }
    let again = ticket.chosen_again_by(index, update);
    if ticket.chosen.is_some() && !again {
        return Ok(Press::AlreadyChosen);
    }
    // The press came from the ticket's chat; its topic is the ticket's.
    let state = store.chats().state(Conversation::new(chat, ticket.topic))?;
    // The press that chose it, re-delivered after a crash, goes on even if a resumed turn of
    // the chat retired the options meanwhile: its own turn never ran.
    let current = ticket.epoch == state.epoch && state.offered.is_some_and(|o| o.ticket == id);
    if !current && !again {
        return Ok(Press::Earlier);
    }
    Ok(match store.tickets().choose(id, index, update)? {
        Choice::Chosen(ticket) => Press::Continue(ticket, index),
        Choice::AlreadyChosen => Press::AlreadyChosen,
        Choice::Unknown => Press::Expired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_cleaned() {
        let raw = vec![
            " Yes ".into(),
            "".into(),
            "Yes".into(),
            "x".repeat(201),
            "No".into(),
            "Maybe".into(),
        ];
        assert_eq!(
            clean_labels(raw, 2),
            vec!["Yes".to_string(), "No".to_string()]
        );
    }
}
