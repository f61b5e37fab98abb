//! A fake OpenAI-compatible `/v1/chat/completions` on 127.0.0.1. A responder function decides
//! each reply from the request (so concurrent flows stay deterministic); every request is
//! recorded exactly as the bot sent it, with the status it got. It counts the requests in
//! flight (a responder may see how many others are, as llama-server's shared context would),
//! and can serve llama.cpp's `GET /props` and a `GET /v1/models` listing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};

pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
    pub(crate) delay: Duration,
    /// Server-sent events to stream instead of `body`, one every `gap`.
    pub(crate) events: Option<(Vec<Value>, Duration)>,
    /// Extra response headers.
    pub(crate) headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub(crate) fn text(content: &str) -> Self {
        Self::completion(json!({"role": "assistant", "content": content}), "stop")
    }

    pub(crate) fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        Self::completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
            ]}),
            "tool_calls",
        )
    }

    pub(crate) fn completion(message: Value, finish_reason: &str) -> Self {
        Self {
            status: 200,
            body: json!({
                "id": "cmpl", "object": "chat.completion", "model": "fake",
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 60}},
            }),
            delay: Duration::ZERO,
            events: None,
            headers: Vec::new(),
        }
    }

    pub(crate) fn error(status: u16, message: &str) -> Self {
        Self::status_body(status, json!({"error": {"message": message}}))
    }

    /// Any status with this JSON body.
    pub(crate) fn status_body(status: u16, body: Value) -> Self {
        Self {
            status,
            body,
            delay: Duration::ZERO,
            events: None,
            headers: Vec::new(),
        }
    }

    /// Streams these events (`data:` lines), one every 10 ms, then `[DONE]`.
    pub(crate) fn events(events: Vec<Value>) -> Self {
        Self {
            status: 200,
            body: Value::Null,
            delay: Duration::ZERO,
            events: Some((events, Duration::from_millis(10))),
            headers: Vec::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    /// Streams `text` in `pieces` chunks, one every `gap` (llama.cpp-style: a first chunk with
    /// `content: null`, usage at the end).
    pub(crate) fn streamed(text: &str, pieces: usize, gap: Duration) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let size = chars.len().div_ceil(pieces.max(1)).max(1);
        let mut events = vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
        ];
        for chunk in chars.chunks(size) {
            let piece: String = chunk.iter().collect();
            events.push(json!({"choices": [{"index": 0, "delta": {"content": piece}}]}));
        }
        events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
        events
            .push(json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10}}));
        Self {
            status: 200,
            body: Value::Null,
            delay: Duration::ZERO,
            events: Some((events, gap)),
            headers: Vec::new(),
        }
    }

    /// A tool call streamed in fragments, as OpenAI sends it.
    pub(crate) fn streamed_tool_call(id: &str, name: &str, arguments: Value) -> Self {
        let arguments = arguments.to_string();
        let (a, b) = arguments.split_at(arguments.len() / 2);
        let events = vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": a}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": b}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ];
        Self {
            status: 200,
            body: Value::Null,
            delay: Duration::ZERO,
            events: Some((events, Duration::from_millis(20))),
            headers: Vec::new(),
        }
    }

    pub(crate) fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// `(request, index, others in flight)`.
type Responder = dyn Fn(&Value, usize, usize) -> Reply + Send + Sync;

#[derive(Clone)]
pub(crate) struct FakeLlm {
    /// Base URL including `/v1`, as `OPENAI_BASE_URL` takes it.
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    /// The status each request got, by index.
    statuses: Arc<Mutex<Vec<u16>>>,
    responder: Arc<Responder>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    /// What `GET /props` and `GET /v1/models` answer (404 while unset).
    props: Arc<Mutex<Option<Value>>>,
    models: Arc<Mutex<Option<Value>>>,
    /// Paths of the GET requests received.
    gets: Arc<Mutex<Vec<String>>>,
    /// The `Authorization` header of each chat request, in arrival order.
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
    /// When each chat request arrived, by index.
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

/// Counts a request as in flight until its reply (a stream included) is sent.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl FakeLlm {
    /// `responder(request, index)` answers the request with zero-based `index`.
    pub(crate) async fn start(
        responder: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start_with_load(move |request, index, _| responder(request, index)).await
    }

    /// `responder(request, index, others)` also sees how many other requests were in flight
    /// when this one arrived.
    pub(crate) async fn start_with_load(
        responder: impl Fn(&Value, usize, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Self {
            url: format!("http://{}/v1", listener.local_addr().unwrap()),
            requests: Arc::default(),
            statuses: Arc::default(),
            responder: Arc::new(responder),
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
            props: Arc::default(),
            models: Arc::default(),
            gets: Arc::default(),
            authorizations: Arc::default(),
            arrivals: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/embeddings", post(embeddings))
            .route("/props", get(props))
            .route("/v1/models", get(models))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// Serves `GET /props` (llama.cpp) with this body from now on.
    pub(crate) fn serve_props(&self, body: Value) {
        *self.props.lock().unwrap() = Some(body);
    }

    /// Serves `GET /v1/models` with this body from now on.
    pub(crate) fn serve_models(&self, body: Value) {
        *self.models.lock().unwrap() = Some(body);
    }

    /// Paths of the GET requests received, in order.
    pub(crate) fn gets(&self) -> Vec<String> {
        self.gets.lock().unwrap().clone()
    }

    /// The most chat requests that were in flight at once.
    pub(crate) fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// When each chat request arrived, in the order of `requests()`.
    pub(crate) fn arrivals(&self) -> Vec<Instant> {
        self.arrivals.lock().unwrap().clone()
    }

    /// The status each chat request was answered with, in arrival order.
    pub(crate) fn statuses(&self) -> Vec<u16> {
        self.statuses.lock().unwrap().clone()
    }

    /// Always answers `text`.
    pub(crate) async fn answering(text: &'static str) -> Self {
        Self::start(move |_, _| Reply::text(text)).await
    }

    /// Every request, extraction calls included.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The agent's own requests (options and reflection calls left out).
    pub(crate) fn agent_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| !is_options_request(r) && !is_reflection_request(r))
            .collect()
    }

    /// The reflection calls.
    pub(crate) fn reflection_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(is_reflection_request)
            .collect()
    }

    /// The `Authorization` header of each chat request (`None`: none sent), in arrival order.
    pub(crate) fn authorizations(&self) -> Vec<Option<String>> {
        self.authorizations.lock().unwrap().clone()
    }

    /// A base URL where nothing listens: connections are refused.
    pub(crate) async fn down_url() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/v1")
    }
}

async fn handle(
    State(fake): State<FakeLlm>,
    request_headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let request: Value = serde_json::from_slice(&body).expect("the bot sent invalid JSON");
    let authorization = request_headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    fake.authorizations.lock().unwrap().push(authorization);
    let others = fake.in_flight.fetch_add(1, Ordering::SeqCst);
    fake.max_in_flight.fetch_max(others + 1, Ordering::SeqCst);
    let in_flight = InFlight(fake.in_flight.clone());
    let index = {
        let mut requests = fake.requests.lock().unwrap();
        requests.push(request.clone());
        fake.arrivals.lock().unwrap().push(arrived);
        requests.len() - 1
    };
    let reply = (fake.responder)(&request, index, others);
    {
        let mut statuses = fake.statuses.lock().unwrap();
        let len = statuses.len().max(index + 1);
        statuses.resize(len, 0);
        statuses[index] = reply.status;
    }
    // Not even a zero sleep: tokio's timer would round it up to its next millisecond tick,
    // and the benchmarks' zero-latency fake must not add that to every call.
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut headers = axum::http::HeaderMap::new();
    for (name, value) in &reply.headers {
        headers.insert(*name, value.parse().unwrap());
    }
    if let Some((events, gap)) = reply.events {
        let stream = futures_util::stream::iter(events.into_iter().map(Some).chain([None])).then(
            move |event| async move {
                tokio::time::sleep(gap).await;
                let line = match event {
                    Some(event) => format!("data: {event}\n\n"),
                    None => "data: [DONE]\n\n".to_string(),
                };
                Ok::<_, std::convert::Infallible>(line)
            },
        );
        // In flight until the last event is sent.
        let stream = stream.chain(futures_util::stream::once(async move {
            drop(in_flight);
            Ok(String::new())
        }));
        headers.insert("content-type", "text/event-stream".parse().unwrap());
        return (headers, axum::body::Body::from_stream(stream)).into_response();
    }
    drop(in_flight);
    (
        StatusCode::from_u16(reply.status).unwrap(),
        headers,
        axum::Json(reply.body),
    )
        .into_response()
}

async fn props(State(fake): State<FakeLlm>) -> Response {
    fake.gets.lock().unwrap().push("/props".to_string());
    served(fake.props.lock().unwrap().clone())
}

async fn models(State(fake): State<FakeLlm>) -> Response {
    fake.gets.lock().unwrap().push("/v1/models".to_string());
    served(fake.models.lock().unwrap().clone())
}

fn served(body: Option<Value>) -> Response {
    match body {
        Some(body) => axum::Json(body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The text of the last user message of a request.
pub(crate) fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// An LLM whose agent calls answer `answer` only after 30 s while the returned flag is set, and
/// at once after it is cleared (options and reflection fail): a turn stays in flight until the
/// test kills the bot, and the restarted bot's turn is answered at once.
pub(crate) async fn stalling_llm(answer: &'static str) -> (FakeLlm, Arc<AtomicBool>) {
    let slow = Arc::new(AtomicBool::new(true));
    let flag = slow.clone();
    let llm = FakeLlm::start(move |req, _| {
        if is_options_request(req) || is_reflection_request(req) {
            return Reply::error(500, "not now");
        }
        let delay = if flag.load(Ordering::SeqCst) { 30 } else { 0 };
        Reply::text(answer).after(Duration::from_secs(delay))
    })
    .await;
    (llm, slow)
}

/// Whether a request is an options extraction (its last user message is that prompt).
pub(crate) fn is_options_request(request: &Value) -> bool {
    let last = last_user_text(request);
    let prompt_start = &heurist::options::OPTIONS_PROMPT_TEMPLATE[..40];
    last.starts_with(prompt_start) || last == heurist::options::OPTIONS_RETRY_PROMPT
}

/// Whether a request is a reflection (its last user message is that prompt).
pub(crate) fn is_reflection_request(request: &Value) -> bool {
    use heurist::learning::lessons::{REFLECTION_EXTRACT_PROMPT_TEMPLATE, REFLECTION_RETRY_PROMPT};
    let last = last_user_text(request);
    last.starts_with(&REFLECTION_EXTRACT_PROMPT_TEMPLATE[..40]) || last == REFLECTION_RETRY_PROMPT
}

/// Topics the fake embedding model knows, with the words that signal each.
const TOPICS: &[&[&str]] = &[
    &["time", "clock", "hour", "date", "calendar", "o'clock"],
    &["web", "research", "fetch", "pages", "sources"],
    &["write", "writing", "edit", "prose", "grammar"],
];

/// A fake `/v1/embeddings`: one dimension per topic, so "clock" and "time" are close although
/// they share no word (what a real embedding model gives and BM25 cannot).
async fn embeddings(body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap();
    let data: Vec<Value> = request["input"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let text = text.as_str().unwrap().to_lowercase();
            let mut vector: Vec<f32> = TOPICS
                .iter()
                .map(|words| words.iter().filter(|w| text.contains(*w)).count() as f32)
                .collect();
            vector.push(0.1);
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}
