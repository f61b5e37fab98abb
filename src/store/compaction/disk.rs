//! The disk under the store: syncing what was written, the size of sled's files, and the room
//! left on the volume.

use std::fs;
use std::path::Path;

use anyhow::Context;

/// The files sled keeps in its directory (besides `snap.*` snapshots and `blobs/`).
const SLED_FILES: &[&str] = &["conf", "db"];
const SLED_BLOBS: &str = "blobs";
const SLED_SNAPSHOT_PREFIX: &str = "snap.";

/// Syncs every file and directory below `dir`, and `dir` itself.
pub(in crate::store) fn sync_all(dir: &Path) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            sync_all(&path)?;
        } else {
            fs::File::open(&path)?.sync_all()?;
        }
    }
    sync_dir(dir)
}

/// Syncs the directory `dir` itself (its entries: a file created or renamed in it).
pub(in crate::store) fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// The file system holding `path`: bytes available to an unprivileged process, and its size.
#[cfg(unix)]
// The fields are narrower than `u64` on some targets.
#[allow(clippy::useless_conversion)]
pub(super) fn volume(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is a NUL-terminated string and `stat` a zeroed struct statvfs(3) fills.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let unit = u64::from(stat.f_frsize);
    Some((
        u64::from(stat.f_bavail).saturating_mul(unit),
        u64::from(stat.f_blocks).saturating_mul(unit),
    ))
}

#[cfg(not(unix))]
pub(super) fn volume(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// The bytes of sled's files in `dir` (its `db` and `conf`, snapshots and blobs), and nothing
/// else: the legacy generation shares its directory with the generations and `CURRENT`.
pub(super) fn sled_size(dir: &Path) -> u64 {
    fn tree_size(path: &Path) -> u64 {
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => fs::read_dir(path)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| tree_size(&e.path()))
                        .sum()
                })
                .unwrap_or(0),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| is_sled_name(&e.file_name().to_string_lossy()))
        .map(|e| tree_size(&e.path()))
        .sum()
}

/// Whether `name` is one of the files sled keeps in its directory.
pub(super) fn is_sled_name(name: &str) -> bool {
    SLED_FILES.contains(&name) || name == SLED_BLOBS || name.starts_with(SLED_SNAPSHOT_PREFIX)
}

/// Whether `dir` holds a sled database: its `conf` says so, and its `db` is there.
pub(super) fn is_sled_dir(dir: &Path) -> bool {
    fs::read(dir.join("conf")).is_ok_and(|conf| conf.starts_with(b"segment_size: "))
        && dir.join("db").is_file()
}
