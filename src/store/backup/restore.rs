//! Restoring a backup into an empty data directory, as its first generation.

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::Path;

use anyhow::{Context, bail};

use super::format::{Damage, Frame, Restored, decode};
use crate::store::compaction::{commit_first_generation, first_generation, sync_all, sync_dir};
use crate::store::db::open_sled;

/// How many restored records go into sled at once.
const BATCH_BYTES: usize = 4 << 20;

/// Restores the backup `file` into `data_dir`, which must be missing or empty. The file is read
/// through and its version and checksum checked first; then its records are written into the
/// data directory's first generation (`store-1/`), synced, and only then named live in
/// `CURRENT`, as a compaction commits its copy (see [`crate::store::compaction`]). So a damaged
/// file, or a restore that fails on the way, leaves the directory as it was (what it wrote is
/// removed); one cut short by a crash leaves a `store-1/` without `CURRENT`, which the bot
/// refuses to start on (and this refuses to restore over) until it is removed. The directory
/// itself is never replaced: it may be a volume's mount point.
pub(crate) fn restore(file: &Path, data_dir: &Path, cache_bytes: u64) -> anyhow::Result<Restored> {
    let existed = ensure_empty(data_dir)?;
    let damaged = |e: anyhow::Error| match e.downcast::<Damage>() {
        Ok(damage) => anyhow::anyhow!("{} cannot be restored: {damage}", file.display()),
        Err(e) => e,
    };
    let open = || -> anyhow::Result<BufReader<fs::File>> {
        let f = fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        Ok(BufReader::new(f))
    };
    decode(open()?, |_| Ok(())).map_err(damaged)?;
    let restored = fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))
        .and_then(|()| {
            // The new directory's name is durable before anything is said restored.
            if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            fill(data_dir, open()?, cache_bytes)
        });
    if restored.is_err() {
        // It was empty or missing: what is there now is this restore's.
        let _ = if existed {
            empty(data_dir)
        } else {
            fs::remove_dir_all(data_dir)
        };
    }
    restored.map_err(damaged)
}

/// Removes everything in `dir`, not `dir` itself.
fn empty(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// Refuses a data directory that holds anything; whether it exists.
fn ensure_empty(data_dir: &Path) -> anyhow::Result<bool> {
    match fs::read_dir(data_dir) {
        Ok(entries) => {
            // A file system's own `lost+found` (an ext4 volume's mount point) is no data.
            let mut entries = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name() != "lost+found");
            if entries.next().is_some() {
                bail!(
                    "{} is not empty: restore into an empty or missing directory (set \
                     HEURIST_DATA_DIR to one, or move this one aside)",
                    data_dir.display()
                );
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", data_dir.display())),
    }
}

/// The records of the backup `input` as the first generation of the data directory `root`,
/// synced and then committed in `CURRENT`.
fn fill(root: &Path, input: impl Read, cache_bytes: u64) -> anyhow::Result<Restored> {
    let dir = first_generation(root);
    let restored = {
        let db = open_sled(&dir, cache_bytes, true)?;
        let mut tree: Option<sled::Tree> = None;
        let mut batch = sled::Batch::default();
        let mut bytes = 0;
        let restored = decode(input, |frame| {
            match frame {
                Frame::Tree(name) => {
                    if let Some(done) = tree.take() {
                        done.apply_batch(std::mem::take(&mut batch))?;
                    }
                    tree = Some(db.open_tree(name)?);
                    bytes = 0;
                }
                Frame::Record(key, value) => {
                    let Some(into) = &tree else {
                        bail!("a record outside a tree");
                    };
                    batch.insert(key, value);
                    bytes += key.len() + value.len();
                    if bytes >= BATCH_BYTES {
                        into.apply_batch(std::mem::take(&mut batch))?;
                        bytes = 0;
                    }
                }
            }
            Ok(())
        })?;
        if let Some(done) = tree {
            done.apply_batch(batch)?;
        }
        db.flush()?;
        restored
    };
    sync_all(&dir)?;
    commit_first_generation(root)?;
    Ok(restored)
}
