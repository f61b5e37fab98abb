//! Users' personal memories, in the `people` tree (what the bot knows of the people who write
//! to it): key `memory:<user>`, value a JSON [`Facts`], the user's whole list, so saving a
//! fact, dropping one to make room and forgetting are each one atomic step. What a list may
//! hold and which fact goes first is [`crate::memory`]'s pure logic; this file only reads and
//! writes it. An unreadable list is logged and read as empty, and never written over.

use super::db::{self, Store};
use super::error::{Error, Result};
use super::records::{decode_json, read_json};
use crate::ids::UserId;
use crate::memory::Facts;

const TREE: &str = db::PEOPLE;

fn memory_key(user: UserId) -> String {
    format!("memory:{user}")
}

/// Users' personal memories (in tree `people`): [`Store::memories`], a borrowed view, cheap to
/// make.
#[derive(Clone, Copy)]
pub struct Memories<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Users' personal memories.
    pub fn memories(&self) -> Memories<'_> {
        Memories { store: self }
    }
}

impl Memories<'_> {
    /// `user`'s facts; none when there are none or their record cannot be read (logged).
    pub fn facts(&self, user: UserId) -> Facts {
        let key = memory_key(user);
        read_json(&self.store.people, TREE, key.as_bytes()).unwrap_or_default()
    }

    /// Applies `change` to `user`'s facts in one atomic step (sled may run it more than once,
    /// so it only edits the list it is given) and returns what it returned last. An unreadable
    /// record is left as it is and refused; a list left empty is removed.
    pub fn change<R>(&self, user: UserId, mut change: impl FnMut(&mut Facts) -> R) -> Result<R> {
        let key = memory_key(user);
        let (mut outcome, mut unreadable) = (None, false);
        self.store.people.fetch_and_update(key.as_bytes(), |old| {
            let mut facts = match old {
                None => Facts::default(),
                Some(bytes) => match decode_json::<Facts>(TREE, key.as_bytes(), bytes) {
                    Some(facts) => facts,
                    None => {
                        unreadable = true;
                        return Some(bytes.to_vec());
                    }
                },
            };
            unreadable = false;
            outcome = Some(change(&mut facts));
            if facts.is_blank() {
                return None;
            }
            // A list that cannot be encoded stays as it was (never happens to plain strings).
            serde_json::to_vec(&facts)
                .ok()
                .or_else(|| old.map(<[u8]>::to_vec))
        })?;
        match outcome {
            Some(outcome) if !unreadable => Ok(outcome),
            _ => Err(Error::Unreadable {
                tree: TREE,
                key: key.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Kept;

    const ALICE: UserId = UserId(1);
    const BOB: UserId = UserId(2);

    #[test]
    fn each_user_has_their_own_list_and_forgetting_removes_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let memories = store.memories();
        let kept = memories
            .change(ALICE, |f| f.remember("I'm vegetarian", 1, 5))
            .unwrap();
        assert_eq!(kept, Kept::Added { dropped: vec![] });
        memories
            .change(BOB, |f| f.remember("use metric units", 2, 5))
            .unwrap();
        let texts = |user| -> Vec<String> {
            memories
                .facts(user)
                .list()
                .iter()
                .map(|f| f.text.clone())
                .collect()
        };
        assert_eq!(texts(ALICE), ["I'm vegetarian"]);
        assert_eq!(texts(BOB), ["use metric units"]);
        let id = memories.facts(ALICE).list()[0].id;
        // Bob's list has a fact with the same id: forgetting it leaves Alice's alone.
        assert!(memories.change(BOB, |f| f.forget(id)).unwrap());
        assert_eq!(texts(ALICE), ["I'm vegetarian"]);
        assert_eq!(memories.change(ALICE, Facts::forget_all).unwrap(), 1);
        let key = memory_key(ALICE);
        assert!(store.people.get(key.as_bytes()).unwrap().is_none());
    }

    #[test]
    fn an_unreadable_list_is_read_as_empty_and_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let key = memory_key(ALICE);
        store
            .people
            .insert(key.as_bytes(), &b"{garbage"[..])
            .unwrap();
        assert!(store.memories().facts(ALICE).list().is_empty());
        let refused = store.memories().change(ALICE, |f| f.remember("x", 1, 5));
        assert!(
            matches!(refused, Err(Error::Unreadable { .. })),
            "{refused:?}"
        );
        let kept = store.people.get(key.as_bytes()).unwrap().unwrap();
        assert_eq!(&kept[..], b"{garbage");
    }
}
