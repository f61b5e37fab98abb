//! Records the store's tests build on: a reflection job and an approved lesson, written
//! once so each test states only what it changes; and every record of a store, to compare.

use super::{Lesson, Origin, ReflectionJob, ReviewState, Store};
use crate::conversation::Conversation;
use crate::ids::ChatId;

/// A successful reflection job of `chat` about `task`.
pub(super) fn job(chat: ChatId, task: &str) -> ReflectionJob {
    ReflectionJob {
        chat,
        user: None,
        model: "m".into(),
        request: task.into(),
        tools: vec![],
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        answer: None,
        skills: Vec::new(),
        evidence: String::new(),
        proven: Vec::new(),
    }
}

/// An approved lesson `id` with `text`, never injected yet.
pub(super) fn lesson(id: u64, text: &str) -> Lesson {
    Lesson::learned(
        id,
        None,
        text.into(),
        ReviewState::Approved,
        Origin::default(),
        1,
    )
}

/// Chat `chat` outside topics: the conversation most tests write to.
pub(super) fn conversation(chat: i64) -> Conversation {
    Conversation::new(ChatId(chat), None)
}

/// Records as (tree name, key, value).
pub(super) type Records = Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>;

/// Every record of every tree, by tree name, as the store holds it.
pub(super) fn dump(store: &Store) -> Records {
    let mut records = Vec::new();
    for name in store.db.tree_names() {
        for entry in store.db.open_tree(&name).unwrap().iter() {
            let (key, value) = entry.unwrap();
            records.push((name.to_vec(), key.to_vec(), value.to_vec()));
        }
    }
    records.sort();
    records
}
