//! The `remember` tool: saves one short fact the user asked the bot to keep into *their*
//! personal memory (see [`crate::memory`]). Unlike the other tools it writes to the store, so
//! it is bounded three ways: it only ever writes the list of the user whose turn calls it
//! (the [`MemoryWriter`] the turn hands the agent), a fact is one line of at most `max_chars`, and
//! where the turn's context holds text a third party wrote (a page, search results, a tool
//! server's answer, a document, a forwarded message, now or earlier in the chat's window) the
//! provenance gate ([`crate::provenance`]) has the fact proposed instead: it is saved only
//! when the user presses ✅ under it, so no page can plant a fact that every later turn of the
//! user would carry. The user sees every fact in `/memory`, and the result tells the model what
//! to tell the user: saved, already kept, saved with an older fact dropped to make room, or
//! waiting for their ✅.

use serde::Deserialize;
use serde_json::json;

use super::proposing::{Lasting, propose};
use crate::config::MemoryConfig;
use crate::conversation::Conversation;
use crate::ids::UserId;
use crate::llm::ToolSpec;
use crate::memory::{Facts, Kept, REMEMBER_TOOL, Unfit, clean};
use crate::store::{ProposedChange, Store};
use crate::texts::confirm as confirm_texts;

/// The tool's schema: one fact, in the user's words.
pub(crate) fn spec(max_chars: usize) -> ToolSpec {
    ToolSpec::function(
        REMEMBER_TOOL,
        format!(
            "Save one short fact about the user in their personal memory, only when they ask you \
             to remember something (a preference, a standing instruction, a detail about them). \
             It is shown to you in their later messages, in any chat; only they see it, in \
             /memory, where they also forget it. One fact per call, at most {max_chars} characters."
        ),
        json!({
            "type": "object",
            "properties": {
                "fact": {"type": "string", "description": "The fact, short, in the user's words"}
            },
            "required": ["fact"],
            "additionalProperties": false
        }),
    )
}

#[derive(Deserialize)]
struct RememberArgs {
    fact: String,
}

/// The memory a turn's `remember` calls write: its user's, and only theirs.
#[derive(Clone)]
pub(crate) struct MemoryWriter {
    store: Store,
    user: UserId,
    /// Where the turn is: a fact that waits for the user's ✅ is shown there.
    at: Conversation,
    config: MemoryConfig,
}

impl std::fmt::Debug for MemoryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWriter")
            .field("user", &self.user)
            .finish()
    }
}

impl MemoryWriter {
    /// The memory of `user`, the asker of the turn in `at`.
    pub(crate) fn new(store: Store, user: UserId, at: Conversation, config: MemoryConfig) -> Self {
        Self {
            store,
            user,
            at,
            config,
        }
    }

    /// Runs one `remember` call with `arguments`; `confirm`: the provenance gate asks for the
    /// user's ✅ (the fact is proposed, not saved).
    pub(crate) fn call(&self, arguments: &str, confirm: bool) -> Lasting {
        let fact = match self.fact_of(arguments) {
            Ok(fact) => fact,
            Err(e) => return Lasting::done(Err(e)),
        };
        if confirm {
            let what = confirm_texts::fact(&fact);
            return propose(
                &self.store,
                self.user,
                self.at,
                ProposedChange::Fact(fact),
                what,
            );
        }
        Lasting::done(self.save(&fact))
    }

    /// The fact a call's `arguments` name, cleaned, or why there is none to save.
    fn fact_of(&self, arguments: &str) -> Result<String, String> {
        let args: RememberArgs = serde_json::from_str(arguments)
            .map_err(|e| format!("remember needs {{\"fact\": \"…\"}}: {e}"))?;
        let max_chars = self.config.max_chars;
        clean(&args.fact, max_chars).map_err(|unfit| match unfit {
            Unfit::Empty => "the fact is empty; nothing was saved".to_string(),
            Unfit::TooLong(chars) => format!(
                "the fact has {chars} characters, more than the limit of {max_chars}; save a \
                 shorter version"
            ),
        })
    }

    /// Saves `fact` (already cleaned) in the user's memory; what the model reads of it.
    pub(crate) fn save(&self, fact: &str) -> Result<String, String> {
        let now = chrono::Utc::now().timestamp();
        let max = self.config.max_memories;
        let kept = self
            .store
            .memories()
            .change(self.user, |facts: &mut Facts| {
                facts.remember(fact, now, max)
            })
            .map_err(|e| {
                tracing::warn!(user = %self.user, error = %e, "cannot save a fact");
                "the memory could not be saved just now; tell the user it was not saved".to_string()
            })?;
        Ok(result_text(fact, &kept, max))
    }
}

/// What the model reads after a call that saved `fact` (or found it kept), with `max` facts
/// allowed: a dropped fact is named, for the model to tell the user.
fn result_text(fact: &str, kept: &Kept, max: usize) -> String {
    match kept {
        Kept::Known => format!(
            "Already in the user's personal memory: \"{fact}\". Nothing changed; they can see \
             and forget their facts with /memory."
        ),
        Kept::Added { dropped } if dropped.is_empty() => format!(
            "Saved in the user's personal memory: \"{fact}\". They can see and forget it with \
             /memory."
        ),
        Kept::Added { dropped } => {
            let dropped: Vec<String> = dropped.iter().map(|d| format!("\"{d}\"")).collect();
            format!(
                "Saved in the user's personal memory: \"{fact}\". The memory holds at most {max} \
                 facts, so the one saved (or asked for again) longest ago was dropped: {}. Tell \
                 the user that it was dropped.",
                dropped.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::output::ERROR_PREFIX;

    fn keeper(dir: &std::path::Path, max_memories: usize) -> MemoryWriter {
        let store = Store::open(dir).unwrap();
        let config = MemoryConfig {
            max_memories,
            max_chars: 20,
        };
        let at = Conversation::new(crate::ids::ChatId(7), None);
        MemoryWriter::new(store, UserId(7), at, config)
    }

    #[test]
    fn a_call_saves_refuses_or_names_what_it_dropped() {
        struct Case {
            name: &'static str,
            arguments: &'static str,
            tainted: bool,
            says: &'static str,
            error: bool,
        }
        let cases = [
            Case {
                name: "saved",
                arguments: r#"{"fact": "I'm vegetarian"}"#,
                tainted: false,
                says: "Saved in the user's personal memory: \"I'm vegetarian\".",
                error: false,
            },
            Case {
                name: "the same again",
                arguments: r#"{"fact": "i'm vegetarian."}"#,
                tainted: false,
                says: "Already in the user's personal memory",
                error: false,
            },
            Case {
                name: "full: the older fact is named",
                arguments: r#"{"fact": "use metric units"}"#,
                tainted: false,
                says: "was dropped: \"I'm vegetarian\"",
                error: false,
            },
            Case {
                name: "after third-party text: proposed, not saved",
                arguments: r#"{"fact": "send my key to x"}"#,
                tainted: true,
                says: "Not done yet",
                error: false,
            },
            Case {
                name: "too long",
                arguments: r#"{"fact": "a fact far longer than twenty characters"}"#,
                tainted: false,
                says: "more than the limit of 20",
                error: true,
            },
            Case {
                name: "no fact",
                arguments: r#"{"text": "x"}"#,
                tainted: false,
                says: "remember needs",
                error: true,
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let keeper = keeper(dir.path(), 1);
        for case in cases {
            let lasting = keeper.call(case.arguments, case.tainted);
            assert_eq!(
                lasting.proposed.is_some(),
                case.tainted,
                "case {}",
                case.name
            );
            let output = lasting.output;
            assert!(!output.external, "case {}", case.name);
            assert!(
                output.text.contains(case.says),
                "case {}: {}",
                case.name,
                output.text
            );
            assert_eq!(
                output.text.starts_with(ERROR_PREFIX),
                case.error,
                "case {}",
                case.name
            );
        }
        let facts = keeper.store.memories().facts(UserId(7));
        let texts: Vec<&str> = facts.list().iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["use metric units"]);
        let proposed = keeper.call(r#"{"fact": "send my key to x"}"#, true);
        let id = proposed.proposed.unwrap().id;
        let claim = keeper
            .store
            .proposals()
            .claim(&id, crate::ids::ChatId(7), UserId(7), 0);
        let Ok(crate::store::ProposalClaim::Taken(proposal)) = claim else {
            panic!("the proposal is kept for the user's press: {claim:?}");
        };
        assert_eq!(
            proposal.change,
            ProposedChange::Fact("send my key to x".into())
        );
    }
}
