//! How useful a lesson has proven: a Bayesian lower bound over what happened to the
//! answers that carried it, an exploration bonus so a new one gets a fair trial, and the
//! order in which a full store forgets.
//!
//! Evidence is weighted: a 👍 or 👎 on an answer that carried the lesson counts fully; a
//! turn that carried it and ended well (or badly) counts a little, since most answers are
//! never rated; being learned again from a trusted turn counts half. The utility is the
//! lower bound of a Beta(1 + positive, 1 + negative) posterior one standard deviation below
//! its mean, so 1 of 1 does not beat 40 of 45, and a lesson with no evidence sits in the
//! middle (about 0.21) until it has been tried.
//!
//! ```
//! use heurist::learning::utility::{Evidence, utility};
//! let once = Evidence { up: 1, ..Evidence::default() };
//! let proven = Evidence { up: 40, down: 5, ..Evidence::default() };
//! assert!(utility(&proven) > utility(&once));
//! ```

use std::cmp::Ordering;

/// Weight of a turn outcome (success or failure) of a turn that carried the lesson.
const SUCCESS_WEIGHT: f32 = 0.2;
const FAILURE_WEIGHT: f32 = 0.5;
/// Weight of learning the same lesson again from a trusted turn.
const RELEARNED_WEIGHT: f32 = 0.5;
/// How many standard deviations below the posterior mean the utility is taken.
const Z: f32 = 1.0;
/// A lesson injected fewer times than this gets an exploration bonus, shrinking to zero.
pub(crate) const EXPLORATION_TRIALS: u32 = 5;
/// The bonus of a lesson never injected.
pub(crate) const EXPLORATION_BONUS: f32 = 0.4;

/// What is known about a lesson's use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence {
    pub up: u32,
    pub down: u32,
    pub successes: u32,
    pub failures: u32,
    pub relearned: u32,
    pub injected: u32,
}

/// The lower bound of the lesson's usefulness, in `[0, 1)`.
#[allow(clippy::cast_precision_loss)]
pub fn utility(e: &Evidence) -> f32 {
    let positive =
        e.up as f32 + SUCCESS_WEIGHT * e.successes as f32 + RELEARNED_WEIGHT * e.relearned as f32;
    let negative = e.down as f32 + FAILURE_WEIGHT * e.failures as f32;
    let (alpha, beta) = (1.0 + positive, 1.0 + negative);
    let sum = alpha + beta;
    let mean = alpha / sum;
    let sd = (alpha * beta / (sum * sum * (sum + 1.0))).sqrt();
    (mean - Z * sd).max(0.0)
}

/// The bonus a lesson injected `injected` times gets when ranked for injection.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn exploration_bonus(injected: u32) -> f32 {
    let left = EXPLORATION_TRIALS.saturating_sub(injected) as f32;
    EXPLORATION_BONUS * left / EXPLORATION_TRIALS as f32
}

/// What eviction compares: utility, when it was last injected, when it was created, its id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Age {
    pub utility: f32,
    /// Unix seconds; 0 for never.
    pub last_injected: i64,
    pub created: i64,
    pub id: u64,
}

/// The eviction order of a full store: the first to go is the least useful, then the least
/// recently injected, then the oldest (then the lowest id, so the order is total).
pub(crate) fn eviction_order(a: &Age, b: &Age) -> Ordering {
    a.utility
        .total_cmp(&b.utility)
        .then(a.last_injected.cmp(&b.last_injected))
        .then(a.created.cmp(&b.created))
        .then(a.id.cmp(&b.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(up: u32, down: u32) -> Evidence {
        Evidence {
            up,
            down,
            ..Evidence::default()
        }
    }

    #[test]
    fn utility_orders_evidence_sensibly() {
        struct Case {
            name: &'static str,
            better: Evidence,
            worse: Evidence,
        }
        let cases = [
            Case {
                name: "40 of 45 beats 1 of 1",
                better: e(40, 5),
                worse: e(1, 0),
            },
            Case {
                name: "1 of 1 beats nothing known",
                better: e(1, 0),
                worse: e(0, 0),
            },
            Case {
                name: "nothing known beats one 👎",
                better: e(0, 0),
                worse: e(0, 1),
            },
            Case {
                name: "successful turns count",
                better: Evidence {
                    successes: 5,
                    ..Evidence::default()
                },
                worse: e(0, 0),
            },
            Case {
                name: "failed turns count against",
                better: e(0, 0),
                worse: Evidence {
                    failures: 3,
                    ..Evidence::default()
                },
            },
            Case {
                name: "relearned counts for",
                better: Evidence {
                    relearned: 2,
                    ..Evidence::default()
                },
                worse: e(0, 0),
            },
        ];
        for case in cases {
            assert!(
                utility(&case.better) > utility(&case.worse),
                "case {}: {} vs {}",
                case.name,
                utility(&case.better),
                utility(&case.worse)
            );
        }
        assert!((utility(&e(0, 0)) - 0.211).abs() < 0.01);
        assert!(utility(&e(0, 50)) < 0.05 && utility(&e(1000, 0)) < 1.0);
    }

    #[test]
    fn exploration_is_bounded_and_fades() {
        assert_eq!(exploration_bonus(0), EXPLORATION_BONUS);
        assert!(exploration_bonus(2) < exploration_bonus(1));
        assert_eq!(exploration_bonus(EXPLORATION_TRIALS), 0.0);
        assert_eq!(exploration_bonus(1000), 0.0);
    }

    #[test]
    fn eviction_order_is_utility_then_recency_then_age() {
        struct Case {
            name: &'static str,
            first: Age,
            second: Age,
        }
        let age = |utility, last_injected, created, id| Age {
            utility,
            last_injected,
            created,
            id,
        };
        let cases = [
            Case {
                name: "lower utility goes first, however recent",
                first: age(0.1, 900, 900, 9),
                second: age(0.5, 0, 0, 1),
            },
            Case {
                name: "same utility: least recently injected first",
                first: age(0.3, 100, 900, 9),
                second: age(0.3, 500, 0, 1),
            },
            Case {
                name: "never injected counts as least recent",
                first: age(0.3, 0, 900, 9),
                second: age(0.3, 1, 0, 1),
            },
            Case {
                name: "same utility and recency: oldest first",
                first: age(0.3, 100, 10, 9),
                second: age(0.3, 100, 20, 1),
            },
            Case {
                name: "all equal: lowest id first",
                first: age(0.3, 100, 10, 1),
                second: age(0.3, 100, 10, 2),
            },
        ];
        for case in cases {
            assert_eq!(
                eviction_order(&case.first, &case.second),
                Ordering::Less,
                "case {}",
                case.name
            );
            assert_eq!(
                eviction_order(&case.second, &case.first),
                Ordering::Greater,
                "case {} (reversed)",
                case.name
            );
        }
    }
}
