//! The doctor's checks of this machine and the configuration itself: the data directory (the
//! bot can write there; how big the store is and when it compacts) and the allow-list (an
//! empty one lets nobody use the bot).

use std::path::Path;

use super::context::{Checked, Context};
use super::report::Line;
use crate::store::compaction::{CompactionPolicy, peek};
use crate::texts::ops as texts;

/// Writable (a file is created and removed; the directory is created as the bot would), the
/// live store's size, and the size at which it is compacted next. Never opens the store, so
/// it is safe while the bot runs.
pub(super) fn data_dir<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let config = context.config;
        let root = &config.data_dir;
        let shown = root.display().to_string();
        if let Err(e) = writable(root) {
            let found = texts::data_dir_unwritable(&shown, &e.to_string());
            return vec![Line::fail(texts::DATA_DIR, found, texts::DATA_DIR_FIX)];
        }
        let policy = CompactionPolicy {
            factor: config.compact_factor,
            min_growth: config.compact_min_mb.saturating_mul(1 << 20),
        };
        let line = match peek(root, policy) {
            Ok(None) => Line::ok(texts::DATA_DIR, texts::data_dir_new(&shown)),
            Ok(Some(dir)) => {
                let compaction = match dir.compacts_at() {
                    Some(at) => texts::compacts_at(&megabytes(at)),
                    None => texts::COMPACTION_OFF.to_string(),
                };
                Line::ok(
                    texts::DATA_DIR,
                    texts::data_dir_ok(&shown, &megabytes(dir.size()), &compaction),
                )
            }
            Err(e) => Line::fail(
                texts::DATA_DIR,
                texts::data_dir_unreadable(&format!("{e:#}")),
                texts::DATA_DIR_FIX,
            ),
        };
        vec![line]
    })
}

/// Creates `root` if needed, then a file in it, which is removed again.
fn writable(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    let probe = root.join(format!(".doctor-{}", std::process::id()));
    std::fs::write(&probe, b"heurist doctor")?;
    std::fs::remove_file(&probe)
}

/// `bytes` in megabytes, one decimal.
fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / f64::from(1 << 20))
}

/// Who may use the bot: nobody when both lists are empty (default deny).
pub(super) fn allow_list<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let access = &context.config.access;
        let line = if access.allowed_users.is_empty() && access.admins.is_empty() {
            Line::fail(
                texts::ALLOW_LIST,
                texts::ALLOW_LIST_EMPTY,
                texts::ALLOW_LIST_FIX,
            )
        } else {
            Line::ok(
                texts::ALLOW_LIST,
                texts::allow_list_ok(access.allowed_users.len(), access.admins.len()),
            )
        };
        vec![line]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_megabytes() {
        for (name, bytes, want) in [
            ("empty", 0, "0.0 MB"),
            ("half", 1 << 19, "0.5 MB"),
            ("two", 2 << 20, "2.0 MB"),
        ] {
            assert_eq!(megabytes(bytes), want, "{name}");
        }
    }
}
