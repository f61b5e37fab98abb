//! The generations of the data directory and `CURRENT`, the file that names the live one:
//! read, checked against what is on disk, written atomically, and what a crash left removed.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::disk::{is_sled_dir, is_sled_name, sled_size, sync_dir};

/// The file naming the live generation.
pub(super) const CURRENT: &str = "CURRENT";

/// Where the next `CURRENT` is written before it is renamed over the old one.
pub(super) const CURRENT_TMP: &str = "CURRENT.tmp";

const GENERATION_PREFIX: &str = "store-";
/// How `CURRENT` names the legacy generation.
pub(super) const LEGACY_NAME: &str = "legacy";

/// Which sled directory is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Generation {
    /// sled's files in the data directory itself (before generations).
    Legacy,
    /// `store-<n>`.
    Numbered(u64),
}

impl Generation {
    pub(super) fn dir(self, root: &Path) -> PathBuf {
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

    pub(super) fn next(self) -> u64 {
        match self {
            Generation::Legacy => 1,
            Generation::Numbered(n) => n + 1,
        }
    }
}

/// What `CURRENT` says.
pub(super) struct Current {
    pub(super) generation: Generation,
    pub(super) baseline: u64,
    pub(super) from_legacy: bool,
}

/// The mark after a generation copied from sled's files in the data directory itself.
pub(super) const FROM_LEGACY: &str = "from-legacy";

/// Reads `CURRENT`, if there is one. An unreadable one is an error that names it.
pub(super) fn read_current(root: &Path) -> anyhow::Result<Option<Current>> {
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
pub(super) fn live_generation(root: &Path) -> anyhow::Result<Current> {
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
pub(super) fn remove_stale(root: &Path, live: Generation, from_legacy: bool) {
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
pub(super) fn only_sled_files(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .all(|e| is_sled_name(&e.file_name().to_string_lossy()))
    })
}

/// Writes `CURRENT` naming `generation` of `bytes` (marked `from-legacy` when it was copied from
/// sled's files in the data directory itself): to a temporary file, synced, renamed over the
/// old one, and the directory synced, so it is the old or the new, whole, after a crash.
pub(super) fn commit(
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
pub(in crate::store) fn first_generation(root: &Path) -> PathBuf {
    Generation::Numbered(1).dir(root)
}

/// Names the first generation, written and synced by a restore, live in `CURRENT` (with its
/// size, what the next compaction is measured against).
pub(in crate::store) fn commit_first_generation(root: &Path) -> anyhow::Result<()> {
    let size = sled_size(&first_generation(root));
    commit(root, Generation::Numbered(1), size, false)
}
