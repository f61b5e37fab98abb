//! The `tickets` and `feedback` trees: what the buttons under an answer act on. Callback data
//! comes from the client and can be forged, so a button carries only a ticket id, and the id is
//! random (64 bits from the operating system's CSPRNG): a user cannot reach another chat's
//! ticket by counting. Every press is one atomic update that checks the ticket first.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::{Error, Result};
use super::learning::ReflectionJob;
use super::records::{prune_json, read_json, update_json};
use super::tree::Tree;
use crate::ids::{ChatId, TopicId, UpdateId};

const OPTIONS_TREE: &str = db::TICKETS;
const FEEDBACK_TREE: &str = db::FEEDBACK;

/// Length of every ticket id: a random `u64` in base 36, zero-padded (36^13 > 2^64). Callback
/// data has room for it: `__opt__<id>.<index>|` leaves at least 40 of Telegram's 64 bytes for
/// the label.
pub const TICKET_ID_CHARS: usize = crate::ids::BASE36_CHARS;

/// The option buttons under one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptionTicket {
    pub chat: ChatId,
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
    /// Unix seconds; [`super::Db::prune`] removes old tickets. Tickets stored before this field
    /// existed read as 0, the oldest, so the first prune removes them.
    #[serde(default)]
    pub created: i64,
    /// The forum topic of the answer: a press continues that topic's conversation.
    #[serde(default)]
    pub topic: Option<TopicId>,
    /// The update (the press) that chose the option: Telegram re-delivers a press whose turn a
    /// crash kept from the inbox, and that same press may still go on.
    #[serde(default)]
    pub chosen_by: Option<UpdateId>,
}

impl OptionTicket {
    /// Whether option `index` was chosen by press `update` (so this press, re-delivered after
    /// a crash, may go on); never for a press without an update id.
    pub(crate) fn chosen_again_by(&self, index: usize, update: Option<UpdateId>) -> bool {
        update.is_some() && self.chosen == Some(index) && self.chosen_by == update
    }
}

/// What 👍/👎 under one answer act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackTicket {
    pub chat: ChatId,
    /// The lessons injected into that answer's prompt (stored under its first name,
    /// `heuristics`).
    #[serde(rename = "heuristics")]
    pub lessons: Vec<u64>,
    /// The reflection a 👎 starts.
    pub job: ReflectionJob,
    /// `Some(true)` after 👍, `Some(false)` after 👎.
    pub vote: Option<bool>,
    /// How often the vote was changed (a change of mind is allowed a bounded number of times).
    #[serde(default)]
    pub changes: u8,
    /// Unix seconds, as in [`OptionTicket::created`].
    #[serde(default)]
    pub created: i64,
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

/// What pressing 👍 or 👎 did.
#[derive(Debug, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "one is made per press and matched at once; a box would only add an allocation"
)]
pub enum Vote {
    /// This press recorded the vote. The ticket as it was before: its `vote` is `None` for a
    /// first vote, and the replaced vote for a change of mind.
    Recorded(FeedbackTicket),
    /// The same vote again, or a change with no change left: nothing changed.
    AlreadyVoted,
    /// No such ticket in the chat the press came from (unknown, pruned, unreadable or another
    /// chat's): nothing changed. One answer for all, so a press learns nothing about other chats.
    Unknown,
}

/// What a press does to a ticket; decided inside the atomic update, from the ticket it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TicketVerdict {
    First,
    Change,
    AlreadyVoted,
    OtherChat,
}

/// The pure rule behind [`Tickets::vote`]: only the ticket's own chat may vote; a first vote is
/// recorded; a different vote replaces it while fewer than `changes_allowed` changes were made.
fn judge(ticket: &FeedbackTicket, chat: ChatId, up: bool, changes_allowed: u8) -> TicketVerdict {
    match ticket.vote {
        _ if ticket.chat != chat => TicketVerdict::OtherChat,
        None => TicketVerdict::First,
        Some(vote) if vote != up && ticket.changes < changes_allowed => TicketVerdict::Change,
        Some(_) => TicketVerdict::AlreadyVoted,
    }
}

/// Option and feedback tickets (trees `tickets` and `feedback`):
/// [`Store::tickets`], a borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Tickets<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Option and feedback tickets.
    pub fn tickets(&self) -> Tickets<'_> {
        Tickets { store: self }
    }
}

impl Tickets<'_> {
    /// Stores a ticket under a new random id and returns the id.
    pub fn create(&self, ticket: &OptionTicket) -> Result<String> {
        insert_new(&self.store.tickets, &serde_json::to_vec(ticket)?)
    }

    /// Records the message that shows ticket `id`'s options (known only once it is sent, while
    /// the options may go into that very send).
    pub fn set_message(&self, id: &str, message_id: i32) -> Result<()> {
        update_json(
            &self.store.tickets,
            OPTIONS_TREE,
            id.as_bytes(),
            |t: &mut OptionTicket| {
                t.message_id = message_id;
                true
            },
        )?;
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<OptionTicket> {
        read_json(&self.store.tickets, OPTIONS_TREE, id.as_bytes())
    }

    /// Marks option `index` of ticket `id` chosen, atomically: of two concurrent presses, one
    /// wins and the other sees [`Choice::AlreadyChosen`].
    pub(crate) fn choose(
        &self,
        id: &str,
        index: usize,
        update: Option<UpdateId>,
    ) -> Result<Choice> {
        let before = update_json(
            &self.store.tickets,
            OPTIONS_TREE,
            id.as_bytes(),
            |t: &mut OptionTicket| {
                let fresh = t.chosen.is_none();
                if fresh {
                    t.chosen = Some(index);
                    t.chosen_by = update;
                }
                fresh
            },
        )?;
        Ok(match before {
            None => Choice::Unknown,
            Some(ticket) if ticket.chosen_again_by(index, update) => Choice::Chosen(ticket),
            Some(ticket) if ticket.chosen.is_some() => Choice::AlreadyChosen,
            Some(ticket) => Choice::Chosen(ticket),
        })
    }

    /// Stores a feedback ticket under a new random id and returns the id.
    pub fn create_feedback(&self, ticket: &FeedbackTicket) -> Result<String> {
        insert_new(&self.store.feedback, &serde_json::to_vec(ticket)?)
    }

    /// Records 👍 (`up`) or 👎 pressed in `chat` on feedback ticket `id`. The chat check and
    /// the vote are one atomic update: a press from another chat changes nothing, not even
    /// the vote state. A vote can be changed `changes_allowed` times.
    pub fn vote(&self, id: &str, chat: ChatId, up: bool, changes_allowed: u8) -> Result<Vote> {
        let mut verdict = TicketVerdict::OtherChat;
        let before = update_json(
            &self.store.feedback,
            FEEDBACK_TREE,
            id.as_bytes(),
            |t: &mut FeedbackTicket| {
                verdict = judge(t, chat, up, changes_allowed);
                match verdict {
                    TicketVerdict::First => t.vote = Some(up),
                    TicketVerdict::Change => {
                        t.vote = Some(up);
                        t.changes += 1;
                    }
                    TicketVerdict::AlreadyVoted | TicketVerdict::OtherChat => return false,
                }
                true
            },
        )?;
        Ok(match (before, verdict) {
            (Some(ticket), TicketVerdict::First | TicketVerdict::Change) => Vote::Recorded(ticket),
            (Some(_), TicketVerdict::AlreadyVoted) => Vote::AlreadyVoted,
            (None, _) | (Some(_), TicketVerdict::OtherChat) => Vote::Unknown,
        })
    }

    /// The vote recorded on feedback ticket `id` (`None`: none yet, or no such ticket).
    pub(crate) fn feedback_vote(&self, id: &str) -> Option<bool> {
        read_json::<FeedbackTicket>(&self.store.feedback, FEEDBACK_TREE, id.as_bytes())?.vote
    }

    /// Removes option and feedback tickets created before `before` (unix seconds) (unreadable
    /// ones are kept); returns how many of each went.
    pub(super) fn prune(&self, before: i64) -> Result<(usize, usize)> {
        let options = prune_json(&self.store.tickets, OPTIONS_TREE, |t: &OptionTicket| {
            t.created < before
        })?;
        let feedback = prune_json(&self.store.feedback, FEEDBACK_TREE, |t: &FeedbackTicket| {
            t.created < before
        })?;
        Ok((options, feedback))
    }
}

/// Inserts `value` under a new random id; an id already taken (one chance in 2^64 per
/// ticket) is drawn again rather than overwritten.
pub(super) fn insert_new(tree: &Tree, value: &[u8]) -> Result<String> {
    loop {
        let id = random_id()?;
        if tree
            .compare_and_swap(id.as_bytes(), None as Option<&[u8]>, Some(value))?
            .is_ok()
        {
            return Ok(id);
        }
    }
}

/// A new ticket id: 64 bits from the operating system's CSPRNG.
fn random_id() -> Result<String> {
    let n = getrandom::u64().map_err(Error::Random)?;
    Ok(crate::ids::base36(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UpdateId};

    fn option_ticket(created: i64) -> OptionTicket {
        OptionTicket {
            chat: ChatId(1),
            message_id: 5,
            labels: vec!["a".into(), "b".into()],
            epoch: 0,
            chosen: None,
            feedback: None,
            created,
            topic: None,
            chosen_by: None,
        }
    }

    fn feedback_ticket(chat: i64, created: i64) -> FeedbackTicket {
        FeedbackTicket {
            chat: ChatId(chat),
            lessons: vec![3],
            job: super::super::fixtures::job(ChatId(chat), "t"),
            vote: None,
            changes: 0,
            created,
        }
    }

    #[test]
    fn a_ticket_is_chosen_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ticket = option_ticket(1);
        let id = store.tickets().create(&ticket).unwrap();
        let other = store.tickets().create(&ticket).unwrap();
        assert_ne!(id, other);
        assert!(id.len() <= 13);
        assert_eq!(
            store.tickets().choose(&id, 1, Some(UpdateId(7))).unwrap(),
            Choice::Chosen(ticket.clone())
        );
        assert_eq!(
            store.tickets().choose(&id, 0, Some(UpdateId(8))).unwrap(),
            Choice::AlreadyChosen
        );
        // The same press re-delivered after a crash goes on; no other one does.
        let chosen = OptionTicket {
            chosen: Some(1),
            chosen_by: Some(UpdateId(7)),
            ..ticket
        };
        assert_eq!(
            store.tickets().choose(&id, 1, Some(UpdateId(7))).unwrap(),
            Choice::Chosen(chosen)
        );
        assert_eq!(
            store.tickets().choose(&id, 1, None).unwrap(),
            Choice::AlreadyChosen
        );
        assert_eq!(store.tickets().get(&id).unwrap().chosen, Some(1));
        assert_eq!(
            store.tickets().choose("nope", 0, None).unwrap(),
            Choice::Unknown
        );
    }

    #[test]
    fn ticket_ids_are_random_fixed_length_and_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ids: Vec<String> = (0..500)
            .map(|i| {
                if i % 2 == 0 {
                    store.tickets().create(&option_ticket(1)).unwrap()
                } else {
                    store
                        .tickets()
                        .create_feedback(&feedback_ticket(1, 1))
                        .unwrap()
                }
            })
            .collect();
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        for id in &ids {
            assert_eq!(id.len(), TICKET_ID_CHARS, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
            );
        }
        // A counter would give increasing ids, each a neighbour of the last.
        assert!(
            ids.windows(2).any(|w| w[0] > w[1]),
            "ids are in creation order"
        );
        assert!(
            !ids.windows(2).all(|w| w[0][..6] == w[1][..6]),
            "ids share a prefix"
        );
    }

    #[test]
    fn judge_follows_the_vote_rules() {
        struct Case {
            name: &'static str,
            vote: Option<bool>,
            changes: u8,
            chat: i64,
            up: bool,
            changes_allowed: u8,
            verdict: TicketVerdict,
        }
        let cases = [
            Case {
                name: "first vote",
                vote: None,
                changes: 0,
                chat: 1,
                up: true,
                changes_allowed: 0,
                verdict: TicketVerdict::First,
            },
            Case {
                name: "another chat, even on a fresh ticket",
                vote: None,
                changes: 0,
                chat: 2,
                up: true,
                changes_allowed: 1,
                verdict: TicketVerdict::OtherChat,
            },
            Case {
                name: "the same vote again",
                vote: Some(true),
                changes: 0,
                chat: 1,
                up: true,
                changes_allowed: 1,
                verdict: TicketVerdict::AlreadyVoted,
            },
            Case {
                name: "a change of mind, when changes are not allowed",
                vote: Some(true),
                changes: 0,
                chat: 1,
                up: false,
                changes_allowed: 0,
                verdict: TicketVerdict::AlreadyVoted,
            },
            Case {
                name: "a change of mind, once",
                vote: Some(true),
                changes: 0,
                chat: 1,
                up: false,
                changes_allowed: 1,
                verdict: TicketVerdict::Change,
            },
            Case {
                name: "a second change of mind",
                vote: Some(false),
                changes: 1,
                chat: 1,
                up: true,
                changes_allowed: 1,
                verdict: TicketVerdict::AlreadyVoted,
            },
        ];
        for case in cases {
            let ticket = FeedbackTicket {
                vote: case.vote,
                changes: case.changes,
                ..feedback_ticket(1, 1)
            };
            assert_eq!(
                judge(&ticket, ChatId(case.chat), case.up, case.changes_allowed),
                case.verdict,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn a_forged_vote_from_another_chat_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .tickets()
            .create_feedback(&feedback_ticket(1, 1))
            .unwrap();
        let stored = store.feedback.get(&id).unwrap();
        assert_eq!(
            store.tickets().vote(&id, ChatId(2), false, 1).unwrap(),
            Vote::Unknown
        );
        assert_eq!(
            store.feedback.get(&id).unwrap(),
            stored,
            "not even the vote state"
        );
        assert_eq!(
            store
                .tickets()
                .vote("0000000000000", ChatId(1), true, 1)
                .unwrap(),
            Vote::Unknown
        );
        // The ticket's own chat can still vote, once.
        assert_eq!(
            store.tickets().vote(&id, ChatId(1), true, 0).unwrap(),
            Vote::Recorded(feedback_ticket(1, 1))
        );
        assert_eq!(
            store.tickets().vote(&id, ChatId(2), false, 1).unwrap(),
            Vote::Unknown
        );
        assert_eq!(
            store.tickets().vote(&id, ChatId(1), false, 0).unwrap(),
            Vote::AlreadyVoted
        );
    }

    #[test]
    fn a_vote_can_be_changed_as_often_as_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store
            .tickets()
            .create_feedback(&feedback_ticket(1, 1))
            .unwrap();
        assert!(matches!(
            store.tickets().vote(&id, ChatId(1), true, 1).unwrap(),
            Vote::Recorded(FeedbackTicket { vote: None, .. })
        ));
        assert!(matches!(
            store.tickets().vote(&id, ChatId(1), false, 1).unwrap(),
            Vote::Recorded(FeedbackTicket {
                vote: Some(true),
                changes: 0,
                ..
            })
        ));
        assert_eq!(
            store.tickets().vote(&id, ChatId(1), true, 1).unwrap(),
            Vote::AlreadyVoted
        );
        let stored: FeedbackTicket =
            serde_json::from_slice(&store.feedback.get(&id).unwrap().unwrap()).unwrap();
        assert_eq!((stored.vote, stored.changes), (Some(false), 1));
    }

    #[test]
    fn concurrent_votes_record_exactly_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for _ in 0..50 {
            let id = store
                .tickets()
                .create_feedback(&feedback_ticket(1, 1))
                .unwrap();
            let barrier = std::sync::Barrier::new(4);
            let recorded = std::thread::scope(|s| {
                let presses: Vec<_> = (0..4)
                    .map(|i| {
                        let (store, id, barrier) = (&store, &id, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            store.tickets().vote(id, ChatId(1), i % 2 == 0, 0).unwrap()
                        })
                    })
                    .collect();
                presses
                    .into_iter()
                    .map(|p| p.join().unwrap())
                    .filter(|vote| matches!(vote, Vote::Recorded(_)))
                    .count()
            });
            assert_eq!(recorded, 1);
        }
    }

    #[test]
    fn tickets_from_before_created_existed_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let old = r#"{"chat":1,"message_id":5,"labels":["a"],"epoch":0,"chosen":null}"#;
        store.tickets.insert("old", old).unwrap();
        assert_eq!(store.tickets().get("old").unwrap().created, 0);
        let old = r#"{"chat":1,"heuristics":[],"job":{"chat":1,"model":"m","task":"t",
            "tools":[],"outcome":"success"},"vote":null}"#;
        store.feedback.insert("old", old).unwrap();
        assert!(matches!(
            store.tickets().vote("old", ChatId(1), true, 0).unwrap(),
            Vote::Recorded(_)
        ));
    }
}
