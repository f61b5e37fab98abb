//! The `retries` tree: what a 🔁 Retry button under a failed answer re-runs. The button carries
//! only a random id (as option tickets do, so a forged press cannot reach another chat's
//! message); the record holds the message as the user sent it, and whether it was retried.
//! Claiming a retry is one atomic update, so two presses at once run the message once.

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::Result;
use super::records::{prune_json, update_json};
use super::request::TurnRequest;
use super::tickets::insert_new;
use crate::ids::{ChatId, UpdateId, UserId};

const TREE: &str = db::RETRIES;

/// A failed turn's message, kept for one retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryTicket {
    /// The message as the turn got it (a typed text, or a pressed option's full label), and
    /// the forum topic it came from: the retry answers there, even when Telegram no longer
    /// shows which topic the pressed message is in.
    #[serde(flatten)]
    pub request: TurnRequest,
    /// Set by the press that claimed the retry.
    pub used: bool,
    /// The update (the press) that claimed it: the same press re-delivered after a crash that
    /// came before its turn reached the inbox may still go on.
    #[serde(default)]
    pub claimed_by: Option<UpdateId>,
    /// Unix seconds.
    pub created: i64,
}

/// What pressing 🔁 Retry did.
#[derive(Debug, PartialEq)]
pub enum RetryClaim {
    /// This press claimed the retry; the message to run again (boxed: it is far larger than
    /// the other outcomes).
    Claimed(Box<RetryTicket>),
    /// An earlier press claimed it.
    AlreadyUsed,
    /// No such retry in the chat the press came from, or it is too old: nothing runs. One
    /// answer for all, so a press learns nothing about other chats.
    Expired,
    /// Another member of the chat pressed it: a message is retried only by its sender, so
    /// nobody runs someone else's text under their own role and budget.
    NotYours,
}

/// What a press does to a retry; decided inside the atomic update, from the record it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryVerdict {
    Claim,
    Used,
    Expired,
    NotYours,
}

/// The pure rule behind [`Retries::claim`]: only the message's sender, in the retry's own
/// chat, may claim it, while it was created at or after `oldest` (unix seconds), and only once
/// (the claiming press `update` itself, re-delivered, claims it again).
fn judge(
    ticket: &RetryTicket,
    chat: ChatId,
    user: UserId,
    oldest: i64,
    update: Option<UpdateId>,
) -> RetryVerdict {
    if ticket.request.chat != chat || ticket.created < oldest {
        RetryVerdict::Expired
    } else if ticket.request.user != user {
        RetryVerdict::NotYours
    } else if ticket.used && !(update.is_some() && ticket.claimed_by == update) {
        RetryVerdict::Used
    } else {
        RetryVerdict::Claim
    }
}

/// The 🔁 Retry tickets (tree `retries`): [`Store::retries`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Retries<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// The 🔁 Retry tickets.
    pub fn retries(&self) -> Retries<'_> {
        Retries { store: self }
    }
}

impl Retries<'_> {
    /// Stores a retry under a new random id and returns the id.
    pub fn create(&self, ticket: &RetryTicket) -> Result<String> {
        insert_new(&self.store.retries, &serde_json::to_vec(ticket)?)
    }

    /// Claims retry `id` for `user`'s press `update` in `chat`, if it was created at or after
    /// `oldest`. The check and the claim are one atomic update: of two concurrent presses, one
    /// gets the message and the other [`RetryClaim::AlreadyUsed`]; the claiming press itself,
    /// re-delivered, gets the message again (the inbox keeps it from running twice).
    pub fn claim(
        &self,
        id: &str,
        chat: ChatId,
        user: UserId,
        oldest: i64,
        update: Option<UpdateId>,
    ) -> Result<RetryClaim> {
        let mut verdict = RetryVerdict::Expired;
        let before = update_json(
            &self.store.retries,
            TREE,
            id.as_bytes(),
            |t: &mut RetryTicket| {
                verdict = judge(t, chat, user, oldest, update);
                if verdict != RetryVerdict::Claim || t.used {
                    return false;
                }
                t.used = true;
                t.claimed_by = update;
                true
            },
        )?;
        Ok(match (before, verdict) {
            (Some(ticket), RetryVerdict::Claim) => RetryClaim::Claimed(Box::new(ticket)),
            (Some(_), RetryVerdict::Used) => RetryClaim::AlreadyUsed,
            (Some(_), RetryVerdict::NotYours) => RetryClaim::NotYours,
            _ => RetryClaim::Expired,
        })
    }

    /// Retry tickets not pressed yet (unreadable ones are not counted).
    pub(crate) fn unused(&self) -> usize {
        self.store
            .retries
            .iter()
            .values()
            .filter_map(Result::ok)
            .filter_map(|value| serde_json::from_slice::<RetryTicket>(&value).ok())
            .filter(|ticket| !ticket.used)
            .count()
    }

    /// Removes retries created before `before` (unix seconds); unreadable ones are kept.
    pub(super) fn prune(&self, before: i64) -> Result<usize> {
        prune_json(&self.store.retries, TREE, |t: &RetryTicket| {
            t.created < before
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(chat: i64, created: i64, used: bool) -> RetryTicket {
        RetryTicket {
            request: TurnRequest::new(ChatId(chat), UserId(2), "hello"),
            used,
            claimed_by: None,
            created,
        }
    }

    #[test]
    fn a_retry_is_claimed_once_in_its_own_chat_while_fresh() {
        struct Case {
            name: &'static str,
            ticket: RetryTicket,
            chat: i64,
            user: u64,
            oldest: i64,
            verdict: RetryVerdict,
        }
        let cases = [
            Case {
                name: "fresh, own chat",
                ticket: ticket(1, 100, false),
                chat: 1,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Claim,
            },
            Case {
                name: "created exactly at the limit",
                ticket: ticket(1, 50, false),
                chat: 1,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Claim,
            },
            Case {
                name: "already used",
                ticket: ticket(1, 100, true),
                chat: 1,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Used,
            },
            Case {
                name: "too old",
                ticket: ticket(1, 10, false),
                chat: 1,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Expired,
            },
            Case {
                name: "another chat's",
                ticket: ticket(1, 100, false),
                chat: 7,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Expired,
            },
            Case {
                name: "another member's message",
                ticket: ticket(1, 100, false),
                chat: 1,
                user: 3,
                oldest: 50,
                verdict: RetryVerdict::NotYours,
            },
            Case {
                name: "another chat's, used: says nothing about it",
                ticket: ticket(1, 100, true),
                chat: 7,
                user: 2,
                oldest: 50,
                verdict: RetryVerdict::Expired,
            },
        ];
        for case in cases {
            assert_eq!(
                judge(
                    &case.ticket,
                    ChatId(case.chat),
                    UserId(case.user),
                    case.oldest,
                    None
                ),
                case.verdict,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn claiming_marks_the_record_and_a_second_claim_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let fresh = ticket(1, 100, false);
        let id = store.retries().create(&fresh).unwrap();
        assert_eq!(
            store
                .retries()
                .claim(&id, ChatId(7), UserId(2), 0, None)
                .unwrap(),
            RetryClaim::Expired,
            "another chat claims nothing"
        );
        assert_eq!(
            store
                .retries()
                .claim(&id, ChatId(1), UserId(3), 0, None)
                .unwrap(),
            RetryClaim::NotYours,
            "another member claims nothing"
        );
        assert_eq!(
            store
                .retries()
                .claim(&id, ChatId(1), UserId(2), 0, None)
                .unwrap(),
            RetryClaim::Claimed(Box::new(fresh.clone()))
        );
        assert_eq!(
            store
                .retries()
                .claim(&id, ChatId(1), UserId(2), 0, None)
                .unwrap(),
            RetryClaim::AlreadyUsed
        );
        assert_eq!(
            store
                .retries()
                .claim(&id, ChatId(1), UserId(2), 0, Some(UpdateId(5)))
                .unwrap(),
            RetryClaim::AlreadyUsed,
            "a press that did not claim it claims nothing"
        );
        let other = store.retries().create(&fresh).unwrap();
        let claimed = RetryTicket {
            used: true,
            claimed_by: Some(UpdateId(5)),
            ..fresh.clone()
        };
        assert_eq!(
            store
                .retries()
                .claim(&other, ChatId(1), UserId(2), 0, Some(UpdateId(5)))
                .unwrap(),
            RetryClaim::Claimed(Box::new(fresh.clone()))
        );
        assert_eq!(
            store
                .retries()
                .claim(&other, ChatId(1), UserId(2), 0, Some(UpdateId(5)))
                .unwrap(),
            RetryClaim::Claimed(Box::new(claimed)),
            "the claiming press, re-delivered after a crash, goes on"
        );
        assert_eq!(
            store
                .retries()
                .claim(&other, ChatId(1), UserId(2), 0, Some(UpdateId(6)))
                .unwrap(),
            RetryClaim::AlreadyUsed
        );
        assert_eq!(
            store
                .retries()
                .claim("0000000000000", ChatId(1), UserId(2), 0, None)
                .unwrap(),
            RetryClaim::Expired
        );
        store.retries.insert("garbage", "{").unwrap();
        assert_eq!(
            store
                .retries()
                .claim("garbage", ChatId(1), UserId(2), 0, None)
                .unwrap(),
            RetryClaim::Expired
        );
        assert_eq!(
            store.retries().prune(50).unwrap(),
            0,
            "an unreadable one is kept"
        );
        assert_eq!(store.retries().prune(200).unwrap(), 2, "the two retries");
        assert!(store.retries.contains_key("garbage").unwrap());
    }

    #[test]
    fn of_many_presses_at_once_exactly_one_claims() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let id = store.retries().create(&ticket(1, 100, false)).unwrap();
        let claims: Vec<RetryClaim> = std::thread::scope(|scope| {
            let presses: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        store
                            .retries()
                            .claim(&id, ChatId(1), UserId(2), 0, None)
                            .unwrap()
                    })
                })
                .collect();
            presses.into_iter().map(|p| p.join().unwrap()).collect()
        });
        let claimed = claims
            .iter()
            .filter(|c| matches!(c, RetryClaim::Claimed(_)))
            .count();
        assert_eq!(claimed, 1, "{claims:?}");
        assert!(
            claims
                .iter()
                .all(|c| matches!(c, RetryClaim::Claimed(_) | RetryClaim::AlreadyUsed))
        );
    }
}
