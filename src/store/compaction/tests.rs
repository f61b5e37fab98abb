//! The compaction's tests: generations written, crashes at every step, and states refused.

use super::super::db::{IDS, NEXT_ID};
use super::generations::{CURRENT, CURRENT_TMP, FROM_LEGACY};
use super::*;
use crate::ids::ChatId;
use crate::llm::ChatMessage;
use crate::store::fixtures;
use crate::store::fixtures::{Records, conversation, dump};

/// Compacts on any growth of 10 % or more.
const EAGER: CompactionPolicy = CompactionPolicy {
    factor: 1.1,
    min_growth: 0,
};
const NEVER: CompactionPolicy = CompactionPolicy::NEVER;

/// Writes `turns` turns of chat 7, lessons and a reflection, as the bot would.
fn fill(store: &Store, turns: usize) -> Vec<u64> {
    for i in 0..turns {
        let text = format!("question {i} {}", "x".repeat(500));
        let turn = [ChatMessage::user(text), ChatMessage::assistant("answer")];
        assert!(
            store
                .history()
                .append(conversation(7), 0, None, &turn, &Default::default())
                .unwrap()
        );
    }
    let mut ids = Vec::new();
    for i in 0..3 {
        let id = store.learning().new_lesson_id().unwrap();
        store
            .learning()
            .put_lesson(&fixtures::lesson(id, &format!("lesson {i}")))
            .unwrap();
        ids.push(id);
    }
    ids.push(
        store
            .learning()
            .save_reflection(&fixtures::job(ChatId(7), "task"))
            .unwrap(),
    );
    store.db().flush().unwrap();
    ids
}

fn names(root: &Path) -> Vec<String> {
    let mut names: Vec<_> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_store_is_due_once_it_has_grown_by_the_factor_and_the_minimum() {
    let policy = CompactionPolicy {
        factor: 2.0,
        min_growth: 100,
    };
    struct Case {
        name: &'static str,
        policy: CompactionPolicy,
        baseline: u64,
        size: u64,
        due: bool,
    }
    let cases = [
        Case {
            name: "doubled and grown by the minimum",
            policy,
            baseline: 1_000,
            size: 2_001,
            due: true,
        },
        Case {
            name: "exactly doubled is not over",
            policy,
            baseline: 1_000,
            size: 2_000,
            due: false,
        },
        Case {
            name: "doubled but under the minimum growth",
            policy,
            baseline: 50,
            size: 120,
            due: false,
        },
        Case {
            name: "a fresh store past the minimum",
            policy,
            baseline: 0,
            size: 101,
            due: true,
        },
        Case {
            name: "off",
            policy: NEVER,
            baseline: 0,
            size: u64::MAX,
            due: false,
        },
    ];
    for case in cases {
        assert_eq!(
            case.policy.due(case.baseline, case.size),
            case.due,
            "case {}",
            case.name
        );
    }
}

#[test]
fn a_fresh_directory_starts_generation_one_and_keeps_it() {
    let root = tempfile::tempdir().unwrap();
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert_eq!(
        fs::read_to_string(root.path().join(CURRENT)).unwrap(),
        "store-1 0\n"
    );
    fill(&store, 3);
    drop(store);
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert_eq!(
        store
            .history()
            .window(conversation(7), 1 << 20)
            .unwrap()
            .messages
            .len(),
        6
    );
}

#[test]
fn compaction_moves_a_legacy_store_keeping_every_record_and_ids_go_on_above() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::open(root.path()).unwrap();
    let mut ids = fill(&store, 200);
    // Ids a store from before the id counter gave straight from sled's generator.
    for _ in 0..3 {
        ids.push(store.db.generate_id().unwrap());
    }
    store.ids.remove(NEXT_ID).unwrap();
    // sled's default tree, which no area uses, goes over too.
    store.db.insert(b"default", b"tree").unwrap();
    store.db().flush().unwrap();
    let before = dump(&store);
    drop(store);

    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();

    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert_eq!(
        names(root.path()),
        ["CURRENT", "LOCK", "store-1"],
        "sled's old files are gone"
    );
    let after: Vec<_> = dump(&store)
        .into_iter()
        .filter(|(tree, _, _)| tree.as_slice() != IDS.as_bytes())
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|(tree, _, _)| tree.as_slice() != IDS.as_bytes())
        .collect();
    assert_eq!(after, before, "every record of every tree, unchanged");
    let next = store.learning().new_lesson_id().unwrap();
    assert!(
        ids.iter().all(|&id| next > id),
        "a new id {next} is above every old one {ids:?}"
    );
    assert!(!dir.compaction_due(), "the baseline is the compacted size");
    let current = fs::read_to_string(root.path().join(CURRENT)).unwrap();
    assert!(
        !current.contains(FROM_LEGACY),
        "{current}: the mark went with the files"
    );
}

#[test]
fn a_crash_after_a_legacy_store_was_copied_deletes_it_at_the_next_start() {
    let root = tempfile::tempdir().unwrap();
    let legacy = Store::open(root.path()).unwrap();
    fill(&legacy, 20);
    drop(legacy);
    // The state right after the copy's commit: the copy in store-1, marked as copied from
    // sled's files in the data directory, which are still there.
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    let records = dump(&store);
    drop((store, dir));
    let copy = tempfile::tempdir().unwrap();
    let legacy = Store::open(copy.path()).unwrap();
    fill(&legacy, 20);
    drop(legacy);
    for name in names(copy.path()) {
        fs::rename(copy.path().join(&name), root.path().join(&name)).unwrap();
    }
    fs::write(root.path().join(CURRENT), "store-1 0 from-legacy\n").unwrap();

    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-1"]);
    assert_eq!(
        fs::read_to_string(root.path().join(CURRENT)).unwrap(),
        "store-1 0\n",
        "the mark goes with the files"
    );
    assert_eq!(dump(&store), records);
}

#[test]
fn a_crash_while_a_legacy_store_was_being_copied_removes_the_copy_and_keeps_the_store() {
    let root = tempfile::tempdir().unwrap();
    let legacy = Store::open(root.path()).unwrap();
    fill(&legacy, 20);
    let records = dump(&legacy);
    drop(legacy);
    // Cut short after the copy started: sled's files and what it wrote of store-1.
    let failed = CompactionPolicy {
        factor: 1.1,
        min_growth: 0,
    };
    fs::create_dir(root.path().join("store-1")).unwrap();
    fs::write(root.path().join("store-1/notes.txt"), b"in the way").unwrap();
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, failed).unwrap();
    assert_eq!(dir.store_dir(), root.path());
    drop((store, dir));
    assert_eq!(
        fs::read_to_string(root.path().join(CURRENT)).unwrap(),
        "legacy 0\n",
        "named before the copy"
    );
    fs::remove_file(root.path().join("store-1/notes.txt")).unwrap();
    let half = Store::open(&root.path().join("store-1")).unwrap();
    fill(&half, 1);
    drop(half);

    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

    assert_eq!(dir.store_dir(), root.path());
    assert!(!root.path().join("store-1").exists(), "the copy is removed");
    assert_eq!(dump(&store), records);
}

#[test]
fn each_compaction_writes_the_next_generation_and_only_when_due() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    let ids = fill(&store, 200);
    drop(store);
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-2"));
    let records = dump(&store);
    let next = store.learning().new_lesson_id().unwrap();
    assert!(ids.iter().all(|&id| next > id), "{next} above {ids:?}");
    drop(store);

    // Not grown since: opened as it is.
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-2"));
    assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-2"]);
    assert_eq!(store.learning().lessons().len(), 3);
    assert_eq!(dump(&store).len(), records.len());
}

#[test]
fn what_a_crash_left_of_a_compaction_is_removed_and_the_live_store_kept() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    fill(&store, 20);
    let records = dump(&store);
    drop(store);
    // A crash during the copy into store-2, before CURRENT was renamed.
    fs::create_dir(root.path().join("store-2")).unwrap();
    fs::write(root.path().join("store-2/db"), b"half a copy").unwrap();
    fs::write(root.path().join(CURRENT_TMP), b"store-2 11\n").unwrap();
    // And what an earlier crash after a commit left: an older generation.
    fs::create_dir_all(root.path().join("store-0/blobs")).unwrap();
    // Not ours: left alone, even named like sled's files or a generation.
    for name in ["db", "snap.00000000000A1B2C", "notes.txt"] {
        fs::write(root.path().join(name), b"mine").unwrap();
    }
    fs::create_dir(root.path().join("conf")).unwrap();
    fs::create_dir(root.path().join("store-9")).unwrap();
    fs::write(root.path().join("store-9/notes.txt"), b"mine").unwrap();

    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();

    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert_eq!(
        names(root.path()),
        [
            "CURRENT",
            "LOCK",
            "conf",
            "db",
            "notes.txt",
            "snap.00000000000A1B2C",
            "store-1",
            "store-9"
        ]
    );
    assert_eq!(names(&root.path().join("store-9")), ["notes.txt"]);
    assert_eq!(dump(&store), records);
}

#[test]
fn an_unreadable_current_stops_the_start_and_deletes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    fill(&store, 2);
    drop(store);
    for garbage in [
        "",
        "store-x 5\n",
        "store-1\n",
        "db 0\n",
        "store-1 0 extra\n",
    ] {
        fs::write(root.path().join(CURRENT), garbage).unwrap();
        let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
            .err()
            .unwrap_or_else(|| panic!("{garbage:?} was accepted"));
        assert!(
            format!("{err:#}").contains("CURRENT is unreadable"),
            "{err:#}"
        );
        assert_eq!(names(root.path()), ["CURRENT", "LOCK", "store-1"]);
    }
}

/// A data directory with one compaction behind it: `store-2` live, `store-1` gone.
fn compacted_once() -> (tempfile::TempDir, Records) {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    fill(&store, 50);
    drop(store);
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-2"));
    let records = dump(&store);
    (root, records)
}

#[test]
fn states_no_compaction_leaves_stop_the_start_and_delete_nothing() {
    struct Case {
        name: &'static str,
        /// Changes the directory (after one compaction: `store-2` live).
        make: fn(&Path),
        error: &'static str,
    }
    let cases = [
        Case {
            name: "CURRENT deleted beside the store",
            make: |root| fs::remove_file(root.join(CURRENT)).unwrap(),
            error: "is missing, but",
        },
        Case {
            name: "sled's files in the data directory beside a generation, without CURRENT",
            make: |root| {
                fs::remove_file(root.join(CURRENT)).unwrap();
                let restored = Store::open(root).unwrap();
                fill(&restored, 3);
            },
            error: "both sled's files in",
        },
        Case {
            name: "CURRENT naming a generation that is not there",
            make: |root| fs::write(root.join(CURRENT), "store-7 0\n").unwrap(),
            error: "which holds no store",
        },
        Case {
            name: "a sled store in the data directory that CURRENT was not copied from",
            make: |root| {
                let restored = Store::open(root).unwrap();
                fill(&restored, 3);
            },
            error: "it was not copied from",
        },
    ];
    for case in cases {
        let (root, records) = compacted_once();
        (case.make)(root.path());
        let before = names(root.path());
        let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
            .err()
            .unwrap_or_else(|| panic!("{}: the start went on", case.name));
        assert!(
            format!("{err:#}").contains(case.error),
            "{}: {err:#}",
            case.name
        );
        assert_eq!(names(root.path()), before, "{}: nothing deleted", case.name);
        let store = Store::open(&root.path().join("store-2")).unwrap();
        assert_eq!(dump(&store), records, "{}: the store is intact", case.name);
    }
}

#[test]
fn a_second_process_on_the_directory_stops_before_it_touches_anything() {
    let (root, _) = compacted_once();
    let (_first, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    fs::write(root.path().join(CURRENT_TMP), "store-3 0\n").unwrap();
    let err = Store::open_data_dir(root.path(), 1 << 20, EAGER)
        .err()
        .expect("the second open is refused");
    assert!(format!("{err:#}").contains("is in use"), "{err:#}");
    assert!(
        root.path().join(CURRENT_TMP).exists(),
        "the second one removed nothing"
    );
}

#[test]
fn a_failed_compaction_opens_the_store_as_it_was_and_is_not_retried_in_this_run() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    let ids = fill(&store, 50);
    let records = dump(&store);
    drop(store);
    // Something not ours where the copy would go.
    fs::create_dir(root.path().join("store-2")).unwrap();
    fs::write(root.path().join("store-2/notes.txt"), b"mine").unwrap();

    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();

    assert_eq!(dir.store_dir(), root.path().join("store-1"));
    assert!(!dir.compaction_due(), "not asked for again in this run");
    assert_eq!(dump(&store), records);
    assert_eq!(names(&root.path().join("store-2")), ["notes.txt"]);
    assert!(store.learning().new_lesson_id().unwrap() > *ids.iter().max().unwrap());
}

#[test]
fn an_unreadable_id_counter_still_gives_ids_above_every_record_after_a_compaction() {
    let root = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(root.path(), 1 << 20, NEVER).unwrap();
    let ids = fill(&store, 50);
    store.ids.insert(NEXT_ID, b"garbage".as_slice()).unwrap();
    store.db().flush().unwrap();
    drop(store);
    let (store, dir) = Store::open_data_dir(root.path(), 1 << 20, EAGER).unwrap();
    assert_eq!(dir.store_dir(), root.path().join("store-2"));
    let next = store.learning().new_lesson_id().unwrap();
    assert!(ids.iter().all(|&id| next > id), "{next} above {ids:?}");
}
