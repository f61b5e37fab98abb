//! The compaction itself: the live generation copied, tree by tree, into the next one, read
//! back and checked, made durable, and named in `CURRENT`.

use std::fs;
use std::time::Instant;

use anyhow::{Context, bail};

use super::data_dir::DataDir;
use super::disk::{sled_size, sync_all};
use super::generations::{Generation, commit, only_sled_files};
use crate::store::db::{Store, open_sled};

/// Copies the live generation into the next one, reads the copy back and checks it, makes it
/// durable and names it in `CURRENT`. Returns the data directory as it now is; the caller
/// opens the new generation and only then deletes the old one.
pub(super) fn compact(dir: &DataDir, cache_bytes: u64) -> anyhow::Result<DataDir> {
    let started = Instant::now();
    let from = dir.store_dir();
    let next = dir.generation.next();
    let to = Generation::Numbered(next).dir(&dir.root);
    let before = dir.size();
    tracing::info!(mb = before >> 20, from = %from.display(), "compacting the store");
    if dir.generation == Generation::Legacy {
        // Named first, so a crash during the copy leaves a known unfinished `store-1/`.
        commit(&dir.root, Generation::Legacy, 0, false)?;
    }
    if to.exists() {
        // What a crash left of an earlier copy.
        if !only_sled_files(&to) {
            bail!(
                "{} is in the way and holds more than a store copy: move it aside",
                to.display()
            );
        }
        fs::remove_dir_all(&to).with_context(|| format!("cannot remove {}", to.display()))?;
    }
    let records = {
        let old = Store::open_with_cache(&from, cache_bytes)?;
        // The counter goes over with the records, above every id the old store gave.
        old.db().settle_id_counter()?;
        old.db().flush()?;
        let new = open_sled(&to, cache_bytes, true)?;
        let records = copy(&old.db, &new)?;
        new.flush()?;
        drop(new);
        let expected = old.db.checksum()?;
        let written = open_sled(&to, cache_bytes, false)?;
        if written.checksum()? != expected {
            bail!("the copy in {} differs from the store", to.display());
        }
        records
    };
    sync_all(&to)?;
    let after = sled_size(&to);
    let from_legacy = dir.generation == Generation::Legacy;
    commit(&dir.root, Generation::Numbered(next), after, from_legacy)?;
    tracing::info!(
        before_mb = before >> 20,
        after_mb = after >> 20,
        records,
        secs = started.elapsed().as_secs_f64(),
        into = %to.display(),
        "compacted the store"
    );
    Ok(DataDir {
        generation: Generation::Numbered(next),
        baseline: after,
        from_legacy,
        ..dir.clone()
    })
}

/// Copies every tree of `old` into `new` in key order, in batches; returns the records copied.
fn copy(old: &sled::Db, new: &sled::Db) -> anyhow::Result<u64> {
    const BATCH_BYTES: usize = 4 << 20;
    let mut records = 0;
    for name in old.tree_names() {
        let from = old.open_tree(&name)?;
        let into = new.open_tree(&name)?;
        let mut batch = sled::Batch::default();
        let mut bytes = 0;
        for entry in from.iter() {
            let (key, value) = entry?;
            bytes += key.len() + value.len();
            batch.insert(key, value);
            records += 1;
            if bytes >= BATCH_BYTES {
                into.apply_batch(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        into.apply_batch(batch)?;
    }
    Ok(records)
}
