//! The model's side of a run: a recording proxy in front of the fake or a real server, which
//! keeps every chat completion the bot asked for with what it got, and adds the run's sampling
//! `seed` to each request (the bot has no setting for one; llama-server and OpenAI honour the
//! field). Also the readers of a recorded request that the fake and the judge share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// One chat completion the bot asked for, with what it got.
#[derive(Clone)]
pub(crate) struct Exchange {
    pub(crate) request: Value,
    pub(crate) response: Value,
}

/// A proxy in front of the model that keeps every exchange.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub(crate) url: String,
    upstream: String,
    seed: Option<u64>,
    client: reqwest::Client,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
}

impl Recorder {
    /// Listens on 127.0.0.1; `seed`, when set, goes into every chat completion request.
    pub(crate) async fn start(upstream: &str, seed: Option<u64>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let recorder = Self {
            url: format!("http://{}/v1", listener.local_addr().unwrap()),
            upstream: upstream.trim_end_matches('/').to_string(),
            seed,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(1800))
                .build()
                .unwrap(),
            exchanges: Arc::default(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(recorder.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        recorder
    }

    /// Every exchange so far, in the order their answers came.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }

    /// How many exchanges there are so far.
    pub(crate) fn len(&self) -> usize {
        self.exchanges.lock().unwrap().len()
    }
}

/// The request's body with the run's seed in it (unchanged if it is not JSON).
fn seeded(body: &Bytes, seed: Option<u64>) -> Bytes {
    let Some(seed) = seed else {
        return body.clone();
    };
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut request)) => {
            request.insert("seed".into(), seed.into());
            Bytes::from(Value::Object(request).to_string())
        }
        _ => body.clone(),
    }
}

/// Forwards a request under `/v1` (and llama.cpp's `/props`) to the upstream server.
async fn forward(
    State(recorder): State<Recorder>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let base = recorder.upstream.trim_end_matches("/v1");
    let target = match path.strip_prefix("/v1") {
        Some(rest) => format!("{}{rest}", recorder.upstream),
        None => format!("{base}{path}"),
    };
    let completion = path.ends_with("/chat/completions");
    let body = if completion {
        seeded(&body, recorder.seed)
    } else {
        body
    };
    let mut upstream = recorder.client.request(method, &target).body(body.clone());
    for name in ["authorization", "content-type"] {
        if let Some(value) = headers.get(name) {
            upstream = upstream.header(name, value.as_bytes());
        }
    }
    let reply = match upstream.send().await {
        Ok(reply) => reply,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = axum::http::StatusCode::from_u16(reply.status().as_u16()).unwrap();
    let content_type = reply.headers().get("content-type").cloned();
    let answer = reply.bytes().await.unwrap_or_default();
    if completion
        && let (Ok(request), Ok(response)) = (
            serde_json::from_slice::<Value>(&body),
            serde_json::from_slice::<Value>(&answer),
        )
    {
        recorder
            .exchanges
            .lock()
            .unwrap()
            .push(Exchange { request, response });
    }
    let mut response = (status, answer).into_response();
    if let Some(content_type) = content_type {
        response.headers_mut().insert("content-type", content_type);
    }
    response
}

/// The contents of a request's messages with this role.
pub(crate) fn contents<'a>(request: &'a Value, role: &'a str) -> impl Iterator<Item = &'a str> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |m| m["role"] == role)
        .filter_map(|m| m["content"].as_str())
}

/// The last user message that is the user's (not the bot's "answer now" nudge), with the
/// block learning may have put in front of it.
pub(crate) fn asked(request: &Value) -> String {
    contents(request, "user")
        .filter(|c| !heurist::agent::is_answer_now(c))
        .last()
        .unwrap_or_default()
        .to_string()
}

/// The messages of the request's current turn: after the user's message.
pub(crate) fn this_turn(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| !heurist::agent::is_answer_now(c))
        })
        .map_or(0, |i| i + 1);
    messages[start..].to_vec()
}

/// The names of the tools a request offered.
pub(crate) fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .map(str::to_string)
        .collect()
}
