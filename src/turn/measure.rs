//! What one turn records in the metrics (see [`crate::metrics`]): how it ended, how long it
//! took from its start (admitted, holding its turn slot) until its answer was on screen, and
//! until its first text was (a streamed answer's first part, else the answer).
//!
//! A [`TurnClock`] goes with the turn: its outcome starts as cancelled (a turn dropped before
//! the agent is done was stopped, or aborted at shutdown), the stages set what they learn, and
//! the outcome is counted once, when the turn is dropped. Recording is two atomic adds and a
//! short lock per turn, never held across an await.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::messenger::OnVisible;
use crate::agent::TurnStatus;
use crate::metrics::{Metrics, TurnOutcome};

/// A turn's timing and outcome; counted when dropped.
pub(super) struct TurnClock(Arc<TurnTiming>);

struct TurnTiming {
    metrics: Metrics,
    started: Instant,
    /// Whether the turn's first text was seen (it is timed once).
    first_text: AtomicBool,
    outcome: Mutex<TurnOutcome>,
}

impl TurnClock {
    /// Starts timing a turn now.
    pub(super) fn start(metrics: &Metrics) -> Self {
        Self(Arc::new(TurnTiming {
            metrics: metrics.clone(),
            started: Instant::now(),
            first_text: AtomicBool::new(false),
            outcome: Mutex::new(TurnOutcome::Cancelled),
        }))
    }

    /// How the turn ended, as far as it is known now.
    pub(super) fn ended(&self, outcome: TurnOutcome) {
        *self.0.outcome.lock().unwrap_or_else(|e| e.into_inner()) = outcome;
    }

    /// The agent is done with `status`.
    pub(super) fn thought(&self, status: &TurnStatus) {
        self.ended(outcome_of(status));
    }

    /// The answer is on screen.
    pub(super) fn shown(&self) {
        self.0.metrics.turn_shown(self.0.started.elapsed());
    }

    /// `on_visible`, timing the turn's first visible text on the way (the first message that
    /// exists: the callback's `Some`).
    pub(super) fn first_text(&self, on_visible: OnVisible) -> OnVisible {
        let clock = self.0.clone();
        Arc::new(move |message| {
            if message.is_some() && !clock.first_text.swap(true, Ordering::Relaxed) {
                clock.metrics.first_text(clock.started.elapsed());
            }
            on_visible(message)
        })
    }
}

impl Drop for TurnClock {
    fn drop(&mut self) {
        let outcome = *self.0.outcome.lock().unwrap_or_else(|e| e.into_inner());
        self.0.metrics.turn(outcome);
    }
}

/// The outcome a turn whose agent ended with `status` is counted under.
fn outcome_of(status: &TurnStatus) -> TurnOutcome {
    match status {
        TurnStatus::Answered => TurnOutcome::Answered,
        TurnStatus::IterationCap => TurnOutcome::IterationCap,
        TurnStatus::LlmFailed(_) => TurnOutcome::Failed,
        TurnStatus::NoAnswer => TurnOutcome::NoAnswer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmError;
    use crate::metrics::Gauges;

    /// A turn is counted once, under the outcome it last reached; its first text is timed once.
    #[tokio::test]
    async fn a_turn_is_counted_once_under_its_last_outcome() {
        let cases: [(&str, Option<TurnStatus>, &str); 3] = [
            ("stopped before the agent was done", None, "cancelled"),
            ("answered", Some(TurnStatus::Answered), "answered"),
            (
                "the LLM failed",
                Some(TurnStatus::LlmFailed(LlmError::Malformed("x".into()))),
                "failed",
            ),
        ];
        for (name, status, label) in cases {
            let metrics = Metrics::new();
            let clock = TurnClock::start(&metrics);
            if let Some(status) = &status {
                clock.thought(status);
                let visible = clock.first_text(crate::turn::unrecorded());
                visible(None).await;
                visible(Some(1)).await;
                visible(Some(2)).await;
                clock.shown();
            }
            drop(clock);
            let text = metrics.render(&Gauges::default());
            let counted = format!("heurist_turns_total{{outcome=\"{label}\"}} 1");
            assert!(text.contains(&counted), "{name}:\n{text}");
            let timed = u8::from(status.is_some());
            for histogram in ["turn_duration", "turn_first_text"] {
                let count = format!("heurist_{histogram}_seconds_count {timed}\n");
                assert!(text.contains(&count), "{name}: {histogram}:\n{text}");
            }
        }
    }
}
