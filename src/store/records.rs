//! Reading and changing JSON records and counters in a sled tree, shared by every area: an
//! unreadable record is logged with its tree and key and treated as absent, never a panic.

use serde::{Serialize, de::DeserializeOwned};

use super::error::Result;
use super::tree::Tree;

/// Decodes a JSON record; an unreadable one is logged with its tree and key and is `None`.
pub(super) fn decode_json<T: DeserializeOwned>(tree: &str, key: &[u8], bytes: &[u8]) -> Option<T> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Some(value),
        Err(e) => {
            tracing::warn!(tree, key = %show_key(key), error = %e, "skipping unreadable record");
            None
        }
    }
}

/// A key as a log shows it: printable ASCII as is (ticket ids, usage keys), anything else in hex.
fn show_key(key: &[u8]) -> String {
    if key.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(key).into_owned()
    } else {
        key.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Decodes a big-endian `u64` counter; a missing one is 0, an unreadable one is logged and 0.
pub(super) fn decode_count(tree: &str, key: &[u8], bytes: Option<&[u8]>) -> u64 {
    let Some(bytes) = bytes else {
        return 0;
    };
    match <[u8; 8]>::try_from(bytes) {
        Ok(bytes) => u64::from_be_bytes(bytes),
        Err(_) => {
            tracing::warn!(tree, key = %show_key(key), len = bytes.len(), "unreadable counter counts as 0");
            0
        }
    }
}

/// Reads a record's bytes for a reader that answers without it: a failed read is logged with
/// its tree and key, and read as missing.
pub(super) fn read(tree: &Tree, name: &str, key: &[u8]) -> Option<sled::IVec> {
    tree.get(key)
        .inspect_err(|e| {
            tracing::warn!(tree = name, key = %show_key(key), error = %e, "cannot read record");
        })
        .ok()
        .flatten()
}

/// Reads a JSON record; a missing or unreadable one is `None` (an unreadable one is logged).
pub(super) fn read_json<T: DeserializeOwned>(tree: &Tree, name: &str, key: &[u8]) -> Option<T> {
    decode_json(name, key, &read(tree, name, key)?)
}

/// Applies `change` to the JSON record at `key` atomically (sled retries the closure on
/// contention, so `change` must only edit the record it is given). Returns the record as it
/// was, or `None` if it is missing or unreadable; `change` returns whether to write.
pub(super) fn update_json<T>(
    tree: &Tree,
    name: &str,
    key: &[u8],
    mut change: impl FnMut(&mut T) -> bool,
) -> Result<Option<T>>
where
    T: Clone + Serialize + DeserializeOwned,
{
    let mut before = None;
    tree.fetch_and_update(key, |old| {
        // Returning `None` would delete the key: a missing record stays missing, an
        // unreadable one stays as it is.
        let old = old?;
        let Some(mut record) = decode_json::<T>(name, key, old) else {
            before = None;
            return Some(old.to_vec());
        };
        before = Some(record.clone());
        if change(&mut record) {
            serde_json::to_vec(&record)
                .ok()
                .or_else(|| Some(old.to_vec()))
        } else {
            Some(old.to_vec())
        }
    })?;
    Ok(before)
}

/// Removes the records of `tree` that `expired` says are old; returns how many went. An
/// unreadable record is logged and kept (it may be repaired; deleting it would lose what it
/// held). A record rewritten while this runs is left for the next prune.
pub(super) fn prune_json<T: DeserializeOwned>(
    tree: &Tree,
    name: &str,
    expired: impl Fn(&T) -> bool,
) -> Result<usize> {
    let mut pruned = 0;
    for entry in tree.iter() {
        let (key, value) = entry?;
        let old = decode_json::<T>(name, &key, &value).is_some_and(|record| expired(&record));
        if old
            && tree
                .compare_and_swap(&key, Some(&value), None as Option<&[u8]>)?
                .is_ok()
        {
            pruned += 1;
        }
    }
    Ok(pruned)
}
