//! How often each model failed and handed a turn to its fallback (what `/stats` shows beside
//! the usage), per chat and for the whole bot. Kept in the `usage` tree under keys of their
//! own, `fallbacks:chat:<id>:<model>` and `fallbacks:all:<model>` (big-endian counts), which no
//! scan of the usage counters meets. Counters saturate; an unreadable one is kept as it is.

use super::db::{self, Store};
use super::error::Result;
use super::records::decode_count;
use crate::ids::ChatId;

const TREE: &str = db::USAGE;

/// The key prefix of one chat's counts (`Some`) or the bot's (`None`).
fn prefix(chat: Option<ChatId>) -> String {
    match chat {
        Some(chat) => format!("fallbacks:chat:{chat}:"),
        None => "fallbacks:all:".to_string(),
    }
}

/// Fallback counters (in tree `usage`): [`Store::fallbacks`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Fallbacks<'s> {
    store: &'s Store,
}

impl Store {
    /// How often each model handed a turn to its fallback.
    pub fn fallbacks(&self) -> Fallbacks<'_> {
        Fallbacks { store: self }
    }
}

impl Fallbacks<'_> {
    /// Counts one turn in `chat` that `model` failed and handed to its fallback.
    pub fn record(&self, chat: ChatId, model: &str) -> Result<()> {
        for key in [
            format!("{}{model}", prefix(Some(chat))),
            format!("{}{model}", prefix(None)),
        ] {
            self.store
                .usage
                .fetch_and_update(key.as_bytes(), |old| match old {
                    Some(bytes) if bytes.len() != 8 => {
                        tracing::warn!(key, "an unreadable fallback count is kept as it is");
                        Some(bytes.to_vec())
                    }
                    _ => {
                        let count = decode_count(TREE, key.as_bytes(), old);
                        Some(count.saturating_add(1).to_be_bytes().to_vec())
                    }
                })?;
        }
        Ok(())
    }

    /// The counts per model of one chat (`Some(chat)`) or of the whole bot (`None`), by id.
    pub fn counts(&self, chat: Option<ChatId>) -> Vec<(String, u64)> {
        let prefix = prefix(chat);
        self.store
            .usage
            .scan_prefix(prefix.as_bytes())
            .filter_map(std::result::Result::ok)
            .filter_map(|(key, value)| {
                let model = String::from_utf8_lossy(key.get(prefix.len()..)?).into_owned();
                Some((model, decode_count(TREE, &key, Some(&value))))
            })
            .filter(|&(_, count)| count > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts go to the chat and the bot, per model; one chat's never show in another's.
    #[test]
    fn fallbacks_are_counted_per_chat_and_model() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (alice, bob) = (ChatId(1), ChatId(2));
        store.fallbacks().record(alice, "local").unwrap();
        store.fallbacks().record(alice, "local").unwrap();
        store.fallbacks().record(bob, "hosted").unwrap();
        let count = |chat| store.fallbacks().counts(chat);
        assert_eq!(count(Some(alice)), [("local".to_string(), 2)]);
        assert_eq!(count(Some(bob)), [("hosted".to_string(), 1)]);
        assert_eq!(
            count(None),
            [("hosted".to_string(), 1), ("local".to_string(), 2)]
        );
        assert!(
            store.usage().totals(None).is_empty(),
            "the usage totals never meet these keys"
        );
    }
}
