//! Option buttons: after an answer, the choices a user can tap instead of typing.
//!
//! The answer is sent first. Then, in the background, a structured extraction asks the model in
//! the same conversation (same request parameters, same message prefix, so its prompt cache is
//! reused) for up to `max_count` short options. Non-empty options are stored as a ticket in
//! sled and attached to the answer's last message by editing its reply markup. A failed, empty
//! or late extraction attaches nothing; the answer never waits for it.
//!
//! A press is checked on the server (allowed presser, the ticket belongs to this chat and was
//! not expired by /clear, the option exists), answered at once, marks the keyboard with the
//! choice so a second press does nothing, and continues the conversation exactly as if the user
//! had typed the full label.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use teloxide::prelude::*;
use teloxide::types::MessageId;

use crate::app::App;
use crate::config::Role;
use crate::learning::reflection::Prefix;
use crate::llm::Priority;
use crate::llm::extraction::{ExtractionConfig, retry_extract_structured};
use crate::store::{Choice, OptionTicket};
use crate::telegram::keyboards;
use crate::telegram::send::edit_keyboard;
use crate::turn;

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

/// What the toast says for anything that is not a live option of this chat.
const EXPIRED: &str = "This option has expired";

#[derive(Deserialize)]
struct OptionsReply {
    options: Vec<String>,
}

/// Trimmed, non-empty, not overlong, without duplicates, at most `max`.
pub fn clean_labels(raw: Vec<String>, max: usize) -> Vec<String> {
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

/// Extracts options for the answer just sent and attaches them to message `message_id`,
/// beside the answer's 👍/👎 row (`feedback`). `prefix` is the agent's last request and its
/// messages followed by the final answer.
pub async fn attach(
    app: Arc<App>,
    bot: Bot,
    chat: ChatId,
    message_id: MessageId,
    epoch: u64,
    prefix: Prefix,
    feedback: Option<String>,
) {
    let (template, history) = prefix;
    let config = &app.config.options;
    let prompt = OPTIONS_PROMPT_TEMPLATE.replace("{max_count}", &config.max_count.to_string());
    let extraction = retry_extract_structured::<OptionsReply>(
        &history,
        &prompt,
        OPTIONS_RETRY_PROMPT,
        ExtractionConfig {
            llm: app.agent.llm(),
            template: &template,
            max_attempts: config.max_attempts,
            max_tokens: app.config.llm.max_tokens_extraction,
            max_tokens_field: app.config.llm.max_tokens_field,
            priority: Priority::Background,
        },
    );
    let Ok(extraction) =
        tokio::time::timeout(Duration::from_secs(config.timeout_secs), extraction).await
    else {
        tracing::info!(chat = chat.0, "options extraction timed out; no buttons");
        return;
    };
    if extraction.calls > 0
        && let Err(e) = app.store.record_usage(
            chat.0,
            &template.model,
            0,
            extraction.calls,
            extraction.usage,
        )
    {
        tracing::warn!(error = %e, "cannot record usage");
    }
    let labels = match extraction.result {
        Ok(reply) => clean_labels(reply.options, config.max_count),
        Err(e) => {
            tracing::info!(chat = chat.0, error = %e, "options extraction failed; no buttons");
            return;
        }
    };
    if labels.is_empty() {
        return;
    }
    let ticket = OptionTicket {
        chat: chat.0,
        message_id: message_id.0,
        labels,
        epoch,
        chosen: None,
        feedback,
    };
    let id = match app.store.create_ticket(&ticket) {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(error = %e, "cannot store option ticket");
            return;
        }
    };
    let markup = keyboards::answer(Some((&id, &ticket.labels)), ticket.feedback.as_deref());
    edit_keyboard(
        &bot,
        &app.send_policy,
        chat,
        message_id,
        markup,
        "attach option buttons",
    )
    .await;
}

/// What a press may do, decided on the server.
enum Press {
    /// Continue the conversation with this ticket's option `index`.
    Continue(OptionTicket, usize),
    /// Change nothing; show this toast.
    Refuse(&'static str),
}

/// Handles a press of an option button; the callback query is answered before anything slow.
pub async fn press(
    app: Arc<App>,
    bot: Bot,
    query: CallbackQuery,
    role: Role,
    update: u32,
    ticket: Option<String>,
    label: String,
) -> anyhow::Result<()> {
    // A press starts a turn: the same limits as a typed message, checked before the option is
    // used up.
    if let Some(refusal) = app
        .limits
        .check(query.from.id.0, role, &app.store)
        .message()
    {
        bot.answer_callback_query(query.id).text(refusal).await?;
        return Ok(());
    }
    let chat = query.message.as_ref().map(|m| m.chat().id);
    let press = match (chat, ticket.as_deref().and_then(parse_ticket)) {
        (Some(chat), Some((id, index))) => decide(&app, chat, id, index, &label)?,
        _ => Press::Refuse(EXPIRED),
    };
    let (ticket, index) = match press {
        Press::Continue(ticket, index) => (ticket, index),
        Press::Refuse(toast) => {
            tracing::info!(user = query.from.id.0, data = ?query.data, toast, "option press refused");
            bot.answer_callback_query(query.id).text(toast).await?;
            return Ok(());
        }
    };
    bot.answer_callback_query(query.id).await?;
    let chat = ChatId(ticket.chat);
    let full_label = ticket.labels[index].clone();
    let mark = keyboards::chosen(&full_label, ticket.feedback.as_deref());
    let message_id = MessageId(ticket.message_id);
    edit_keyboard(
        &bot,
        &app.send_policy,
        chat,
        message_id,
        mark,
        "mark the chosen option",
    )
    .await;
    let input = turn::TurnInput {
        chat,
        user: query.from.id.0,
        update: Some(update),
        text: full_label,
        image: None,
    };
    turn::accept(&app, bot, input).await;
    Ok(())
}

/// `<id>.<index>` as [`keyboards::options`] writes it.
fn parse_ticket(ticket: &str) -> Option<(&str, usize)> {
    let (id, index) = ticket.rsplit_once('.')?;
    Some((id, index.parse().ok()?))
}

/// The server-side checks, then the atomic choice: the ticket exists, belongs to the chat the
/// press came from, was not expired by a /clear, and has this option with this label.
fn decide(app: &App, chat: ChatId, id: &str, index: usize, label: &str) -> anyhow::Result<Press> {
    let Some(ticket) = app.store.ticket(id) else {
        return Ok(Press::Refuse(EXPIRED));
    };
    let live = ticket.chat == chat.0
        && ticket.epoch == app.store.chat_state(chat.0).epoch
        && ticket
            .labels
            .get(index)
            .is_some_and(|full| full.starts_with(label));
    if !live {
        return Ok(Press::Refuse(EXPIRED));
    }
    Ok(match app.store.choose_option(id, index)? {
        Choice::Chosen(ticket) => Press::Continue(ticket, index),
        Choice::AlreadyChosen => Press::Refuse("You already chose an option here"),
        Choice::Unknown => Press::Refuse(EXPIRED),
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

    #[test]
    fn tickets_parse() {
        assert_eq!(parse_ticket("k3.2"), Some(("k3", 2)));
        assert_eq!(parse_ticket("k3"), None);
        assert_eq!(parse_ticket("k3.x"), None);
    }
}
