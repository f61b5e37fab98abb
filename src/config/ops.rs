//! `[metrics]` (the Prometheus endpoint) and `[backup]` (online backups): what an operator
//! runs beside the bot.

use std::path::PathBuf;

use serde::Deserialize;

/// The Prometheus endpoint (see [`crate::metrics`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` where `GET /metrics` is served (`HEURIST_METRICS_LISTEN`); empty: off.
    pub listen: String,
}

/// Online backups (see [`crate::store::backup`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupConfig {
    /// Where backups are written (`HEURIST_BACKUP_DIR`); empty: `backups` beside the data
    /// directory ([`super::Config::backup_dir`]).
    pub dir: PathBuf,
    /// Hours between two scheduled backups; 0: none but `/backup`'s.
    pub every_hours: u64,
    /// Backups kept; the older ones are deleted after each new one. At least 1.
    pub keep: usize,
}
