//! Writing a backup: every tree as of one moment (the gate held whole), spooled, then copied
//! into a file that is synced and renamed into place.

use std::fs;
use std::io::{self, BufWriter, Seek};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::files::{create_temporary, remove_leftovers};
use super::format::Encoder;
use crate::store::compaction::sync_dir;
use crate::store::db::Store;

/// A backup just written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    pub records: u64,
}

impl Store {
    /// Writes a backup of every tree into `dir` (created if missing), as of one moment (see
    /// the module's doc), under a name with `now` in it. Blocking: call it off the runtime.
    pub fn write_backup(
        &self,
        dir: &Path,
        now: chrono::DateTime<chrono::Utc>,
    ) -> anyhow::Result<Written> {
        // One backup at a time (the schedule's and `/backup`), so none takes another's
        // temporary file for a crash's leftover.
        let _one = self
            .backing_up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Its files hold every conversation and memory: the directory is its owner's only.
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .with_context(|| format!("cannot create the backup directory {}", dir.display()))?;
        remove_leftovers(dir);
        // The id counter is a record like any other: raised above every id given first, so a
        // restored store goes on from it (as a compacted one does).
        self.db().settle_id_counter()?;
        let (name, tmp, file) = create_temporary(dir, now)?;
        let written = self.write_frames(file, &tmp).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        let path = dir.join(&name);
        fs::rename(&tmp, &path)
            .with_context(|| format!("cannot rename {} to {name}", tmp.display()))?;
        sync_dir(dir)?;
        let bytes = fs::metadata(&path)?.len();
        Ok(Written {
            path,
            bytes,
            records: written,
        })
    }

    /// Every tree's records into `file` with the gate held whole; then the file is synced
    /// (after the gate is let go). Returns the count of records.
    ///
    /// While the gate is held, the frames go to a spool file in the system's temporary
    /// directory where one can be made (local and fast), and are copied into `file` after the
    /// gate is let go: writers (which wait on the gate on the runtime's threads) never wait
    /// for a slow or hung backup disk. Without a spool, straight into `file`.
    fn write_frames(&self, file: fs::File, tmp: &Path) -> anyhow::Result<u64> {
        let cannot = || format!("cannot write {}", tmp.display());
        // The crash test's pause (debug builds) wants a half-written file where it stops.
        let spool = if pause_asked() { None } else { spool_file() };
        let (spooled, target) = match spool {
            Some(spool) => (true, spool),
            None => (false, file.try_clone().with_context(cannot)?),
        };
        let mut encoder = Encoder::new(BufWriter::new(target)).with_context(cannot)?;
        {
            let _all = self.gate.hold_all();
            for name in self.db.tree_names() {
                encoder.tree(&name).with_context(cannot)?;
                for entry in self.db.open_tree(&name)?.iter() {
                    let (key, value) = entry?;
                    encoder.record(&key, &value).with_context(cannot)?;
                }
                test_pause(&mut encoder.out);
            }
        }
        let (out, records) = encoder.finish().with_context(cannot)?;
        let mut written = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(cannot)?;
        let mut file = file;
        if spooled {
            written.seek(io::SeekFrom::Start(0)).with_context(cannot)?;
            io::copy(&mut written, &mut file).with_context(cannot)?;
        }
        file.sync_all().with_context(cannot)?;
        Ok(records)
    }
}

/// Whether a debug build was asked to pause a backup (`HEURIST_TEST_PAUSE_BACKUP`).
fn pause_asked() -> bool {
    cfg!(debug_assertions)
        && std::env::var_os("HEURIST_TEST_PAUSE_BACKUP").is_some_and(|m| !m.is_empty())
}

/// A debug build with `HEURIST_TEST_PAUSE_BACKUP` set to a path stops a backup after its
/// first tree (written out to the temporary file), creates that path and waits there for good:
/// the end-to-end test kills the bot mid-backup that way. Release builds have no such hook.
fn test_pause(out: &mut BufWriter<fs::File>) {
    #[cfg(debug_assertions)]
    if let Some(marker) = std::env::var_os("HEURIST_TEST_PAUSE_BACKUP").filter(|m| !m.is_empty()) {
        let _ = io::Write::flush(out);
        let _ = fs::write(&marker, b"paused");
        tracing::error!("HEURIST_TEST_PAUSE_BACKUP: the backup waits here for good");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = out;
}

/// An unnamed file (created 0600, then unlinked) in the system's temporary directory for a
/// backup's frames while the gate is held; `None` where none can be made.
fn spool_file() -> Option<fs::File> {
    let path = std::env::temp_dir().join(format!(
        ".heurist-backup-spool-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
    ));
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&path).ok()?;
    // Unlinked at once: gone with the process whatever happens; still written and read here.
    fs::remove_file(&path).ok()?;
    Some(file)
}
