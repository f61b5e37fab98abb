//! `heurist lessons export FILE [--include-pending]` and `import FILE [--trust]` (also under
//! their first name, `heurist heuristics`): the store
//! of a stopped bot opened as the bot opens it (a running bot holds the data directory's lock,
//! and the command says so), its reviewed lessons (and, when asked, the pending ones) written
//! to a JSON-lines file only its owner can read, or lessons learned from one (see
//! [`crate::learning::transfer`] for the format and the rules of an import).

use std::path::Path;

use anyhow::Context as _;

use crate::budget::Ledger;
use crate::config::Config;
use crate::learning::Learning;
use crate::learning::lessons::ReviewState;
use crate::learning::transfer::{ImportReport, export_lines, parse_lines};
use crate::llm::LlmClient;
use crate::store::Store;
use crate::store::compaction::CompactionPolicy;
use crate::texts::ops as texts;

/// What an import did, and the lines it skipped, as the operator reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub report: ImportReport,
    /// One sentence per malformed line, with its number.
    pub skipped: Vec<String>,
}

impl Imported {
    /// The summary, after the skipped lines.
    pub fn render(&self) -> String {
        let mut out: String = self.skipped.iter().map(|s| format!("{s}\n")).collect();
        let r = &self.report;
        out.push_str(&texts::imported(
            r.added,
            r.pending,
            r.on_probation,
            r.merged,
            r.refused,
        ));
        out.push('\n');
        out
    }
}

/// The data directory's store, opened as the bot opens it.
fn open_store(config: &Config) -> anyhow::Result<Store> {
    let policy = CompactionPolicy::configured(config);
    let (store, _) = Store::open_data_dir(&config.data_dir, config.cache_bytes, policy)?;
    Ok(store)
}

/// Writes the store's reviewed lessons (approved by an admin, or trusted when learned) that
/// are not on probation to `file`, and the pending and probation ones too when
/// `include_pending` (they stay marked so, and even a trusted import keeps them so: an
/// unreviewed lesson may carry text a third party wrote, and an unproven one may be false;
/// neither must come back approved or proven through a file). The file is whole or not there (a
/// temporary file renamed over it) and readable by its owner only; returns the sentence to
/// print.
pub fn export(config: &Config, file: &Path, include_pending: bool) -> anyhow::Result<String> {
    let store = open_store(config)?;
    let (lessons, left_out): (Vec<_>, Vec<_>) = store
        .learning()
        .lessons()
        .into_iter()
        .partition(|h| include_pending || (h.review != ReviewState::Pending && !h.probation));
    write_private(file, export_lines(&lessons).as_bytes())?;
    Ok(texts::exported(
        lessons.len(),
        left_out.len(),
        &file.display().to_string(),
    ))
}

/// Writes `bytes` to `file` through a temporary file beside it, created afresh with mode 0600
/// and renamed over `file`: a file that was there before (however readable) is replaced, not
/// rewritten in place, so the lessons are never readable by others, even for a moment.
fn write_private(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let partial = file.with_extension("partial");
    // A temporary file a failed export left keeps its mode when opened again: start afresh.
    match std::fs::remove_file(&partial) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", partial.display()));
        }
        _ => {}
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    out.write_all(bytes)
        .and_then(|()| out.sync_all())
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, file)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), file.display()))
}

/// Learns the lessons in `file` into the store (see [`Learning::import`]); malformed lines are
/// skipped and named.
pub async fn import(config: &Config, file: &Path, trust: bool) -> anyhow::Result<Imported> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (lessons, errors) = parse_lines(&text);
    let store = open_store(config)?;
    let learning = Learning::new(
        config.learning.clone(),
        &config.llm,
        store.clone(),
        LlmClient::new(&config.llm)?,
        Ledger::new(config, store),
    );
    let report = learning.import(lessons, trust).await?;
    Ok(Imported {
        report,
        skipped: errors
            .iter()
            .map(|(line, error)| texts::malformed_line(*line, error))
            .collect(),
    })
}
