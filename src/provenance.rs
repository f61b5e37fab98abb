//! One gate for every lasting effect of a turn. A turn may change what outlives it — save a
//! personal fact, create a scheduled task, teach a lesson that later turns carry — only as far
//! as where its text came from allows, and that is decided here, once, by [`decide`] over the
//! turn's [`Provenance`]:
//!
//! - its message: the user's own words, someone else's (forwarded, a document, an audio
//!   file), or the run of a scheduled task (the user is not there to see what it reads);
//! - what it read this turn: a web page, search results, a tool server's answer;
//! - what its chat's history window holds: a page read in an earlier turn is still in front of
//!   the model, and an instruction planted there can act now.
//!
//! Untainted, a fact or a task is made as the model asks. Tainted, it is not made silently:
//! the user is shown exactly what would be saved or scheduled, with ✅ / ✖, and only their ✅
//! makes it. A lesson from tainted context waits for an admin's review (as `learning.review`
//! asks of third-party text), and one from a scheduled run is never trusted by itself, whatever
//! `learning.review` says. A new kind of lasting effect gets an [`Effect`] here, not a check of
//! its own.
//!
//! ```
//! use heurist::provenance::{Decision, Effect, Message, Provenance, decide};
//! let own = Provenance { message: Message::Own, read_external: false, history_external: false };
//! assert_eq!(decide(Effect::ScheduleTask, &own), Decision::Allow);
//! let after_a_page = Provenance { read_external: true, ..own };
//! assert_eq!(decide(Effect::ScheduleTask, &after_a_page), Decision::Confirm);
//! let run = Provenance { message: Message::Scheduled { tainted: false }, ..own };
//! assert_eq!(decide(Effect::TeachLesson, &run), Decision::Untrusted);
//! ```

/// Where a turn's message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// The user typed (or said, or pressed) it themselves.
    Own,
    /// Someone else wrote it: a forwarded message, a document, an audio file.
    ThirdParty,
    /// The run of a scheduled task; `tainted`: the task was made from tainted context (and
    /// confirmed by its owner).
    Scheduled { tainted: bool },
}

/// What a turn's text came from, as far as lasting effects care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provenance {
    pub message: Message,
    /// The turn read text a third party wrote (a page, search results, a tool server's answer).
    pub read_external: bool,
    /// The chat's history window, which the model sees, holds such text.
    pub history_external: bool,
}

impl Provenance {
    /// Whether anything the model saw came from someone other than the user, live: third-party
    /// text, or a scheduled run (the user is not there to see what it does).
    #[must_use]
    pub fn tainted(&self) -> bool {
        self.message != Message::Own || self.read_external || self.history_external
    }

    /// Whether the turn holds text a third party wrote, so the history marks it and later
    /// turns whose window holds it are tainted: a clean task's run brings none in.
    #[must_use]
    pub fn third_party_text(&self) -> bool {
        matches!(
            self.message,
            Message::ThirdParty | Message::Scheduled { tainted: true }
        ) || self.read_external
            || self.history_external
    }

    /// The same, once the turn has (or has not) read third-party text.
    #[must_use]
    pub fn after_reading(self, read_external: bool) -> Self {
        Self {
            read_external: self.read_external || read_external,
            ..self
        }
    }
}

/// A change that outlives the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Save a fact in the asker's personal memory.
    SaveFact,
    /// Create a scheduled task or reminder.
    ScheduleTask,
    /// Teach a lesson that every user's later turns may carry.
    TeachLesson,
    /// Keep the form a tool taught one of its arguments in (see `learning::rewrite`), which
    /// later calls are rewritten to: the tool's own refusal or acceptance is its evidence (a
    /// tool's result is no third party's word about that tool), so only the user's own
    /// message and a clean window are asked; a fix after reading a page is never learned (the
    /// turn's forms see to it, `agent::rewriting`).
    TeachForm,
}

/// What [`decide`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It happens now.
    Allow,
    /// A fact or task: only once its user presses ✅ under exactly what would change. A
    /// lesson: it counts as third-party, pending an admin's review where `learning.review`
    /// asks it.
    Confirm,
    /// A lesson that is never trusted by itself: pending an admin's ✅ whatever
    /// `learning.review` says.
    Untrusted,
}

/// Whether a turn of provenance `provenance` may have `effect`.
#[must_use]
pub fn decide(effect: Effect, provenance: &Provenance) -> Decision {
    match (effect, provenance.message) {
        (Effect::TeachForm, Message::Own) if !provenance.history_external => Decision::Allow,
        (Effect::TeachForm, _) => Decision::Untrusted,
        (Effect::TeachLesson, Message::Scheduled { .. }) => Decision::Untrusted,
        _ if provenance.tainted() => Decision::Confirm,
        _ => Decision::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_users_own_untainted_turn_acts_at_once() {
        struct Case {
            name: &'static str,
            message: Message,
            read: bool,
            history: bool,
            fact: Decision,
            lesson: Decision,
            form: Decision,
        }
        let (allow, confirm, untrusted) = (Decision::Allow, Decision::Confirm, Decision::Untrusted);
        let cases = [
            Case {
                name: "own words, clean context",
                message: Message::Own,
                read: false,
                history: false,
                fact: allow,
                lesson: allow,
                form: allow,
            },
            Case {
                name: "read a page this turn",
                message: Message::Own,
                read: true,
                history: false,
                fact: confirm,
                lesson: confirm,
                form: allow,
            },
            Case {
                name: "a page in the history window",
                message: Message::Own,
                read: false,
                history: true,
                fact: confirm,
                lesson: confirm,
                form: untrusted,
            },
            Case {
                name: "forwarded or a document",
                message: Message::ThirdParty,
                read: false,
                history: false,
                fact: confirm,
                lesson: confirm,
                form: untrusted,
            },
            Case {
                name: "a clean task's run",
                message: Message::Scheduled { tainted: false },
                read: false,
                history: false,
                fact: confirm,
                lesson: untrusted,
                form: untrusted,
            },
            Case {
                name: "a tainted task's run",
                message: Message::Scheduled { tainted: true },
                read: true,
                history: true,
                fact: confirm,
                lesson: untrusted,
                form: untrusted,
            },
        ];
        for case in cases {
            let provenance = Provenance {
                message: case.message,
                read_external: case.read,
                history_external: case.history,
            };
            for (effect, want) in [
                (Effect::SaveFact, case.fact),
                (Effect::ScheduleTask, case.fact),
                (Effect::TeachLesson, case.lesson),
                (Effect::TeachForm, case.form),
            ] {
                assert_eq!(
                    decide(effect, &provenance),
                    want,
                    "{}: {effect:?}",
                    case.name
                );
            }
        }
    }

    #[test]
    fn reading_only_ever_taints() {
        let own = Provenance {
            message: Message::Own,
            read_external: false,
            history_external: false,
        };
        assert!(own.after_reading(true).tainted());
        assert!(!own.after_reading(false).tainted());
        assert!(own.after_reading(true).after_reading(false).tainted());
    }

    #[test]
    fn a_clean_tasks_run_is_tainted_but_brings_no_third_party_text() {
        let run = |tainted| Provenance {
            message: Message::Scheduled { tainted },
            read_external: false,
            history_external: false,
        };
        assert!(run(false).tainted() && !run(false).third_party_text());
        assert!(run(true).tainted() && run(true).third_party_text());
        let forwarded = Provenance {
            message: Message::ThirdParty,
            ..run(false)
        };
        assert!(forwarded.third_party_text());
    }
}
