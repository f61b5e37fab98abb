//! One turn as a pipeline of stages over one [`Turn`]: admitted (`gate`), its attachment read
//! (a recording transcribed, a document's text), then prepare (the prompt), think (the
//! agent), persist (the history), show (the answer) and follow up (options and reflection).
//! Each stage is a function of its own file; this one only says their order and where a turn
//! ends early. A scheduled reminder, once admitted, is only shown (`reminder`): no prompt, no
//! model.

use std::sync::Arc;
use std::time::Duration;

use super::attachment::read_attachment;
use super::follow_up;
use super::gate;
use super::input::TurnInput;
use super::messenger::SharedMessenger;
use super::persist::persist;
use super::prepare::prepare;
use super::show::show;
use super::state::Turn;
use super::think::think;
use super::working::Working;
use crate::app::App;

/// Runs one turn. Errors are logged and told to the user, never returned: the chat's queue
/// goes on with the next message either way. The user's message carries the working reaction
/// from admission until the turn is over, whichever way it ends.
pub(crate) async fn run(app: Arc<App>, out: SharedMessenger, input: TurnInput) {
    let at = input.conversation();
    let admitted = gate::admit(&app, out.as_ref(), input.request.user, at, input.update);
    let Some(admitted) = admitted.await else {
        return;
    };
    if input.request.reminder {
        super::reminder::remind(&app, &out, &input).await;
        return;
    }
    let working = Working::begin(&app, &out, &input.request);
    stages(app.clone(), out, input, admitted).await;
    if let Some(working) = working {
        working.end(&app);
    }
}

/// The stages of an admitted turn, in order; any of them may end it early.
async fn stages(app: Arc<App>, out: SharedMessenger, input: TurnInput, admitted: gate::Admitted) {
    let at = input.conversation();
    // Registered first, so a stop finds the turn while it waits for a slot too.
    let control = app.turns().begin(at);
    let Some(_slot) = app.turn_slot().await else {
        return;
    };
    let mut turn = Turn::begin(app.clone(), out, input, admitted, control);
    if !read_attachment(&mut turn).await {
        return;
    }
    let Some((prompt, mut basis)) = prepare(&turn).await else {
        return;
    };
    let Some(thought) = think(&turn, prompt).await else {
        return;
    };
    // The rest of the turn (its usage, options and reflection) is the answering model's.
    if let Some(model) = thought.result.answered_by() {
        basis.model = model.to_string();
    }
    let provenance = persist(&turn, &basis, &thought);
    let mut follow_ups = follow_up::start(&turn, &basis, &thought, &provenance);
    let wait = Duration::from_millis(app.config().options.attach_wait_ms);
    let quick = follow_ups.quick(wait).await;
    let proposed = thought.result.proposed.clone();
    let shown = show(&turn, thought, &follow_ups, &quick).await;
    follow_up::attach(&turn, follow_ups, quick, &shown);
    super::confirm::ask(&turn, &proposed).await;
}
