//! Bounded storage: the inbox and the option and feedback tickets grow with every turn, so
//! [`super::Store::prune`] runs at start and then at a fixed interval while the bot runs (the
//! turn layer schedules it) with the cutoff computed here.

/// The unix second before which records are old enough to prune, for a retention in days.
pub(crate) fn cutoff(now_unix: i64, retention_days: u32) -> i64 {
    now_unix.saturating_sub(i64::from(retention_days) * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_the_retention_before_now() {
        struct Case {
            name: &'static str,
            now: i64,
            days: u32,
            cutoff: i64,
        }
        let cases = [
            Case {
                name: "thirty days",
                now: 100 * 86_400,
                days: 30,
                cutoff: 70 * 86_400,
            },
            Case {
                name: "zero days prunes everything up to now",
                now: 5_000,
                days: 0,
                cutoff: 5_000,
            },
            Case {
                name: "no overflow near the minimum",
                now: i64::MIN + 1,
                days: u32::MAX,
                cutoff: i64::MIN,
            },
        ];
        for case in cases {
            assert_eq!(
                cutoff(case.now, case.days),
                case.cutoff,
                "case {}",
                case.name
            );
        }
    }
}
