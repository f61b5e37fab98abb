//! Bounded storage while the bot runs: the inbox and the option and feedback tickets grow with
//! every turn, so [`prune_forever`] removes what is older than the retention at start and then
//! at a fixed interval, for as long as the bot runs.

use std::time::Duration;

use super::Store;

/// The unix second before which records are old enough to prune, for a retention in days.
pub(crate) fn cutoff(now_unix: i64, retention_days: u32) -> i64 {
    now_unix.saturating_sub(i64::from(retention_days) * 24 * 3600)
}

/// Prunes now and then every `interval` (at least a second), until the task is aborted (the
/// shutdown ends background work). A failed prune is logged and tried again next time.
pub async fn prune_forever(store: Store, retention_days: u32, interval: Duration) {
    let mut ticks = tokio::time::interval(interval.max(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let before = cutoff(chrono::Utc::now().timestamp(), retention_days);
        let store = store.clone();
        match tokio::task::spawn_blocking(move || store.prune(before)).await {
            Ok(Ok(report)) => tracing::debug!(?report, "pruned old records"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot prune old records"),
            Err(e) => tracing::warn!(error = %e, "the prune task failed"),
        }
    }
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
