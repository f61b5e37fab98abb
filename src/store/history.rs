//! The `history` tree: every stored turn of every chat, and the window of it the LLM sees.
//! A forum topic's turns are kept the same way in the `topic_history` tree.
//!
//! # The history window and prompt caching
//! The LLM sees the turns from `window_start` on. The window only moves when the stored turns
//! exceed the token budget, and then it jumps forward far enough (to three quarters of the
//! budget) that the next several turns again share a byte-identical prefix. Moving it a turn at a
//! time would change the prompt's beginning on every turn and defeat providers' prompt caches.
//! Only whole turns drop, so a tool result never loses its call.
//!
//! # Clear epochs
//! A turn reads the chat's epoch with its history and is stored only if no `/clear` bumped the
//! epoch meanwhile; the check and the turn's number are one compare-and-swap. The window only moves
//! forward, so a window computed before a clear can never bring cleared turns back.

use serde::{Deserialize, Serialize};

use super::chats::{self, chat_key};
use super::db::{self, Store};
use super::error::Result;
use super::records::decode_json;
use super::tree::Tree;
use crate::conversation::Conversation;
use crate::ids::UpdateId;
use crate::llm::{ChatMessage, estimate_tokens};

const TREE: &str = db::HISTORY;

/// How far the window jumps when the budget is exceeded: to this share of the budget.
const TRIM_TO_NUMERATOR: usize = 3;
const TRIM_TO_DENOMINATOR: usize = 4;

/// One turn as stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredTurn {
    /// Estimated tokens of `messages`, computed once at write time.
    pub tokens: usize,
    pub messages: Vec<ChatMessage>,
    /// The update that started the turn, if any (recovery finds the turn by it).
    #[serde(default)]
    pub update: Option<UpdateId>,
    /// Where the turn's text came from; `None` in records from before it was kept (read as
    /// [`TurnProvenance::legacy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<TurnProvenance>,
}

impl StoredTurn {
    /// The turn's provenance, as recorded or, for an older record, as its messages allow.
    pub(crate) fn provenance(&self) -> TurnProvenance {
        self.provenance
            .clone()
            .unwrap_or_else(|| TurnProvenance::legacy(&self.messages))
    }
}

/// Where a stored turn's text came from: what decides whether a reflection that reads it may
/// be trusted, and whose turns may be sent its tool results.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnProvenance {
    /// Text a third party wrote is in the turn (a page, search results, a tool server's
    /// words), or was in the history it read (its answer may repeat that text).
    #[serde(default)]
    pub external: bool,
    /// The tool calls whose results only admins' turns may see (an admin-only MCP server's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admin_only: Vec<String>,
}

impl TurnProvenance {
    /// A turn recorded before provenance was: whatever a tool returned may have been third
    /// party text, and may have come from an admin-only tool.
    fn legacy(messages: &[ChatMessage]) -> Self {
        let calls: Vec<String> = messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect();
        Self {
            external: !calls.is_empty(),
            admin_only: calls,
        }
    }
}

/// The history the LLM sees, the epoch it was read in, and where its text came from.
#[derive(Debug, Default)]
pub struct HistoryWindow {
    pub messages: Vec<ChatMessage>,
    pub epoch: u64,
    /// Some turn of the window holds text a third party wrote (see [`TurnProvenance::external`]),
    /// or one did since the conversation's last clear (see `ChatState::external`).
    pub external: bool,
    /// The window's tool calls whose results are for admins only.
    pub admin_only: std::collections::HashSet<String>,
}

impl HistoryWindow {
    /// The window as a turn of a user who is not an admin may see it: every admin-only tool
    /// result replaced by a short placeholder (the call stays, so the history stays valid).
    pub(crate) fn for_non_admin(mut self) -> Self {
        for message in &mut self.messages {
            if let ChatMessage::Tool {
                tool_call_id,
                content,
            } = message
                && self.admin_only.contains(tool_call_id)
            {
                *content = ADMIN_ONLY_PLACEHOLDER.to_string();
            }
        }
        self
    }
}

/// What a non-admin's turn gets in place of an admin-only tool's result.
pub const ADMIN_ONLY_PLACEHOLDER: &str =
    "[the result of an admin-only tool: not shown in this user's turn]";

/// `chat_id ‖ seq` (`chat_id ‖ topic ‖ seq` in a topic), big-endian, so one conversation's
/// turns are one ordered range of its tree.
pub(super) fn turn_key(chat: Conversation, seq: u64) -> Vec<u8> {
    let mut key = chat_key(chat);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The sequence number in a turn key of `chat`; `None` for a key of another length.
fn seq_of(key: &[u8], chat: Conversation) -> Option<u64> {
    let prefix = chat_key(chat).len();
    let seq: [u8; 8] = key.get(prefix..)?.try_into().ok()?;
    Some(u64::from_be_bytes(seq))
}

/// Drops the oldest whole turns of `turns` (oldest first, `total` tokens in all) once they
/// exceed `budget_tokens`, down to three quarters of it. Returns the new window start if the
/// window moves: the first kept turn, or `next_seq` when none is kept.
fn trim_window(
    turns: &mut Vec<(u64, StoredTurn)>,
    mut total: usize,
    budget_tokens: usize,
    next_seq: u64,
) -> Option<u64> {
    if total <= budget_tokens {
        return None;
    }
    let target = budget_tokens * TRIM_TO_NUMERATOR / TRIM_TO_DENOMINATOR;
    let drop = turns
        .iter()
        .take_while(|(_, t)| {
            let over = total > target;
            if over {
                total -= t.tokens;
            }
            over
        })
        .count();
    turns.drain(..drop);
    Some(turns.first().map_or(next_seq, |(seq, _)| *seq))
}

/// The conversations' turns (trees `history` and `topic_history`):
/// [`Store::history`], a borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct History<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// The conversations' turns.
    pub fn history(&self) -> History<'_> {
        History { store: self }
    }
}

impl History<'_> {
    /// The tree that holds the turns of `chat`: its own, or the forum topics' one.
    fn tree(&self, chat: Conversation) -> &Tree {
        match chat.topic {
            Some(_) => &self.store.topic_history,
            None => &self.store.history,
        }
    }

    /// The turns the LLM should see, within `budget_tokens`; moves the window when exceeded.
    ///
    /// Reads backwards from the newest turn and stops once past the budget, so a chat with a
    /// long stored history costs no more than its window (plus one turn) to load.
    pub fn window(&self, chat: Conversation, budget_tokens: usize) -> Result<HistoryWindow> {
        let state = self.store.chats().state(chat)?;
        let mut turns: Vec<(u64, StoredTurn)> = Vec::new();
        let mut total = 0;
        for entry in self
            .tree(chat)
            .range(turn_key(chat, state.window_start)..turn_key(chat, u64::MAX))
            .rev()
        {
            let (key, value) = entry?;
            let Some(seq) = seq_of(&key, chat) else {
                tracing::warn!(
                    %chat,
                    ?key,
                    "skipping a history record with an unreadable key"
                );
                continue;
            };
            if let Some(turn) = decode_json::<StoredTurn>(TREE, &key, &value) {
                total += turn.tokens;
                turns.push((seq, turn));
                if total > budget_tokens {
                    break;
                }
            }
        }
        turns.reverse();
        if let Some(start) = trim_window(&mut turns, total, budget_tokens, state.next_seq) {
            self.move_window(chat, start)?;
        }
        let mut window = HistoryWindow {
            epoch: state.epoch,
            external: state.external,
            ..HistoryWindow::default()
        };
        for (_, turn) in turns {
            let provenance = turn.provenance();
            window.external |= provenance.external;
            window.admin_only.extend(provenance.admin_only);
            window.messages.extend(turn.messages);
        }
        Ok(window)
    }

    /// Moves the history window past its `count` oldest turns (after a context overflow).
    pub(crate) fn skip(&self, chat: Conversation, count: usize) -> Result<()> {
        let state = self.store.chats().state(chat)?;
        let next = self
            .tree(chat)
            .range(turn_key(chat, state.window_start)..turn_key(chat, u64::MAX))
            .keys()
            .filter_map(|key| match key {
                Ok(key) => seq_of(&key, chat).map(Ok),
                Err(e) => Some(Err(e)),
            })
            .nth(count)
            .transpose()?;
        self.move_window(chat, next.unwrap_or(state.next_seq))
    }

    /// Moves the window start to `start`, atomically and only forward: a window computed from
    /// a state that a clear or another move has overtaken changes nothing.
    fn move_window(&self, chat: Conversation, start: u64) -> Result<()> {
        self.store.chats().update_state(chat, |state| {
            state.window_start = state.window_start.max(start);
        })
    }

    /// Appends a finished turn with its `provenance`, unless the chat was cleared since
    /// `epoch` was read.
    ///
    /// The epoch check and the turn's number are one compare-and-swap of the chat state; the
    /// turn is written under that number after it. A clear lands wholly before (the turn is
    /// refused) or after (the turn is cleared): a clear between the two writes has moved the
    /// window past the number, and whichever of the clear and this append comes second
    /// removes the turn. A crash between them leaves an unused number, which the window
    /// skips; the update's turn is then run again, as no answer of it is stored.
    pub fn append(
        &self,
        chat: Conversation,
        epoch: u64,
        update: Option<UpdateId>,
        messages: &[ChatMessage],
        provenance: &TurnProvenance,
    ) -> Result<bool> {
        let turn = serde_json::to_vec(&StoredTurn {
            tokens: estimate_tokens(messages),
            messages: messages.to_vec(),
            update,
            provenance: Some(provenance.clone()),
        })?;
        let numbered = self.store.chats().try_update_state(chat, |state| {
            if state.epoch != epoch {
                return None;
            }
            state.next_seq += 1;
            state.external |= provenance.external;
            Some(state.next_seq - 1)
        })?;
        let Some(seq) = numbered else {
            return Ok(false);
        };
        let key = turn_key(chat, seq);
        self.tree(chat).insert(&key, turn)?;
        if self.store.chats().state(chat)?.epoch != epoch {
            self.tree(chat).remove(&key)?;
        }
        Ok(true)
    }

    /// The answer of the stored turn that `update` started in `chat`, if it is still there:
    /// only turns from the update's `first_seq` on count, so an older turn whose update had
    /// the same id (Telegram reuses ids after a week of silence) is not taken for its answer.
    pub fn stored_answer(&self, chat: Conversation, update: UpdateId) -> Option<String> {
        let first = self.store.inbox().first_seq(update, chat);
        self.tree(chat)
            .range(turn_key(chat, first)..turn_key(chat, u64::MAX))
            .rev()
            .filter_map(Result::ok)
            .filter_map(|(key, bytes)| decode_json::<StoredTurn>(TREE, &key, &bytes))
            .find(|turn| turn.update == Some(update))
            .and_then(|turn| turn.messages.last().map(|m| m.content().to_string()))
    }

    /// Removes every conversation's turns before its history window: the LLM never sees them
    /// again (the window only moves forward), so they are only weight on the disk. Returns how
    /// many went. Conversations whose state cannot be read are left alone, and so are turns
    /// whose update is not finished yet.
    pub(super) fn prune(&self) -> Result<usize> {
        // A turn whose update is not finished may still be needed by recovery (its answer sent
        // or edited in after a crash), even once a later turn moved the window past it.
        let unfinished: std::collections::HashSet<UpdateId> = self
            .store
            .inbox()
            .unfinished()
            .into_iter()
            .map(|(update, _)| update)
            .collect();
        let mut pruned = 0;
        for (states, turns) in [
            (&self.store.chats, &self.store.history),
            (&self.store.topic_chats, &self.store.topic_history),
        ] {
            for entry in states.iter() {
                let (key, value) = entry?;
                let Some(state) = decode_json::<chats::ChatState>(db::CHATS, &key, &value) else {
                    continue;
                };
                // A conversation's state key is the prefix of its turns' keys.
                let below = |seq: u64| [key.as_ref(), &seq.to_be_bytes()].concat();
                for old in turns.range(below(0)..below(state.window_start)) {
                    let (old, value) = old?;
                    let needed = decode_json::<StoredTurn>(TREE, &old, &value)
                        .and_then(|turn| turn.update)
                        .is_some_and(|update| unfinished.contains(&update));
                    if !needed {
                        turns.remove(old)?;
                        pruned += 1;
                    }
                }
            }
        }
        Ok(pruned)
    }

    /// Forgets a chat's conversation (its settings stay) and invalidates turns in flight.
    ///
    /// The epoch bump and the window move are one compare-and-swap; the turns before the new
    /// window are removed after it. A turn stored after the clear starts at or past the new window, so
    /// it is never removed, and a turn stored before it is never seen again.
    pub(crate) fn clear(&self, chat: Conversation) -> Result<()> {
        let cleared_below = self.store.chats().update_state(chat, |state| {
            state.window_start = state.next_seq;
            state.epoch += 1;
            state.external = false;
            state.window_start
        })?;
        for key in self
            .tree(chat)
            .range(turn_key(chat, 0)..turn_key(chat, cleared_below))
            .keys()
        {
            self.tree(chat).remove(key?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::UpdateId;
    use crate::store::fixtures::conversation;
    use std::sync::Barrier;

    fn turn(i: usize, size: usize) -> Vec<ChatMessage> {
        vec![
            ChatMessage::user(format!("q{i} {}", "x".repeat(size))),
            ChatMessage::assistant(format!("a{i}")),
        ]
    }

    /// A turn with one tool call `id` answered by `result`.
    fn tool_turn(id: &str, result: &str) -> Vec<ChatMessage> {
        let call = crate::llm::ToolCall {
            id: id.to_string(),
            kind: "function".to_string(),
            function: crate::llm::FunctionCall {
                name: "ops__echo".to_string(),
                arguments: "{}".to_string(),
            },
        };
        vec![
            ChatMessage::user("look it up"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![call],
            },
            ChatMessage::tool_result(id, result.to_string()),
            ChatMessage::assistant("done"),
        ]
    }

    #[test]
    fn a_window_carries_what_its_turns_provenance_says() {
        struct Case {
            name: &'static str,
            /// Each turn: its tool call id (if it has one), and its provenance (`None`: a record
            /// from before provenance was kept).
            turns: Vec<(Option<&'static str>, Option<TurnProvenance>)>,
            external: bool,
            admin_only: &'static [&'static str],
        }
        let external = TurnProvenance {
            external: true,
            admin_only: Vec::new(),
        };
        let admin = |id: &str| TurnProvenance {
            external: true,
            admin_only: vec![id.to_string()],
        };
        let cases = [
            Case {
                name: "own text only",
                turns: vec![(None, Some(TurnProvenance::default())); 3],
                external: false,
                admin_only: &[],
            },
            Case {
                name: "one external turn taints the window",
                turns: vec![
                    (None, Some(TurnProvenance::default())),
                    (Some("c1"), Some(external.clone())),
                    (None, Some(TurnProvenance::default())),
                ],
                external: true,
                admin_only: &[],
            },
            Case {
                name: "admin-only results are named",
                turns: vec![
                    (Some("c1"), Some(admin("c1"))),
                    (Some("c2"), Some(external)),
                ],
                external: true,
                admin_only: &["c1"],
            },
            Case {
                name: "an old record without a tool is clean",
                turns: vec![(None, None)],
                external: false,
                admin_only: &[],
            },
            Case {
                name: "an old record's tool results are external and admins' only",
                turns: vec![(Some("c9"), None), (None, None)],
                external: true,
                admin_only: &["c9"],
            },
        ];
        for case in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let chat = conversation(7);
            for (seq, (call, provenance)) in case.turns.iter().enumerate() {
                let messages = match call {
                    Some(id) => tool_turn(id, "secret"),
                    None => turn(seq, 10),
                };
                let record = StoredTurn {
                    tokens: estimate_tokens(&messages),
                    messages,
                    update: None,
                    provenance: provenance.clone(),
                };
                let bytes = serde_json::to_vec(&record).unwrap();
                store
                    .history
                    .insert(turn_key(chat, seq as u64), bytes)
                    .unwrap();
            }
            let window = store.history().window(chat, 100_000).unwrap();
            assert_eq!(window.external, case.external, "{}", case.name);
            let mut named: Vec<&str> = window.admin_only.iter().map(String::as_str).collect();
            named.sort_unstable();
            assert_eq!(named, case.admin_only, "{}", case.name);
            // A user's turn sees none of the admin-only results, and every other one.
            let seen = window.for_non_admin();
            let results: Vec<&str> = seen
                .messages
                .iter()
                .filter_map(|m| match m {
                    ChatMessage::Tool { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            let hidden = results
                .iter()
                .filter(|r| **r == ADMIN_ONLY_PLACEHOLDER)
                .count();
            assert_eq!(hidden, case.admin_only.len(), "{}", case.name);
            assert_eq!(
                results.iter().filter(|r| **r == "secret").count(),
                results.len() - hidden,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_stored_turn_keeps_its_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let provenance = TurnProvenance {
            external: true,
            admin_only: vec!["c1".to_string()],
        };
        assert!(
            store
                .history()
                .append(
                    conversation(3),
                    0,
                    None,
                    &tool_turn("c1", "secret"),
                    &provenance
                )
                .unwrap()
        );
        let window = store.history().window(conversation(3), 100_000).unwrap();
        assert!(window.external);
        assert!(window.admin_only.contains("c1"));
    }

    #[test]
    fn pruning_removes_only_the_turns_before_each_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let per_turn = estimate_tokens(&turn(0, 300));
        let budget = per_turn * 4;
        let chats = [
            conversation(7),
            conversation(-100),
            Conversation::new(crate::ids::ChatId(-100), Some(crate::ids::TopicId(3))),
        ];
        for chat in chats {
            for i in 0..12 {
                let epoch = store.history().window(chat, budget).unwrap().epoch;
                assert!(
                    store
                        .history()
                        .append(chat, epoch, None, &turn(i, 300), &Default::default())
                        .unwrap()
                );
            }
        }
        // A chat whose window never moved keeps every turn.
        let quiet = conversation(8);
        assert!(
            store
                .history()
                .append(quiet, 0, None, &turn(0, 300), &Default::default())
                .unwrap()
        );
        let windows: Vec<_> = chats
            .iter()
            .map(|&c| store.history().window(c, budget).unwrap().messages)
            .collect();
        let before = store.history.len() + store.topic_history.len();

        let pruned = store.history().prune().unwrap();

        let starts: u64 = chats
            .iter()
            .map(|&c| store.chats().state(c).unwrap().window_start)
            .sum();
        assert!(starts > 0, "the windows moved");
        assert_eq!(
            pruned as u64, starts,
            "exactly the turns before the windows"
        );
        assert_eq!(
            store.history.len() + store.topic_history.len(),
            before - pruned
        );
        for (chat, window) in chats.iter().zip(&windows) {
            assert_eq!(
                &store.history().window(*chat, budget).unwrap().messages,
                window,
                "the LLM sees the same history in {chat}"
            );
        }
        assert_eq!(
            store
                .history()
                .window(quiet, budget)
                .unwrap()
                .messages
                .len(),
            2
        );
        assert_eq!(store.history().prune().unwrap(), 0, "nothing left to prune");
    }

    #[test]
    fn window_jumps_by_whole_turns_and_then_stays_stable() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let per_turn = estimate_tokens(&turn(0, 300));
        let budget = per_turn * 4;
        let mut previous: Option<Vec<ChatMessage>> = None;
        let mut jumps = 0;
        for i in 0..12 {
            let window = store.history().window(conversation(7), budget).unwrap();
            assert!(estimate_tokens(&window.messages) <= budget);
            assert!(
                matches!(
                    window.messages.first(),
                    None | Some(ChatMessage::User { .. })
                ),
                "windows start at a turn boundary"
            );
            if let Some(prev) = &previous
                && !window.messages.starts_with(prev)
            {
                jumps += 1;
            }
            store
                .history()
                .append(
                    conversation(7),
                    window.epoch,
                    None,
                    &turn(i, 300),
                    &Default::default(),
                )
                .unwrap();
            previous = Some(window.messages);
        }
        assert!(
            (1..=4).contains(&jumps),
            "the prefix changed on {jumps} of 12 turns"
        );
    }

    #[test]
    fn trim_window_drops_whole_oldest_turns_to_three_quarters() {
        struct Case {
            name: &'static str,
            tokens: &'static [usize],
            budget: usize,
            start: Option<u64>,
            kept: &'static [u64],
        }
        let cases = [
            Case {
                name: "within budget: the window stays",
                tokens: &[10, 10, 10],
                budget: 30,
                start: None,
                kept: &[0, 1, 2],
            },
            Case {
                name: "over budget: down to three quarters",
                tokens: &[10, 10, 10, 10],
                budget: 30,
                start: Some(2),
                kept: &[2, 3],
            },
            Case {
                name: "one huge turn: nothing kept, window at next_seq",
                tokens: &[100],
                budget: 30,
                start: Some(9),
                kept: &[],
            },
        ];
        for case in cases {
            let mut turns: Vec<(u64, StoredTurn)> = (0u64..)
                .zip(case.tokens)
                .map(|(seq, &tokens)| {
                    let turn = StoredTurn {
                        tokens,
                        messages: vec![],
                        update: None,
                        provenance: None,
                    };
                    (seq, turn)
                })
                .collect();
            let total = case.tokens.iter().sum();
            let start = trim_window(&mut turns, total, case.budget, 9);
            assert_eq!(start, case.start, "case {}", case.name);
            let kept: Vec<u64> = turns.iter().map(|(seq, _)| *seq).collect();
            assert_eq!(kept, case.kept, "case {}", case.name);
        }
    }

    #[test]
    fn clear_empties_and_invalidates_turns_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let before = store.history().window(conversation(1), 1000).unwrap();
        store
            .history()
            .append(
                conversation(1),
                before.epoch,
                None,
                &turn(0, 1),
                &Default::default(),
            )
            .unwrap();
        store.chats().set_model(conversation(1), "m").unwrap();
        store.history().clear(conversation(1)).unwrap();
        assert!(
            !store
                .history()
                .append(
                    conversation(1),
                    before.epoch,
                    None,
                    &turn(1, 1),
                    &Default::default()
                )
                .unwrap()
        );
        let after = store.history().window(conversation(1), 1000).unwrap();
        assert!(after.messages.is_empty());
        assert_eq!(store.chats().model(conversation(1)).as_deref(), Some("m"));
        assert_eq!(
            store.history.scan_prefix(chat_key(conversation(1))).count(),
            0
        );
    }

    #[test]
    fn unreadable_records_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..3 {
            store
                .history()
                .append(conversation(3), 0, None, &turn(i, 1), &Default::default())
                .unwrap();
        }
        store
            .history
            .insert(turn_key(conversation(3), 1), b"not json".to_vec())
            .unwrap();
        // A key inside the chat's range that is not a turn key.
        let mut short = chat_key(conversation(3)).to_vec();
        short.push(1);
        store.history.insert(short, b"{}".to_vec()).unwrap();
        store
            .chats
            .insert(chat_key(conversation(4)), b"{".to_vec())
            .unwrap();
        assert_eq!(
            store
                .history()
                .window(conversation(3), 1000)
                .unwrap()
                .messages
                .len(),
            4
        );
        assert!(
            store.history().window(conversation(4), 1000).is_err(),
            "an unreadable state is no new chat"
        );
        store.history().skip(conversation(3), 1).unwrap();
        assert_eq!(
            store
                .history()
                .window(conversation(3), 1000)
                .unwrap()
                .messages
                .len(),
            2
        );
    }

    #[test]
    fn skipped_turns_leave_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..4 {
            store
                .history()
                .append(conversation(2), 0, None, &turn(i, 1), &Default::default())
                .unwrap();
        }
        store.history().skip(conversation(2), 3).unwrap();
        assert_eq!(
            store
                .history()
                .window(conversation(2), 1000)
                .unwrap()
                .messages,
            turn(3, 1)
        );
        store.history().skip(conversation(2), 10).unwrap();
        assert!(
            store
                .history()
                .window(conversation(2), 1000)
                .unwrap()
                .messages
                .is_empty()
        );
        assert!(
            store
                .history()
                .append(conversation(2), 0, None, &turn(4, 1), &Default::default())
                .unwrap()
        );
        assert_eq!(
            store
                .history()
                .window(conversation(2), 1000)
                .unwrap()
                .messages,
            turn(4, 1)
        );
    }

    /// A forum's topics and the chat outside them are separate conversations: each sees its
    /// own turns and answers, and a clear, a window move or a model in one leaves the others.
    #[test]
    fn topics_and_their_chat_keep_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let chat = -100;
        let (general, a, b) = (
            conversation(chat),
            Conversation::new(crate::ids::ChatId(chat), Some(crate::ids::TopicId(3))),
            Conversation::new(crate::ids::ChatId(chat), Some(crate::ids::TopicId(4))),
        );
        for (i, at) in [general, a, b].into_iter().enumerate() {
            for n in 0..2 {
                let update = Some(UpdateId((10 * i + n) as u32));
                assert!(
                    store
                        .history()
                        .append(at, 0, update, &turn(10 * i + n, 1), &Default::default())
                        .unwrap()
                );
            }
        }
        store.chats().set_model(a, "topic-model").unwrap();
        store.history().clear(b).unwrap();
        store.history().skip(general, 1).unwrap();

        assert_eq!(
            store.history().window(general, 1000).unwrap().messages,
            turn(1, 1)
        );
        let mut both = turn(10, 1);
        both.extend(turn(11, 1));
        assert_eq!(store.history().window(a, 1000).unwrap().messages, both);
        assert!(store.history().window(b, 1000).unwrap().messages.is_empty());
        assert_eq!(store.chats().model(a).as_deref(), Some("topic-model"));
        assert_eq!(store.chats().model(general), None);
        assert_eq!(store.chats().state(b).unwrap().epoch, 1);
        assert_eq!(store.chats().state(general).unwrap().epoch, 0);
        assert_eq!(
            store.history().stored_answer(a, UpdateId(11)).as_deref(),
            Some("a11")
        );
        assert_eq!(
            store.history().stored_answer(general, UpdateId(11)),
            None,
            "the chat finds no topic turn"
        );
        assert_eq!(
            store.history().stored_answer(a, UpdateId(1)),
            None,
            "a topic finds no chat turn"
        );
        assert_eq!(
            store.history.scan_prefix(chat_key(general)).count(),
            2,
            "the chat's own tree holds only its own turns"
        );
    }

    /// `/clear`, `/model`, a finishing turn and a window move, released together: none of the
    /// four may undo another. The turn lands before the clear (and is cleared) or is refused,
    /// never after it with the old epoch; no cleared turn comes back.
    #[test]
    fn concurrent_clear_model_turn_and_window_move_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let chat = conversation(9);
        for round in 0..200u64 {
            // Enough stored turns that a small budget moves the window.
            for i in 0..4 {
                let epoch = store.chats().state(chat).unwrap().epoch;
                assert!(
                    store
                        .history()
                        .append(chat, epoch, None, &turn(i, 200), &Default::default())
                        .unwrap()
                );
            }
            let before = store.chats().state(chat).unwrap();
            let model = format!("m{round}");
            let barrier = Barrier::new(4);
            let stored = std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    store.history().clear(chat).unwrap();
                });
                s.spawn(|| {
                    barrier.wait();
                    store.chats().set_model(chat, &model).unwrap();
                });
                s.spawn(|| {
                    barrier.wait();
                    store.history().window(chat, 100).unwrap();
                });
                let turn = s.spawn(|| {
                    barrier.wait();
                    store
                        .history()
                        .append(chat, before.epoch, None, &turn(99, 1), &Default::default())
                        .unwrap()
                });
                turn.join().unwrap()
            });
            let after = store.chats().state(chat).unwrap();
            assert_eq!(after.epoch, before.epoch + 1, "round {round}: clear lost");
            assert_eq!(
                after.model.as_deref(),
                Some(model.as_str()),
                "round {round}: model switch lost"
            );
            let expected_next = before.next_seq + u64::from(stored);
            assert_eq!(after.next_seq, expected_next, "round {round}: turn count");
            assert_eq!(
                after.window_start, after.next_seq,
                "round {round}: the window moved back"
            );
            assert!(
                store
                    .history()
                    .window(chat, usize::MAX)
                    .unwrap()
                    .messages
                    .is_empty(),
                "round {round}: a turn survived the clear or came back"
            );
            assert_eq!(
                store.history.scan_prefix(chat_key(chat)).count(),
                0,
                "round {round}: a turn was written after the clear with the old epoch"
            );
        }
    }
}
