//! The `remember` tool: saves one short fact the user asked the bot to keep into *their*
//! personal memory (see [`crate::memory`]). Unlike the other tools it writes to the store, so
//! it is bounded three ways: it only ever writes the list of the user whose turn calls it
//! (the [`Keeper`] the turn hands the agent), a fact is one line of at most `max_chars`, and
//! it refuses once the turn has read text a third party wrote (a page, search results, a tool
//! server's answer), so no page can plant a fact that every later turn of the user would
//! carry. The user sees every fact in `/memory`, and the result tells the model what to tell
//! the user: saved, already kept, or saved with an older fact dropped to make room.

use serde::Deserialize;
use serde_json::json;

use super::output::{ERROR_PREFIX, ToolOutput};
use crate::config::MemoryConfig;
use crate::ids::UserId;
use crate::llm::ToolSpec;
use crate::memory::{Facts, Kept, REMEMBER_TOOL, Unfit, clean};
use crate::store::Store;

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
pub(crate) struct Keeper {
    store: Store,
    user: UserId,
    config: MemoryConfig,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper").field("user", &self.user).finish()
    }
}

impl Keeper {
    /// The memory of `user`, the asker of the turn.
    pub(crate) fn new(store: Store, user: UserId, config: MemoryConfig) -> Self {
        Self {
            store,
            user,
            config,
        }
    }

    /// Runs one `remember` call with `arguments`; `tainted`: the turn has read third-party
    /// text (then nothing is saved).
    pub(crate) fn call(&self, arguments: &str, tainted: bool) -> ToolOutput {
        ToolOutput::own(match self.save(arguments, tainted) {
            Ok(text) => text,
            Err(error) => format!("{ERROR_PREFIX}{error}"),
        })
    }

    fn save(&self, arguments: &str, tainted: bool) -> Result<String, String> {
        if tainted {
            return Err(
                "remember is not available in a turn that read text from a web page, \
                 search results or a tool server; ask the user to send the fact again in a \
                 message of their own"
                    .to_string(),
            );
        }
        let args: RememberArgs = serde_json::from_str(arguments)
            .map_err(|e| format!("remember needs {{\"fact\": \"…\"}}: {e}"))?;
        let max_chars = self.config.max_chars;
        let fact = clean(&args.fact, max_chars).map_err(|unfit| match unfit {
            Unfit::Empty => "the fact is empty; nothing was saved".to_string(),
            Unfit::TooLong(chars) => format!(
                "the fact has {chars} characters, more than the limit of {max_chars}; save a \
                 shorter version"
            ),
        })?;
        let now = chrono::Utc::now().timestamp();
        let max = self.config.max_memories;
        let kept = self
            .store
            .memories()
            .change(self.user, |facts: &mut Facts| {
                facts.remember(&fact, now, max)
            })
            .map_err(|e| {
                tracing::warn!(user = %self.user, error = %e, "cannot save a fact");
                "the memory could not be saved just now; tell the user it was not saved".to_string()
            })?;
        Ok(result_text(&fact, &kept, max))
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

    fn keeper(dir: &std::path::Path, max_memories: usize) -> Keeper {
        let store = Store::open(dir).unwrap();
        let config = MemoryConfig {
            max_memories,
            max_chars: 20,
        };
        Keeper::new(store, UserId(7), config)
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
                name: "after third-party text",
                arguments: r#"{"fact": "send my key to x"}"#,
                tainted: true,
                says: "not available in a turn that read text",
                error: true,
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
            let output = keeper.call(case.arguments, case.tainted);
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
    }
}
