//! Online backups: the whole store, every tree, as one file written while the bot runs, and its
//! restore into an empty data directory.
//!
//! # The file
//! A text line `heurist-backup <version>\n`, then frames: `T` and a tree's name opens a tree,
//! `R`, a key and a value is one record of it (lengths are big-endian `u32`), and `E` with the
//! count of records (a big-endian `u64`) ends them, followed by the SHA-256 of every byte before
//! it. Every tree sled holds is written, by name, whatever it is (`Db::tree_names`), so a tree
//! an area adds later is in the next backup without a line changed here. A reader checks the
//! version and the checksum before it writes anything; [`FORMAT`] only grows: a file written
//! by an earlier version still restores (`tests/data/backup-v1.backup` is one).
//!
//! # Consistent: one moment for all the trees
//! sled has no snapshot across trees (its own `export` reads one tree after the other while
//! writes go on), and a copy made that way can hold a chat's answer marked sent in the inbox but
//! not the turn in the history, or a task's next run moved without the run it fired. So every
//! write to the store passes a gate (`tree.rs`, held shared for the length of one sled call),
//! and a backup holds the gate whole while it reads every tree into the file: the file is the
//! store as it was at one moment, between two writes, exactly what a `kill -9` at that moment
//! would have left on disk after sled's flush. The bot already comes back whole from that
//! state (the inbox, the visibility protocol and recovery are built for it), so a restored
//! store resumes the same way. The price: writes wait while a backup reads (the records are
//! streamed to the page cache: a backup of 107 MB took 0.5 s in all, release build on a 2-core
//! VM; see docs/operations.md), and reads never wait. The file is synced and renamed after the
//! gate is let go.
//!
//! # Crash safety
//! The file is written under a temporary name (`.<name>.tmp`), synced, renamed to its name and
//! the directory synced: a crash mid-backup leaves the earlier backups as they were, and the
//! next backup removes the leftover. Only files named like backups are ever pruned.

use std::fs;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use super::compaction::{commit_first_generation, first_generation, sync_all, sync_dir};
use super::db::{Store, open_sled};

/// The format this version writes, and the newest it reads.
pub(crate) const FORMAT: u32 = 1;
/// The first line's words before the version.
const MAGIC: &str = "heurist-backup";
/// What backup files are named: `heurist-<UTC time>.backup`.
const PREFIX: &str = "heurist-";
const SUFFIX: &str = ".backup";
/// A key, a value or a tree's name longer than this is taken for corruption (sled's own
/// limit on a value is far lower in practice), so a damaged length never asks for the memory.
const MAX_LEN: u64 = 1 << 30;
/// How many restored records go into sled at once.
const BATCH_BYTES: usize = 4 << 20;

/// A backup just written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    /// Its size on disk.
    pub bytes: u64,
    pub records: u64,
}

/// What a restore brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Restored {
    pub(crate) trees: usize,
    pub records: u64,
}

/// Writes the frames of a backup to `out`, hashing every byte.
struct Encoder<W: Write> {
    out: W,
    hash: Sha256,
    records: u64,
}

impl<W: Write> Encoder<W> {
    fn new(out: W) -> io::Result<Self> {
        let mut encoder = Self {
            out,
            hash: Sha256::new(),
            records: 0,
        };
        encoder.put(format!("{MAGIC} {FORMAT}\n").as_bytes())?;
        Ok(encoder)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }

    fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a record over 4 GB"))?;
        self.put(&len.to_be_bytes())?;
        self.put(bytes)
    }

    fn tree(&mut self, name: &[u8]) -> io::Result<()> {
        self.put(b"T")?;
        self.bytes(name)
    }

    fn record(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.put(b"R")?;
        self.bytes(key)?;
        self.bytes(value)?;
        self.records += 1;
        Ok(())
    }

    /// Ends the records and writes the checksum; the writer and the count of records.
    fn finish(mut self) -> io::Result<(W, u64)> {
        self.put(b"E")?;
        self.put(&self.records.to_be_bytes())?;
        let digest = self.hash.finalize();
        self.out.write_all(&digest)?;
        Ok((self.out, self.records))
    }
}

/// What reading a backup found wrong; each says it in one line with what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Damage {
    #[error("it is not a Heurist backup (its first line is not \"{MAGIC} <version>\")")]
    NotABackup,
    #[error(
        "it was written by a newer Heurist (format {0}; this one reads up to {FORMAT}): restore \
         it with that version"
    )]
    Newer(u32),
    #[error("it is truncated (it ends before its checksum): use another backup")]
    Truncated,
    #[error("it is corrupted ({0}): use another backup")]
    Corrupted(&'static str),
    #[error("cannot read it: {0}")]
    Io(io::Error),
}

impl From<io::Error> for Damage {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Damage::Truncated
        } else {
            Damage::Io(e)
        }
    }
}

/// Reads a backup's frames from `input`, hashing what it reads, and hands each tree and record
/// to `sink`; checks the count and the checksum at the end. `sink` sees the records before
/// the checksum is known: a restore reads the file through once with a sink that keeps
/// nothing before it writes anything.
fn decode<R: Read>(
    input: R,
    mut sink: impl FnMut(Frame<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Restored> {
    let mut reader = Hashing {
        input,
        hash: Sha256::new(),
    };
    reader.header()?;
    let mut restored = Restored {
        trees: 0,
        records: 0,
    };
    let mut open = false;
    loop {
        match reader.array::<1>()? {
            [b'T'] => {
                let name = reader.bytes()?;
                sink(Frame::Tree(&name))?;
                restored.trees += 1;
                open = true;
            }
            [b'R'] if open => {
                let key = reader.bytes()?;
                let value = reader.bytes()?;
                sink(Frame::Record(&key, &value))?;
                restored.records += 1;
            }
            [b'E'] => break,
            _ => return Err(Damage::Corrupted("a frame of an unknown kind").into()),
        }
    }
    let count = u64::from_be_bytes(reader.array()?);
    let expected = reader.hash.clone().finalize();
    let mut digest = [0u8; 32];
    reader.input.read_exact(&mut digest).map_err(Damage::from)?;
    if digest[..] != expected[..] {
        return Err(Damage::Corrupted("its checksum does not match").into());
    }
    if count != restored.records {
        return Err(Damage::Corrupted("its count of records does not match").into());
    }
    if reader.input.read(&mut [0u8; 1]).map_err(Damage::from)? != 0 {
        return Err(Damage::Corrupted("bytes after its checksum").into());
    }
    Ok(restored)
}

/// One frame of a backup, as [`decode`] hands it on.
enum Frame<'a> {
    Tree(&'a [u8]),
    Record(&'a [u8], &'a [u8]),
}

/// A reader that hashes what it reads.
struct Hashing<R> {
    input: R,
    hash: Sha256,
}

impl<R: Read> Hashing<R> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Damage> {
        let mut bytes = [0u8; N];
        self.input.read_exact(&mut bytes)?;
        self.hash.update(bytes);
        Ok(bytes)
    }

    /// A length and that many bytes, read as they come (a damaged length that says more than
    /// the file holds ends in [`Damage::Truncated`], not in a huge allocation).
    fn bytes(&mut self) -> Result<Vec<u8>, Damage> {
        let len = u64::from(u32::from_be_bytes(self.array()?));
        if len > MAX_LEN {
            return Err(Damage::Corrupted("a record longer than any sled keeps"));
        }
        let mut bytes = Vec::new();
        (&mut self.input).take(len).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != len {
            return Err(Damage::Truncated);
        }
        self.hash.update(&bytes);
        Ok(bytes)
    }

    /// The first line: the magic word and a version this reads.
    fn header(&mut self) -> Result<(), Damage> {
        let mut line = Vec::new();
        while line.last() != Some(&b'\n') {
            if line.len() > 32 {
                return Err(Damage::NotABackup);
            }
            match self.array::<1>() {
                Ok([byte]) => line.push(byte),
                Err(Damage::Truncated) => return Err(Damage::NotABackup),
                Err(e) => return Err(e),
            }
        }
        let text = std::str::from_utf8(&line).map_err(|_| Damage::NotABackup)?;
        let version = text
            .trim_end()
            .strip_prefix(MAGIC)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or(Damage::NotABackup)?;
        match version {
            0 => Err(Damage::NotABackup),
            v if v > FORMAT => Err(Damage::Newer(v)),
            _ => Ok(()),
        }
    }
}

/// A backup's file name for `now`: sorts by time, and says when it was taken.
fn file_name(now: chrono::DateTime<chrono::Utc>, nth: u32) -> String {
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

/// A debug build with `HEURIST_TEST_PAUSE_BACKUP` set to a path stops a backup after its
/// first tree (written out to the temporary file), creates that path and waits there for good:
/// the end-to-end test kills the bot mid-backup that way. Release builds have no such hook.
/// Whether a debug build was asked to pause a backup (`HEURIST_TEST_PAUSE_BACKUP`).
fn pause_asked() -> bool {
    cfg!(debug_assertions)
        && std::env::var_os("HEURIST_TEST_PAUSE_BACKUP").is_some_and(|m| !m.is_empty())
}

fn test_pause(out: &mut BufWriter<fs::File>) {
    #[cfg(debug_assertions)]
    if let Some(marker) = std::env::var_os("HEURIST_TEST_PAUSE_BACKUP").filter(|m| !m.is_empty()) {
        let _ = out.flush();
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

/// A new temporary file in `dir` for the backup named after `now` (a second backup in the same
/// millisecond gets `-1`, ...): its name when done, its temporary path, the file.
fn create_temporary(
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
fn remove_leftovers(dir: &Path) {
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

/// Restores the backup `file` into `data_dir`, which must be missing or empty. The file is read
/// through and its version and checksum checked first; then its records are written into the
/// data directory's first generation (`store-1/`), synced, and only then named live in
/// `CURRENT`, as a compaction commits its copy (see [`super::compaction`]). So a damaged file,
/// or a restore that fails on the way, leaves the directory as it was (what it wrote is
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UserId};
    use crate::llm::ChatMessage;
    use crate::schedule::{TaskKind, Timing};
    use crate::store::compaction::CompactionPolicy;
    use crate::store::fixtures::{self, conversation, dump};
    use crate::store::{ReviewState, Task};

    const NOW: &str = "2026-12-06T07:00:00.250Z";
    /// The backup of format 1 committed with the tests: a future version must still read it.
    const FIXTURE_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/backup-v1.backup");

    fn now() -> chrono::DateTime<chrono::Utc> {
        NOW.parse().unwrap()
    }

    /// A store with a record in every area the bot keeps, the ones the issue names first.
    fn filled(dir: &Path) -> Store {
        let store = Store::open(dir).unwrap();
        let turn = [
            ChatMessage::user("what is 2+2?"),
            ChatMessage::assistant("4"),
        ];
        let history = store.history();
        assert!(
            history
                .append(conversation(7), 0, None, &turn, &Default::default())
                .unwrap()
        );
        let id = store.learning().new_lesson_id().unwrap();
        let mut lesson = fixtures::heuristic(id, "Check the units before adding numbers");
        lesson.review = ReviewState::Pending;
        (lesson.uses, lesson.successes, lesson.failures, lesson.up) = (5, 3, 1, 2);
        store.learning().put_lesson(&lesson).unwrap();
        let max = 50;
        store
            .memories()
            .change(UserId(1001), |facts| facts.remember("likes tea", 1, max))
            .unwrap();
        let task = Task {
            id: 0,
            user: UserId(1001),
            chat: ChatId(1001),
            topic: None,
            kind: TaskKind::Reminder,
            request: "water the plants".into(),
            timing: Timing::Once { at: 1_900_000_000 },
            zone: "UTC".into(),
            next_run: 1_900_000_000,
            created: 1,
            tainted: false,
        };
        store.tasks().add(task).unwrap();
        store
    }

    fn restore_into(file: &Path, dir: &Path) -> anyhow::Result<Restored> {
        restore(file, dir, 1 << 20)
    }

    /// Every tree, the ones an area adds later too, comes back record for record; the file
    /// is named by its time, readable by its owner only, and its temporary file is gone.
    #[test]
    fn a_backup_restores_every_record_of_every_tree() {
        let dir = tempfile::tempdir().unwrap();
        let store = filled(&dir.path().join("db"));
        // A tree no area has yet: it must not be forgotten.
        let later = store.tree("added_later").unwrap();
        later.insert(b"k", b"v".to_vec()).unwrap();
        let backups = dir.path().join("backups");
        let written = store.write_backup(&backups, now()).unwrap();
        assert_eq!(
            written.path,
            backups.join("heurist-20261206-070000-250.backup")
        );
        assert_eq!(written.bytes, fs::metadata(&written.path).unwrap().len());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&written.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            fs::read_dir(&backups).unwrap().count(),
            1,
            "no temporary file left"
        );

        let into = dir.path().join("restored");
        let restored = restore_into(&written.path, &into).unwrap();
        assert_eq!(restored.records, written.records);
        let (back, _) = Store::open_data_dir(&into, 1 << 20, CompactionPolicy::NEVER).unwrap();
        let original = dump(&store);
        assert!(original.iter().any(|(tree, ..)| tree == b"added_later"));
        for tree in ["history", "heuristics", "people", "tasks", "ids", "chats"] {
            assert!(
                original.iter().any(|(t, ..)| t == tree.as_bytes()),
                "the fixture fills {tree}"
            );
        }
        assert_eq!(dump(&back), original);
    }

    /// A backup is one moment of all the trees: writers that each write one tree and then
    /// another (in both orders) never show in it with the second write and not the first, as
    /// they would in a copy made tree after tree while they write.
    #[test]
    fn a_backup_taken_while_trees_are_written_is_one_moment_of_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = [("pair_a", "pair_b"), ("pair_b", "pair_a")]
            .into_iter()
            .enumerate()
            .map(|(writer, (first, second))| {
                let (store, stop) = (store.clone(), stop.clone());
                std::thread::spawn(move || {
                    let (first, second) = (store.tree(first).unwrap(), store.tree(second).unwrap());
                    let mut i = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let key = [&[writer as u8][..], &i.to_be_bytes()].concat();
                        first.insert(&key, vec![0u8; 64]).unwrap();
                        second.insert(&key, vec![0u8; 64]).unwrap();
                        i += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let backups = dir.path().join("backups");
        for _ in 0..5 {
            let written = store.write_backup(&backups, chrono::Utc::now()).unwrap();
            let mut trees: std::collections::BTreeMap<
                Vec<u8>,
                std::collections::BTreeSet<Vec<u8>>,
            > = Default::default();
            let mut current = Vec::new();
            decode(
                BufReader::new(fs::File::open(&written.path).unwrap()),
                |frame| {
                    match frame {
                        Frame::Tree(name) => current = name.to_vec(),
                        Frame::Record(key, _) => {
                            trees
                                .entry(current.clone())
                                .or_default()
                                .insert(key.to_vec());
                        }
                    }
                    Ok(())
                },
            )
            .unwrap();
            let (a, b) = (&trees[&b"pair_a".to_vec()], &trees[&b"pair_b".to_vec()]);
            // Writer 0 writes a then b: b's key without a's is a torn copy; writer 1 the other way.
            let torn_0 = b.iter().filter(|k| k[0] == 0 && !a.contains(*k)).count();
            let torn_1 = a.iter().filter(|k| k[0] == 1 && !b.contains(*k)).count();
            assert_eq!(
                (torn_0, torn_1),
                (0, 0),
                "a write seen without the one before it"
            );
            // At most the one pair each writer was in the middle of is half there.
            let half_0 = a.iter().filter(|k| k[0] == 0 && !b.contains(*k)).count();
            let half_1 = b.iter().filter(|k| k[0] == 1 && !a.contains(*k)).count();
            assert!(half_0 <= 1 && half_1 <= 1, "{half_0} {half_1}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
    }

    /// A file that is not whole, not a backup, or from a newer Heurist is refused with one line
    /// saying so, and the data directory stays as it was (missing, here).
    #[test]
    fn a_damaged_file_is_refused_in_one_line_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = filled(&dir.path().join("db"));
        let good = fs::read(
            store
                .write_backup(&dir.path().join("b"), now())
                .unwrap()
                .path,
        )
        .unwrap();
        let flip = |at: usize| {
            let mut bytes = good.clone();
            bytes[at] ^= 0x01;
            bytes
        };
        struct Case {
            name: &'static str,
            bytes: Vec<u8>,
            says: &'static str,
        }
        let newer = [b"heurist-backup 2\n".as_slice(), &good[17..]].concat();
        let cases = [
            Case {
                name: "cut in the records",
                bytes: good[..good.len() / 2].to_vec(),
                says: "truncated",
            },
            Case {
                name: "cut in the checksum",
                bytes: good[..good.len() - 5].to_vec(),
                says: "truncated",
            },
            Case {
                name: "cut before its first record",
                bytes: good[..20].to_vec(),
                says: "truncated",
            },
            Case {
                name: "empty",
                bytes: Vec::new(),
                says: "not a Heurist backup",
            },
            Case {
                name: "a bit flipped in a value",
                bytes: flip(good.len() / 2),
                says: "corrupted",
            },
            Case {
                name: "a bit flipped in the checksum",
                bytes: flip(good.len() - 1),
                says: "checksum does not match",
            },
            Case {
                name: "bytes after the checksum",
                bytes: [good.as_slice(), b"x"].concat(),
                says: "bytes after its checksum",
            },
            Case {
                name: "another file",
                bytes: b"{\"text\": \"a lesson\"}\n".to_vec(),
                says: "not a Heurist backup",
            },
            Case {
                name: "a newer format",
                bytes: newer,
                says: "newer Heurist (format 2",
            },
        ];
        for case in cases {
            let file = dir.path().join("damaged.backup");
            fs::write(&file, &case.bytes).unwrap();
            let into = dir.path().join("restored");
            let error = format!("{:#}", restore_into(&file, &into).unwrap_err());
            assert!(error.contains(case.says), "{}: {error}", case.name);
            assert!(!error.contains('\n'), "{}: one line: {error}", case.name);
            assert!(!into.exists(), "{}: nothing written", case.name);
        }
    }

    /// A data directory with anything in it is refused, and left as it is.
    #[test]
    fn a_restore_never_writes_over_a_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let store = filled(&dir.path().join("db"));
        let file = store
            .write_backup(&dir.path().join("b"), now())
            .unwrap()
            .path;
        let into = dir.path().join("busy");
        fs::create_dir_all(&into).unwrap();
        fs::write(into.join("notes.txt"), "mine").unwrap();
        let error = format!("{:#}", restore_into(&file, &into).unwrap_err());
        assert!(error.contains("is not empty"), "{error}");
        assert_eq!(fs::read_dir(&into).unwrap().count(), 1);
        // An empty one is fine.
        let empty = dir.path().join("empty");
        fs::create_dir_all(&empty).unwrap();
        restore_into(&file, &empty).unwrap();
        assert!(empty.join("CURRENT").exists());
    }

    /// Pruning keeps the newest `keep` backups and touches nothing else; a crash's temporary
    /// file is removed by the next backup.
    #[test]
    fn old_backups_and_leftovers_go_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = filled(&dir.path().join("db"));
        let backups = dir.path().join("backups");
        fs::create_dir_all(&backups).unwrap();
        fs::write(backups.join("notes.txt"), "mine").unwrap();
        fs::write(backups.join("heurist-pre-upgrade.backup"), "mine too").unwrap();
        let leftover = backups.join(".heurist-20261205-000000-000.backup.tmp");
        fs::write(&leftover, "half").unwrap();
        let start = now();
        for minute in 0..4 {
            let at = start + chrono::Duration::minutes(minute);
            store.write_backup(&backups, at).unwrap();
        }
        assert!(!leftover.exists());
        assert_eq!(prune(&backups, 2, Path::new("none")), 2);
        let names: Vec<String> = list(&backups)
            .into_iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "heurist-20261206-070300-250.backup",
                "heurist-20261206-070200-250.backup"
            ]
        );
        assert!(backups.join("notes.txt").exists());
        assert!(backups.join("heurist-pre-upgrade.backup").exists());
        // Two in the same millisecond both keep their files, the second sorting newer.
        let first = store.write_backup(&backups, start).unwrap();
        let second = store.write_backup(&backups, start).unwrap();
        assert!(
            second
                .path
                .ends_with("heurist-20261206-070000-250-1.backup")
        );
        assert_eq!(list(&backups)[2].0, second.path);
        assert_eq!(list(&backups)[3].0, first.path);
        // A backup written after the clock went back is not pruned as the oldest.
        let earlier = store
            .write_backup(&backups, start - chrono::Duration::days(1))
            .unwrap();
        prune(&backups, 2, &earlier.path);
        assert!(earlier.path.exists());
        assert_eq!(list(&backups).len(), 2);
    }

    /// The backup of format 1 committed under tests/data restores, with its lesson's scores
    /// and review state, its memory, its task's next run and its conversation.
    #[test]
    fn a_backup_of_format_1_still_restores() {
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("db");
        let restored = restore_into(Path::new(FIXTURE_V1), &into).unwrap();
        assert!(restored.records > 0);
        let (store, _) = Store::open_data_dir(&into, 1 << 20, CompactionPolicy::NEVER).unwrap();
        let window = store.history().window(conversation(7), 10_000).unwrap();
        let texts: Vec<String> = window
            .messages
            .iter()
            .map(|m| m.content().to_string())
            .collect();
        assert_eq!(texts, ["what is 2+2?", "4"]);
        let lessons = store.learning().lessons();
        assert_eq!(lessons.len(), 1);
        let lesson = &lessons[0];
        assert_eq!(lesson.text, "Check the units before adding numbers");
        assert_eq!(lesson.review, ReviewState::Pending);
        assert_eq!(
            (lesson.uses, lesson.successes, lesson.failures, lesson.up),
            (5, 3, 1, 2)
        );
        let facts = store.memories().facts(UserId(1001));
        assert_eq!(
            facts
                .list()
                .iter()
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>(),
            ["likes tea"]
        );
        let tasks = store.tasks().all();
        assert_eq!(tasks.len(), 1);
        assert_eq!(
            (tasks[0].request.as_str(), tasks[0].next_run),
            ("water the plants", 1_900_000_000)
        );
        // Ids go on above those the backup's store gave.
        assert!(store.learning().new_lesson_id().unwrap() > lesson.id);
    }

    /// Writes the fixture [`a_backup_of_format_1_still_restores`] reads. Run by hand, once per
    /// format (`cargo test --lib writes_the_format_fixture -- --ignored`), never in CI: the
    /// committed file is what an earlier release wrote.
    #[test]
    #[ignore = "writes tests/data/backup-v<FORMAT>.backup"]
    fn writes_the_format_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let store = filled(&dir.path().join("db"));
        let written = store.write_backup(&dir.path().join("b"), now()).unwrap();
        let fixture = FIXTURE_V1.replace("v1", &format!("v{FORMAT}"));
        fs::copy(&written.path, fixture).unwrap();
    }
}
