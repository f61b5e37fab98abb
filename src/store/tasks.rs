//! The `tasks` tree: users' scheduled tasks and reminders, and how many runs each user had
//! per day. Keys: `t` ‖ id (big-endian) → a JSON [`Task`]; `r` ‖ user ‖ day (big-endian) → a
//! big-endian count of that user's runs that day (the daily run budget).
//!
//! # Exactly once
//! A run is [`Tasks::fire`]d in one sled transaction over this tree and the inbox: the task
//! moves to its next run (a once-task is removed), the day's count goes up, and the run's turn
//! is recorded in the inbox as a pending update with an id of its own. Either all of it is on
//! disk or none of it: a `kill -9` before the commit fires the run again at the next start, one
//! after it leaves a pending inbox record that recovery runs once, as it does a typed message.
//! A run's update id has the top bit set ([`run_update_id`]): Telegram's update ids are
//! positive 32-bit signed integers, so the two never meet in the inbox.

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use super::db::Store;
use super::error::{Error, Result};
use super::inbox::InboxEntry;
use super::records::decode_json;
use super::request::TurnRequest;
use super::tree::Tree;
use crate::ids::{ChatId, TopicId, UpdateId, UserId};
use crate::schedule::{TaskKind, Timing};

const TREE: &str = "tasks";
const TASK: u8 = b't';
const RUNS: u8 = b'r';

/// A scheduled task: who made it, where it runs, what it does, and when it runs next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: u64,
    /// Its owner: their role and budget are checked at every run; only they (or an admin)
    /// may cancel it.
    pub user: UserId,
    pub chat: ChatId,
    #[serde(default)]
    pub topic: Option<TopicId>,
    pub kind: TaskKind,
    /// What to do (a task) or say (a reminder) at its time, in the user's words.
    pub request: String,
    pub timing: Timing,
    /// The time zone its times are shown in (and a cron expression read in).
    pub zone: String,
    /// Its next run, unix seconds.
    pub next_run: i64,
    /// Unix seconds.
    pub created: i64,
    /// Made from tainted context (see [`crate::provenance`]), on its owner's ✅: its runs
    /// carry it. Always written: a task stored before provenance was kept reads as tainted,
    /// as it may have been planted by a page.
    #[serde(default = "stored_before_provenance")]
    pub tainted: bool,
}

/// What a task stored before tasks kept their provenance counts as: tainted.
fn stored_before_provenance() -> bool {
    true
}

/// A run that [`Tasks::fire`] recorded: its inbox update and the turn it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    pub update: UpdateId,
    pub request: TurnRequest,
}

/// Users' scheduled tasks (tree `tasks`): [`Store::tasks`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Tasks<'s> {
    store: &'s Store,
}

impl Store {
    /// Users' scheduled tasks and their daily run counts.
    pub fn tasks(&self) -> Tasks<'_> {
        Tasks { store: self }
    }
}

/// The inbox update id of run `n`: the top bit set, which no Telegram update id has.
pub(crate) fn run_update_id(n: u64) -> UpdateId {
    UpdateId(0x8000_0000 | (n as u32 & 0x7FFF_FFFF))
}

fn task_key(id: u64) -> Vec<u8> {
    let mut key = vec![TASK];
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn runs_key(user: UserId, day: i64) -> Vec<u8> {
    let mut key = vec![RUNS];
    key.extend_from_slice(&user.0.to_be_bytes());
    key.extend_from_slice(&day.to_be_bytes());
    key
}

impl Tasks<'_> {
    /// The tree, opened on first use (sled keeps it open after).
    fn tree(&self) -> Result<Tree> {
        self.store.tree(TREE)
    }

    /// Stores `task` under a new id (its `id` is set) and returns it.
    pub fn add(&self, mut task: Task) -> Result<Task> {
        task.id = self.store.db().next_id()?;
        self.tree()?
            .insert(task_key(task.id), serde_json::to_vec(&task)?)?;
        Ok(task)
    }

    /// Every readable task, soonest first.
    pub fn all(&self) -> Vec<Task> {
        let Ok(tree) = self.tree() else {
            return Vec::new();
        };
        let mut tasks: Vec<Task> = tree
            .scan_prefix([TASK])
            .filter_map(|entry| {
                let (key, value) = entry.ok()?;
                decode_json(TREE, &key, &value)
            })
            .collect();
        tasks.sort_by_key(|t| (t.next_run, t.id));
        tasks
    }

    /// `user`'s tasks, soonest first.
    pub fn of_user(&self, user: UserId) -> Vec<Task> {
        let mut tasks = self.all();
        tasks.retain(|t| t.user == user);
        tasks
    }

    /// Task `id`, if it exists and reads.
    pub fn get(&self, id: u64) -> Option<Task> {
        let key = task_key(id);
        let bytes = self.tree().ok()?.get(&key).ok()??;
        decode_json(TREE, &key, &bytes)
    }

    /// Removes task `id`; `false` if it was gone already.
    pub fn remove(&self, id: u64) -> Result<bool> {
        Ok(self.tree()?.remove(task_key(id))?.is_some())
    }

    /// A future that resolves when the tree changes (a task added, fired or removed).
    pub(crate) fn changed(&self) -> Result<sled::Subscriber> {
        Ok(self.tree()?.watch_prefix([TASK]))
    }

    /// Fires `task`'s run due at `task.next_run`, atomically (see the module doc): the task
    /// moves to `next` (removed when `None`), the owner's count of runs on `day` goes up, and
    /// `make(nth)` (the run's place in that count, from 1) gives the turn to record in the
    /// inbox under a new update id, or `None` for a run skipped. `Ok(None)`: nothing was recorded,
    /// because the task changed meanwhile (cancelled, or fired already) or the run was skipped.
    pub fn fire(
        &self,
        task: &Task,
        next: Option<i64>,
        day: i64,
        make: impl Fn(u32) -> Option<TurnRequest>,
    ) -> Result<Option<Fired>> {
        let tree = self.tree()?;
        let update = run_update_id(self.store.db().next_id()?);
        let key = task_key(task.id);
        let runs = runs_key(task.user, day);
        let first_seq = self
            .store
            .chats()
            .state(crate::conversation::Conversation::new(
                task.chat, task.topic,
            ))
            .map_or(0, |state| state.next_seq);
        let received = chrono::Utc::now().timestamp();
        let moved = next.map(|next_run| Task {
            next_run,
            ..task.clone()
        });
        let moved = moved.map(|t| serde_json::to_vec(&t)).transpose()?;
        // One write, through the gate: a backup sees the run fired with its inbox record, or
        // neither.
        let gate = tree.writing();
        let fired = (tree.raw(), self.store.inbox.raw()).transaction(|(tasks, inbox)| {
            let unchanged = tasks
                .get(&key)?
                .and_then(|bytes| decode_json::<Task>(TREE, &key, &bytes))
                .is_some_and(|stored| stored.next_run == task.next_run);
            if !unchanged {
                return Ok(None);
            }
            match &moved {
                Some(bytes) => tasks.insert(key.as_slice(), bytes.as_slice())?,
                None => tasks.remove(key.as_slice())?,
            };
            let nth = tasks
                .get(&runs)?
                .and_then(|c| <[u8; 4]>::try_from(c.as_ref()).ok())
                .map_or(0, u32::from_be_bytes)
                .saturating_add(1);
            tasks.insert(runs.as_slice(), &nth.to_be_bytes())?;
            let Some(request) = make(nth) else {
                return Ok(None);
            };
            let entry = InboxEntry {
                first_seq,
                ..InboxEntry::pending(request.clone(), received)
            };
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| ConflictableTransactionError::Abort(Error::from(e)))?;
            inbox.insert(&update.0.to_be_bytes(), bytes)?;
            Ok(Some(Fired { update, request }))
        });
        drop(gate);
        let fired = fired.map_err(|e: TransactionError<Error>| Error::from(e))?;
        self.forget_runs_before(task.user, day)?;
        Ok(fired)
    }

    /// Forgets `user`'s run counts of days before `day`.
    fn forget_runs_before(&self, user: UserId, day: i64) -> Result<()> {
        let tree = self.tree()?;
        let mut prefix = vec![RUNS];
        prefix.extend_from_slice(&user.0.to_be_bytes());
        for entry in tree.range(prefix.clone()..runs_key(user, day)) {
            let (key, _) = entry?;
            if key.starts_with(&prefix) {
                tree.remove(key)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(user: u64, next_run: i64, timing: Timing) -> Task {
        Task {
            id: 0,
            user: UserId(user),
            chat: ChatId(user as i64),
            topic: None,
            kind: TaskKind::Reminder,
            request: "water the plants".into(),
            timing,
            zone: "UTC".into(),
            next_run,
            created: 0,
            tainted: false,
        }
    }

    fn request(task: &Task) -> TurnRequest {
        TurnRequest::new(task.chat, task.user, task.request.clone())
    }

    /// A run fires once: a second fire of the same due time, or of a removed task, records
    /// nothing; the run is in the inbox, pending, under its own id.
    #[test]
    fn a_run_is_recorded_once_with_the_task_moved_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let hourly = Timing::Cron {
            expr: "0 * * * *".into(),
            zone: "UTC".into(),
        };
        let stored = store.tasks().add(task(7, 3600, hourly)).unwrap();
        let fired = store
            .tasks()
            .fire(&stored, Some(7200), 0, |_| Some(request(&stored)))
            .unwrap();
        let update = fired.map(|f| f.update).unwrap();
        assert!(update.0 > i32::MAX as u32);
        assert_eq!(store.tasks().get(stored.id).unwrap().next_run, 7200);
        let again = store
            .tasks()
            .fire(&stored, Some(7200), 0, |_| Some(request(&stored)))
            .unwrap();
        assert_eq!(again, None, "the same due time fires once");
        let pending = store.inbox().unfinished();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].0, update);
        assert!(store.tasks().remove(stored.id).unwrap());
        let moved = store.tasks().get(stored.id);
        assert_eq!(moved, None);
    }

    /// The day's count numbers each run; a once-task is gone after its run; old days'
    /// counts are forgotten.
    #[test]
    fn runs_are_counted_per_user_and_day() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut seen = Vec::new();
        for (n, day) in [(1, 10), (2, 10), (3, 11)] {
            let once = store
                .tasks()
                .add(task(7, n, Timing::Once { at: n }))
                .unwrap();
            let nth = std::cell::Cell::new(0);
            store
                .tasks()
                .fire(&once, None, day, |count| {
                    nth.set(count);
                    None
                })
                .unwrap();
            seen.push(nth.get());
            assert_eq!(store.tasks().get(once.id), None, "a once-task is done");
        }
        assert_eq!(seen, [1, 2, 1]);
        assert!(
            store.inbox().unfinished().is_empty(),
            "skipped runs record nothing"
        );
        assert_eq!(
            store.tasks().tree().unwrap().scan_prefix([RUNS]).count(),
            1,
            "only today's count is kept"
        );
    }

    #[test]
    fn run_ids_never_meet_telegram_update_ids() {
        for n in [0, 1, u64::from(u32::MAX), u64::MAX] {
            assert!(run_update_id(n).0 > i32::MAX as u32, "{n}");
        }
    }
}
