//! What one turn carries from stage to stage: who asked what, in which chat, the user's role
//! and payer as the gate admitted them, the turn's registration for a stop, and what it showed
//! before it began (a resumed answer's messages, the typing indicator). Each stage reads it;
//! what a stage produces is its own value, handed to the next (see [`super::pipeline`]).

use std::sync::Arc;

use super::gate::Admitted;
use super::input::TurnInput;
use super::measure::TurnClock;
use super::messenger::SharedMessenger;
use super::offers::retire_options;
use crate::app::App;
use crate::budget::Payer;
use crate::cancel::RegisteredTurn;
use crate::conversation::Conversation;
use crate::role::Role;

/// One admitted turn, as every stage reads it.
pub(super) struct Turn {
    pub(super) app: Arc<App>,
    pub(super) out: SharedMessenger,
    pub(super) input: TurnInput,
    /// The user's role when the turn began (not when the message came).
    pub(super) role: Role,
    /// Who pays for the turn's LLM calls.
    pub(super) payer: Payer,
    /// The turn as a stop sees it; it stays registered until the turn is dropped.
    pub(super) control: RegisteredTurn,
    /// A turn resumed after a crash whose answer was already showing: the messages that show
    /// it, which the new answer goes into.
    pub(super) resumed: Option<Vec<i32>>,
    /// The option round of this turn's own options (`None`: none are offered).
    pub(super) round: Option<u64>,
    /// Its timing and outcome, for the metrics (counted when the turn is dropped).
    pub(super) clock: TurnClock,
    typing: Typing,
}

impl Turn {
    /// Begins an admitted turn (registered as `control`, holding its slot): finds the messages
    /// of an answer a crash interrupted, shows that an answer is coming, and retires the
    /// chat's earlier option buttons.
    pub(super) fn begin(
        app: Arc<App>,
        out: SharedMessenger,
        input: TurnInput,
        admitted: Admitted,
        control: RegisteredTurn,
    ) -> Self {
        let at = input.conversation();
        let resumed = input
            .update
            .map(|u| app.store().inbox().visible_messages(u))
            .filter(|ids| !ids.is_empty());
        let clock = TurnClock::start(app.metrics());
        let typing = Typing(tokio::spawn(out.typing(at)));
        let round = retire_options(&app, &out, at);
        Self {
            app,
            out,
            input,
            role: admitted.role,
            payer: admitted.payer,
            control,
            resumed,
            round,
            clock,
            typing,
        }
    }

    /// The conversation the turn answers in.
    pub(super) fn at(&self) -> Conversation {
        self.input.conversation()
    }

    /// Ends the typing indicator (it ends with the turn anyway, also a stopped one).
    pub(super) fn stop_typing(&self) {
        self.typing.0.abort();
    }
}

/// The typing indicator's task, aborted when dropped.
struct Typing(tokio::task::JoinHandle<()>);

impl Drop for Typing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use crate::store::InboxState;
    use crate::turn::testing::{NO_LLM, Recorder, UPDATE, accept, app, input, turn};

    /// A turn whose answer was on screen when a crash came goes into the messages showing it.
    #[tokio::test]
    async fn a_turn_begins_in_the_messages_of_an_answer_a_crash_interrupted() {
        let cases = [
            ("a new turn", None, None),
            ("a resumed turn", Some(42), Some(vec![42])),
        ];
        for (name, showing, resumed) in cases {
            let dir = tempfile::tempdir().unwrap();
            let app = app(dir.path(), NO_LLM);
            let input = input("hi");
            accept(&app, &input);
            if let Some(message) = showing {
                let visible = InboxState::Visible {
                    message: Some(message),
                };
                app.store().inbox().set_state(UPDATE, visible).unwrap();
            }
            let turn = turn(&app, &Recorder::new(), input).await;
            assert_eq!(turn.resumed, resumed, "{name}");
            assert!(turn.round.is_some(), "{name}: options may be offered");
        }
    }
}
