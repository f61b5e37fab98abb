//! The owner's bill: `[limits]` enforced, in the two places a turn can spend it.
//!
//! - [`limits`]: before a turn is accepted, each user's turns per minute and tokens per day
//!   (a limited message costs no LLM call);
//! - `ledger.rs`: every LLM call a user's turn causes (the agent's, option extractions,
//!   reflections, embeddings) reserves its estimate and settles what it used, so queued and
//!   parallel turns end at most one call over the day's budget.
//!
//! The other limits are Telegram's and an endpoint's, where they apply: the pace of what the
//! bot sends (`telegram::transport::limiter`), the requests one LLM endpoint serves at once
//! (`llm::concurrency`), and a burst of notices shown as one message ([`crate::burst`]).

mod ledger;
pub mod limits;

pub use ledger::{Admission, Ledger, admit};
pub(crate) use ledger::{Payer, estimate};
