//! The one backoff: how long to wait before trying again after failures in a row. The base
//! wait, doubling with each failure, at most a cap. Three loops use it: the runtime's restart
//! in place (`runtime::run`), an MCP server's supervisor (`agent::mcp`), and an LLM call's
//! retries (`llm::client`, which jitters the wait and lets a provider's `Retry-After` win).
//!
//! One small pure function rather than a crate such as `backon`: each of those loops has its
//! own way to stop or start over (a restart tries until a signal, an MCP server's count of
//! failures is reset by a healthy connection and its next try is shown in `/tools`, an LLM
//! call stops at its retry budget and gives way to `Retry-After`), so a crate's retry
//! combinator fits none of them, and what the three share is this one formula.
//!
//! ```
//! use std::time::Duration;
//! use heurist::backoff::Backoff;
//! let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
//! let waits: Vec<u64> = (1..=6).map(|n| backoff.after(n).as_secs()).collect();
//! assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
//! ```

use std::time::Duration;

/// A doubling wait from `base`, capped at `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
}

impl Backoff {
    /// Waits `base` after the first failure, doubling after each one more, never over `max`.
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// The wait after `failures` failures in a row (1: the first, which waits `base`; 0 too).
    /// The doubling stops at 2^30 times `base`, so no count overflows.
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap() {
        struct Case {
            name: &'static str,
            base_ms: u64,
            max_ms: u64,
            failures: &'static [u32],
            want_ms: &'static [u64],
        }
        let cases = [
            Case {
                name: "an MCP server's restarts",
                base_ms: 500,
                max_ms: 10_000,
                failures: &[1, 2, 3, 4, 5, 6, 7, 8],
                want_ms: &[500, 1000, 2000, 4000, 8000, 10000, 10000, 10000],
            },
            Case {
                name: "no failure yet waits the base",
                base_ms: 20,
                max_ms: 1000,
                failures: &[0, 1],
                want_ms: &[20, 20],
            },
            Case {
                name: "a count past any doubling stays at the cap",
                base_ms: 500,
                max_ms: 10_000,
                failures: &[31, 1000, u32::MAX],
                want_ms: &[10_000, 10_000, 10_000],
            },
            Case {
                name: "an uncapped wait stops doubling at 2^30, without overflow",
                base_ms: 1,
                max_ms: u64::MAX,
                failures: &[31, u32::MAX],
                want_ms: &[1 << 30, 1 << 30],
            },
        ];
        for case in cases {
            let backoff = Backoff::new(
                Duration::from_millis(case.base_ms),
                Duration::from_millis(case.max_ms),
            );
            let got: Vec<u64> = case
                .failures
                .iter()
                .map(|&n| u64::try_from(backoff.after(n).as_millis()).unwrap())
                .collect();
            assert_eq!(got, case.want_ms, "{}", case.name);
        }
    }
}
