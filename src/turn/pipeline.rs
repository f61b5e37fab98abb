//! One turn as a pipeline of stages over one [`Turn`]: admitted (`gate`), its attachment read
//! (a recording transcribed, a document's text), then prepare (the prompt), think (the
//! agent), persist (the history), show (the answer) and follow up (options and reflection).
//! Each stage is a function of its own file; this one only says their order and where a turn
//! ends early.

use std::sync::Arc;
use std::time::Duration;

use super::attachment::read_attachment;
use super::follow_up;
use super::gate;
use super::input::TurnInput;
use super::messenger::Out;
use super::persist::persist;
use super::prepare::prepare;
use super::show::show;
use super::state::Turn;
use super::think::think;
use crate::app::App;

/// Runs one turn. Errors are logged and told to the user, never returned: the chat's queue
/// goes on with the next message either way.
pub(crate) async fn run(app: Arc<App>, out: Out, input: TurnInput) {
    let at = input.conversation();
    let admitted = gate::admit(&app, out.as_ref(), input.request.user, at, input.update);
    let Some(admitted) = admitted.await else {
        return;
    };
    // Registered first, so a stop finds the turn while it waits for a slot too.
    let control = app.turns().begin(at);
    let Some(_slot) = app.turn_slot().await else {
        return;
    };
    let mut turn = Turn::begin(app.clone(), out, input, admitted, control);
    if !read_attachment(&mut turn).await {
        return;
    }
    let Some((prompt, basis)) = prepare(&turn).await else {
        return;
    };
    let Some(thought) = think(&turn, prompt).await else {
        return;
    };
    let provenance = persist(&turn, &basis, &thought);
    let mut follow_ups = follow_up::start(&turn, &basis, &thought, provenance.external);
    let wait = Duration::from_millis(app.config().options.attach_wait_ms);
    let quick = follow_ups.quick(wait).await;
    let shown = show(&turn, thought, &follow_ups, &quick).await;
    follow_up::attach(&turn, follow_ups, quick, &shown);
}
