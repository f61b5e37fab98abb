//! `heurist restore FILE`: a backup written by the bot (see [`crate::store::backup`]) restored
//! into the data directory the configuration names (`HEURIST_DATA_DIR`), which must be empty or
//! missing: a restore never writes over a store. The file's version and checksum are checked
//! before anything is written, and the new store appears whole or not at all.

use std::path::Path;

use crate::config::Config;
use crate::store::backup;
use crate::texts::ops as texts;

/// Restores `file` into `config.data_dir`; the sentence to print.
pub fn restore(config: &Config, file: &Path) -> anyhow::Result<String> {
    let restored = backup::restore(file, &config.data_dir, config.cache_bytes)?;
    Ok(texts::restored(
        &file.display().to_string(),
        &config.data_dir.display().to_string(),
        restored.trees,
        restored.records,
    ))
}
