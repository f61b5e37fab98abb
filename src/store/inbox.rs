//! The `inbox` tree: every update that starts a turn, recorded before the turn starts, and how
//! far it got, so a crash loses no message and a re-delivered update is not answered twice.
//!
//! # Update ids are not forever
//! Records are keyed by Telegram's `update_id`, which is unique only for a while: after a week
//! without updates, Telegram may go on from a random id, so a new update can carry the id of
//! one the inbox still keeps (finished records stay for `retention_days`). A re-delivery, on
//! the other hand, comes within a day of the first delivery: Telegram keeps an update no
//! longer than 24 hours. So an update whose id is on record counts as seen only if that record
//! was received within [`REDELIVERY_WINDOW`] before it ([`arrival`]); an older finished record
//! is a reused id's predecessor and makes way for it. The turns of the history name their
//! update too, so a record also keeps `first_seq`, where its own turn can start: recovery never
//! takes an older turn under the same id for its answer.
//!
//! ```
//! use heurist::store::{Arrival, arrival, InboxState};
//! let day = 24 * 3600;
//! let on_record = |state, received| Some(Some((state, received)));
//! assert_eq!(arrival(on_record(InboxState::Answered, 0), 3600), Arrival::Redelivered);
//! assert_eq!(arrival(on_record(InboxState::Answered, 0), 8 * day), Arrival::Reused);
//! assert_eq!(arrival(on_record(InboxState::Pending, 0), 8 * day), Arrival::Unrecorded);
//! assert_eq!(arrival(None, 0), Arrival::New);
//! ```

use serde::{Deserialize, Serialize};

use super::db::{self, Store};
use super::error::Result;
use super::inbox_state::{InboxEvent, InboxState, InboxVerdict, Progress, step};
use super::records::{decode_json, prune_json, read_json, update_json};
use super::request::TurnRequest;
use crate::conversation::Conversation;
use crate::ids::UpdateId;

const TREE: &str = db::INBOX;

/// How long after an update's first delivery a second one with its id counts as a
/// re-delivery: more than the day Telegram keeps an update, less than the week of silence after
/// which it may reuse ids, with a margin for the clock either way.
pub const REDELIVERY_WINDOW: i64 = 3 * 24 * 3600;

/// What an arriving update is, given the record its id already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// No record: it is recorded.
    New,
    /// Recorded within [`REDELIVERY_WINDOW`]: the same update again, not to be run twice.
    Redelivered,
    /// A finished record from before the window: the id was reused, and the new update
    /// replaces the record.
    Reused,
    /// A record that cannot be read, or one from before the window that is not finished: it is
    /// neither the same update nor one to overwrite, so it stays, and the new update is
    /// answered without a record of its own (logged).
    Unrecorded,
}

/// Decides an arrival at `received` (unix seconds) from the record its id has: `None` for
/// none, `Some(None)` for an unreadable one, else its state and when it was received.
pub fn arrival(on_record: Option<Option<(InboxState, i64)>>, received: i64) -> Arrival {
    match on_record {
        None => Arrival::New,
        Some(None) => Arrival::Unrecorded,
        Some(Some((_, then))) if received - then < REDELIVERY_WINDOW => Arrival::Redelivered,
        Some(Some((state, _))) if state.is_done() => Arrival::Reused,
        Some(Some(_)) => Arrival::Unrecorded,
    }
}

/// An update that starts a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxEntry {
    /// What the turn answers, who asked it, where (its fields at the record's top level).
    #[serde(flatten)]
    pub request: TurnRequest,
    pub state: InboxState,
    /// Unix seconds.
    pub received: i64,
    /// The later messages of a visible answer too long for one (the first is in
    /// [`InboxState::Visible`]), so a resumed answer is edited into all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<i32>,
    /// The conversation's next turn number when the update was accepted (set by
    /// [`Inbox::accept`]): its own turn is stored at or after it, and a turn before it
    /// that names the same update id is a reused id's predecessor's (0 in older records).
    #[serde(default)]
    pub first_seq: u64,
    /// How many times recovery started the update again (see `inbox_state`'s poison updates):
    /// written by a start recovery makes, before that start runs, never on a turn's first run
    /// (its flushed record stands for that start). Left out when 0, so a record without it
    /// (every record of earlier versions) reads as never restarted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
}

/// `serde`'s test for leaving `restarts` out.
fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl InboxEntry {
    /// `request`, just received (at `received`, unix seconds): pending, nothing shown yet.
    pub fn pending(request: TurnRequest, received: i64) -> Self {
        Self {
            request,
            state: InboxState::Pending,
            received,
            parts: Vec::new(),
            first_seq: 0,
            restarts: 0,
        }
    }

    /// The part of the record the state machine changes.
    pub(crate) fn progress(&self) -> Progress {
        Progress {
            state: self.state,
            parts: self.parts.clone(),
            restarts: self.restarts,
        }
    }
}

/// The updates that start turns (tree `inbox`): [`Store::inbox`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Inbox<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// The updates that start turns, and how far each got.
    pub fn inbox(&self) -> Inbox<'_> {
        Inbox { store: self }
    }
}

impl Inbox<'_> {
    /// Records an update before its turn starts (see the module doc for what its id on record
    /// means). [`Arrival::Redelivered`]: Telegram sent it again after a crash, and it must not
    /// be processed again; [`Arrival::Unrecorded`]: its turn runs without an inbox record.
    pub fn accept(&self, update: UpdateId, entry: &InboxEntry) -> Result<Arrival> {
        let key = update.0.to_be_bytes();
        let chat = entry.request.conversation();
        let entry = InboxEntry {
            first_seq: self
                .store
                .chats()
                .state(chat)
                .map_or(0, |state| state.next_seq),
            ..entry.clone()
        };
        let bytes = serde_json::to_vec(&entry)?;
        loop {
            let old = self.store.inbox.get(key)?;
            let on_record = old.as_ref().map(|old| {
                decode_json::<InboxEntry>(TREE, &key, old).map(|old| (old.state, old.received))
            });
            let seen = arrival(on_record, entry.received);
            match seen {
                Arrival::Redelivered => return Ok(seen),
                Arrival::Unrecorded => {
                    tracing::warn!(
                        %update,
                        "an update's id has a record that is unreadable or unfinished: \
                         keeping it, and answering the update without a record"
                    );
                    return Ok(seen);
                }
                Arrival::Reused => {
                    tracing::info!(%update, "an update id came again after a week: a new update");
                }
                Arrival::New => {}
            }
            // Another writer came first: decide again on what it wrote.
            let swapped = self
                .store
                .inbox
                .compare_and_swap(key, old, Some(bytes.as_slice()))?;
            if swapped.is_ok() {
                return Ok(seen);
            }
        }
    }

    /// Where the turn of `update` in `chat` can start in the history (see
    /// [`InboxEntry::first_seq`]); 0 when the update has no readable record of `chat`.
    pub(super) fn first_seq(&self, update: UpdateId, chat: Conversation) -> u64 {
        let key = update.0.to_be_bytes();
        read_json::<InboxEntry>(&self.store.inbox, TREE, &key)
            .filter(|e| e.request.conversation() == chat)
            .map_or(0, |e| e.first_seq)
    }

    /// Applies `event` to the update's record, atomically, as [`step`] decides; a missing or
    /// unreadable record is left as it is (and [`InboxVerdict::Keep`]).
    pub(crate) fn apply(&self, update: UpdateId, event: InboxEvent) -> Result<InboxVerdict> {
        let mut verdict = InboxVerdict::Keep;
        update_json(
            &self.store.inbox,
            TREE,
            &update.0.to_be_bytes(),
            |e: &mut InboxEntry| {
                let now = Progress {
                    state: e.state,
                    parts: std::mem::take(&mut e.parts),
                    restarts: e.restarts,
                };
                let (next, said) = step(&now, event);
                verdict = said;
                let write = said == InboxVerdict::Write;
                let Progress {
                    state,
                    parts,
                    restarts,
                } = if write { next } else { now };
                (e.state, e.parts, e.restarts) = (state, parts, restarts);
                write
            },
        )?;
        Ok(verdict)
    }

    /// Moves an update to `state`, by the event that leads there ([`InboxEvent::Accept`] to
    /// `Pending`, [`InboxEvent::Store`] to `Stored`, which leaves a visible answer visible).
    pub fn set_state(&self, update: UpdateId, state: InboxState) -> Result<()> {
        let event = match state {
            InboxState::Pending => InboxEvent::Accept,
            InboxState::Stored => InboxEvent::Store,
            InboxState::Visible { message } => InboxEvent::Show(message),
            InboxState::Answered => InboxEvent::Answer,
            InboxState::Failed => InboxEvent::Fail,
        };
        self.apply(update, event).map(drop)
    }

    /// Replaces the request of update `update`'s record by `request`, the same request with its
    /// attachment read (a recording's transcript, a document's text), so a turn resumed after
    /// a crash neither reads the file again nor shows its transcript twice. A missing or
    /// unreadable record is left as it is.
    pub(crate) fn replace_request(&self, update: UpdateId, request: &TurnRequest) -> Result<()> {
        update_json(
            &self.store.inbox,
            TREE,
            &update.0.to_be_bytes(),
            |e: &mut InboxEntry| {
                e.request = request.clone();
                true
            },
        )
        .map(drop)
    }

    /// Marks an update's turn stored, unless its answer is already visible (which says more).
    pub(crate) fn mark_stored(&self, update: UpdateId) -> Result<()> {
        self.apply(update, InboxEvent::Store).map(drop)
    }

    /// The message that shows an update's answer, if it was recorded as visible in one.
    pub(crate) fn visible_message(&self, update: UpdateId) -> Option<i32> {
        self.visible_messages(update).first().copied()
    }

    /// Every message that shows an update's answer, first to last, as recorded; empty if none.
    pub(crate) fn visible_messages(&self, update: UpdateId) -> Vec<i32> {
        let key = update.0.to_be_bytes();
        read_json::<InboxEntry>(&self.store.inbox, TREE, &key)
            .map_or_else(Vec::new, |e| e.progress().shown_in())
    }

    /// Counts a start recovery makes of update `update` ([`InboxEvent::Start`]), before it runs;
    /// whether it was counted ([`InboxVerdict::Keep`]: the update is done, or its record missing or
    /// unreadable, and it is not to be started). The caller flushes before the start runs.
    pub(crate) fn count_start(&self, update: UpdateId) -> Result<bool> {
        Ok(self.apply(update, InboxEvent::Start)? == InboxVerdict::Write)
    }

    /// Records `message` as a later message of update `update`'s visible answer.
    pub(crate) fn add_visible_part(&self, update: UpdateId, message: i32) -> Result<()> {
        self.apply(update, InboxEvent::ShowPart(message)).map(drop)
    }

    /// The record of update `update`, done or not, if it is there and readable.
    #[cfg(test)]
    pub(crate) fn entry(&self, update: UpdateId) -> Option<InboxEntry> {
        read_json(&self.store.inbox, TREE, &update.0.to_be_bytes())
    }

    /// Accepted updates whose answer was not (known to be) sent: what a crash interrupted.
    pub fn unfinished(&self) -> Vec<(UpdateId, InboxEntry)> {
        self.store
            .inbox
            .iter()
            .filter_map(|entry| {
                let (key, value) = entry.ok()?;
                let update = UpdateId(u32::from_be_bytes(key.as_ref().try_into().ok()?));
                decode_json::<InboxEntry>(TREE, &key, &value)
                    .filter(|e| !e.state.is_done())
                    .map(|e| (update, e))
            })
            .collect()
    }

    /// Forgets finished (answered or failed) updates received before `before` (unix
    /// seconds); unreadable ones are kept.
    pub(crate) fn prune(&self, before: i64) -> Result<usize> {
        prune_json(&self.store.inbox, TREE, |e: &InboxEntry| {
            e.state.is_done() && e.received < before
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UpdateId, UserId};
    use crate::store::fixtures::conversation;

    fn entry(state: InboxState, received: i64) -> InboxEntry {
        InboxEntry {
            state,
            ..InboxEntry::pending(TurnRequest::new(ChatId(1), UserId(2), "hi"), received)
        }
    }

    #[test]
    fn an_update_is_accepted_once_and_tracked_to_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let pending = entry(InboxState::Pending, 5);
        assert_eq!(
            store.inbox().accept(UpdateId(1), &pending).unwrap(),
            Arrival::New
        );
        assert_eq!(
            store.inbox().accept(UpdateId(1), &pending).unwrap(),
            Arrival::Redelivered
        );
        assert_eq!(
            store.inbox().unfinished(),
            vec![(UpdateId(1), pending.clone())]
        );
        store
            .inbox()
            .set_state(UpdateId(1), InboxState::Answered)
            .unwrap();
        assert!(store.inbox().unfinished().is_empty());
        assert_eq!(
            store.inbox().accept(UpdateId(2), &pending).unwrap(),
            Arrival::New
        );
        store
            .inbox()
            .set_state(UpdateId(2), InboxState::Failed)
            .unwrap();
        assert!(
            store.inbox().unfinished().is_empty(),
            "a failed turn is not resumed"
        );
    }

    #[test]
    fn arrivals_tell_a_redelivery_from_a_reused_id() {
        struct Case {
            name: &'static str,
            on_record: Option<Option<(InboxState, i64)>>,
            received: i64,
            arrival: Arrival,
        }
        let day = 24 * 3600;
        let cases = [
            Case {
                name: "no record",
                on_record: None,
                received: 0,
                arrival: Arrival::New,
            },
            Case {
                name: "a re-delivery after a crash, within Telegram's day",
                on_record: Some(Some((InboxState::Pending, 0))),
                received: day,
                arrival: Arrival::Redelivered,
            },
            Case {
                name: "an answered update re-delivered",
                on_record: Some(Some((InboxState::Answered, 0))),
                received: 60,
                arrival: Arrival::Redelivered,
            },
            Case {
                name: "a clock that went back",
                on_record: Some(Some((InboxState::Answered, 100))),
                received: 50,
                arrival: Arrival::Redelivered,
            },
            Case {
                name: "an id reused after a week of silence",
                on_record: Some(Some((InboxState::Answered, 0))),
                received: 8 * day,
                arrival: Arrival::Reused,
            },
            Case {
                name: "a failed one's id reused",
                on_record: Some(Some((InboxState::Failed, 0))),
                received: 8 * day,
                arrival: Arrival::Reused,
            },
            Case {
                name: "an unfinished record under a reused id is kept",
                on_record: Some(Some((InboxState::Stored, 0))),
                received: 8 * day,
                arrival: Arrival::Unrecorded,
            },
            Case {
                name: "an unreadable record is kept",
                on_record: Some(None),
                received: 0,
                arrival: Arrival::Unrecorded,
            },
        ];
        for case in cases {
            assert_eq!(
                arrival(case.on_record, case.received),
                case.arrival,
                "case {}",
                case.name
            );
        }
    }

    /// Telegram restarts update ids after a week of silence: a new message with the id of one
    /// answered weeks ago is accepted (not dropped as "already accepted"), and recovery finds
    /// its own turn's answer, never the old turn's under the same id.
    #[test]
    fn a_reused_update_id_is_a_new_update_with_its_own_answer() {
        use crate::llm::ChatMessage;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let day = 24 * 3600;
        let mut old = entry(InboxState::Pending, 1_000);
        old.request.text = "old".into();
        assert_eq!(
            store.inbox().accept(UpdateId(7), &old).unwrap(),
            Arrival::New
        );
        let answer = |text: &str| [ChatMessage::user("q"), ChatMessage::assistant(text)];
        assert!(
            store
                .history()
                .append(
                    conversation(1),
                    0,
                    Some(UpdateId(7)),
                    &answer("old answer"),
                    &Default::default()
                )
                .unwrap()
        );
        store
            .inbox()
            .set_state(UpdateId(7), InboxState::Answered)
            .unwrap();

        let mut new = entry(InboxState::Pending, 1_000 + 8 * day);
        new.request.text = "new".into();
        assert_eq!(
            store.inbox().accept(UpdateId(7), &new).unwrap(),
            Arrival::Reused
        );
        let unfinished = store.inbox().unfinished();
        assert_eq!(unfinished.len(), 1);
        assert_eq!(unfinished[0].1.request.text, "new");
        assert_eq!(
            store.history().stored_answer(conversation(1), UpdateId(7)),
            None,
            "the old turn is not the new update's answer"
        );
        assert_eq!(
            store.inbox().accept(UpdateId(7), &new).unwrap(),
            Arrival::Redelivered,
            "the new one, re-delivered, is seen"
        );
        assert!(
            store
                .history()
                .append(
                    conversation(1),
                    0,
                    Some(UpdateId(7)),
                    &answer("new answer"),
                    &Default::default()
                )
                .unwrap()
        );
        assert_eq!(
            store
                .history()
                .stored_answer(conversation(1), UpdateId(7))
                .as_deref(),
            Some("new answer")
        );
    }

    #[test]
    fn a_record_that_is_unreadable_or_unfinished_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let late = entry(InboxState::Pending, 30 * 24 * 3600);
        store.inbox.insert(1u32.to_be_bytes(), &b"{"[..]).unwrap();
        assert_eq!(
            store.inbox().accept(UpdateId(1), &late).unwrap(),
            Arrival::Unrecorded
        );
        assert_eq!(
            store.inbox.get(1u32.to_be_bytes()).unwrap().as_deref(),
            Some(&b"{"[..])
        );
        let stuck = entry(InboxState::Stored, 5);
        store.inbox().accept(UpdateId(2), &stuck).unwrap();
        assert_eq!(
            store.inbox().accept(UpdateId(2), &late).unwrap(),
            Arrival::Unrecorded
        );
        assert_eq!(store.inbox().unfinished(), vec![(UpdateId(2), stuck)]);
    }

    #[test]
    fn a_visible_answer_is_not_downgraded_to_stored() {
        struct Case {
            name: &'static str,
            before: InboxState,
            after: InboxState,
        }
        let visible = InboxState::Visible { message: Some(42) };
        let cases = [
            Case {
                name: "pending becomes stored",
                before: InboxState::Pending,
                after: InboxState::Stored,
            },
            Case {
                name: "visible stays visible",
                before: visible,
                after: visible,
            },
            Case {
                name: "answered stays answered",
                before: InboxState::Answered,
                after: InboxState::Answered,
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store
                .inbox()
                .accept(UpdateId(1), &entry(case.before, 5))
                .unwrap();
            store.inbox().mark_stored(UpdateId(1)).unwrap();
            let state = store
                .inbox()
                .unfinished()
                .first()
                .map_or(InboxState::Answered, |(_, e)| e.state);
            assert_eq!(state, case.after, "case {}", case.name);
        }
    }

    /// A recording's record holds its attachment until the turn read it, then the transcript
    /// (what a resumed turn answers); a record that is not there stays absent.
    #[test]
    fn a_read_request_replaces_the_received_one() {
        use crate::store::{Attachment, AttachmentKind};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let voice = TurnRequest {
            attachment: Some(Attachment {
                kind: AttachmentKind::Audio,
                file_id: "v".into(),
                name: String::new(),
                mime: "audio/ogg".into(),
                seconds: 3,
                voice: false,
            }),
            ..TurnRequest::new(ChatId(1), UserId(2), "")
        };
        let received = InboxEntry::pending(voice, 5);
        store.inbox().accept(UpdateId(1), &received).unwrap();
        assert_eq!(store.inbox().unfinished()[0].1, received);
        let read = TurnRequest::new(ChatId(1), UserId(2), "what I said");
        store.inbox().replace_request(UpdateId(1), &read).unwrap();
        let (_, entry) = &store.inbox().unfinished()[0];
        assert_eq!(entry.request, read);
        assert_eq!(entry.state, InboxState::Pending, "its progress is kept");
        store.inbox().replace_request(UpdateId(9), &read).unwrap();
        assert_eq!(store.inbox().unfinished().len(), 1, "no record is made");
    }

    #[test]
    fn the_visible_message_is_read_back_and_old_records_still_decode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .inbox()
            .accept(
                UpdateId(1),
                &entry(InboxState::Visible { message: Some(7) }, 5),
            )
            .unwrap();
        store
            .inbox()
            .accept(
                UpdateId(2),
                &entry(InboxState::Visible { message: None }, 5),
            )
            .unwrap();
        assert_eq!(store.inbox().visible_message(UpdateId(1)), Some(7));
        assert_eq!(store.inbox().visible_message(UpdateId(2)), None);
        assert_eq!(
            store.inbox().visible_message(UpdateId(3)),
            None,
            "no such update"
        );
        // A long answer's later parts, each once, after its first message.
        for part in [8, 9, 8, 7] {
            store.inbox().add_visible_part(UpdateId(1), part).unwrap();
        }
        assert_eq!(store.inbox().visible_messages(UpdateId(1)), [7, 8, 9]);
        assert_eq!(
            store.inbox().visible_messages(UpdateId(2)),
            Vec::<i32>::new(),
            "no first message"
        );
        // A record written before `Visible` existed.
        let old = br#"{"chat":1,"user":2,"text":"hi","state":"Stored","received":5}"#;
        store.inbox.insert(4u32.to_be_bytes(), &old[..]).unwrap();
        assert_eq!(store.inbox().visible_message(UpdateId(4)), None);
        assert!(
            store
                .inbox()
                .unfinished()
                .iter()
                .any(|(id, e)| *id == UpdateId(4) && e.state == InboxState::Stored)
        );
    }

    #[test]
    fn pruning_drops_only_old_finished_entries() {
        struct Case {
            name: &'static str,
            state: InboxState,
            received: i64,
            pruned: bool,
        }
        let cases = [
            Case {
                name: "old answered",
                state: InboxState::Answered,
                received: 10,
                pruned: true,
            },
            Case {
                name: "recent answered",
                state: InboxState::Answered,
                received: 100,
                pruned: false,
            },
            Case {
                name: "old failed",
                state: InboxState::Failed,
                received: 10,
                pruned: true,
            },
            Case {
                name: "old pending",
                state: InboxState::Pending,
                received: 10,
                pruned: false,
            },
            Case {
                name: "old stored",
                state: InboxState::Stored,
                received: 10,
                pruned: false,
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store
                .inbox()
                .accept(UpdateId(1), &entry(case.state, case.received))
                .unwrap();
            assert_eq!(
                store.inbox().prune(50).unwrap(),
                usize::from(case.pruned),
                "case {}",
                case.name
            );
            assert_eq!(
                store.inbox.contains_key(1u32.to_be_bytes()).unwrap(),
                !case.pruned,
                "case {}",
                case.name
            );
        }
    }
}
