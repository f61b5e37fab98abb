//! Moving lessons between deployments, end to end: lessons learned by a real bot are exported
//! from its sled store (the reviewed ones, unless asked for the pending ones too, into a file
//! only its owner reads) and imported into fresh ones, pending review unless trusted (and a
//! pending lesson stays pending even then); an import goes through the same dedupe and quality
//! gate as a learned lesson, and a malformed line is named and skipped.

use std::path::Path;

use heurist::Config;
use heurist::learning::Source;
use heurist::learning::lessons::{Lesson, NewLesson, ReviewState};
use heurist::ops::lessons;
use heurist::store::Store;
use heurist::store::compaction::CompactionPolicy;
use serde_json::json;

use crate::support::*;

const TICKETS: &str = "When looking up support tickets, write the id as TCK- and six digits";
const DATES: &str = "When converting meeting times, use ISO 8601 with the UTC offset";

fn entry(text: &str) -> NewLesson {
    serde_json::from_value(json!({"text": text})).unwrap()
}

/// Every lesson of the store in `data_dir` (opened, read, closed).
fn stored(data_dir: &Path) -> Vec<Lesson> {
    let policy = CompactionPolicy::NEVER;
    let (store, _) = Store::open_data_dir(data_dir, 1 << 20, policy).unwrap();
    store.learning().lessons()
}

/// What must survive the move: everything but the id, the embedding, the review state (which
/// the import decides) and `updated`.
fn moved(h: &Lesson) -> (String, Option<String>, u32, u32, u32, String, bool, i64) {
    (
        h.text.clone(),
        h.tool.clone(),
        h.uses,
        h.up,
        h.injected,
        h.origin.outcome.clone(),
        h.origin.external,
        h.created,
    )
}

/// A fresh deployment's configuration, with its own data directory under `root`.
fn fresh(tg: &FakeTelegram, llm: &FakeLlm, root: &Path, name: &str) -> Config {
    config(tg, &llm.url, &root.join(name))
}

#[tokio::test]
async fn export_then_import_gives_the_same_lessons_pending_unless_trusted() {
    let llm = FakeLlm::answering("done").await;
    let mut h = Harness::start(llm.clone()).await;
    let learning = h.app().learning();
    let trusted = Source {
        outcome: "success".into(),
        ..Source::default()
    };
    learning
        .learn(vec![entry(TICKETS)], &trusted)
        .await
        .unwrap();
    let external = Source {
        outcome: "success".into(),
        external: true,
        untrusted: false,
        grounds: None,
        ..Source::default()
    };
    learning.learn(vec![entry(DATES)], &external).await.unwrap();
    let first = h.app().store().learning().lessons()[0].id;
    learning.record_outcome(&[first], |_| Some(true)).unwrap();
    learning.feedback(&[first], true).unwrap();
    let config = h.config.clone();
    // Stopped, as an export wants it (the harness keeps the data directory).
    h.bot.take().unwrap().stop().await;
    let original = stored(&config.data_dir);
    assert_eq!(
        original.iter().map(|h| h.review).collect::<Vec<_>>(),
        [ReviewState::Approved, ReviewState::Pending]
    );

    let root = tempfile::tempdir().unwrap();
    // By default only lessons an admin approved or that were trusted: a pending lesson is
    // unreviewed third-party text, and a trusted import elsewhere must not launder it.
    let file = root.path().join("approved.jsonl");
    let said = lessons::export(&config, &file, false).unwrap();
    assert!(
        said.starts_with("exported 1 lessons to ")
            && said.contains("1 pending or on probation left out"),
        "{said}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(TICKETS) && !text.contains(DATES), "{text}");
    // With the flag, the pending ones too, marked pending.
    let file = root.path().join("lessons.jsonl");
    let said = lessons::export(&config, &file, true).unwrap();
    assert!(said.starts_with("exported 2 lessons to "), "{said}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);

    let tg = FakeTelegram::start().await;
    let pending = fresh(&tg, &llm, root.path(), "pending");
    let imported = lessons::import(&pending, &file, false).await.unwrap();
    assert_eq!((imported.report.added, imported.report.pending), (2, 2));
    assert!(imported.skipped.is_empty());
    let got = stored(&pending.data_dir);
    assert_eq!(
        got.iter().map(moved).collect::<Vec<_>>(),
        original.iter().map(moved).collect::<Vec<_>>()
    );
    assert!(got.iter().all(|h| h.review == ReviewState::Pending));

    let trusted = fresh(&tg, &llm, root.path(), "trusted");
    let imported = lessons::import(&trusted, &file, true).await.unwrap();
    assert_eq!((imported.report.added, imported.report.pending), (2, 1));
    let got = stored(&trusted.data_dir);
    assert_eq!(
        got.iter().map(|h| (moved(h), h.review)).collect::<Vec<_>>(),
        original
            .iter()
            .map(|h| (moved(h), h.review))
            .collect::<Vec<_>>(),
        "trusted: the same lessons in the same review states"
    );

    // Again into the same store: merged into the known lessons, never doubled.
    let imported = lessons::import(&pending, &file, false).await.unwrap();
    assert_eq!((imported.report.added, imported.report.merged), (0, 2));
    assert_eq!(stored(&pending.data_dir).len(), 2);
}

/// The file holds lessons (some with third-party provenance): it is readable by its owner only,
/// also when an earlier export left a world-readable file (or a stale temporary file) there.
#[tokio::test]
async fn an_export_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let llm = FakeLlm::answering("done").await;
    let tg = FakeTelegram::start().await;
    let root = tempfile::tempdir().unwrap();
    let config = fresh(&tg, &llm, root.path(), "deployment");
    let file = root.path().join("lessons.jsonl");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for (name, before) in [("a new file", None), ("over a 0644 file", Some(0o644))] {
        if let Some(before) = before {
            std::fs::write(&file, "old").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(before)).unwrap();
            let stale = file.with_extension("partial");
            std::fs::write(&stale, "stale").unwrap();
            std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o666)).unwrap();
        }
        lessons::export(&config, &file, false).unwrap();
        assert_eq!(mode(&file), 0o600, "{name}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "", "{name}");
        assert!(!file.with_extension("partial").exists(), "{name}");
    }
}

#[tokio::test]
async fn an_import_is_gated_deduplicated_and_skips_malformed_lines() {
    let llm = FakeLlm::answering("done").await;
    let tg = FakeTelegram::start().await;
    let root = tempfile::tempdir().unwrap();
    let config = fresh(&tg, &llm, root.path(), "deployment");
    let file = root.path().join("mixed.jsonl");
    let lines = [
        json!({"text": TICKETS}).to_string(),
        "{\"text\": \"half a line".to_string(),
        json!({"text": "Be careful and verify the result is correct"}).to_string(),
        json!({"text": format!("{TICKETS}.")}).to_string(),
        String::new(),
        json!({"text": DATES, "up": 3}).to_string(),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let imported = lessons::import(&config, &file, false).await.unwrap();
    let report = &imported.report;
    assert_eq!(
        (report.added, report.pending, report.merged, report.refused),
        (2, 2, 1, 1),
        "{imported:?}"
    );
    assert_eq!(imported.skipped.len(), 1);
    assert!(
        imported.skipped[0].starts_with("line 2: not a lesson ("),
        "{imported:?}"
    );
    let rendered = imported.render();
    assert!(rendered.contains("imported 2 new lessons (2 wait for review in /heuristics pending), 1 merged into known ones, 1 refused by the quality gate"), "{rendered}");
    let texts: Vec<String> = stored(&config.data_dir)
        .into_iter()
        .map(|h| h.text)
        .collect();
    assert_eq!(texts, [TICKETS, DATES]);

    // A missing file loses nothing and says which.
    let missing = lessons::import(&config, &root.path().join("nope.jsonl"), false).await;
    assert!(format!("{:#}", missing.unwrap_err()).starts_with("cannot read "));
}
