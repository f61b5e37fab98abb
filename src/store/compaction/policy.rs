//! When the store is compacted: a policy of growth, measured against the store's size right
//! after its last compaction.

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
