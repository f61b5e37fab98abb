//! The doctor's checks of this machine and the configuration itself: the data directory (the
//! bot can write there; how big the store is and when it compacts), the backups (how old the
//! last one is; a warning past twice the interval), the allow-list (an empty
//! one lets nobody use the bot) and the PDF reader (a test PDF read in the jail's child
//! process, with the `[documents]` limits, as the bot reads one).

use std::path::Path;

use super::context::{Checked, Context};
use super::report::Line;
use crate::agent::jail::{Jail, JailFailure, Parser};
use crate::sizes::{Unit, megabytes};
use crate::store::backup;
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
        let policy = CompactionPolicy::configured(config);
        let line = match peek(root, policy) {
            Ok(None) => Line::ok(texts::DATA_DIR, texts::data_dir_new(&shown)),
            Ok(Some(dir)) => {
                let compaction = match dir.compacts_at() {
                    Some(at) => texts::compacts_at(&megabytes(at, Unit::Binary)),
                    None => texts::COMPACTION_OFF.to_string(),
                };
                Line::ok(
                    texts::DATA_DIR,
                    texts::data_dir_ok(&shown, &megabytes(dir.size(), Unit::Binary), &compaction),
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

/// The newest backup's age, warned about past twice `backup.every_hours` (a backup failing, or
/// none written yet); backups off is said, not warned about.
pub(super) fn backups<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let config = context.config;
        let dir = config.backup_dir();
        let shown = dir.display().to_string();
        let age = backup::list(&dir)
            .into_iter()
            .next()
            .map(|(_, written)| written.elapsed().unwrap_or_default());
        let line = match (config.backup_interval(), age) {
            (None, age) => {
                let last =
                    age.map_or_else(|| "none yet".to_string(), |a| texts::backups_last(&ago(a)));
                Line::ok(texts::BACKUPS, texts::backups_off(&shown, &last))
            }
            // A new deployment: nothing to back up yet; the bot writes one as it starts.
            (Some(_), None)
                if matches!(peek(&config.data_dir, CompactionPolicy::NEVER), Ok(None)) =>
            {
                Line::ok(texts::BACKUPS, texts::backups_first(&shown))
            }
            (Some(_), None) => Line::warn(
                texts::BACKUPS,
                texts::backups_none(&shown),
                texts::BACKUPS_FIX,
            ),
            (Some(every), Some(age)) if age > every * 2 => Line::warn(
                texts::BACKUPS,
                texts::backups_late(&shown, &ago(age), config.backup.every_hours),
                texts::BACKUPS_FIX,
            ),
            (Some(_), Some(age)) => Line::ok(
                texts::BACKUPS,
                texts::backups_ok(
                    &shown,
                    &ago(age),
                    config.backup.every_hours,
                    config.backup.keep,
                ),
            ),
        };
        vec![line]
    })
}

/// An age for a reader: "5 min", "3 h", "2 d".
fn ago(age: std::time::Duration) -> String {
    let secs = age.as_secs();
    match secs {
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    }
}

/// Creates `root` if needed, then a file in it, which is removed again.
fn writable(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    let probe = root.join(format!(".doctor-{}", std::process::id()));
    std::fs::write(&probe, b"heurist doctor")?;
    std::fs::remove_file(&probe)
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

/// A test PDF read the way the bot reads one: in a child process of this binary, with the
/// `[documents]` limits. Optional: without it, PDFs get an apology and the rest works.
pub(super) fn pdf_reader<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let documents = &context.config.documents;
        let jail = Jail::new(documents);
        let read = jail.read(Parser::Pdf, SAMPLE_PDF.as_bytes().to_vec()).await;
        let failed = |why: &str| {
            let found = texts::pdf_reader_failed(why);
            Line::warn(texts::PDF_READER, found, texts::PDF_READER_FIX)
        };
        let line = match read {
            Ok(parsed) if parsed.text.contains(SAMPLE_TEXT) => Line::ok(
                texts::PDF_READER,
                texts::pdf_reader_ok(
                    documents.parser_timeout_secs,
                    documents.parser_memory_mb,
                    documents.parser_cpu_secs,
                ),
            ),
            Ok(parsed) => failed(&format!("it read {:?}", parsed.text.trim())),
            Err(
                JailFailure::Refused(why) | JailFailure::Broke(why) | JailFailure::NotStarted(why),
            ) => failed(&why),
        };
        vec![line]
    })
}

/// A one-page PDF (Helvetica, one line: [`SAMPLE_TEXT`]) the doctor has the jail read, as the
/// bot reads one a user sends. Written by hand, with its cross-reference offsets.
const SAMPLE_PDF: &str = concat!(
    "%PDF-1.4\n",
    "1 0 obj\n",
    "<< /Type /Catalog /Pages 2 0 R >>\n",
    "endobj\n",
    "2 0 obj\n",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>\n",
    "endobj\n",
    "3 0 obj\n",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 50] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>\n",
    "endobj\n",
    "4 0 obj\n",
    "<< /Length 49 >>\n",
    "stream\n",
    "BT /F1 12 Tf 10 20 Td (Heurist reads PDFs.) Tj ET\n",
    "endstream\n",
    "endobj\n",
    "5 0 obj\n",
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\n",
    "endobj\n",
    "xref\n",
    "0 6\n",
    "0000000000 65535 f \n",
    "0000000009 00000 n \n",
    "0000000058 00000 n \n",
    "0000000115 00000 n \n",
    "0000000240 00000 n \n",
    "0000000339 00000 n \n",
    "trailer\n",
    "<< /Size 6 /Root 1 0 R >>\n",
    "startxref\n",
    "409\n",
    "%%EOF\n",
);

/// The text of [`SAMPLE_PDF`].
const SAMPLE_TEXT: &str = "Heurist reads PDFs.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_pdf_holds_its_text() {
        let text = crate::agent::document::pdf_text(SAMPLE_PDF.as_bytes()).unwrap();
        assert_eq!(text.trim(), SAMPLE_TEXT);
    }
}
