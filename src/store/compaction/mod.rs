//! Bounded disk: sled 0.34 never gives back the space of records it removed or rewrote (the
//! file only grows, and pruned space is not visibly reused), so the store is compacted: copied,
//! tree by tree, into a fresh sled directory, which then replaces it. The copy holds only the
//! live records.
//!
//! # Layout of the data directory
//! - `CURRENT`: one line, `store-<n> <bytes>`: the generation in use, and its size when it was
//!   first opened (what the next compaction is measured against); `from-legacy` after them
//!   while sled's files from before generations, which it was copied from, are still to be
//!   deleted. `legacy 0` names sled's files in the data directory itself: written before
//!   they are first copied, so a `store-1/` that a crash left half-written beside them is
//!   known for the unfinished copy it is.
//! - `store-<n>/`: that generation's sled files.
//! - `LOCK`: held (`flock`) by the process using the directory, so a second one started on it
//!   stops before it touches anything.
//!
//! A data directory from before generations holds sled's own files (`conf`, `db`, `blobs/`,
//! `snap.*`); it is used as it is until its first compaction moves it into `store-1`.
//!
//! # Crash safety
//! The copy is written, flushed, read back from disk and checked against the old store (sled's
//! checksum of every tree), and its files and directories synced; only then is `CURRENT`
//! replaced, by an atomic rename, and the old generation is deleted only once the new one is
//! open. So after a crash at any point `CURRENT` names a whole generation: the old one (the
//! copy is discarded at the next start) or the new one (the old one is then deleted). Only
//! `CURRENT` decides which generation is live, a directory it names is never deleted, and a
//! state this code never leaves (`CURRENT` missing beside a store, be it a `store-<n>/` or
//! sled's files beside one, or naming a missing one, or a sled store in the data directory
//! itself that `CURRENT` does not say it was copied from) stops the start and deletes nothing.
//!
//! # When
//! At start-up, when the store has grown past `compact_factor` times its size after the last
//! compaction and by at least `compact_min_mb`. A bot that runs for months checks the same
//! after every prune and, once nothing is running, restarts itself in place to compact (see
//! `heurist::run`).

use std::fs;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};

use super::db::{Store, while_held};
use copy::compact;
use disk::{is_sled_dir, is_sled_name};
use generations::{Current, Generation, live_generation, read_current, remove_stale};

mod copy;
mod data_dir;
mod disk;
mod generations;
mod policy;
#[cfg(test)]
mod tests;

pub use data_dir::DataDir;
pub(super) use disk::{sync_all, sync_dir};
pub(super) use generations::{commit_first_generation, first_generation};
pub use policy::CompactionPolicy;

/// Held by the process that uses the data directory.
const LOCK: &str = "LOCK";

impl Store {
    /// Opens the store of the data directory `root` (creating it), with sled's page cache at
    /// most `cache_bytes`: takes the directory's lock (held until the last handle on the store
    /// is dropped), compacts first when `policy` says the store is due, and removes what a
    /// crash left of a compaction. A compaction that fails (a full disk, say) is logged and the
    /// store is opened as `CURRENT` then names it.
    pub fn open_data_dir(
        root: &Path,
        cache_bytes: u64,
        policy: CompactionPolicy,
    ) -> anyhow::Result<(Store, DataDir)> {
        fs::create_dir_all(root)
            .with_context(|| format!("cannot create the data directory {}", root.display()))?;
        let lock = lock(root)?;
        let current = live_generation(root)?;
        let mut dir = DataDir::at(root, current, policy);
        let mut compacted = false;
        if dir.compaction_due() {
            match compact(&dir, cache_bytes) {
                Ok(next) => {
                    dir = next;
                    compacted = true;
                }
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot compact the store; it is used as it is");
                    // The rename may have happened before the error (a failed directory
                    // sync): what `CURRENT` says now is what is live.
                    if let Some(current) = read_current(root)? {
                        dir.generation = current.generation;
                        dir.baseline = current.baseline;
                        dir.from_legacy = current.from_legacy;
                    }
                    dir.failed = true;
                }
            }
        }
        let mut store = Store::open_with_cache(&dir.store_dir(), cache_bytes)?;
        // Every handle on the store holds the directory's lock, and the last one lets it go.
        store.dir_lock = Some(Arc::new(lock));
        if compacted {
            store.db().flush()?;
            // sled grows its files a little as it opens them: the baseline is the size the
            // store is used at.
            dir.baseline = dir.size();
            dir.record();
        }
        // Only now that the live generation is open: what else is there is stale.
        remove_stale(root, dir.generation, dir.from_legacy);
        if dir.from_legacy
            && !fs::read_dir(root)?
                .any(|e| e.is_ok_and(|e| is_sled_name(&e.file_name().to_string_lossy())))
        {
            dir.from_legacy = false;
            dir.record();
        }
        Ok((store, dir))
    }
}

/// Takes the data directory's lock, or says who holds it.
fn lock(root: &Path) -> anyhow::Result<fs::File> {
    let path = root.join(LOCK);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let locked = while_held(
        || file.try_lock(),
        |e| matches!(e, fs::TryLockError::WouldBlock),
    );
    if let Err(e) = locked {
        bail!(
            "{} is in use ({e}): is another Heurist running on it? Stop it, or set \
             HEURIST_DATA_DIR to another directory",
            root.display()
        );
    }
    Ok(file)
}

/// The data directory as it is on disk, read without taking its lock and without changing
/// anything (`heurist doctor` looks at it while the bot may be running): the live generation,
/// whose [`DataDir::size`] and [`DataDir::compacts_at`] say how far the next compaction is.
/// `None` when no store was written there yet.
pub(crate) fn peek(root: &Path, policy: CompactionPolicy) -> anyhow::Result<Option<DataDir>> {
    let current = match read_current(root)? {
        Some(current) => current,
        None if is_sled_dir(root) => Current {
            generation: Generation::Legacy,
            baseline: 0,
            from_legacy: false,
        },
        None => return Ok(None),
    };
    Ok(Some(DataDir::at(root, current, policy)))
}
