//! Test support for the turn's stages: a [`Messenger`] that records what a turn shows, an app
//! on a temporary store, a fake LLM on 127.0.0.1, and a turn admitted as `run` admits one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::gate;
use super::input::TurnInput;
use super::messenger::{Keyboard, Live, Messenger, OnVisible, SharedMessenger};
use super::state::Turn;
use crate::agent::{AgentEvent, TurnResult, TurnStatus};
use crate::app::App;
use crate::cancel::TurnId;
use crate::config::Config;
use crate::conversation::Conversation;
use crate::ids::{ChatId, UpdateId, UserId};
use crate::llm::ChatMessage;
use crate::store::{InboxEntry, InboxState, TurnRequest};

/// An allowed user (private chat id = user id).
pub(super) const ALICE: i64 = 1001;
/// An admin.
pub(super) const ADMIN: i64 = 9001;
/// The update that carries Alice's message ([`input`]).
pub(super) const UPDATE: UpdateId = UpdateId(7);
/// The id of the first message an answer is sent as.
pub(super) const SENT: i32 = 500;

/// What a turn showed, in order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Shown {
    Notice(Conversation, String),
    Answer {
        live: Live,
        text: String,
        keyboard: Keyboard,
    },
    Keyboard(ChatId, i32, Keyboard),
}

/// A chat that records what it is shown; it sends an answer as message [`SENT`] (or into the
/// live messages it is given), or refuses every send when `refusing`.
#[derive(Default)]
pub(super) struct Recorder {
    shown: Mutex<Vec<Shown>>,
    /// The reactions put on (`Some`) or taken off (`None`), by chat and message, in order.
    reactions: Mutex<Vec<(ChatId, i32, Option<String>)>>,
    pub(super) refusing: AtomicBool,
}

impl Recorder {
    pub(super) fn new() -> Arc<Self> {
        Arc::default()
    }

    pub(super) fn shown(&self) -> Vec<Shown> {
        self.shown.lock().unwrap().clone()
    }

    /// The reactions put on or taken off so far.
    pub(super) fn reactions(&self) -> Vec<(ChatId, i32, Option<String>)> {
        self.reactions.lock().unwrap().clone()
    }

    fn record(&self, shown: Shown) {
        self.shown.lock().unwrap().push(shown);
    }
}

impl Messenger for Recorder {
    fn typing(&self, _chat: Conversation) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    fn live(
        &self,
        _chat: Conversation,
        _reply_to: Option<i32>,
        _turn: TurnId,
        mut events: mpsc::UnboundedReceiver<AgentEvent>,
        _on_visible: OnVisible,
    ) -> BoxFuture<'static, Option<Live>> {
        Box::pin(async move {
            let mut finished = false;
            while let Some(event) = events.recv().await {
                finished |= matches!(event, AgentEvent::Finished);
            }
            finished.then(Live::default)
        })
    }

    fn answer<'a>(
        &'a self,
        _chat: Conversation,
        _reply_to: Option<i32>,
        live: Live,
        markdown: &'a str,
        keyboard: Keyboard,
        on_visible: OnVisible,
    ) -> BoxFuture<'a, Vec<i32>> {
        Box::pin(async move {
            if self.refusing.load(Ordering::SeqCst) {
                return Vec::new();
            }
            let first = live.messages.first().copied();
            if first.is_none() {
                on_visible(None).await;
            }
            self.record(Shown::Answer {
                live,
                text: markdown.to_string(),
                keyboard,
            });
            let id = first.unwrap_or(SENT);
            on_visible(Some(id)).await;
            vec![id]
        })
    }

    fn set_keyboard(&self, chat: ChatId, message: i32, keyboard: Keyboard) -> BoxFuture<'_, ()> {
        self.record(Shown::Keyboard(chat, message, keyboard));
        Box::pin(async {})
    }

    fn notice<'a>(&'a self, chat: Conversation, text: &'a str) -> BoxFuture<'a, ()> {
        self.record(Shown::Notice(chat, text.to_string()));
        Box::pin(async {})
    }

    fn image<'a>(&'a self, _file_id: &'a str) -> BoxFuture<'a, anyhow::Result<String>> {
        Box::pin(async { anyhow::bail!("no photos here") })
    }

    fn react(&self, chat: ChatId, message: i32, emoji: Option<String>) -> BoxFuture<'static, bool> {
        let on = emoji.is_some();
        self.reactions.lock().unwrap().push((chat, message, emoji));
        Box::pin(async move { on })
    }
}

/// An LLM URL where nothing listens: for stages that must not need one.
pub(super) const NO_LLM: &str = "http://127.0.0.1:9/v1";

/// The shipped configuration, on `dir`, with the LLM at `llm_url`, no streaming, no skills.
pub(super) fn config(dir: &Path, llm_url: &str) -> Config {
    let mut config =
        Config::from_toml(None, Path::new("config/heurist.toml")).expect("the shipped config");
    config.data_dir = dir.join("data");
    config.llm.base_url = llm_url.to_string();
    config.llm.retry_base_ms = 1;
    config.access.allowed_users = vec![crate::ids::UserId(ALICE.unsigned_abs())];
    config.access.admins = vec![crate::ids::UserId(ADMIN.unsigned_abs())];
    config.telegram.streaming = false;
    config.learning.skills_dir = dir.join("no-skills");
    config.options.enabled = false;
    config
}

/// An app on a temporary store (in `dir`) with the LLM at `llm_url`.
pub(super) fn app(dir: &Path, llm_url: &str) -> Arc<App> {
    App::new(config(dir, llm_url)).expect("an app on a temporary store")
}

/// A store in `dir` whose chat state for `chat` is `garbage` (disk damage): written with the
/// database opened by the test, after an app created it. The app's tasks let go of sled as
/// the runtime drops them, a moment after the app itself; under load that moment is later, so
/// the open is retried.
pub(super) async fn damaged_chat_state(dir: &Path, chat: i64, garbage: &[u8]) {
    let store_dir = app(dir, NO_LLM).data_dir().store_dir();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let db = loop {
        match sled::open(&store_dir) {
            Ok(db) => break db,
            Err(e) => {
                assert!(std::time::Instant::now() < until, "cannot reopen: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    };
    let chats = db.open_tree("chats").unwrap();
    chats.insert(chat.to_be_bytes(), garbage).unwrap();
    db.flush().unwrap();
}

/// An LLM URL where a listener takes connections and never answers: a turn that asks it
/// waits (until its timeout), so it can be seen before it ends. The listener lives as long
/// as the test's runtime.
pub(super) async fn silent_llm() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    url
}

/// A fake OpenAI-compatible LLM that answers every chat completion with `status` and, for a
/// 200, the text `answer`; its base URL.
pub(super) async fn fake_llm(status: u16, answer: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let reply = move || async move {
        let body = serde_json::json!({
            "id": "cmpl", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        });
        let status = axum::http::StatusCode::from_u16(status).unwrap();
        (status, axum::Json(body))
    };
    let router = axum::Router::new().route("/v1/chat/completions", axum::routing::post(reply));
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// Alice's message `text`, as inbox update 7.
pub(super) fn input(text: &str) -> TurnInput {
    from(ALICE, text)
}

/// `text` from user `user` in their private chat, as inbox update [`UPDATE`].
pub(super) fn from(user: i64, text: &str) -> TurnInput {
    let request = TurnRequest::new(ChatId(user), UserId(user.unsigned_abs()), text);
    TurnInput::new(request, UPDATE)
}

/// Records `input`'s update in the inbox, as `accept` does.
pub(super) fn accept(app: &App, input: &TurnInput) {
    let entry = InboxEntry::pending(input.request.clone(), chrono::Utc::now().timestamp());
    let update = input.update.expect("an update");
    app.store().inbox().accept(update, &entry).unwrap();
}

/// The state of unfinished inbox update `update`; `None` once it is done (answered, failed).
pub(super) fn state(app: &App, update: UpdateId) -> Option<InboxState> {
    let unfinished = app.store().inbox().unfinished().into_iter();
    unfinished
        .filter(|(u, _)| *u == update)
        .map(|(_, entry)| entry.state)
        .next()
}

/// `input`'s turn, admitted and begun as `run` begins it (accept its update first).
pub(super) async fn turn(app: &Arc<App>, out: &Arc<Recorder>, input: TurnInput) -> Turn {
    let out: SharedMessenger = out.clone();
    let at = input.conversation();
    let admitted = gate::admit(app, out.as_ref(), input.request.user, at, input.update).await;
    let control = app.turns().begin(at);
    Turn::begin(
        app.clone(),
        out,
        input,
        admitted.expect("admitted"),
        control,
    )
}

/// What the prompt stage decides for a turn on model "m" whose window read third-party text
/// (`external`) or not, with no skills, lessons or correction.
pub(super) fn basis(external: bool) -> super::prepare::Basis {
    super::prepare::Basis {
        model: "m".into(),
        epoch: 0,
        external,
        corrected: None,
        context: crate::learning::TurnContext::default(),
    }
}

/// The think stage's outcome: the agent's `result` for `question`, nothing shown live yet and
/// no 🔁 Retry offered.
pub(super) fn thought(status: TurnStatus, question: &str, answer: &str) -> super::think::Thought {
    super::think::Thought {
        result: result(status, question, answer),
        live: Live::default(),
        retry: None,
    }
}

/// What the agent produces for `question` when it ends with `status` and `answer`.
pub(super) fn result(status: TurnStatus, question: &str, answer: &str) -> TurnResult {
    TurnResult {
        status,
        answer: answer.to_string(),
        messages: vec![ChatMessage::user(question), ChatMessage::assistant(answer)],
        calls: 1,
        ..TurnResult::nothing_yet()
    }
}
