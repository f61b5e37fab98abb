//! The one place that talks to sled: chat history, per-chat settings and usage.
//!
//! Trees:
//! - `history`: key `chat_id ‖ seq` (big-endian), value a JSON [`StoredTurn`]: every message of
//!   one turn (user, assistant tool calls, tool results, answer). Append-only, written when a
//!   turn completes, so a turn is either wholly in the history or not at all.
//! - `chats`: key `chat_id`, value a JSON [`ChatState`]: the history window, the clear epoch and
//!   the chat's chosen model.
//! - `usage`: key `chat:<id>:<model>` and `all:<model>`, value JSON [`UsageTotals`].
//! - `tickets`: key a short base-36 id, value a JSON [`OptionTicket`]: the option buttons under
//!   one answer (callback data only carries the id and a cut label).
//! - `feedback`: key a short base-36 id, value a JSON [`FeedbackTicket`]: what 👍/👎 under one
//!   answer act on (the heuristics that were in its prompt).
//! - `heuristics`: key the id (big-endian), value a JSON [`Heuristic`].
//! - `reflections`: key a big-endian id, value a JSON [`ReflectionJob`]: reflections not yet
//!   done, resumed after a restart.
//! - `skill_matches`: key a skill name, value a big-endian count.
//! - `inbox`: key an `update_id` (big-endian), value a JSON [`InboxEntry`]: every message that
//!   starts a turn, recorded before the turn starts, so a crash never loses it and a re-delivered
//!   update is never processed twice.
//!
//! # The history window and prompt caching
//! The LLM sees the turns from `window_start` on. The window only moves when the stored turns
//! exceed the token budget, and then it jumps forward far enough (to three quarters of the
//! budget) that the next several turns again share a byte-identical prefix. Moving it a turn at a
//! time would change the prompt's beginning on every turn and defeat providers' prompt caches.
//! Only whole turns drop, so a tool result never loses its call.
//!
//! A record that cannot be read is skipped with a warning naming its key; it never blocks a chat.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use sled::Transactional;

use crate::learning::heuristics::Heuristic;
use crate::llm::{ChatMessage, Usage, estimate_tokens};

/// How far the window jumps when the budget is exceeded: to this share of the budget.
const TRIM_TO_NUMERATOR: usize = 3;
const TRIM_TO_DENOMINATOR: usize = 4;

/// The sled database and its trees. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    history: sled::Tree,
    chats: sled::Tree,
    usage: sled::Tree,
    tickets: sled::Tree,
    feedback: sled::Tree,
    heuristics: sled::Tree,
    reflections: sled::Tree,
    skill_matches: sled::Tree,
    inbox: sled::Tree,
    /// Flush requests made so far, and the highest one a finished flush covers.
    flush_requests: Arc<AtomicU64>,
    flush_lock: Arc<tokio::sync::Mutex<u64>>,
}

/// One turn as stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredTurn {
    /// Estimated tokens of `messages`, computed once at write time.
    pub tokens: usize,
    pub messages: Vec<ChatMessage>,
    /// The update that started the turn, if any (recovery finds the turn by it).
    #[serde(default)]
    pub update: Option<u32>,
}

/// Where an accepted update is on its way to an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InboxState {
    /// Accepted; its turn has not been stored yet.
    Pending,
    /// Its turn is in the history; the answer may not have been sent.
    Stored,
    /// Answered (or cancelled, or refused): nothing left to do.
    Answered,
}

/// An update that starts a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxEntry {
    pub chat: i64,
    pub user: u64,
    /// What the turn answers (a message's text, or a pressed option's full label).
    pub text: String,
    /// A photo's Telegram `file_id`, for vision-capable models.
    #[serde(default)]
    pub image: Option<String>,
    pub state: InboxState,
    /// Unix seconds.
    pub received: i64,
}

/// Per-chat state.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ChatState {
    /// First turn the LLM still sees.
    pub window_start: u64,
    /// Sequence number of the next turn.
    pub next_seq: u64,
    /// Bumped by every clear; a turn that started before a clear is not written after it.
    pub epoch: u64,
    /// The chat's chosen model, if not the default.
    pub model: Option<String>,
}

/// The history the LLM sees, and the epoch it was read in.
#[derive(Debug, Default)]
pub struct HistoryWindow {
    pub messages: Vec<ChatMessage>,
    pub epoch: u64,
}

/// Usage counters for one model (in one chat, or bot-wide).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub turns: u64,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

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

/// A reflection to run: the task, the tools it used and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReflectionJob {
    pub chat: i64,
    pub model: String,
    /// The user's request, cut to 512 characters.
    pub task: String,
    pub tools: Vec<String>,
    pub outcome: String,
    /// The task's context held content from outside the bot (web pages, search results, MCP
    /// tool output): what it teaches waits for review.
    #[serde(default)]
    pub external: bool,
    /// The answer a 👎 rated, cut to 2,000 characters: the reflection reads the request and
    /// this answer instead of the turn's whole request.
    #[serde(default)]
    pub answer: Option<String>,
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

fn chat_key(chat: i64) -> [u8; 8] {
    chat.to_be_bytes()
}

fn turn_key(chat: i64, seq: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&chat.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

impl Store {
    /// Opens (or creates) the database in `dir`, with sled's default page cache (1 GB).
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_with_cache(dir, 1 << 30)
    }

    /// Opens (or creates) the database in `dir`; sled's page cache holds at most `cache_bytes`.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> anyhow::Result<Self> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .open()
            .with_context(|| {
                format!(
                    "cannot open the database in {} (is another Heurist running on it? \
                 set HEURIST_DATA_DIR to another directory)",
                    dir.display()
                )
            })?;
        Ok(Self {
            history: db.open_tree("history")?,
            chats: db.open_tree("chats")?,
            usage: db.open_tree("usage")?,
            tickets: db.open_tree("tickets")?,
            feedback: db.open_tree("feedback")?,
            heuristics: db.open_tree("heuristics")?,
            reflections: db.open_tree("reflections")?,
            skill_matches: db.open_tree("skill_matches")?,
            inbox: db.open_tree("inbox")?,
            flush_requests: Arc::default(),
            flush_lock: Arc::default(),
            db,
        })
    }

    /// Writes everything to disk; called at shutdown.
    pub fn flush(&self) -> anyhow::Result<()> {
        self.db.flush()?;
        Ok(())
    }

    /// Writes everything written so far to disk, without blocking the runtime. sled otherwise
    /// syncs every 500 ms, and an accepted update must survive a `kill -9` right after it.
    ///
    /// sled's own `flush_async` deadlocks when called concurrently (sled issue #1308, fixed
    /// only in unreleased sled), so one blocking `flush` runs at a time on the blocking pool,
    /// and callers that arrive while it runs share the next one (group commit: under load, one
    /// fsync serves many turns).
    pub async fn flush_async(&self) -> anyhow::Result<()> {
        let ticket = self.flush_requests.fetch_add(1, Ordering::SeqCst) + 1;
        let mut flushed_upto = self.flush_lock.lock().await;
        if *flushed_upto >= ticket {
            return Ok(());
        }
        // Every request numbered up to here was made before this flush starts.
        let upto = self.flush_requests.load(Ordering::SeqCst);
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush()).await??;
        *flushed_upto = upto;
        Ok(())
    }

    pub fn chat_state(&self, chat: i64) -> ChatState {
        read_json(&self.chats, &chat_key(chat)).unwrap_or_default()
    }

    fn put_chat_state(&self, chat: i64, state: &ChatState) -> anyhow::Result<()> {
        self.chats
            .insert(chat_key(chat), serde_json::to_vec(state)?)?;
        Ok(())
    }

    /// The turns the LLM should see, within `budget_tokens`; moves the window when exceeded.
    ///
    /// Reads backwards from the newest turn and stops once past the budget, so a chat with a
    /// long stored history costs no more than its window (plus one turn) to load.
    pub fn history(&self, chat: i64, budget_tokens: usize) -> anyhow::Result<HistoryWindow> {
        let mut state = self.chat_state(chat);
        let mut turns: Vec<(u64, StoredTurn)> = Vec::new();
        let mut total = 0;
        for entry in self
            .history
            .range(turn_key(chat, state.window_start)..turn_key(chat, u64::MAX))
            .rev()
        {
            let (key, value) = entry?;
            let seq = u64::from_be_bytes(key[8..16].try_into()?);
            match serde_json::from_slice::<StoredTurn>(&value) {
                Ok(turn) => {
                    total += turn.tokens;
                    turns.push((seq, turn));
                    if total > budget_tokens {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(chat, seq, error = %e, "skipping unreadable history record")
                }
            }
        }
        turns.reverse();
        if total > budget_tokens {
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
            state.window_start = turns.first().map_or(state.next_seq, |(seq, _)| *seq);
            self.put_chat_state(chat, &state)?;
        }
        Ok(HistoryWindow {
            messages: turns.into_iter().flat_map(|(_, t)| t.messages).collect(),
            epoch: state.epoch,
        })
    }

    /// Moves the history window past its `count` oldest turns (after a context overflow).
    pub fn skip_turns(&self, chat: i64, count: usize) -> anyhow::Result<()> {
        let mut state = self.chat_state(chat);
        let next = self
            .history
            .range(turn_key(chat, state.window_start)..turn_key(chat, u64::MAX))
            .keys()
            .nth(count)
            .transpose()?
            .map(|key| u64::from_be_bytes(key[8..16].try_into().unwrap_or_default()));
        state.window_start = next.unwrap_or(state.next_seq);
        self.put_chat_state(chat, &state)
    }

    /// Appends a finished turn, unless the chat was cleared since `epoch` was read.
    /// The turn record and the chat state are written in one sled transaction: a crash leaves
    /// either both or neither.
    pub fn append_turn(
        &self,
        chat: i64,
        epoch: u64,
        update: Option<u32>,
        messages: &[ChatMessage],
    ) -> anyhow::Result<bool> {
        let mut state = self.chat_state(chat);
        if state.epoch != epoch {
            return Ok(false);
        }
        let turn = serde_json::to_vec(&StoredTurn {
            tokens: estimate_tokens(messages),
            messages: messages.to_vec(),
            update,
        })?;
        let seq = state.next_seq;
        state.next_seq += 1;
        let state = serde_json::to_vec(&state)?;
        (&self.history, &self.chats)
            .transaction(|(history, chats)| {
                history.insert(&turn_key(chat, seq), turn.as_slice())?;
                chats.insert(&chat_key(chat), state.as_slice())?;
                Ok(())
            })
            .map_err(|e: sled::transaction::TransactionError<()>| anyhow::anyhow!("{e:?}"))?;
        Ok(true)
    }

    /// Records an update before its turn starts; `false` if it was seen before (Telegram
    /// re-delivers updates after a crash), in which case it must not be processed again.
    pub fn accept_update(&self, update: u32, entry: &InboxEntry) -> anyhow::Result<bool> {
        let swapped = self.inbox.compare_and_swap(
            update.to_be_bytes(),
            None as Option<&[u8]>,
            Some(serde_json::to_vec(entry)?),
        )?;
        Ok(swapped.is_ok())
    }

    pub fn set_update_state(&self, update: u32, state: InboxState) -> anyhow::Result<()> {
        Self::update_json(&self.inbox, &update.to_be_bytes(), |e: &mut InboxEntry| {
            e.state = state;
            true
        })?;
        Ok(())
    }

    /// Accepted updates whose answer was not (known to be) sent: what a crash interrupted.
    pub fn unfinished_updates(&self) -> Vec<(u32, InboxEntry)> {
        self.inbox
            .iter()
            .filter_map(|entry| {
                let (key, value) = entry.ok()?;
                let update = u32::from_be_bytes(key.as_ref().try_into().ok()?);
                match serde_json::from_slice::<InboxEntry>(&value) {
                    Ok(e) if e.state != InboxState::Answered => Some((update, e)),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!(update, error = %e, "skipping unreadable inbox record");
                        None
                    }
                }
            })
            .collect()
    }

    /// Forgets answered updates received before `before` (unix seconds).
    pub fn prune_inbox(&self, before: i64) -> anyhow::Result<usize> {
        let mut pruned = 0;
        for entry in self.inbox.iter() {
            let (key, value) = entry?;
            let old = serde_json::from_slice::<InboxEntry>(&value).map_or(true, |e| {
                e.state == InboxState::Answered && e.received < before
            });
            if old {
                self.inbox.remove(key)?;
                pruned += 1;
            }
        }
        Ok(pruned)
    }

    /// The answer of the stored turn that `update` started in `chat`, if it is still there.
    pub fn stored_answer(&self, chat: i64, update: u32) -> Option<String> {
        self.history
            .scan_prefix(chat_key(chat))
            .values()
            .rev()
            .filter_map(Result::ok)
            .filter_map(|bytes| serde_json::from_slice::<StoredTurn>(&bytes).ok())
            .find(|turn| turn.update == Some(update))
            .and_then(|turn| turn.messages.last().map(|m| m.content().to_string()))
    }

    /// Forgets a chat's conversation (its settings stay) and invalidates turns in flight.
    pub fn clear_history(&self, chat: i64) -> anyhow::Result<()> {
        let mut state = self.chat_state(chat);
        for key in self
            .history
            .range(turn_key(chat, 0)..turn_key(chat, u64::MAX))
            .keys()
        {
            self.history.remove(key?)?;
        }
        state.window_start = state.next_seq;
        state.epoch += 1;
        self.put_chat_state(chat, &state)
    }

    /// The model id a chat chose, if any.
    pub fn chat_model(&self, chat: i64) -> Option<String> {
        self.chat_state(chat).model
    }

    pub fn set_chat_model(&self, chat: i64, model: &str) -> anyhow::Result<()> {
        let mut state = self.chat_state(chat);
        state.model = Some(model.to_string());
        self.put_chat_state(chat, &state)
    }

    /// Adds usage to the chat's and the bot's totals for `model`; `turns` is 1 for an agent
    /// turn and 0 for follow-up calls (extraction, reflection) that belong to one.
    pub fn record_usage(
        &self,
        chat: i64,
        model: &str,
        turns: u64,
        calls: u32,
        usage: Usage,
    ) -> anyhow::Result<()> {
        for key in [format!("chat:{chat}:{model}"), format!("all:{model}")] {
            self.usage.fetch_and_update(key.as_bytes(), |old| {
                let mut totals: UsageTotals = old
                    .and_then(|bytes| serde_json::from_slice(bytes).ok())
                    .unwrap_or_default();
                totals.turns += turns;
                totals.calls += u64::from(calls);
                totals.prompt_tokens += usage.prompt_tokens;
                totals.completion_tokens += usage.completion_tokens;
                totals.cached_tokens += usage.cached_tokens;
                serde_json::to_vec(&totals).ok()
            })?;
        }
        Ok(())
    }

    /// Adds a turn's tokens to the user's count for today (UTC), for the daily budget.
    pub fn record_user_tokens(&self, user: u64, usage: Usage) -> anyhow::Result<()> {
        let key = user_day_key(user, chrono::Utc::now().date_naive());
        let tokens = usage.prompt_tokens + usage.completion_tokens;
        self.usage.fetch_and_update(key.as_bytes(), |old| {
            let count = old
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_be_bytes);
            Some((count + tokens).to_be_bytes().to_vec())
        })?;
        Ok(())
    }

    /// Tokens the user's turns used today (UTC).
    pub fn user_tokens_today(&self, user: u64) -> u64 {
        let key = user_day_key(user, chrono::Utc::now().date_naive());
        self.usage
            .get(key.as_bytes())
            .ok()
            .flatten()
            .and_then(|b| b.as_ref().try_into().ok())
            .map_or(0, u64::from_be_bytes)
    }

    /// Usage per model of one chat (`Some(chat)`) or of the whole bot (`None`).
    pub fn usage(&self, chat: Option<i64>) -> Vec<(String, UsageTotals)> {
        let prefix = match chat {
            Some(chat) => format!("chat:{chat}:"),
            None => "all:".to_string(),
        };
        self.usage
            .scan_prefix(prefix.as_bytes())
            .filter_map(Result::ok)
            .filter_map(|(key, value)| {
                let model = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
                let totals = serde_json::from_slice(&value).ok()?;
                Some((model, totals))
            })
            .collect()
    }
}

impl Store {
    /// Applies `change` to the JSON record at `key` atomically (sled retries the closure on
    /// contention, so `change` must only edit the record it is given). Returns the record as it
    /// was, or `None` if it is missing or unreadable; `change` returns whether to write.
    fn update_json<T>(
        tree: &sled::Tree,
        key: &[u8],
        mut change: impl FnMut(&mut T) -> bool,
    ) -> anyhow::Result<Option<T>>
    where
        T: Clone + Serialize + DeserializeOwned,
    {
        let mut before = None;
        tree.fetch_and_update(key, |old| {
            // Returning `None` would delete the key: a missing record stays missing, an
            // unreadable one stays as it is.
            let old = old?;
            let Ok(mut record) = serde_json::from_slice::<T>(old) else {
                before = None;
                return Some(old.to_vec());
            };
            before = Some(record.clone());
            if change(&mut record) {
                serde_json::to_vec(&record)
                    .ok()
                    .or_else(|| Some(old.to_vec()))
            } else {
                Some(old.to_vec())
            }
        })?;
        Ok(before)
    }

    /// Stores a ticket and returns its short id (base 36 of sled's monotonic id generator).
    pub fn create_ticket(&self, ticket: &OptionTicket) -> anyhow::Result<String> {
        let id = base36(self.db.generate_id()?);
        self.tickets
            .insert(id.as_bytes(), serde_json::to_vec(ticket)?)?;
        Ok(id)
    }

    pub fn ticket(&self, id: &str) -> Option<OptionTicket> {
        read_json(&self.tickets, id.as_bytes())
    }

    /// Marks option `index` of ticket `id` chosen, atomically: of two concurrent presses, one
    /// wins and the other sees [`Choice::AlreadyChosen`].
    pub fn choose_option(&self, id: &str, index: usize) -> anyhow::Result<Choice> {
        let before = Self::update_json(&self.tickets, id.as_bytes(), |t: &mut OptionTicket| {
            let fresh = t.chosen.is_none();
            if fresh {
                t.chosen = Some(index);
            }
            fresh
        })?;
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
        Self::update_json(&self.feedback, id.as_bytes(), |t: &mut FeedbackTicket| {
            let fresh = t.vote.is_none();
            if fresh {
                t.vote = Some(up);
            }
            fresh
        })
    }

    /// Every stored heuristic, in id order.
    pub fn heuristics(&self) -> Vec<Heuristic> {
        self.heuristics
            .iter()
            .filter_map(|entry| match entry {
                Ok((key, value)) => match serde_json::from_slice(&value) {
                    Ok(h) => Some(h),
                    Err(e) => {
                        tracing::warn!(?key, error = %e, "skipping unreadable heuristic");
                        None
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read heuristics");
                    None
                }
            })
            .collect()
    }

    pub fn new_heuristic_id(&self) -> anyhow::Result<u64> {
        Ok(self.db.generate_id()?)
    }

    pub fn put_heuristic(&self, heuristic: &Heuristic) -> anyhow::Result<()> {
        self.heuristics
            .insert(heuristic.id.to_be_bytes(), serde_json::to_vec(heuristic)?)?;
        Ok(())
    }

    /// Removes a heuristic; says whether it existed.
    pub fn delete_heuristic(&self, id: u64) -> anyhow::Result<bool> {
        Ok(self.heuristics.remove(id.to_be_bytes())?.is_some())
    }

    /// Persists a reflection before it runs, so a restart can resume it.
    pub fn save_reflection(&self, job: &ReflectionJob) -> anyhow::Result<u64> {
        let id = self.db.generate_id()?;
        self.reflections
            .insert(id.to_be_bytes(), serde_json::to_vec(job)?)?;
        Ok(id)
    }

    pub fn finish_reflection(&self, id: u64) -> anyhow::Result<()> {
        self.reflections.remove(id.to_be_bytes())?;
        Ok(())
    }

    /// Reflections saved but not finished (a previous run stopped first).
    pub fn pending_reflections(&self) -> Vec<(u64, ReflectionJob)> {
        self.reflections
            .iter()
            .filter_map(Result::ok)
            .filter_map(|(key, value)| {
                let id = u64::from_be_bytes(key.as_ref().try_into().ok()?);
                match serde_json::from_slice(&value) {
                    Ok(job) => Some((id, job)),
                    Err(e) => {
                        tracing::warn!(id, error = %e, "dropping unreadable reflection job");
                        let _ = self.reflections.remove(key);
                        None
                    }
                }
            })
            .collect()
    }

    pub fn count_skill_match(&self, skill: &str) -> anyhow::Result<()> {
        self.skill_matches
            .fetch_and_update(skill.as_bytes(), |old| {
                let count = old
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_be_bytes);
                Some((count + 1).to_be_bytes().to_vec())
            })?;
        Ok(())
    }

    pub fn skill_matches(&self, skill: &str) -> u64 {
        self.skill_matches
            .get(skill.as_bytes())
            .ok()
            .flatten()
            .and_then(|b| b.as_ref().try_into().ok())
            .map_or(0, u64::from_be_bytes)
    }
}

fn user_day_key(user: u64, day: chrono::NaiveDate) -> String {
    format!("user:{user}:{day}")
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

/// Reads a JSON record; an unreadable one is logged with its key and treated as absent.
fn read_json<T: DeserializeOwned>(tree: &sled::Tree, key: &[u8]) -> Option<T> {
    let bytes = match tree.get(key) {
        Ok(bytes) => bytes?,
        Err(e) => {
            tracing::warn!(tree = ?tree.name(), ?key, error = %e, "cannot read record");
            return None;
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::warn!(tree = ?tree.name(), ?key, error = %e, "skipping unreadable record");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize, size: usize) -> Vec<ChatMessage> {
        vec![
            ChatMessage::user(format!("q{i} {}", "x".repeat(size))),
            ChatMessage::assistant(format!("a{i}")),
        ]
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
            let window = store.history(7, budget).unwrap();
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
                .append_turn(7, window.epoch, None, &turn(i, 300))
                .unwrap();
            previous = Some(window.messages);
        }
        assert!(
            (1..=4).contains(&jumps),
            "the prefix changed on {jumps} of 12 turns"
        );
    }

    #[test]
    fn clear_empties_and_invalidates_turns_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let before = store.history(1, 1000).unwrap();
        store
            .append_turn(1, before.epoch, None, &turn(0, 1))
            .unwrap();
        store.set_chat_model(1, "m").unwrap();
        store.clear_history(1).unwrap();
        assert!(
            !store
                .append_turn(1, before.epoch, None, &turn(1, 1))
                .unwrap()
        );
        let after = store.history(1, 1000).unwrap();
        assert!(after.messages.is_empty());
        assert_eq!(store.chat_model(1).as_deref(), Some("m"));
    }

    #[test]
    fn unreadable_records_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..3 {
            store.append_turn(3, 0, None, &turn(i, 1)).unwrap();
        }
        store
            .history
            .insert(turn_key(3, 1), b"not json".to_vec())
            .unwrap();
        store.chats.insert(chat_key(4), b"{".to_vec()).unwrap();
        assert_eq!(store.history(3, 1000).unwrap().messages.len(), 4);
        assert!(store.history(4, 1000).unwrap().messages.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_flushes_complete_and_are_coalesced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut tasks = Vec::new();
        for t in 0..20u64 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..50u64 {
                    store
                        .history
                        .insert((t * 1000 + i).to_be_bytes(), vec![0u8; 64])
                        .unwrap();
                    store.flush_async().await.unwrap();
                }
            }));
        }
        // With sled's own flush_async this hangs (sled #1308).
        let all = futures_util::future::join_all(tasks);
        tokio::time::timeout(std::time::Duration::from_secs(30), all)
            .await
            .expect("concurrent flushes must not deadlock");
    }

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

    #[test]
    fn usage_is_summed_per_chat_and_bot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let u = Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: 5,
        };
        store.record_usage(1, "m", 1, 2, u).unwrap();
        store.record_usage(2, "m", 1, 1, u).unwrap();
        let chat = store.usage(Some(1));
        assert_eq!(
            chat,
            vec![(
                "m".to_string(),
                UsageTotals {
                    turns: 1,
                    calls: 2,
                    prompt_tokens: 10,
                    completion_tokens: 2,
                    cached_tokens: 5
                }
            )]
        );
        assert_eq!(store.usage(None)[0].1.turns, 2);
    }
}
