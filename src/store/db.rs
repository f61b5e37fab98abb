//! [`Store`]: the sled database and its trees, opened once and shared (cheap to clone), with
//! an accessor for each area's handle; and [`Db`], the handle on the database as a whole
//! (durable flushing, the id counter, its size). Each area's file holds its own handle.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

use super::error::{Error, Result};
use super::tree::{Gate, Tree};

/// The trees' names in sled; each area's file logs its records under them.
pub(super) const HISTORY: &str = "history";
pub(super) const CHATS: &str = "chats";
pub(super) const USAGE: &str = "usage";
pub(super) const TICKETS: &str = "tickets";
pub(super) const FEEDBACK: &str = "feedback";
/// The lessons' tree keeps its first name, so stored data reads.
pub(super) const LESSONS: &str = "heuristics";
pub(super) const REFLECTIONS: &str = "reflections";
pub(super) const SKILL_MATCHES: &str = "skill_matches";
pub(super) const INBOX: &str = "inbox";
/// Forum topics' turns and state, apart from the chat-wide trees, so that no scan of a
/// chat's own records meets a topic's.
pub(super) const TOPIC_HISTORY: &str = "topic_history";
pub(super) const TOPIC_CHATS: &str = "topic_chats";
pub(super) const RETRIES: &str = "retries";
pub(super) const PEOPLE: &str = "people";
/// The messages of answers with 👍/👎, by chat and message (`answers.rs`).
pub(super) const ANSWERS: &str = "answers";
/// The id counter ([`Db::next_id`]) under its one key.
pub(super) const IDS: &str = "ids";
pub(super) const NEXT_ID: &[u8] = b"next";

/// A big-endian id, as the counter and the id-keyed trees store it.
fn decode_id(bytes: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(bytes).ok().map(u64::from_be_bytes)
}

/// Runs `attempt` until it succeeds, fails other than by `held`, or a few seconds (`PATIENCE`)
/// have passed: for a file lock that the handles of a run just ended may still hold for a
/// moment (sled 0.34 can keep its lock after its last handle drops, sled issue #1289, and an
/// in-place restart can come before the old run's last task has let go of the store).
pub(super) fn while_held<T, E>(
    mut attempt: impl FnMut() -> Result<T, E>,
    held: impl Fn(&E) -> bool,
) -> Result<T, E> {
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);
    let started = std::time::Instant::now();
    loop {
        match attempt() {
            Err(e) if held(&e) && started.elapsed() < PATIENCE => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            done => return done,
        }
    }
}

/// Opens (or, with `create_new`, creates and must create) sled's database in `dir`, waiting a
/// moment for a lock still held ([`while_held`]).
pub(super) fn open_sled(
    dir: &Path,
    cache_bytes: u64,
    create_new: bool,
) -> anyhow::Result<sled::Db> {
    let open = || {
        sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .create_new(create_new)
            .open()
    };
    let held = |e: &sled::Error| matches!(e, sled::Error::Io(e) if e.to_string().contains("could not acquire lock"));
    while_held(open, held).with_context(|| {
        format!(
            "cannot open the database in {} (is another Heurist running on it? \
             set HEURIST_DATA_DIR to another directory)",
            dir.display()
        )
    })
}

/// The sled database and its trees. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(super) db: sled::Db,
    pub(super) history: Tree,
    pub(super) chats: Tree,
    pub(super) usage: Tree,
    pub(super) tickets: Tree,
    pub(super) feedback: Tree,
    pub(super) lessons: Tree,
    pub(super) reflections: Tree,
    pub(super) skill_matches: Tree,
    pub(super) inbox: Tree,
    pub(super) topic_history: Tree,
    pub(super) topic_chats: Tree,
    pub(super) retries: Tree,
    pub(super) people: Tree,
    pub(super) answers: Tree,
    pub(super) ids: Tree,
    /// Every write passes it; a backup holds it whole (see `tree.rs`).
    pub(super) gate: Gate,
    /// Held by the backup being written (`backup.rs`): one at a time.
    pub(super) backing_up: Arc<std::sync::Mutex<()>>,
    /// The data directory's lock, when opened through it (`Store::open_data_dir`).
    pub(super) dir_lock: Option<Arc<std::fs::File>>,
    /// Flush requests made so far, and what the finished flushes covered.
    flush_requests: Arc<AtomicU64>,
    flush_lock: Arc<tokio::sync::Mutex<Flushed>>,
}

/// What the flushes so far covered: the highest request, and how many requests the last one
/// served (more than one: many chats are writing at once).
#[derive(Debug, Default)]
struct Flushed {
    upto: u64,
    last_group: u64,
}

/// Under load (the last flush served several requests), a flush waits this long before it
/// starts, so the requests on their way share its fsync instead of each paying for one.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

impl Store {
    /// Opens (or creates) the database in `dir`, with sled's default page cache (1 GB).
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_with_cache(dir, 1 << 30)
    }

    /// Opens (or creates) the database in `dir`; sled's page cache holds at most `cache_bytes`.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> anyhow::Result<Self> {
        let db = open_sled(dir, cache_bytes, false)?;
        let gate = Gate::default();
        let tree = |name: &str| -> anyhow::Result<Tree> {
            Ok(Tree::new(db.open_tree(name)?, gate.clone()))
        };
        Ok(Self {
            history: tree(HISTORY)?,
            chats: tree(CHATS)?,
            usage: tree(USAGE)?,
            tickets: tree(TICKETS)?,
            feedback: tree(FEEDBACK)?,
            lessons: tree(LESSONS)?,
            reflections: tree(REFLECTIONS)?,
            skill_matches: tree(SKILL_MATCHES)?,
            inbox: tree(INBOX)?,
            topic_history: tree(TOPIC_HISTORY)?,
            topic_chats: tree(TOPIC_CHATS)?,
            retries: tree(RETRIES)?,
            people: tree(PEOPLE)?,
            answers: tree(ANSWERS)?,
            ids: tree(IDS)?,
            gate,
            backing_up: Arc::default(),
            dir_lock: None,
            flush_requests: Arc::default(),
            flush_lock: Arc::default(),
            db,
        })
    }

    /// The tree `name`, opened on first use (sled keeps it open after), its writes gated like
    /// the others': for the areas whose tree is not a field.
    pub(super) fn tree(&self, name: &str) -> Result<Tree> {
        Ok(Tree::new(self.db.open_tree(name)?, self.gate.clone()))
    }

    /// The database as a whole: durable flushing, ids, pruning, its size.
    pub fn db(&self) -> Db<'_> {
        Db { store: self }
    }
}

/// The database as a whole (durable flushing, the id counter, pruning every tree, its size):
/// [`Store::db`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Db<'s> {
    pub(super) store: &'s Store,
}

impl Db<'_> {
    /// A new id, above every id this store gave before (lessons and reflections). The counter
    /// is a record, so a compacted copy of the store goes on from it; sled's own id generator
    /// would start afresh in the copy. A store from before the counter starts it from sled's.
    pub(super) fn next_id(&self) -> Result<u64> {
        let seed = match self.store.ids.get(NEXT_ID)? {
            Some(counter) if decode_id(&counter).is_some() => 0,
            _ => self.id_floor()?,
        };
        let next = self.store.ids.update_and_fetch(NEXT_ID, |counter| {
            let id = counter.and_then(decode_id).unwrap_or(seed);
            Some(id.saturating_add(1).to_be_bytes().to_vec())
        })?;
        let next = next
            .and_then(|c| decode_id(&c))
            .ok_or_else(|| Error::Unreadable {
                tree: IDS,
                key: "next".into(),
            })?;
        Ok(next - 1)
    }

    /// Raises the id counter above every id this store gave, however it gave them: before a
    /// compaction copies it into a database whose own generator starts afresh.
    pub(super) fn settle_id_counter(&self) -> Result<()> {
        let floor = self.id_floor()?;
        self.store.ids.fetch_and_update(NEXT_ID, |counter| {
            let id = counter.and_then(decode_id).unwrap_or(0).max(floor);
            Some(id.to_be_bytes().to_vec())
        })?;
        Ok(())
    }

    /// Above every id given so far: sled's generator (which gave them before the counter) and
    /// the highest id in the trees keyed by one (should the counter be unreadable).
    fn id_floor(&self) -> Result<u64> {
        let mut floor = self.store.db.generate_id()?;
        for tree in [&self.store.lessons, &self.store.reflections] {
            if let Some((key, _)) = tree.last()?
                && let Some(id) = decode_id(&key)
            {
                floor = floor.max(id.saturating_add(1));
            }
        }
        Ok(floor)
    }

    /// The bytes of every key and value in every tree: what a compacted store holds, before
    /// sled's own overhead. O(records); for benchmarks and checks.
    pub fn live_bytes(&self) -> Result<u64> {
        let mut bytes = 0;
        for name in self.store.db.tree_names() {
            for entry in self.store.db.open_tree(name)?.iter() {
                let (key, value) = entry?;
                bytes += (key.len() + value.len()) as u64;
            }
        }
        Ok(bytes)
    }

    /// Writes everything to disk; called at shutdown.
    pub fn flush(&self) -> Result<()> {
        self.store.db.flush()?;
        Ok(())
    }

    /// Writes everything written so far to disk, without blocking the runtime. sled otherwise
    /// syncs every 500 ms, and an accepted update must survive a `kill -9` right after it.
    ///
    /// sled's own `flush_async` deadlocks when called concurrently (sled issue #1308, fixed
    /// only in unreleased sled), so one blocking `flush` runs at a time on the blocking pool,
    /// and callers that arrive while it runs share the next one (group commit). Under load
    /// (the last flush served more than one caller) the next one first waits [`GATHER`], so
    /// one fsync serves the many chats that need one at about the same time; a lone chat's
    /// flush never waits.
    pub(crate) async fn flush_async(&self) -> Result<()> {
        let ticket = self.store.flush_requests.fetch_add(1, Ordering::SeqCst) + 1;
        let mut flushed = self.store.flush_lock.lock().await;
        if flushed.upto >= ticket {
            return Ok(());
        }
        if flushed.last_group > 1 {
            tokio::time::sleep(GATHER).await;
        }
        // Every request numbered up to here was made before this flush starts.
        let upto = self.store.flush_requests.load(Ordering::SeqCst);
        let db = self.store.db.clone();
        tokio::task::spawn_blocking(move || db.flush()).await??;
        flushed.last_group = upto - flushed.upto;
        flushed.upto = upto;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                    store.db().flush_async().await.unwrap();
                }
            }));
        }
        // With sled's own flush_async this hangs (sled #1308).
        let all = futures_util::future::join_all(tasks);
        tokio::time::timeout(std::time::Duration::from_secs(30), all)
            .await
            .expect("concurrent flushes must not deadlock");
    }
}
