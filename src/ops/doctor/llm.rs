//! The doctor's language-model checks: each distinct endpoint answers (once, with the key sent
//! there), each configured model answers a one-token call at its own endpoint (with the
//! context size the server reports, when it does), the default model calls a tool it is
//! offered (natively, as text Heurist reads, or not at all), and the embeddings model embeds.
//! Calls go through the bot's own client, so what works here works for the bot.

use std::sync::atomic::Ordering;

use super::context::{Checked, Context};
use super::report::{Line, Status};
use crate::config::ModelConfig;
use crate::llm::text_calls::parse_text_tool_calls;
use crate::llm::{ChatMessage, ChatRequest, LlmError, Priority, Served, ToolSpec};
use crate::texts::ops as texts;
// The doctor's own client counts in metrics nobody scrapes.
use crate::metrics::CallKind;

/// The tool the tool-calling probe offers.
const PROBE_TOOL: &str = "get_time";

/// GET `/models` on each distinct endpoint, with the key sent there: any HTTP answer means
/// the server is there; 401 or 403 means the key is not accepted. The default endpoint is
/// not checked when nothing uses it (every model has its own, and no embeddings model).
pub(super) fn endpoint<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let mut lines = Vec::new();
        for (index, (served, up)) in context.endpoints.iter().enumerate() {
            let default = index == 0;
            if default
                && served.models.is_empty()
                && context.config.learning.embedding_model.is_empty()
            {
                lines.push(Line::skipped(texts::LLM, texts::LLM_UNUSED));
                continue;
            }
            let what = if default {
                texts::LLM.to_string()
            } else {
                texts::llm_endpoint_for(&served.models.join(", "))
            };
            let line = endpoint_line(context, served, what, default).await;
            if line.status == Status::Ok {
                up.store(true, Ordering::Relaxed);
            }
            lines.push(line);
        }
        lines
    })
}

/// The line of one endpoint: `default` is the global `[llm]` one, whose key and address are
/// set by `OPENAI_API_KEY` and `OPENAI_BASE_URL`; another one's are in its models' entries.
async fn endpoint_line(
    context: &Context<'_>,
    served: &Served,
    what: String,
    default: bool,
) -> Line {
    let base = served.url.as_str();
    let mut request = context.http.get(format!("{base}/models"));
    if let Some(key) = &served.key {
        request = request.bearer_auth(key);
    }
    match request.send().await {
        Ok(response) if matches!(response.status().as_u16(), 401 | 403) => {
            let fix = if default {
                texts::LLM_KEY_FIX.to_string()
            } else {
                let env = context
                    .config
                    .models
                    .iter()
                    .filter(|m| served.models.contains(&m.id))
                    .find_map(|m| m.api_key_env.as_deref());
                texts::llm_model_key_fix(env)
            };
            let found = texts::llm_key_refused(base, response.status().as_u16());
            Line::fail(what, found, &fix)
        }
        Ok(response) => Line::ok(what, texts::llm_reachable(base, response.status().as_u16())),
        Err(e) => Line::fail(
            what,
            texts::llm_unreachable(base, &crate::error_chain(&e.without_url())),
            if default {
                texts::LLM_UNREACHABLE_FIX
            } else {
                texts::LLM_MODEL_UNREACHABLE_FIX
            },
        ),
    }
}

/// A one-token call to each configured model, and the context size it has.
pub(super) fn models<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let mut lines = Vec::new();
        for model in &context.config.models {
            let what = texts::model(&model.id);
            if !context.llm_up(&model.id) {
                lines.push(Line::skipped(what, texts::SKIPPED_NO_LLM));
                continue;
            }
            let request = probe(context, model, "Reply with OK.", Vec::new(), 1);
            let line = match context
                .llm
                .complete(&request, Priority::Interactive, CallKind::Agent)
                .await
            {
                Ok(_) => Line::ok(what, texts::model_ok(&context_size(context, model).await)),
                Err(e) => model_failure(what, &e),
            };
            lines.push(line);
        }
        lines
    })
}

/// The context size the server reports for `model`, or the configured one, said as such.
async fn context_size(context: &Context<'_>, model: &ModelConfig) -> String {
    match (
        context.llm.context_window(&model.id, None).await,
        model.context_tokens,
    ) {
        (Some(tokens), _) => texts::context_reported(tokens),
        (None, Some(tokens)) => texts::context_configured(tokens),
        (None, None) => texts::CONTEXT_UNKNOWN.to_string(),
    }
}

/// A failed model call: a 404 or a 400 naming the model is an unknown model.
fn model_failure(what: String, error: &LlmError) -> Line {
    let unknown = match error {
        LlmError::Rejected { status, message } => {
            *status == 404 || message.to_lowercase().contains("model")
        }
        _ => false,
    };
    let fix = if unknown {
        texts::MODEL_UNKNOWN_FIX
    } else {
        texts::MODEL_FAILED_FIX
    };
    Line::fail(what, texts::model_failed(&error.to_string()), fix)
}

/// The default model, offered one tool and asked to call it.
pub(super) fn tool_calling<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let Some(model) = context.config.models.first() else {
            return Vec::new();
        };
        let what = texts::tool_calling(&model.id);
        if !context.llm_up(&model.id) {
            return vec![Line::skipped(what, texts::SKIPPED_NO_LLM)];
        }
        let tool = ToolSpec::function(
            PROBE_TOOL,
            "Returns the current time in UTC.",
            serde_json::json!({"type": "object", "properties": {}}),
        );
        let request = probe(
            context,
            model,
            "What time is it now? Call the get_time tool to find out.",
            vec![tool],
            64,
        );
        let line = match context
            .llm
            .complete(&request, Priority::Interactive, CallKind::Agent)
            .await
        {
            Ok(completion) if !completion.tool_calls.is_empty() => {
                Line::ok(what, texts::TOOLS_NATIVE)
            }
            Ok(completion)
                if parse_text_tool_calls(&completion.content, &[PROBE_TOOL]).is_some() =>
            {
                Line::ok(what, texts::TOOLS_TEXT)
            }
            Ok(_) => Line::fail(what, texts::TOOLS_NONE, texts::TOOLS_NONE_FIX),
            Err(e) => model_failure(what, &e),
        };
        vec![line]
    })
}

/// The embeddings model, when one is configured.
pub(super) fn embeddings<'a>(context: &'a Context<'a>) -> Checked<'a> {
    Box::pin(async move {
        let model = context.config.learning.embedding_model.as_str();
        if model.is_empty() {
            return Vec::new();
        }
        let what = texts::embeddings(model);
        if !context.llm_up(model) {
            return vec![Line::skipped(what, texts::SKIPPED_NO_LLM)];
        }
        let input = ["heurist doctor".to_string()];
        let line = match context
            .llm
            .embed(model, &input, Priority::Interactive)
            .await
        {
            Ok((vectors, _)) => Line::ok(
                what,
                texts::embeddings_ok(vectors.first().map_or(0, Vec::len)),
            ),
            Err(e) => Line::warn(
                what,
                texts::embeddings_failed(&e.to_string()),
                texts::EMBEDDINGS_FIX,
            ),
        };
        vec![line]
    })
}

/// A small request to `model`, as the agent would send it, capped at `tokens`.
fn probe(
    context: &Context<'_>,
    model: &ModelConfig,
    ask: &str,
    tools: Vec<ToolSpec>,
    tokens: u32,
) -> ChatRequest {
    let mut request = ChatRequest {
        model: model.id.clone(),
        messages: vec![ChatMessage::user(ask)],
        tools,
        temperature: 0.0,
        reasoning_effort: model.reasoning_effort.clone(),
        provider: None,
        max_tokens: None,
        max_completion_tokens: None,
        stream: false,
        stream_options: None,
        context_tokens: model.context_tokens,
    };
    request.set_completion_cap(tokens, context.config.llm.max_tokens_field);
    request
}
