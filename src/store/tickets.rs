//! The `tickets` and `feedback` trees: what the buttons under an answer act on. Callback data
//! comes from the client and can be forged, so a button carries only a ticket id, and every
//! press is one atomic update that checks the ticket first.

use serde::{Deserialize, Serialize};

use super::learning::ReflectionJob;
use super::{Store, read_json, update_json};

/// The trees' names in sled.
pub(super) const OPTIONS_TREE: &str = "tickets";
pub(super) const FEEDBACK_TREE: &str = "feedback";

/// The option buttons under one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionTicket {
    pub chat: i64,
    /// The message that carries the keyboard.
    pub message_id: i32,
    /// The full labels, in button order.
    pub labels: Vec<String>,
    /// The chat's clear epoch at creation: a clear expires the ticket.
    pub epoch: u64,
    /// The option pressed, once one was.
    pub chosen: Option<usize>,
    /// The answer's feedback ticket, whose 👍/👎 row stays beside the options.
    #[serde(default)]
    pub feedback: Option<String>,
}

/// What 👍/👎 under one answer act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackTicket {
    pub chat: i64,
    /// The heuristics injected into that answer's prompt.
    pub heuristics: Vec<u64>,
    /// The reflection a 👎 starts.
    pub job: ReflectionJob,
    /// `Some(true)` after 👍, `Some(false)` after 👎.
    pub vote: Option<bool>,
}

/// What pressing an option did.
#[derive(Debug, PartialEq)]
pub enum Choice {
    /// This press chose the option; the ticket as it was before.
    Chosen(OptionTicket),
    /// An option of this ticket was chosen before.
    AlreadyChosen,
    /// No such ticket.
    Unknown,
}

impl Store {
    /// Stores a ticket and returns its short id (base 36 of sled's monotonic id generator).
    pub fn create_ticket(&self, ticket: &OptionTicket) -> anyhow::Result<String> {
        let id = base36(self.db.generate_id()?);
        self.tickets
            .insert(id.as_bytes(), serde_json::to_vec(ticket)?)?;
        Ok(id)
    }

    pub fn ticket(&self, id: &str) -> Option<OptionTicket> {
        read_json(&self.tickets, OPTIONS_TREE, id.as_bytes())
    }

    /// Marks option `index` of ticket `id` chosen, atomically: of two concurrent presses, one
    /// wins and the other sees [`Choice::AlreadyChosen`].
    pub fn choose_option(&self, id: &str, index: usize) -> anyhow::Result<Choice> {
        let before = update_json(
            &self.tickets,
            OPTIONS_TREE,
            id.as_bytes(),
            |t: &mut OptionTicket| {
                let fresh = t.chosen.is_none();
                if fresh {
                    t.chosen = Some(index);
                }
                fresh
            },
        )?;
        Ok(match before {
            None => Choice::Unknown,
            Some(ticket) if ticket.chosen.is_some() => Choice::AlreadyChosen,
            Some(ticket) => Choice::Chosen(ticket),
        })
    }

    pub fn create_feedback(&self, ticket: &FeedbackTicket) -> anyhow::Result<String> {
        let id = base36(self.db.generate_id()?);
        self.feedback
            .insert(id.as_bytes(), serde_json::to_vec(ticket)?)?;
        Ok(id)
    }

    /// Records a vote once; returns the ticket as it was (its `vote` set means: already voted).
    pub fn vote(&self, id: &str, up: bool) -> anyhow::Result<Option<FeedbackTicket>> {
        update_json(
            &self.feedback,
            FEEDBACK_TREE,
            id.as_bytes(),
            |t: &mut FeedbackTicket| {
                let fresh = t.vote.is_none();
                if fresh {
                    t.vote = Some(up);
                }
                fresh
            },
        )
    }
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_chosen_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ticket = OptionTicket {
            chat: 1,
            message_id: 5,
            labels: vec!["a".into(), "b".into()],
            epoch: 0,
            chosen: None,
            feedback: None,
        };
        let id = store.create_ticket(&ticket).unwrap();
        let other = store.create_ticket(&ticket).unwrap();
        assert_ne!(id, other);
        assert!(id.len() <= 13);
        assert_eq!(store.choose_option(&id, 1).unwrap(), Choice::Chosen(ticket));
        assert_eq!(store.choose_option(&id, 0).unwrap(), Choice::AlreadyChosen);
        assert_eq!(store.ticket(&id).unwrap().chosen, Some(1));
        assert_eq!(store.choose_option("nope", 0).unwrap(), Choice::Unknown);
    }
}
