//! Online backups: the whole store, every tree, as one file written while the bot runs, and its
//! restore into an empty data directory.
//!
//! Its rooms: the file's `format.rs` (frames, version and checksum), the backup directory's
//! `files.rs` (names, leftovers, pruning), and the two ways through it, `write.rs` and
//! `restore.rs`.
//!
//! # Consistent: one moment for all the trees
//! sled has no snapshot across trees (its own `export` reads one tree after the other while
//! writes go on), and a copy made that way can hold a chat's answer marked sent in the inbox but
//! not the turn in the history, or a task's next run moved without the run it fired. So every
//! write to the store passes a gate (`tree.rs`, held shared for the length of one sled call),
//! and a backup holds the gate whole while it reads every tree into the file: the file is the
//! store as it was at one moment, between two writes, exactly what a `kill -9` at that moment
//! would have left on disk after sled's flush. The bot already comes back whole from that
//! state (the inbox, the visibility protocol and recovery are built for it), so a restored
//! store resumes the same way. The price: writes wait while a backup reads (the records are
//! streamed to the page cache: a backup of 107 MB took 0.5 s in all, release build on a 2-core
//! VM; see docs/operations.md), and reads never wait. The file is synced and renamed after the
//! gate is let go.
//!
//! # Crash safety
//! The file is written under a temporary name (`.<name>.tmp`), synced, renamed to its name and
//! the directory synced: a crash mid-backup leaves the earlier backups as they were, and the
//! next backup removes the leftover. Only files named like backups are ever pruned.

mod files;
mod format;
mod restore;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use files::{list, prune};
pub(crate) use restore::restore;
pub use write::Written;
