//! A model's context window, learned from the server where it says so.
//!
//! A completion cap larger than what is left of the context after the prompt makes some
//! servers refuse the request (vLLM) and lets others run into their context's end (llama.cpp).
//! So when a model's context is known, the completion cap is at most the context minus the
//! estimated prompt. The server is asked once per model, on the model's first call, and the
//! answer (or that there is none) is cached for the life of the client:
//!
//! - llama.cpp's `GET /props` → `default_generation_settings.n_ctx`;
//! - `GET /models` → the model's entry's `context_length` (OpenRouter), `n_ctx`, or
//!   `max_model_len` (vLLM).
//!
//! Where neither says, the model's configured `context_tokens` is used.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::OnceCell;

/// A completion is never capped below this, even when the estimate says the prompt fills the
/// context: the estimate errs high, and a server that really is full says so itself.
pub(crate) const MIN_COMPLETION_TOKENS: u32 = 64;

/// Models whose context is remembered; requests only name configured models, so this is a
/// guard, not a limit anyone meets.
const MAX_MODELS: usize = 64;

/// Context sizes beyond this are not believed (no model has a billion-token window).
const MAX_CONTEXT: u64 = 1 << 30;

/// The context window in llama.cpp's `/props`.
pub(crate) fn from_props(props: &Value) -> Option<usize> {
    plausible(
        props
            .get("default_generation_settings")
            .and_then(|settings| settings.get("n_ctx"))
            .or_else(|| props.get("n_ctx")),
    )
}

/// The context window of `model` in a `/models` listing.
pub(crate) fn from_models(models: &Value, model: &str) -> Option<usize> {
    let entry = models
        .get("data")
        .and_then(Value::as_array)?
        .iter()
        .find(|entry| entry.get("id").and_then(Value::as_str) == Some(model))?;
    ["context_length", "n_ctx", "max_model_len"]
        .iter()
        .find_map(|field| plausible(entry.get(field)))
}

fn plausible(value: Option<&Value>) -> Option<usize> {
    value
        .and_then(Value::as_u64)
        .filter(|&n| n > 0 && n <= MAX_CONTEXT)
        .and_then(|n| usize::try_from(n).ok())
}

/// The largest completion that fits `context` after a prompt of `prompt` tokens.
pub(crate) fn completion_room(context: usize, prompt: usize) -> u32 {
    let room = context.saturating_sub(prompt);
    u32::try_from(room)
        .unwrap_or(u32::MAX)
        .max(MIN_COMPLETION_TOKENS)
}

/// Context windows the server reported, per model, each asked for once.
#[derive(Default)]
pub(crate) struct ContextWindows {
    known: Mutex<HashMap<String, Arc<OnceCell<Option<usize>>>>>,
}

impl ContextWindows {
    /// The server's context window for `model`, running `discover` on the model's first call
    /// only (concurrent first calls share that one discovery).
    pub(crate) async fn get<F, Fut>(&self, model: &str, discover: F) -> Option<usize>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<usize>>,
    {
        let cell = {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            match known.get(model) {
                Some(cell) => cell.clone(),
                None if known.len() >= MAX_MODELS => return None,
                None => known.entry(model.to_string()).or_default().clone(),
            }
        };
        *cell.get_or_init(discover).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_windows_are_read_from_what_servers_say() {
        struct Case {
            name: &'static str,
            props: Value,
            models: Value,
            expect: (Option<usize>, Option<usize>),
        }
        let cases = [
            Case {
                name: "llama.cpp",
                props: json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4}),
                models: json!({"data": [{"id": "m", "meta": {"n_ctx_train": 32768}}]}),
                expect: (Some(4096), None),
            },
            Case {
                name: "openrouter",
                props: json!({"error": "not found"}),
                models: json!({"data": [{"id": "other", "context_length": 1}, {"id": "m", "context_length": 131072}]}),
                expect: (None, Some(131072)),
            },
            Case {
                name: "vllm",
                props: Value::Null,
                models: json!({"data": [{"id": "m", "max_model_len": 8192}]}),
                expect: (None, Some(8192)),
            },
            Case {
                name: "nonsense",
                props: json!({"default_generation_settings": {"n_ctx": -1}}),
                models: json!({"data": [{"id": "m", "n_ctx": "4096"}, {"id": "m"}]}),
                expect: (None, None),
            },
            Case {
                name: "absurd size",
                props: json!({"n_ctx": 1u64 << 40}),
                models: json!({"data": "x"}),
                expect: (None, None),
            },
        ];
        for case in cases {
            assert_eq!(
                (from_props(&case.props), from_models(&case.models, "m")),
                case.expect,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn room_is_what_the_prompt_leaves_but_never_nothing() {
        assert_eq!(completion_room(4096, 1000), 3096);
        assert_eq!(completion_room(4096, 5000), MIN_COMPLETION_TOKENS);
        assert_eq!(completion_room(usize::MAX, 0), u32::MAX);
    }

    #[tokio::test]
    async fn each_model_is_discovered_once() {
        let windows = ContextWindows::default();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        for _ in 0..3 {
            let found = windows
                .get("m", || async {
                    asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Some(2048)
                })
                .await;
            assert_eq!(found, Some(2048));
        }
        let unknown = windows.get("n", || async { None }).await;
        assert_eq!(unknown, None);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
