//! `heurist heuristics export FILE` and `import FILE [--trust]`: the store of a stopped bot
//! opened as the bot opens it (a running bot holds the data directory's lock, and the command
//! says so), its lessons written to or learned from a JSON-lines file (see
//! [`crate::learning::transfer`] for the format and the rules of an import).

use std::path::Path;

use anyhow::Context as _;

use crate::budget::Ledger;
use crate::config::Config;
use crate::learning::Learning;
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
        out.push_str(&texts::imported(r.added, r.pending, r.merged, r.refused));
        out.push('\n');
        out
    }
}

/// The data directory's store, opened as the bot opens it.
fn open_store(config: &Config) -> anyhow::Result<Store> {
    let policy = CompactionPolicy {
        factor: config.compact_factor,
        min_growth: config.compact_min_mb.saturating_mul(1 << 20),
    };
    let (store, _) = Store::open_data_dir(&config.data_dir, config.cache_bytes, policy)?;
    Ok(store)
}

/// Writes every lesson of the store to `file` (whole or not at all: a temporary file renamed
/// over it); returns the sentence to print.
pub fn export(config: &Config, file: &Path) -> anyhow::Result<String> {
    let store = open_store(config)?;
    let heuristics = store.learning().heuristics();
    let partial = file.with_extension("partial");
    std::fs::write(&partial, export_lines(&heuristics))
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, file)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), file.display()))?;
    Ok(texts::exported(
        heuristics.len(),
        &file.display().to_string(),
    ))
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
