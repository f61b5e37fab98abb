//! The store's one error type: what can go wrong reading or writing sled, told apart so that a
//! caller can branch on it (an unreadable record is not a broken disk), and converted into
//! `anyhow` at the edges like any `std::error::Error`. Opening the store (`Store::open`,
//! `Store::open_data_dir`) still reports `anyhow`, with what to do: it happens once, at start,
//! where the only thing to do with an error is to tell the operator.
//!
//! ```
//! use heurist::store::Error;
//! let unreadable = Error::Unreadable { tree: "chats", key: "chat 5".into() };
//! assert!(unreadable.to_string().contains("`chats`"));
//! let at_the_edge: anyhow::Error = unreadable.into();
//! assert!(matches!(at_the_edge.downcast_ref::<Error>(), Some(Error::Unreadable { .. })));
//! ```

use sled::transaction::TransactionError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// sled itself failed: the disk (I/O), a corrupt file, or a closed database.
    #[error("the database failed: {0}")]
    Db(#[from] sled::Error),
    /// A record is there but cannot be decoded. It is left as it is (it may be repaired), and
    /// nothing that would write over it is done.
    #[error(
        "the record {key} in tree `{tree}` cannot be read; it is left as it is, and nothing is \
         written over it until it is repaired or removed"
    )]
    Unreadable {
        tree: &'static str,
        /// The record's key as a log shows it (or the conversation it belongs to).
        key: String,
    },
    /// A record cannot be encoded to be written (nothing was written).
    #[error("cannot encode a record: {0}")]
    Encode(#[from] serde_json::Error),
    /// The operating system gave no random numbers for a new ticket id.
    #[error("no random numbers for a new id: {0}")]
    Random(getrandom::Error),
    /// The blocking task that flushes to disk did not finish (a panic, or the runtime
    /// shutting down): the flush may not have happened.
    #[error("the flush to disk did not finish: {0}")]
    Flush(#[from] tokio::task::JoinError),
}

/// The store's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A transaction aborts with the store's own error; sled's storage errors are [`Error::Db`].
/// (Only where several trees must change as one and it is rare: a scheduled task's firing.
/// A transaction costs two disk writes of sled's log, see `chats`.)
impl From<TransactionError<Error>> for Error {
    fn from(e: TransactionError<Error>) -> Self {
        match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => Self::Db(e),
        }
    }
}
