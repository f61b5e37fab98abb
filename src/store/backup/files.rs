//! The backup directory: what backups are named, their temporary files and what a crash left
//! of them, the newest first, and the old ones pruned.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// What backup files are named: `heurist-<UTC time>.backup`.
const PREFIX: &str = "heurist-";
const SUFFIX: &str = ".backup";

/// A backup's file name for `now`: sorts by time, and says when it was taken.
pub(super) fn file_name(now: chrono::DateTime<chrono::Utc>, nth: u32) -> String {
    let stamp = now.format("%Y%m%d-%H%M%S-%3f");
    match nth {
        0 => format!("{PREFIX}{stamp}{SUFFIX}"),
        n => format!("{PREFIX}{stamp}-{n}{SUFFIX}"),
    }
}

/// Whether `name` is a backup's file name (what pruning and the newest backup consider):
/// exactly what [`file_name`] writes, so an operator's `heurist-pre-upgrade.backup` beside
/// them is never taken for the newest nor pruned.
fn is_backup_name(name: &str) -> bool {
    backup_order(name).is_some()
}

/// Where a backup's file name sorts: its time stamp (`YYYYMMDD-HHMMSS-mmm`), then its number
/// within the millisecond (`-1`, ...; none is 0).
fn backup_order(name: &str) -> Option<(&str, u32)> {
    let middle = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (stamp, nth) = match middle.get(19..) {
        Some("") => (middle, 0),
        Some(rest) => (&middle[..19], rest.strip_prefix('-')?.parse().ok()?),
        None => return None,
    };
    let digits = |range: std::ops::Range<usize>| {
        stamp
            .get(range)
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
    };
    (stamp.len() == 19
        && digits(0..8)
        && &stamp[8..9] == "-"
        && digits(9..15)
        && &stamp[15..16] == "-"
        && digits(16..19))
    .then_some((stamp, nth))
}

/// A new temporary file in `dir` for the backup named after `now` (a second backup in the same
/// millisecond gets `-1`, ...): its name when done, its temporary path, the file.
pub(super) fn create_temporary(
    dir: &Path,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(String, PathBuf, fs::File)> {
    let mut nth = 0;
    loop {
        let name = file_name(now, nth);
        let tmp = dir.join(format!(".{name}.tmp"));
        if !dir.join(&name).exists() {
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            // A backup holds every conversation and memory: its owner's to read only.
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&tmp) {
                Ok(file) => return Ok((name, tmp, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", tmp.display()));
                }
            }
        }
        nth += 1;
    }
}

/// Removes what a crash mid-backup left: temporary files of backups (logged; a failure only
/// leaves the file for the next time).
pub(super) fn remove_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let leftover = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .is_some_and(is_backup_name);
        if leftover {
            match fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(file = %name, "removed an unfinished backup"),
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "cannot remove an unfinished backup")
                }
            }
        }
    }
}

/// The backups in `dir`, newest first (by name, which is by time), with when each was written.
pub(crate) fn list(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut backups: Vec<(String, PathBuf, std::time::SystemTime)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let modified = entry.metadata().ok()?.modified().ok()?;
            is_backup_name(&name).then(|| (name, entry.path(), modified))
        })
        .collect();
    backups.sort_by(|a, b| backup_order(&b.0).cmp(&backup_order(&a.0)));
    backups.into_iter().map(|(_, p, t)| (p, t)).collect()
}

/// Deletes all but the newest `keep` backups in `dir`, never `written` (the one just made,
/// whatever the clock did); how many went. Only backups' names are considered: nothing else
/// in the directory is touched.
pub(crate) fn prune(dir: &Path, keep: usize, written: &Path) -> usize {
    let mut removed = 0;
    let backups = list(dir);
    let slots = if backups.iter().any(|(path, _)| path == written) {
        keep.saturating_sub(1)
    } else {
        keep
    };
    let older = backups.into_iter().filter(|(path, _)| path != written);
    for (path, _) in older.skip(slots) {
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot remove an old backup")
            }
        }
    }
    removed
}
