//! Model fallback: which failures hand a turn to another model, and in what order the models
//! are tried.
//!
//! A model's `fallback = ["id", …]` (see `[[models]]`) lists the models that take over a turn
//! it cannot answer. Only failures of the *endpoint or its setup* are handed on, after the
//! client's own retries ([`should_fall_back`]): another model, often on another endpoint with
//! another key, may well succeed. A failure that is the request's own (too long for the
//! context, refused for its content, a 403) or the user's (the daily budget) ends the turn as
//! before: it would fail the same way on any model, or its content must not go elsewhere.
//!
//! The order ([`chain`]) is depth-first: when a model fails, the next untried model of *its*
//! list takes over; when that list is used up, the list of the model that fell back to it
//! goes on. Each model is tried at most once per turn, so lists that lead back to a model
//! already tried (a cycle) cost nothing.
//!
//! ```
//! use heurist::config::ModelConfig;
//! use heurist::llm::fallback::chain;
//! let model = |id: &str, fallback: &[&str]| ModelConfig {
//!     fallback: fallback.iter().map(|s| s.to_string()).collect(),
//!     ..ModelConfig::with_id(id)
//! };
//! let models = [model("local", &["hosted", "backup"]), model("hosted", &["local"]), model("backup", &[])];
//! let ids: Vec<&str> = chain(&models, &models[0]).iter().map(|m| m.id.as_str()).collect();
//! assert_eq!(ids, ["local", "hosted", "backup"]);
//! ```

use super::error::LlmError;
use crate::config::ModelConfig;

/// Whether a model's failure (after its retries) hands the turn to its next fallback.
///
/// - Unreachable (5xx, 429, a timeout, a refused connection, a stream that broke off) and an
///   answer that cannot be read: the endpoint is down or broken.
/// - 401: the key is wrong; another endpoint has another key.
/// - 402 (a prepaid account ran dry, OpenRouter), 404 and an unknown model (a 400 or 422 that
///   says so): the account or the model's name at this endpoint, not the request.
/// - Not handed on: a 403 (OpenRouter answers a moderation refusal with 403: the content was
///   refused, and must not be sent to another provider to try its luck there), a context
///   overflow (the agent already dropped old turns; the user gets 🧹 Clear), another 4xx (the
///   request itself, e.g. a content policy), a spent budget.
pub(crate) fn should_fall_back(error: &LlmError) -> bool {
    match error {
        LlmError::Unavailable { .. } | LlmError::Malformed(_) => true,
        LlmError::Rejected { status, message } => {
            matches!(status, 401 | 402 | 404) || is_unknown_model(message)
        }
        LlmError::ContextOverflow { .. } | LlmError::OverBudget { .. } => false,
    }
}

/// Whether a provider's message says it does not know the model (OpenAI's `model_not_found`,
/// Ollama's "model 'x' not found", vLLM's "The model `x` does not exist").
fn is_unknown_model(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("model_not_found")
        || (message.contains("model")
            && (message.contains("not found") || message.contains("does not exist")))
}

/// The models a turn on `start` may try, in order: `start` first, then depth-first through the
/// fallback lists, each model once. Ids that name no configured model are skipped (the config
/// refuses them at load; a chat's model may outlive its entry).
pub fn chain<'m>(models: &'m [ModelConfig], start: &'m ModelConfig) -> Vec<&'m ModelConfig> {
    let mut order: Vec<&ModelConfig> = Vec::new();
    let mut pending = vec![start];
    while let Some(model) = pending.pop() {
        if order.iter().any(|m| m.id == model.id) {
            continue;
        }
        order.push(model);
        // Reversed onto the stack, so the list's first model is tried first.
        for id in model.fallback.iter().rev() {
            if let Some(next) = models.iter().find(|m| m.id == *id) {
                pending.push(next);
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, fallback: &[&str]) -> ModelConfig {
        ModelConfig {
            fallback: fallback.iter().map(|s| s.to_string()).collect(),
            ..ModelConfig::with_id(id)
        }
    }

    #[test]
    fn which_failures_fall_back() {
        struct Case {
            name: &'static str,
            error: LlmError,
            falls_back: bool,
        }
        let rejected = |status, message: &str| LlmError::Rejected {
            status,
            message: message.to_string(),
        };
        let cases = [
            Case {
                name: "5xx, timeout or refused connection after the retries",
                error: LlmError::Unavailable {
                    attempts: 4,
                    last: "HTTP 500: boom".into(),
                },
                falls_back: true,
            },
            Case {
                name: "an answer that cannot be read",
                error: LlmError::Malformed("expected value at line 1".into()),
                falls_back: true,
            },
            Case {
                name: "a wrong key: another endpoint has another",
                error: rejected(401, "invalid api key"),
                falls_back: true,
            },
            Case {
                name: "payment required",
                error: rejected(402, "insufficient credits"),
                falls_back: true,
            },
            Case {
                name: "forbidden: a moderation refusal is not sent elsewhere",
                error: rejected(403, "Input flagged by moderation"),
                falls_back: false,
            },
            Case {
                name: "404",
                error: rejected(404, "not found"),
                falls_back: true,
            },
            Case {
                name: "OpenAI's unknown model code",
                error: rejected(400, "model_not_found: the model x does not exist"),
                falls_back: true,
            },
            Case {
                name: "Ollama's unknown model",
                error: rejected(400, "model 'llama9' not found, try pulling it first"),
                falls_back: true,
            },
            Case {
                name: "vLLM's unknown model",
                error: rejected(400, "The model `x` does not exist."),
                falls_back: true,
            },
            Case {
                name: "a bad request of its own",
                error: rejected(400, "messages: roles must alternate"),
                falls_back: false,
            },
            Case {
                name: "refused for its content",
                error: rejected(422, "content policy"),
                falls_back: false,
            },
            Case {
                name: "too long for the context",
                error: LlmError::ContextOverflow {
                    message: "maximum context length".into(),
                },
                falls_back: false,
            },
            Case {
                name: "the user's budget",
                error: LlmError::OverBudget { budget: 1000 },
                falls_back: false,
            },
        ];
        for case in cases {
            assert_eq!(
                should_fall_back(&case.error),
                case.falls_back,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn the_chain_is_depth_first_each_model_once() {
        struct Case {
            name: &'static str,
            models: Vec<ModelConfig>,
            expect: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "no fallback",
                models: vec![model("a", &[])],
                expect: &["a"],
            },
            Case {
                name: "a list, in order",
                models: vec![model("a", &["b", "c"]), model("b", &[]), model("c", &[])],
                expect: &["a", "b", "c"],
            },
            Case {
                name: "a fallback's own list comes before the rest of the first",
                models: vec![
                    model("a", &["b", "c"]),
                    model("b", &["d"]),
                    model("c", &[]),
                    model("d", &[]),
                ],
                expect: &["a", "b", "d", "c"],
            },
            Case {
                name: "a chain through two lists",
                models: vec![model("a", &["b"]), model("b", &["c"]), model("c", &[])],
                expect: &["a", "b", "c"],
            },
            Case {
                name: "a cycle is walked once",
                models: vec![
                    model("a", &["b"]),
                    model("b", &["a", "c"]),
                    model("c", &["b"]),
                ],
                expect: &["a", "b", "c"],
            },
            Case {
                name: "a repeated or unknown id is skipped",
                models: vec![model("a", &["b", "gone", "b"]), model("b", &[])],
                expect: &["a", "b"],
            },
        ];
        for case in cases {
            let ids: Vec<&str> = chain(&case.models, &case.models[0])
                .iter()
                .map(|m| m.id.as_str())
                .collect();
            assert_eq!(ids, case.expect, "case {}", case.name);
        }
    }
}
