//! The one place that talks to sled: one [`Store`] over its trees, one file per area, and
//! one small handle per area, each a borrowed view with that area's methods:
//! `store.history()`, `store.chats()`, `store.inbox()`, `store.tickets()`, `store.retries()`,
//! `store.learning()`, `store.usage()`, `store.people()`, `store.memories()`, `store.answers()`,
//! and `store.db()`
//! for the database as a whole (durable flush, ids, pruning). `Store` itself only opens and
//! hands out the handles.
//!
//! `db.rs` holds [`Store`] and the [`Db`] handle (open, durable flush, ids), `records.rs` the
//! JSON and counter helpers every area shares, `retention.rs` the pruning that bounds storage.
//! The areas:
//!
//! - `history.rs`, tree `history`: key `chat_id ‖ seq` (big-endian), value a JSON
//!   [`StoredTurn`]: every message of one turn (user, assistant tool calls, tool results,
//!   answer). Append-only, written when a turn completes, so a turn is either wholly in the
//!   history or not at all. Also the history window the LLM sees, and `/clear`.
//! - `chats.rs`, tree `chats`: key `chat_id`, value a JSON [`ChatState`]: the history window,
//!   the clear epoch and the chat's chosen model.
//! - Forum topics keep the same records in trees of their own, `topic_history` (key
//!   `chat_id ‖ topic ‖ seq`) and `topic_chats` (key `chat_id ‖ topic`, the topic an `i32`),
//!   so a chat's prefix scans and ranges never meet a topic's records, and the chat's records
//!   from before topics were told apart read as they always did.
//! - `inbox.rs`, tree `inbox`: key an `update_id` (big-endian), value a JSON [`InboxEntry`]:
//!   every message that starts a turn, recorded before the turn starts, so a crash never loses
//!   it and a re-delivered update is never processed twice (and a reused id, after a week of
//!   silence, is told apart from a re-delivery by when its record was received). Its way to
//!   its answer (pending, stored, visible, answered) is one pure state machine,
//!   `inbox_state.rs`.
//! - `tickets.rs`, trees `tickets` and `feedback`: key a random 13-character base-36 id, value
//!   a JSON [`OptionTicket`] (the option buttons under one answer; callback data only carries
//!   the id and a cut label) or [`FeedbackTicket`] (what 👍/👎 under one answer act on).
//! - `answers.rs`, tree `answers`: key `chat_id ‖ message_id` (big-endian), value a JSON
//!   [`AnswerRecord`]: the feedback ticket (and options) of the answer a message shows, so a
//!   reaction on it votes like its 👍/👎.
//! - `request.rs`: [`TurnRequest`], the request that starts a turn (who asked what, where),
//!   embedded in the inbox's and the retries' records.
//! - `retries.rs`, tree `retries`: key a random 13-character base-36 id, value a JSON
//!   [`RetryTicket`]: the message of a failed turn that its 🔁 Retry button runs again, once.
//! - `learning.rs`, trees `heuristics` (the lessons, under the tree's first name; key the id,
//!   big-endian; value a JSON [`Lesson`]),
//!   `reflections` (key a big-endian id; value a JSON [`ReflectionJob`] not yet done, resumed
//!   after a restart) and `skill_matches` (key a skill name; value a big-endian count).
//! - `usage.rs`, tree `usage`: keys `chat:<id>:<model>` and `all:<model>` (value a JSON
//!   [`UsageTotals`]) and `user:<id>:<day>` and `user_total:<id>` (values big-endian token counts);
//!   `fallbacks.rs` keeps its counts of model fallbacks there too, under `fallbacks:`.
//! - `people.rs`, tree `people`: users' display names, the day a stranger was last refused
//!   per chat, and strangers' access requests (see the file); `memories.rs`, in the same
//!   tree: each user's personal memory (key `memory:<user>`, a JSON list of facts).
//! - `db.rs` also keeps tree `ids`: key `next`, a big-endian counter that lesson and
//!   reflection ids come from (a record, so a compacted copy goes on from it).
//! - `tasks.rs`, tree `tasks`: users' scheduled tasks (key `t` ‖ id) and their runs per day
//!   (key `r` ‖ user ‖ day); a run is fired in one transaction with its inbox record.
//! - `zones.rs`, tree `zones`: each user's time zone from `/timezone`.
//! - `voices.rs`, tree `voices`: each user's `/voice on|off` (key `p` ‖ user) and the spoken
//!   replies owed (key `o` ‖ update id, a JSON [`OwedVoice`], flushed before the text answer
//!   is shown, removed once sent; one marked `sending` is never sent again).
//! - `proposals.rs`, tree `proposals`: key a random 13-character base-36 id, value a JSON
//!   [`Proposal`]: a fact or task a tainted turn proposed, made only on its user's ✅ (see
//!   [`crate::provenance`]).
//! - `rewrites.rs`, tree `rewrites`: key `tool ‖ 0 ‖ argument`, value a JSON [`TaughtForm`]:
//!   the examples of the form a tool wants an argument in, which the bot rewrites calls to
//!   (see `learning::rewrite`), and how its rewritten calls went.
//! - `compaction.rs`: the data directory's generations of the store (`CURRENT`, `store-<n>/`)
//!   and the compaction that bounds its size on disk.
//! - `backup.rs`: online backups of every tree as one file, as of one moment, and their
//!   restore; `tree.rs`: the `Tree` every area writes through, whose gate makes that
//!   moment one.
//!
//! # Atomic changes
//! Every read-modify-write is one atomic step, so a `/clear`, a `/model`, a finishing turn and
//! a button press never undo one another: chat state changes and other JSON records go through
//! a compare-and-swap loop (`chats` and `records::update_json`; a turn is numbered by one, see
//! `history`), counters through sled's `fetch_and_update`. Sled transactions only where
//! several trees must change as one and it is rare (a scheduled task firing): each writes the
//! log to disk twice.
//!
//! # Unreadable records
//! A record or key that cannot be read is skipped with a warning naming its tree and key; it
//! never blocks a chat and never panics, and it is never deleted, reset or written over (it
//! may be repaired): [`Db::prune`] keeps it, a skill-match count over it stays as it is, and
//! an unreadable chat state stops that chat's turns with an error (see `chats.rs`) instead of
//! being read as a new chat's, which would write its history from turn 0 again. (Not yet the
//! usage counters of `usage.rs`: they still count an unreadable one as 0 and write over it.)

mod answers;
mod attachment;
pub mod backup;
mod chats;
pub mod compaction;
mod db;
mod error;
mod fallbacks;
#[cfg(test)]
mod fixtures;
mod history;
mod inbox;
pub mod inbox_state;
mod learning;
mod memories;
mod people;
mod proposals;
mod records;
mod request;
pub(crate) mod retention;
mod retries;
mod rewrites;
mod tasks;
mod tickets;
mod tree;
mod usage;
mod voices;
mod zones;

pub use answers::{AnswerRecord, Answers};
pub use attachment::{Attachment, AttachmentKind};
pub use chats::Chats;
pub use chats::{ChatState, OfferedOptions};
pub use db::{Db, Store};
pub use error::{Error, Result};
pub use fallbacks::Fallbacks;
pub use history::History;
pub use history::{ADMIN_ONLY_PLACEHOLDER, HistoryWindow, StoredTurn, TurnProvenance};
pub use inbox::Inbox;
pub use inbox::{Arrival, InboxEntry, REDELIVERY_WINDOW, arrival};
pub use inbox_state::InboxState;
pub use learning::LearningTree;
pub use learning::{Grounds, Lesson, Origin, ReflectionJob, ReviewState};
pub use memories::Memories;
pub use people::People;
pub use proposals::{Proposal, ProposalClaim, Proposals, ProposedChange};
pub use request::{TaskRun, TurnRequest};
pub use retention::PruneReport;
pub use retries::Retries;
pub use retries::{RetryClaim, RetryTicket};
pub use rewrites::{MAX_FAILURES_IN_A_ROW, RewriteExample, Rewrites, TaughtForm};
pub use tasks::{Fired, Task, Tasks};
pub use tickets::Tickets;
pub use tickets::{Choice, FeedbackTicket, OptionTicket, TICKET_ID_CHARS, Vote};
pub use usage::UsageLedger;
pub use usage::UsageTotals;
pub use voices::{OwedVoice, Voices};
pub use zones::Zones;

#[cfg(test)]
mod tests {
    //! Garbage in every tree: each reader skips what it cannot read and still serves the good
    //! records beside it.

    use super::*;
    use crate::conversation::Conversation;
    use crate::ids::{ChatId, TopicId, UpdateId, UserId};
    use crate::llm::{ChatMessage, Usage};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    const CHAT: ChatId = ChatId(5);
    /// [`CHAT`] outside topics.
    const AT: Conversation = Conversation::new(CHAT, None);
    const UPDATE: UpdateId = UpdateId(77);

    /// Valid records of every tree; any of them is garbage in another tree.
    fn samples() -> Vec<Vec<u8>> {
        let job = fixtures::job(CHAT, "t");
        let values = [
            serde_json::to_vec(&StoredTurn {
                tokens: 3,
                messages: vec![ChatMessage::user("q")],
                update: Some(UpdateId(1)),
                provenance: Some(TurnProvenance::default()),
            }),
            serde_json::to_vec(&ChatState::default()),
            serde_json::to_vec(&good_entry()),
            serde_json::to_vec(&good_ticket()),
            serde_json::to_vec(&good_feedback(job.clone())),
            serde_json::to_vec(&good_lesson()),
            serde_json::to_vec(&job),
            serde_json::to_vec(&UsageTotals::default()),
            serde_json::to_vec(&good_retry()),
        ];
        values.into_iter().map(Result::unwrap).collect()
    }

    fn good_entry() -> InboxEntry {
        InboxEntry::pending(TurnRequest::new(CHAT, UserId(1), "hello"), 1)
    }

    fn good_ticket() -> OptionTicket {
        OptionTicket {
            chat: CHAT,
            message_id: 1,
            labels: vec!["a".into()],
            epoch: 0,
            chosen: None,
            feedback: None,
            created: 1,
            topic: None,
            chosen_by: None,
        }
    }

    fn good_feedback(job: ReflectionJob) -> FeedbackTicket {
        FeedbackTicket {
            chat: CHAT,
            lessons: vec![],
            job,
            vote: None,
            changes: 0,
            created: 1,
        }
    }

    fn good_lesson() -> Lesson {
        fixtures::lesson(1, "a good lesson")
    }

    /// Arbitrary bytes, JSON of the wrong shape, and valid records cut short or of another tree.
    fn garbage() -> impl Strategy<Value = Vec<u8>> {
        let samples = samples();
        let cut = samples.clone();
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..80),
            "[\\[\\]{}\":,.0-9a-z_ -]{0,40}".prop_map(String::into_bytes),
            (0..cut.len(), any::<prop::sample::Index>())
                .prop_map(move |(i, at)| cut[i][..at.index(cut[i].len())].to_vec()),
            prop::sample::select(samples),
        ]
    }

    /// Where garbage goes: a tree, and a key suffix for trees whose keys are decoded.
    #[derive(Debug, Clone, Copy)]
    enum GarbageTarget {
        History,
        HistoryKey,
        Chats,
        Inbox,
        InboxKey,
        Tickets,
        Feedback,
        Lessons,
        Reflections,
        ReflectionsKey,
        SkillMatches,
        Usage,
        UserTokens,
        TopicHistory,
        TopicChats,
        Retries,
        People,
    }

    const TARGETS: [GarbageTarget; 17] = [
        GarbageTarget::History,
        GarbageTarget::HistoryKey,
        GarbageTarget::Chats,
        GarbageTarget::Inbox,
        GarbageTarget::InboxKey,
        GarbageTarget::Tickets,
        GarbageTarget::Feedback,
        GarbageTarget::Lessons,
        GarbageTarget::Reflections,
        GarbageTarget::ReflectionsKey,
        GarbageTarget::SkillMatches,
        GarbageTarget::Usage,
        GarbageTarget::UserTokens,
        GarbageTarget::TopicHistory,
        GarbageTarget::TopicChats,
        GarbageTarget::Retries,
        GarbageTarget::People,
    ];

    /// The forum topic the garbage test keeps a conversation in, beside the chat's own.
    const TOPIC: Conversation = Conversation::new(CHAT, Some(TopicId(3)));

    fn reset(store: &Store) -> (String, String, String) {
        for tree in [
            &store.history,
            &store.chats,
            &store.usage,
            &store.tickets,
            &store.feedback,
            &store.lessons,
            &store.reflections,
            &store.skill_matches,
            &store.inbox,
            &store.topic_history,
            &store.topic_chats,
            &store.retries,
            &store.people,
        ] {
            tree.raw().clear().unwrap();
        }
        store
            .history()
            .append(
                AT,
                0,
                Some(UPDATE),
                &[ChatMessage::user("kept")],
                &Default::default(),
            )
            .unwrap();
        store
            .history()
            .append(
                TOPIC,
                0,
                None,
                &[ChatMessage::user("in a topic")],
                &Default::default(),
            )
            .unwrap();
        store.people().remember_name(UserId(9), "Ann").unwrap();
        assert_eq!(
            store.inbox().accept(UPDATE, &good_entry()).unwrap(),
            Arrival::New
        );
        store.learning().put_lesson(&good_lesson()).unwrap();
        let job = fixtures::job(CHAT, "kept");
        store.learning().save_reflection(&job).unwrap();
        store.learning().count_skill_match("skill").unwrap();
        let ticket = store.tickets().create(&good_ticket()).unwrap();
        let feedback = store
            .tickets()
            .create_feedback(&good_feedback(job))
            .unwrap();
        let retry = store.retries().create(&good_retry()).unwrap();
        (ticket, feedback, retry)
    }

    fn good_retry() -> RetryTicket {
        RetryTicket {
            request: TurnRequest::new(CHAT, UserId(9), "again"),
            used: false,
            claimed_by: None,
            created: chrono::Utc::now().timestamp(),
        }
    }

    #[test]
    fn garbage_in_any_tree_is_skipped_and_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let usage = Usage {
            prompt_tokens: 1,
            completion_tokens: 1,
            cached_tokens: 0,
        };
        let mut runner = TestRunner::new(Config::with_cases(256));
        let cases = (
            prop::sample::select(TARGETS.to_vec()),
            // Key lengths the trees decode (4: inbox, 8: a seq or an id) would make a valid key.
            proptest::collection::vec(any::<u8>(), 0..20)
                .prop_filter("an unreadable key", |s| s.len() != 4 && s.len() != 8),
            garbage(),
        );
        runner
            .run(&cases, |(target, suffix, bytes)| {
                let (ticket, feedback, retry) = reset(&store);
                let today = usage::user_day_key(UserId(9), chrono::Utc::now().date_naive());
                let (tree, key): (&tree::Tree, Vec<u8>) = match target {
                    GarbageTarget::History => (&store.history, history::turn_key(AT, 1).to_vec()),
                    GarbageTarget::HistoryKey => {
                        let mut key = chats::chat_key(AT).to_vec();
                        key.extend(&suffix);
                        (&store.history, key)
                    }
                    GarbageTarget::Chats => (&store.chats, chats::chat_key(AT).to_vec()),
                    GarbageTarget::Inbox => (&store.inbox, (UPDATE.0 + 1).to_be_bytes().to_vec()),
                    GarbageTarget::InboxKey => (&store.inbox, suffix.clone()),
                    GarbageTarget::Tickets => (&store.tickets, ticket.clone().into_bytes()),
                    GarbageTarget::Feedback => (&store.feedback, feedback.clone().into_bytes()),
                    GarbageTarget::Lessons => (&store.lessons, 2u64.to_be_bytes().to_vec()),
                    GarbageTarget::Reflections => {
                        (&store.reflections, u64::MAX.to_be_bytes().to_vec())
                    }
                    GarbageTarget::ReflectionsKey => (&store.reflections, suffix.clone()),
                    GarbageTarget::SkillMatches => (&store.skill_matches, b"skill".to_vec()),
                    GarbageTarget::Usage => (&store.usage, b"chat:5:m".to_vec()),
                    GarbageTarget::UserTokens => (&store.usage, today.into_bytes()),
                    GarbageTarget::TopicHistory => {
                        let mut key = chats::chat_key(TOPIC);
                        key.extend(&suffix);
                        (&store.topic_history, key)
                    }
                    GarbageTarget::TopicChats => (&store.topic_chats, chats::chat_key(TOPIC)),
                    GarbageTarget::Retries => (&store.retries, retry.clone().into_bytes()),
                    GarbageTarget::People => (&store.people, b"refused:9:5".to_vec()),
                };
                // An unreadable chat state is never taken for a new chat's: what reads or
                // changes it fails, and leaves it as it is.
                let is_state = |t| serde_json::from_slice::<ChatState>(&bytes).is_ok() || t;
                let readable = is_state(!matches!(target, GarbageTarget::Chats));
                let topic_readable = is_state(!matches!(target, GarbageTarget::TopicChats));
                tree.insert(key.clone(), bytes.clone()).unwrap();

                // Every reader answers; the good records beside the garbage still read.
                let state = store.chats().state(AT);
                prop_assert_eq!(state.is_ok(), readable);
                let window = store.history().window(AT, 10_000);
                prop_assert_eq!(window.is_ok(), readable);
                if !matches!(
                    target,
                    GarbageTarget::Chats | GarbageTarget::HistoryKey | GarbageTarget::History
                ) {
                    prop_assert_eq!(window.unwrap().messages.len(), 1);
                }
                prop_assert_eq!(store.history().skip(AT, 0).is_ok(), readable);
                let _ = store.history().stored_answer(AT, UPDATE);
                let _ = store.chats().model(AT);
                if !matches!(target, GarbageTarget::Inbox | GarbageTarget::InboxKey) {
                    prop_assert!(store.inbox().unfinished().iter().any(|(u, _)| *u == UPDATE));
                }
                prop_assert!(
                    store
                        .learning()
                        .lessons()
                        .iter()
                        .any(|h| h.text == "a good lesson")
                );
                prop_assert!(
                    store
                        .learning()
                        .pending_reflections()
                        .iter()
                        .any(|(_, j)| j.request == "kept")
                );
                let _ = store.learning().skill_matches("skill");
                let _ = store.usage().totals(Some(CHAT));
                let _ = store.usage().totals(None);
                let _ = store.usage().user_tokens_today(UserId(9));
                let _ = store.tickets().get(&ticket);
                let _ = store.tickets().choose(&ticket, 0, None).unwrap();
                let _ = store.tickets().vote(&feedback, CHAT, true, 1).unwrap();
                let topic = store.history().window(TOPIC, 10_000);
                prop_assert_eq!(topic.is_ok(), topic_readable);
                if !matches!(
                    target,
                    GarbageTarget::TopicChats | GarbageTarget::TopicHistory
                ) {
                    prop_assert_eq!(topic.unwrap().messages.len(), 1);
                }
                let _ = store.chats().model(TOPIC);
                let claim = store
                    .retries()
                    .claim(&retry, CHAT, UserId(9), 0, None)
                    .unwrap();
                if !matches!(target, GarbageTarget::Retries) {
                    prop_assert!(matches!(claim, RetryClaim::Claimed(_)));
                }
                prop_assert_eq!(store.people().name_of(UserId(9)), Some("Ann".to_string()));
                let _ = store.people().first_refusal_on(
                    UserId(9),
                    CHAT,
                    chrono::Utc::now().date_naive(),
                );

                // Every writer works over garbage, or leaves it as it is.
                store.usage().charge(CHAT, "m", 1, 1, usage).unwrap();
                store.usage().record_user_tokens(UserId(9), usage).unwrap();
                store.learning().count_skill_match("skill").unwrap();
                if let Ok(state) = state {
                    store.chats().set_model(AT, "n").unwrap();
                    prop_assert_eq!(store.chats().model(AT), Some("n".to_string()));
                    let epoch = store.chats().state(AT).unwrap().epoch;
                    prop_assert_eq!(epoch, state.epoch);
                    prop_assert!(
                        store
                            .history()
                            .append(
                                AT,
                                epoch,
                                None,
                                &[ChatMessage::user("more")],
                                &Default::default()
                            )
                            .unwrap()
                    );
                    store.history().clear(AT).unwrap();
                    prop_assert!(
                        store
                            .history()
                            .window(AT, 10_000)
                            .unwrap()
                            .messages
                            .is_empty()
                    );
                } else {
                    let turns = store.history.scan_prefix(chats::chat_key(AT)).count();
                    prop_assert!(store.chats().set_model(AT, "n").is_err());
                    let more = [ChatMessage::user("more")];
                    prop_assert!(
                        store
                            .history()
                            .append(AT, 0, None, &more, &Default::default())
                            .is_err()
                    );
                    prop_assert!(store.history().clear(AT).is_err());
                    let after = store.history.scan_prefix(chats::chat_key(AT)).count();
                    prop_assert_eq!(after, turns, "no turn written or removed");
                    let kept = store.chats.get(&key).unwrap();
                    prop_assert_eq!(kept.as_deref(), Some(bytes.as_slice()));
                }
                store
                    .inbox()
                    .set_state(UPDATE, InboxState::Answered)
                    .unwrap();
                store.db().prune(i64::MAX).unwrap();
                prop_assert!(store.tickets().get(&ticket).is_none());
                if !matches!(target, GarbageTarget::Inbox | GarbageTarget::InboxKey) {
                    prop_assert!(store.inbox().unfinished().is_empty());
                }
                Ok(())
            })
            .unwrap();
    }

    fn option_ticket_at(created: i64) -> OptionTicket {
        OptionTicket {
            created,
            ..good_ticket()
        }
    }

    fn feedback_ticket_at(created: i64) -> FeedbackTicket {
        FeedbackTicket {
            created,
            ..good_feedback(fixtures::job(CHAT, "t"))
        }
    }

    #[test]
    fn prune_removes_old_tickets_and_answered_inbox_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let old_option = store.tickets().create(&option_ticket_at(10)).unwrap();
        let new_option = store.tickets().create(&option_ticket_at(100)).unwrap();
        let old_feedback = store
            .tickets()
            .create_feedback(&feedback_ticket_at(10))
            .unwrap();
        let new_feedback = store
            .tickets()
            .create_feedback(&feedback_ticket_at(100))
            .unwrap();
        store.feedback.insert("garbage", "{").unwrap();
        for (update, state) in [
            (1, InboxState::Answered),
            (2, InboxState::Pending),
            (3, InboxState::Stored),
        ] {
            let entry = InboxEntry {
                state,
                ..InboxEntry::pending(TurnRequest::new(ChatId(1), UserId(1), "hi"), 10)
            };
            store.inbox().accept(UpdateId(update), &entry).unwrap();
        }
        assert_eq!(
            store.db().prune(50).unwrap(),
            PruneReport {
                inbox: 1,
                tickets: 1,
                feedback: 1,
                retries: 0,
                refusals: 0,
                history: 0,
                usage_days: 0,
                answers: 0,
                proposals: 0,
            }
        );
        assert!(store.tickets().get(&old_option).is_none());
        assert!(store.tickets().get(&new_option).is_some());
        assert!(
            store.feedback.contains_key("garbage").unwrap(),
            "an unreadable record is kept"
        );
        assert_eq!(
            store.tickets().vote(&old_feedback, CHAT, true, 0).unwrap(),
            Vote::Unknown
        );
        assert!(matches!(
            store.tickets().vote(&new_feedback, CHAT, true, 0).unwrap(),
            Vote::Recorded(_)
        ));
        let left: Vec<u32> = store
            .inbox()
            .unfinished()
            .iter()
            .map(|(u, _)| u.0)
            .collect();
        assert_eq!(
            left,
            vec![2, 3],
            "a pending or stored update is never pruned"
        );
        assert_eq!(store.db().prune(50).unwrap(), PruneReport::default());
    }
}
