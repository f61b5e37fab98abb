//! The supervisor that keeps one server running: start it, wait for the connection to end,
//! log why, wait a backoff and start it again. Failures in a row double the wait (up to the
//! configured maximum); a connection that lasted [`STABLE_AFTER`] was healthy, and the next
//! failure waits the base backoff again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::connect::connect;
use super::server::{Server, ServerFailure, ServerState};
use crate::backoff::Backoff;

/// A connection that lasted this long was healthy: the next failure waits the base backoff
/// again instead of a doubled one.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Keeps one server running: start, wait for the end, log it, back off, start again.
pub(super) async fn supervise(server: Arc<Server>, base: Duration, max: Duration) {
    let name = server.config.name.clone();
    let mut failures: u32 = 0;
    loop {
        let (error, lasted) = match connect(&server.config, &server.cwd).await {
            Ok((running, connection)) => {
                let connection = Arc::new(connection);
                tracing::info!(server = %name, tools = connection.tools.len(), "MCP server is up");
                server
                    .state
                    .send_replace(ServerState::Up(connection.clone()));
                let started = Instant::now();
                let error = tokio::select! {
                    _ = running.waiting() => ServerFailure::own("the connection closed"),
                    _ = connection.broken.notified() => ServerFailure::own("a call found the connection broken"),
                };
                (error, Some(started.elapsed()))
            }
            Err(error) => (error, None),
        };
        failures = failures_after(failures, lasted);
        let delay = Backoff::new(base, max).after(failures);
        let now = Utc::now();
        tracing::warn!(
            server = %name,
            %error,
            retry_in_ms = delay.as_millis() as u64,
            "MCP server is down; its tools are not offered until it is back"
        );
        server.state.send_replace(ServerState::Down {
            error,
            since: now,
            retry_at: now + delay,
        });
        tokio::time::sleep(delay).await;
    }
}

/// The failures in a row once one more happened, after `failures` before it: a connection
/// that `lasted` at least [`STABLE_AFTER`] ends the run, so this one is the first again
/// (`lasted` is `None` when the server never came up).
fn failures_after(failures: u32, lasted: Option<Duration>) -> u32 {
    let before = match lasted {
        Some(lasted) if lasted >= STABLE_AFTER => 0,
        _ => failures,
    };
    before.saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_in_a_row_until_a_stable_connection() {
        struct Case {
            name: &'static str,
            failures: u32,
            lasted: Option<Duration>,
            expect: u32,
        }
        let cases = [
            Case {
                name: "the first failure",
                failures: 0,
                lasted: None,
                expect: 1,
            },
            Case {
                name: "never came up again",
                failures: 3,
                lasted: None,
                expect: 4,
            },
            Case {
                name: "up, but not for long",
                failures: 3,
                lasted: Some(STABLE_AFTER - Duration::from_millis(1)),
                expect: 4,
            },
            Case {
                name: "up long enough to count as healthy",
                failures: 3,
                lasted: Some(STABLE_AFTER),
                expect: 1,
            },
            Case {
                name: "the count never wraps",
                failures: u32::MAX,
                lasted: None,
                expect: u32::MAX,
            },
        ];
        for case in cases {
            assert_eq!(
                failures_after(case.failures, case.lasted),
                case.expect,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn the_wait_doubles_with_failures_in_a_row_and_starts_over_after_a_stable_one() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        let mut failures = 0;
        let mut waits = Vec::new();
        for lasted in [None, None, Some(Duration::from_secs(1)), Some(STABLE_AFTER)] {
            failures = failures_after(failures, lasted);
            waits.push(backoff.after(failures));
        }
        assert!(waits[1] > waits[0] && waits[2] > waits[1], "{waits:?}");
        assert_eq!(waits[3], waits[0], "{waits:?}");
    }
}
