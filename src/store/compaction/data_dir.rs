//! The data directory as a running bot sees it: which generation is live, what it measured
//! after its last compaction, and whether the next is due.

use std::path::{Path, PathBuf};

use super::disk::{sled_size, volume};
use super::generations::{Current, Generation, commit};
use super::policy::CompactionPolicy;

/// The data directory: which generation is live and what its size was after it was written.
#[derive(Debug, Clone)]
pub struct DataDir {
    pub(super) root: PathBuf,
    pub(super) generation: Generation,
    pub(super) baseline: u64,
    pub(super) policy: CompactionPolicy,
    /// A compaction failed at this start: none is due again until the next one, so a full
    /// disk does not make the bot restart in place over and over.
    pub(super) failed: bool,
    /// `CURRENT` says the live generation was copied from sled's files in the data directory
    /// itself, which are then deleted (and the mark with them).
    pub(super) from_legacy: bool,
}

impl DataDir {
    /// The data directory at `root` whose live generation is `current`'s.
    pub(super) fn at(root: &Path, current: Current, policy: CompactionPolicy) -> Self {
        DataDir {
            root: root.to_path_buf(),
            generation: current.generation,
            baseline: current.baseline,
            policy,
            failed: false,
            from_legacy: current.from_legacy,
        }
    }

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

    /// Writes `CURRENT` as this says (a failure is logged: `CURRENT` still names the live
    /// generation, with an older size or mark).
    pub(super) fn record(&self) {
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
