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
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};

use super::db::{Store, open_sled, while_held};

/// The file naming the live generation.
const CURRENT: &str = "CURRENT";
/// Where the next `CURRENT` is written before it is renamed over the old one.
const CURRENT_TMP: &str = "CURRENT.tmp";
/// Held by the process that uses the data directory.
const LOCK: &str = "LOCK";
/// The files sled keeps in its directory (besides `snap.*` snapshots and `blobs/`).
const SLED_FILES: &[&str] = &["conf", "db"];
const SLED_BLOBS: &str = "blobs";
const SLED_SNAPSHOT_PREFIX: &str = "snap.";
const GENERATION_PREFIX: &str = "store-";
/// How `CURRENT` names the legacy generation.
const LEGACY_NAME: &str = "legacy";

/// When the store is compacted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// Compact once the store is this many times its size after the last compaction; 0 never.
    pub factor: f64,
    /// ... and only once it has grown by at least this many bytes.
    pub min_growth: u64,
}

impl CompactionPolicy {
    /// Never compacts: for opening a store only to read or fill it (a restore, the tests).
    pub const NEVER: Self = Self {
        factor: 0.0,
        min_growth: 0,
    };

    /// The policy `config` sets (`compact_factor`, `compact_min_mb`): the one place it is built,
    /// for the bot, `heurist doctor`, the lessons' export and import, and the storage bench.
    pub fn configured(config: &crate::config::Config) -> Self {
        Self {
            factor: config.compact_factor,
            min_growth: config.compact_min_mb.saturating_mul(1 << 20),
        }
    }

    /// Whether a store of `size` bytes, `baseline` bytes right after its last compaction, is
    /// due for one.
    pub(crate) fn due(&self, baseline: u64, size: u64) -> bool {
        self.factor > 0.0
            && size > baseline.saturating_add(self.min_growth)
            && size as f64 > baseline as f64 * self.factor
    }
}

/// Which sled directory is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    /// sled's files in the data directory itself (before generations).
    Legacy,
    /// `store-<n>`.
    Numbered(u64),
}

impl Generation {
    fn dir(self, root: &Path) -> PathBuf {
        match self {
            Generation::Legacy => root.to_path_buf(),
            Generation::Numbered(n) => root.join(format!("{GENERATION_PREFIX}{n}")),
        }
    }

    /// The generation as `CURRENT` names it.
    fn name(self) -> String {
        match self {
            Generation::Legacy => LEGACY_NAME.to_string(),
            Generation::Numbered(n) => format!("{GENERATION_PREFIX}{n}"),
        }
    }

    fn next(self) -> u64 {
        match self {
            Generation::Legacy => 1,
            Generation::Numbered(n) => n + 1,
        }
    }
}

/// The data directory: which generation is live and what its size was after it was written.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
    generation: Generation,
    baseline: u64,
    policy: CompactionPolicy,
    /// A compaction failed at this start: none is due again until the next one, so a full
    /// disk does not make the bot restart in place over and over.
    failed: bool,
    /// `CURRENT` says the live generation was copied from sled's files in the data directory
    /// itself, which are then deleted (and the mark with them).
    from_legacy: bool,
}

impl DataDir {
    /// The live sled directory.
    pub fn store_dir(&self) -> PathBuf {
        self.generation.dir(&self.root)
    }

    /// What the live generation's sled files take on disk now.
    pub(crate) fn size(&self) -> u64 {
        sled_size(&self.store_dir())
    }

    /// The size past which the store is due for compaction; `None` when compaction is off.
    pub(crate) fn compacts_at(&self) -> Option<u64> {
        let policy = self.policy;
        (policy.factor > 0.0).then(|| {
            let by_factor = (self.baseline as f64 * policy.factor) as u64;
            by_factor.max(self.baseline.saturating_add(policy.min_growth))
        })
    }

    /// The data directory's file system: the bytes available to this process, and its size
    /// (`statvfs`); `None` where that cannot be read.
    pub(crate) fn volume(&self) -> Option<(u64, u64)> {
        volume(&self.root)
    }

    /// Whether the store has grown enough to be compacted (see [`CompactionPolicy`]).
    pub(crate) fn compaction_due(&self) -> bool {
        !self.failed && self.policy.due(self.baseline, self.size())
    }
}

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
        let mut dir = DataDir {
            root: root.to_path_buf(),
            generation: current.generation,
            baseline: current.baseline,
            policy,
            failed: false,
            from_legacy: current.from_legacy,
        };
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

impl DataDir {
    /// Writes `CURRENT` as this says (a failure is logged: `CURRENT` still names the live
    /// generation, with an older size or mark).
    fn record(&self) {
        if let Generation::Numbered(n) = self.generation
            && let Err(e) = commit(
                &self.root,
                Generation::Numbered(n),
                self.baseline,
                self.from_legacy,
            )
        {
            tracing::warn!(error = %format!("{e:#}"), "cannot update CURRENT");
        }
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

/// What `CURRENT` says.
struct Current {
    generation: Generation,
    baseline: u64,
    from_legacy: bool,
}

/// The mark after a generation copied from sled's files in the data directory itself.
const FROM_LEGACY: &str = "from-legacy";

/// Reads `CURRENT`, if there is one. An unreadable one is an error that names it.
fn read_current(root: &Path) -> anyhow::Result<Option<Current>> {
    let current = root.join(CURRENT);
    match fs::read_to_string(&current) {
        Ok(text) => parse_current(&text).map(Some).with_context(|| {
            format!(
                "{} is unreadable (it names the live store, e.g. \"store-3 1048576\"); \
                 restore it, or move the data directory aside to start afresh",
                current.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", current.display())),
    }
}

/// The live generation and its baseline. Without `CURRENT`, a directory holding sled's files
/// is the legacy generation and an empty one starts generation 1 (recorded first, so its
/// directory is never taken for a stale copy). States this code never leaves are refused, so
/// that nothing is deleted on a guess.
fn live_generation(root: &Path) -> anyhow::Result<Current> {
    let legacy = is_sled_dir(root);
    let stores = stores_in(root);
    match read_current(root)? {
        Some(current) => {
            let named = current.generation.dir(root);
            if !is_sled_dir(&named) && stores.iter().any(|s| s != &named) {
                bail!(
                    "{} names {}, which holds no store, while {} do: set CURRENT to the \
                     generation that holds your data (\"store-<n> 0\"), or move the data \
                     directory aside to start afresh",
                    root.join(CURRENT).display(),
                    named.display(),
                    show(&stores)
                );
            }
            if legacy && current.generation != Generation::Legacy && !current.from_legacy {
                bail!(
                    "{} holds both a store generation ({}) and a sled store it was not copied \
                     from (restored from a backup, or written by an older Heurist?): move one \
                     of them aside",
                    root.display(),
                    named.display()
                );
            }
            Ok(current)
        }
        // sled's files beside a generation, and nothing to say which is live: a compaction
        // names the legacy store in `CURRENT` before it copies it, so this is no crash of
        // ours (an older Heurist's, a restored backup): deleting either could lose the data.
        None if legacy && !stores.is_empty() => bail!(
            "{} is missing, but both sled's files in {} and {} hold a store: write it naming \
             the one that holds your data (\"{LEGACY_NAME} 0\" for the files in the directory \
             itself, else \"store-<n> 0\"), or move the other aside",
            root.join(CURRENT).display(),
            root.display(),
            show(&stores)
        ),
        None if legacy => Ok(Current {
            generation: Generation::Legacy,
            baseline: 0,
            from_legacy: false,
        }),
        None if !stores.is_empty() => bail!(
            "{} is missing, but {} hold a store: write it naming the newest complete one, \
             e.g. \"store-<n> 0\", or move the data directory aside to start afresh",
            root.join(CURRENT).display(),
            show(&stores)
        ),
        None => {
            commit(root, Generation::Numbered(1), 0, false)?;
            Ok(Current {
                generation: Generation::Numbered(1),
                baseline: 0,
                from_legacy: false,
            })
        }
    }
}

fn show(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_current(text: &str) -> anyhow::Result<Current> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (name, bytes, from_legacy) = match words[..] {
        [name, bytes] => (name, bytes, false),
        [name, bytes, FROM_LEGACY] => (name, bytes, true),
        _ => bail!("expected \"store-<n> <bytes>\", found {text:?}"),
    };
    let generation = match name {
        LEGACY_NAME => Generation::Legacy,
        name => match generation_number(name) {
            Some(n) => Generation::Numbered(n),
            None => bail!("{name:?} is not a store generation"),
        },
    };
    let baseline = bytes
        .parse()
        .with_context(|| format!("{bytes:?} is not a size"))?;
    Ok(Current {
        generation,
        baseline,
        from_legacy,
    })
}

/// `store-<n>` → `n`.
fn generation_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(GENERATION_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `name` is one of the files sled keeps in its directory.
fn is_sled_name(name: &str) -> bool {
    SLED_FILES.contains(&name) || name == SLED_BLOBS || name.starts_with(SLED_SNAPSHOT_PREFIX)
}

/// Whether `dir` holds a sled database: its `conf` says so, and its `db` is there.
fn is_sled_dir(dir: &Path) -> bool {
    fs::read(dir.join("conf")).is_ok_and(|conf| conf.starts_with(b"segment_size: "))
        && dir.join("db").is_file()
}

/// The `store-<n>` directories in `root` that hold a sled database.
fn stores_in(root: &Path) -> Vec<PathBuf> {
    let mut stores: Vec<PathBuf> = fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| generation_number(&e.file_name().to_string_lossy()).is_some())
                .map(|e| e.path())
                .filter(|p| is_sled_dir(p))
                .collect()
        })
        .unwrap_or_default();
    stores.sort();
    stores
}

/// Deletes what a crash left: an unrenamed `CURRENT.tmp`, generations other than the live one
/// (an unfinished copy, or the old store after its copy was committed), and, when `CURRENT`
/// says the live generation was copied from them (`from_legacy`), sled's files in the data
/// directory itself. Only sled's own files are deleted: a `store-<n>` directory with anything
/// else in it is left alone. Failures are logged; the next start tries again.
fn remove_stale(root: &Path, live: Generation, from_legacy: bool) {
    let mut stale = vec![root.join(CURRENT_TMP)];
    if let Ok(entries) = fs::read_dir(root) {
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let old_generation = generation_number(&name)
                .is_some_and(|n| Generation::Numbered(n) != live)
                && only_sled_files(&entry.path());
            let legacy_file = from_legacy && live != Generation::Legacy && is_sled_name(&name);
            if old_generation || legacy_file {
                stale.push(entry.path());
            }
        }
    }
    // `conf` first: a deletion cut short then leaves nothing that reads as a store.
    stale.sort_by_key(|path| path.file_name().is_none_or(|name| name != "conf"));
    for path in stale {
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed a superseded or unfinished store copy")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a superseded store copy")
            }
        }
    }
}

/// Whether everything in `dir` is one of sled's files (an empty directory too).
fn only_sled_files(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .all(|e| is_sled_name(&e.file_name().to_string_lossy()))
    })
}

/// Copies the live generation into the next one, reads the copy back and checks it, makes it
/// durable and names it in `CURRENT`. Returns the data directory as it now is; the caller
/// opens the new generation and only then deletes the old one.
fn compact(dir: &DataDir, cache_bytes: u64) -> anyhow::Result<DataDir> {
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

/// Writes `CURRENT` naming `generation` of `bytes` (marked `from-legacy` when it was copied from
/// sled's files in the data directory itself): to a temporary file, synced, renamed over the
/// old one, and the directory synced, so it is the old or the new, whole, after a crash.
fn commit(
    root: &Path,
    generation: Generation,
    bytes: u64,
    from_legacy: bool,
) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = root.join(CURRENT_TMP);
    let mut file =
        fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let mark = if from_legacy {
        format!(" {FROM_LEGACY}")
    } else {
        String::new()
    };
    writeln!(file, "{} {bytes}{mark}", generation.name())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, root.join(CURRENT))
        .with_context(|| format!("cannot rename {} to {CURRENT}", tmp.display()))?;
    sync_dir(root)
}

/// Where a restore writes the store of an empty data directory `root`: its first generation.
pub(super) fn first_generation(root: &Path) -> PathBuf {
    Generation::Numbered(1).dir(root)
}

/// Names the first generation, written and synced by a restore, live in `CURRENT` (with its
/// size, what the next compaction is measured against).
pub(super) fn commit_first_generation(root: &Path) -> anyhow::Result<()> {
    let size = sled_size(&first_generation(root));
    commit(root, Generation::Numbered(1), size, false)
}

/// Syncs every file and directory below `dir`, and `dir` itself.
pub(super) fn sync_all(dir: &Path) -> anyhow::Result<()> {
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

pub(super) fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// The file system holding `path`: bytes available to an unprivileged process, and its size.
#[cfg(unix)]
// The fields are narrower than `u64` on some targets.
#[allow(clippy::useless_conversion)]
fn volume(path: &Path) -> Option<(u64, u64)> {
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
fn volume(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// The bytes of sled's files in `dir` (its `db` and `conf`, snapshots and blobs), and nothing
/// else: the legacy generation shares its directory with the generations and `CURRENT`.
fn sled_size(dir: &Path) -> u64 {
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
    Ok(Some(DataDir {
        root: root.to_path_buf(),
        generation: current.generation,
        baseline: current.baseline,
        policy,
        failed: false,
        from_legacy: current.from_legacy,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::db::{IDS, NEXT_ID};
    use super::*;
    use crate::ids::ChatId;
    use crate::llm::ChatMessage;
    use crate::store::fixtures;
    use crate::store::fixtures::{Records, conversation, dump};

    /// Compacts on any growth of 10 % or more.
    const EAGER: CompactionPolicy = CompactionPolicy {
        factor: 1.1,
        min_growth: 0,
    };
    const NEVER: CompactionPolicy = CompactionPolicy::NEVER;

    /// Writes `turns` turns of chat 7, heuristics and a reflection, as the bot would.
    fn fill(store: &Store, turns: usize) -> Vec<u64> {
        for i in 0..turns {
            let text = format!("question {i} {}", "x".repeat(500));
            let turn = [ChatMessage::user(text), ChatMessage::assistant("answer")];
            assert!(
                store
                    .history()
                    .append(conversation(7), 0, None, &turn, &Default::default())
                    .unwrap()
            );
        }
        let mut ids = Vec::new();
        for i in 0..3 {
            let id = store.learning().new_lesson_id().unwrap();
            store
                .learning()
                .put_lesson(&fixtures::heuristic(id, &format!("heuristic {i}")))
                .unwrap();
            ids.push(id);
        }
        ids.push(
            store
                .learning()
                .save_reflection(&fixtures::job(ChatId(7), "task"))
                .unwrap(),
        );
        store.db().flush().unwrap();
        ids
    }

    fn names(root: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_store_is_due_once_it_has_grown_by_the_factor_and_the_minimum() {
        let policy = CompactionPolicy {
            factor: 2.0,
            min_growth: 100,
        };
        struct Case {
            name: &'static str,
            policy: CompactionPolicy,
            baseline: u64,
            size: u64,
            due: bool,
        }
        let cases = [
            Case {
                name: "doubled and grown by the minimum",
                policy,
                baseline: 1_000,
                size: 2_001,
                due: true,
            },
            Case {
                name: "exactly doubled is not over",
                policy,
                baseline: 1_000,
                size: 2_000,
                due: false,
            },
            Case {
                name: "doubled but under the minimum growth",
                policy,
                baseline: 50,
                size: 120,
                due: false,
            },
            Case {
                name: "a fresh store past the minimum",
                policy,
                baseline: 0,
                size: 101,
                due: true,
            },
            Case {
                name: "off",
                policy: NEVER,
                baseline: 0,
                size: u64::MAX,
                due: false,
            },
        ];
        for case in cases {
            assert_eq!(
                case.policy.due(case.baseline, case.size),
                case.due,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn a_fresh_directory_starts_generation_one_and_keeps_it() {
        let root = tempfile::tempdir().unwrap();
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert_eq!(
            fs::read_to_string(root.path().join(CURRENT)).unwrap(),
            "store-1 0\n"
        );
        fill(&store, 3);
        drop(store);
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert_eq!(
            store
                .history()
                .window(conversation(7), 1 << 20)
                .unwrap()
                .messages
                .len(),
            6
        );
    }

    #[test]
    fn compaction_moves_a_legacy_store_keeping_every_record_and_ids_go_on_above() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path()).unwrap();
        let mut ids = fill(&store, 200);
        // Ids a store from before the id counter gave straight from sled's generator.
        for _ in 0..3 {
            ids.push(store.db.generate_id().unwrap());
        }
        store.ids.remove(NEXT_ID).unwrap();
        // sled's default tree, which no area uses, goes over too.
        store.db.insert(b"default", b"tree").unwrap();
        store.db().flush().unwrap();
        let before = dump(&store);
        drop(store);

        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();

        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert_eq!(
            names(root.path()),
            ["CURRENT", "LOCK", "store-1"],
            "sled's old files are gone"
        );
        let after: Vec<_> = dump(&store)
            .into_iter()
            .filter(|(tree, _, _)| tree.as_slice() != IDS.as_bytes())
            .collect();
        let before: Vec<_> = before
            .into_iter()
            .filter(|(tree, _, _)| tree.as_slice() != IDS.as_bytes())
            .collect();
        assert_eq!(after, before, "every record of every tree, unchanged");
        let next = store.learning().new_lesson_id().unwrap();
        assert!(
            ids.iter().all(|&id| next > id),
            "a new id {next} is above every old one {ids:?}"
        );
        assert!(!dir.compaction_due(), "the baseline is the compacted size");
        let current = fs::read_to_string(root.path().join(CURRENT)).unwrap();
        assert!(
            !current.contains(FROM_LEGACY),
            "{current}: the mark went with the files"
        );
    }

    #[test]
    fn a_crash_after_a_legacy_store_was_copied_deletes_it_at_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        let legacy = Store::open(root.path()).unwrap();
        fill(&legacy, 20);
        drop(legacy);
        // The state right after the copy's commit: the copy in store-1, marked as copied from
        // sled's files in the data directory, which are still there.
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        let records = dump(&store);
        drop((store, dir));
        let copy = tempfile::tempdir().unwrap();
        let legacy = Store::open(copy.path()).unwrap();
        fill(&legacy, 20);
        drop(legacy);
        for name in names(copy.path()) {
            fs::rename(copy.path().join(&name), root.path().join(&name)).unwrap();
        }
        fs::write(root.path().join(CURRENT), "store-1 0 from-legacy\n").unwrap();

        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-1"]);
        assert_eq!(
            fs::read_to_string(root.path().join(CURRENT)).unwrap(),
            "store-1 0\n",
            "the mark goes with the files"
        );
        assert_eq!(dump(&store), records);
    }

    #[test]
    fn a_crash_while_a_legacy_store_was_being_copied_removes_the_copy_and_keeps_the_store() {
        let root = tempfile::tempdir().unwrap();
        let legacy = Store::open(root.path()).unwrap();
        fill(&legacy, 20);
        let records = dump(&legacy);
        drop(legacy);
        // Cut short after the copy started: sled's files and what it wrote of store-1.
        let failed = CompactionPolicy {
            factor: 1.1,
            min_growth: 0,
        };
        fs::create_dir(root.path().join("store-1")).unwrap();
        fs::write(root.path().join("store-1/notes.txt"), b"in the way").unwrap();
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, failed).unwrap();
        assert_eq!(dir.store_dir(), root.path());
        drop((store, dir));
        assert_eq!(
            fs::read_to_string(root.path().join(CURRENT)).unwrap(),
            "legacy 0\n",
            "named before the copy"
        );
        fs::remove_file(root.path().join("store-1/notes.txt")).unwrap();
        let half = Store::open(&root.path().join("store-1")).unwrap();
        fill(&half, 1);
        drop(half);

        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

        assert_eq!(dir.store_dir(), root.path());
        assert!(!root.path().join("store-1").exists(), "the copy is removed");
        assert_eq!(dump(&store), records);
    }

    #[test]
    fn each_compaction_writes_the_next_generation_and_only_when_due() {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        let ids = fill(&store, 200);
        drop(store);
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-2"));
        let records = dump(&store);
        let next = store.learning().new_lesson_id().unwrap();
        assert!(ids.iter().all(|&id| next > id), "{next} above {ids:?}");
        drop(store);

        // Not grown since: opened as it is.
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-2"));
        assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-2"]);
        assert_eq!(store.learning().lessons().len(), 3);
        assert_eq!(dump(&store).len(), records.len());
    }

    #[test]
    fn what_a_crash_left_of_a_compaction_is_removed_and_the_live_store_kept() {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        fill(&store, 20);
        let records = dump(&store);
        drop(store);
        // A crash during the copy into store-2, before CURRENT was renamed.
        fs::create_dir(root.path().join("store-2")).unwrap();
        fs::write(root.path().join("store-2/db"), b"half a copy").unwrap();
        fs::write(root.path().join(CURRENT_TMP), b"store-2 11\n").unwrap();
        // And what an earlier crash after a commit left: an older generation.
        fs::create_dir_all(root.path().join("store-0/blobs")).unwrap();
        // Not ours: left alone, even named like sled's files or a generation.
        for name in ["db", "snap.00000000000A1B2C", "notes.txt"] {
            fs::write(root.path().join(name), b"mine").unwrap();
        }
        fs::create_dir(root.path().join("conf")).unwrap();
        fs::create_dir(root.path().join("store-9")).unwrap();
        fs::write(root.path().join("store-9/notes.txt"), b"mine").unwrap();

        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert_eq!(
            names(root.path()),
            [
                "CURRENT",
                "LOCK",
                "conf",
                "db",
                "notes.txt",
                "snap.00000000000A1B2C",
                "store-1",
                "store-9"
            ]
        );
        assert_eq!(names(&root.path().join("store-9")), ["notes.txt"]);
        assert_eq!(dump(&store), records);
    }

    #[test]
    fn an_unreadable_current_stops_the_start_and_deletes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        fill(&store, 2);
        drop(store);
        for garbage in [
            "",
            "store-x 5\n",
            "store-1\n",
            "db 0\n",
            "store-1 0 extra\n",
        ] {
            fs::write(root.path().join(CURRENT), garbage).unwrap();
            let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
                .err()
                .unwrap_or_else(|| panic!("{garbage:?} was accepted"));
            assert!(
                format!("{err:#}").contains("CURRENT is unreadable"),
                "{err:#}"
            );
            assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-1"]);
        }
    }

    /// A data directory with one compaction behind it: `store-2` live, `store-1` gone.
    fn compacted_once() -> (tempfile::TempDir, Records) {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        fill(&store, 50);
        drop(store);
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-2"));
        let records = dump(&store);
        (root, records)
    }

    #[test]
    fn states_no_compaction_leaves_stop_the_start_and_delete_nothing() {
        struct Case {
            name: &'static str,
            /// Changes the directory (after one compaction: `store-2` live).
            make: fn(&Path),
            error: &'static str,
        }
        let cases = [
            Case {
                name: "CURRENT deleted beside the store",
                make: |root| fs::remove_file(root.join(CURRENT)).unwrap(),
                error: "is missing, but",
            },
            Case {
                name: "sled's files in the data directory beside a generation, without CURRENT",
                make: |root| {
                    fs::remove_file(root.join(CURRENT)).unwrap();
                    let restored = Store::open(root).unwrap();
                    fill(&restored, 3);
                },
                error: "both sled's files in",
            },
            Case {
                name: "CURRENT naming a generation that is not there",
                make: |root| fs::write(root.join(CURRENT), "store-7 0\n").unwrap(),
                error: "which holds no store",
            },
            Case {
                name: "a sled store in the data directory that CURRENT was not copied from",
                make: |root| {
                    let restored = Store::open(root).unwrap();
                    fill(&restored, 3);
                },
                error: "it was not copied from",
            },
        ];
        for case in cases {
            let (root, records) = compacted_once();
            (case.make)(root.path());
            let before = names(root.path());
            let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
                .err()
                .unwrap_or_else(|| panic!("{}: the start went on", case.name));
            assert!(
                format!("{err:#}").contains(case.error),
                "{}: {err:#}",
                case.name
            );
            assert_eq!(names(root.path()), before, "{}: nothing deleted", case.name);
            let store = Store::open(&root.path().join("store-2")).unwrap();
            assert_eq!(dump(&store), records, "{}: the store is intact", case.name);
        }
    }

    #[test]
    fn a_second_process_on_the_directory_stops_before_it_touches_anything() {
        let (root, _) = compacted_once();
        let (_first, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        fs::write(root.path().join(CURRENT_TMP), "store-3 0\n").unwrap();
        let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
            .err()
            .expect("the second open is refused");
        assert!(format!("{err:#}").contains("is in use"), "{err:#}");
        assert!(
            root.path().join(CURRENT_TMP).exists(),
            "the second one removed nothing"
        );
    }

    #[test]
    fn a_failed_compaction_opens_the_store_as_it_was_and_is_not_retried_in_this_run() {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        let ids = fill(&store, 50);
        let records = dump(&store);
        drop(store);
        // Something not ours where the copy would go.
        fs::create_dir(root.path().join("store-2")).unwrap();
        fs::write(root.path().join("store-2/notes.txt"), b"mine").unwrap();

        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();

        assert_eq!(dir.store_dir(), root.path().join("store-1"));
        assert!(!dir.compaction_due(), "not asked for again in this run");
        assert_eq!(dump(&store), records);
        assert_eq!(names(&root.path().join("store-2")), ["notes.txt"]);
        assert!(store.learning().new_lesson_id().unwrap() > *ids.iter().max().unwrap());
    }

    #[test]
    fn an_unreadable_id_counter_still_gives_ids_above_every_record_after_a_compaction() {
        let root = tempfile::tempdir().unwrap();
        let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
        let ids = fill(&store, 50);
        store.ids.insert(NEXT_ID, b"garbage".as_slice()).unwrap();
        store.db().flush().unwrap();
        drop(store);
        let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
        assert_eq!(dir.store_dir(), root.path().join("store-2"));
        let next = store.learning().new_lesson_id().unwrap();
        assert!(ids.iter().all(|&id| next > id), "{next} above {ids:?}");
    }
}
