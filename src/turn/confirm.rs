//! The user's side of the provenance gate (see [`crate::provenance`]): a fact or task a tainted
//! turn proposed is shown under its answer with ✅ / ✖ ([`ask`]), and a press ([`answer`])
//! makes it — only its user's, only once — or drops it. What a ✅ makes is exactly what was
//! shown: the proposal's stored change, never the model's words again. A made task records
//! that it came from tainted context, and its runs carry that (see `scheduled`).

use super::messenger::Keyboard;
use super::state::Turn;
use super::task_scheduler::for_user;
use crate::agent::proposing::Proposed;
use crate::agent::remember::MemoryWriter;
use crate::app::App;
use crate::conversation::Conversation;
use crate::ids::{ChatId, UserId};
use crate::schedule::Timing;
use crate::store::{Proposal, ProposalClaim, ProposedChange};
use crate::texts::confirm as texts;

/// How long a proposal waits for its ✅: a day, after which a press finds it expired.
const MAX_AGE_SECS: i64 = 24 * 3600;

/// Shows each proposed change of the turn with ✅ / ✖, after its answer.
pub(super) async fn ask(turn: &Turn, proposed: &[Proposed]) {
    for proposal in proposed {
        let keyboard = Keyboard::Confirm(proposal.id.clone());
        let text = texts::ask(&proposal.what);
        turn.out.ask(turn.at(), &text, keyboard).await;
    }
}

/// What a press on a confirmation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Nothing changed; the toast says why.
    Refused(&'static str),
    /// The proposal was made or dropped: the toast, and the text that replaces the
    /// confirmation (with no buttons left).
    Closed { toast: &'static str, text: String },
}

/// What a press on proposal `id` in `chat` by `presser` did: `yes` (✅) makes the change, ✖
/// drops it; anyone else's press changes nothing.
pub(crate) fn answer(app: &App, id: &str, chat: ChatId, presser: UserId, yes: bool) -> Answered {
    let oldest = chrono::Utc::now().timestamp() - MAX_AGE_SECS;
    let claim = app.store().proposals().claim(id, chat, presser, oldest);
    let proposal = match claim {
        Ok(ProposalClaim::Taken(proposal)) => proposal,
        Ok(ProposalClaim::NotYours) => return Answered::Refused(texts::NOT_YOURS),
        Ok(ProposalClaim::Expired) => return Answered::Refused(texts::EXPIRED),
        Err(e) => {
            tracing::warn!(%chat, error = %e, "cannot read a proposal");
            return Answered::Refused(texts::EXPIRED);
        }
    };
    let what = shown(app, &proposal);
    if !yes {
        tracing::info!(%chat, user = %presser, "a proposal was declined");
        let text = texts::declined(&what);
        return Answered::Closed { toast: "✖", text };
    }
    let text = match make(app, proposal) {
        Ok(said) => texts::done(&what, said),
        Err(why) => texts::failed(&what, &why),
    };
    Answered::Closed { toast: "✅", text }
}

/// Makes the change `proposal` holds; what the user is told of it, or why it was not made.
fn make(app: &App, proposal: Proposal) -> Result<&'static str, String> {
    let at = Conversation::new(proposal.chat, proposal.topic);
    match proposal.change {
        ProposedChange::Fact(fact) => {
            let config = app.config().memory;
            if !config.enabled() {
                return Err(texts::MEMORY_OFF.to_string());
            }
            let keeper = MemoryWriter::new(app.store().clone(), proposal.user, at, config);
            keeper.save(&fact).map(|_| texts::FACT_SAVED)
        }
        ProposedChange::Task(task) => {
            let now = chrono::Utc::now().timestamp();
            if matches!(task.timing, Timing::Once { at } if at <= now) {
                return Err(texts::TIME_PASSED.to_string());
            }
            let next_run = match &task.timing {
                Timing::Cron { expr, zone } => {
                    crate::schedule::next_after(expr, zone, now).unwrap_or(task.next_run)
                }
                Timing::Once { at } => *at,
            };
            let desk = for_user(app, proposal.user, at);
            let task = crate::store::Task { next_run, ..task };
            desk.add(task).map(|_| texts::TASK_SAVED)
        }
    }
}

/// The change `proposal` holds, as its confirmation showed it.
fn shown(app: &App, proposal: &Proposal) -> String {
    match &proposal.change {
        ProposedChange::Fact(fact) => texts::fact(fact),
        ProposedChange::Task(task) => {
            let at = Conversation::new(proposal.chat, proposal.topic);
            for_user(app, proposal.user, at).describe(task)
        }
    }
}
