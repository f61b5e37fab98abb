//! A fake Telegram Bot API on 127.0.0.1 that is as strict as the real one where it matters:
//! message length (4096 UTF-16 units), HTML that Telegram can parse, `callback_data` of 1–64
//! bytes. Tests queue updates, script failures (429 with `retry_after`), and read every call.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub(crate) const BOT_ID: i64 = 4242;
pub(crate) const BOT_USERNAME: &str = "heurist_test_bot";

#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) at: Instant,
    /// Whether the fake answered `ok: true`.
    pub(crate) ok: bool,
    /// What it answered (`result` of the response, or the error body).
    pub(crate) result: Value,
    /// The body as sent, when it was a multipart form (an upload), else empty.
    pub(crate) multipart: Vec<u8>,
}

impl Call {
    /// The bytes of the multipart part named `name` (an uploaded file), as sent.
    pub(crate) fn part(&self, name: &str) -> Option<Vec<u8>> {
        let first_line = self.multipart.split(|b| *b == b'\n').next()?;
        let boundary = first_line.strip_suffix(b"\r").unwrap_or(first_line);
        let delimiter = [b"\r\n".as_slice(), boundary].concat();
        let named = format!("name=\"{name}\"");
        let mut rest = self.multipart.get(boundary.len()..)?;
        while let Some(end) = find(rest, &delimiter) {
            let part = &rest[..end];
            rest = &rest[end + delimiter.len()..];
            let Some(split) = find(part, b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&part[..split]);
            if head.contains(&named) {
                return Some(part[split + 4..].to_vec());
            }
        }
        None
    }

    /// The text the call sent ("" if none).
    pub(crate) fn text(&self) -> String {
        self.params["text"].as_str().unwrap_or_default().to_string()
    }

    /// The callback data of every button the call sent, row by row.
    pub(crate) fn buttons(&self) -> Vec<String> {
        callback_data(&self.params["reply_markup"])
    }
}

/// The callback data of every button of an inline keyboard, row by row.
fn callback_data(markup: &Value) -> Vec<String> {
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
        .collect()
}

#[derive(Default)]
struct Inner {
    updates: Vec<Value>,
    /// Every update ever queued, for re-delivery.
    delivered: Vec<Value>,
    next_update_id: i64,
    next_message_id: i64,
    calls: Vec<Call>,
    /// Forced answers per method, used before normal handling: (HTTP status, body).
    scripted: HashMap<String, VecDeque<(u16, Value)>>,
    /// Per method, how long its next calls' answers are held back (the call is recorded, and
    /// its effect on screen made, at once: a slow network on the way back).
    slow: HashMap<String, VecDeque<Duration>>,
    /// What each chat shows: message id → current text.
    screen: HashMap<i64, std::collections::BTreeMap<i64, String>>,
    /// The inline keyboard each message shows now: (chat, message id) → reply_markup.
    markups: HashMap<(i64, i64), Value>,
    /// The forum topic of each message sent to one: (chat, message id) → message_thread_id.
    topics: HashMap<(i64, i64), i64>,
    /// When set, sends and edits to one chat closer together than this get 429, as Telegram's
    /// flood control answers.
    chat_rate: Option<Duration>,
    last_in_chat: HashMap<i64, Instant>,
    /// 429s answered because of `chat_rate`.
    pub(crate) flood_refusals: usize,
    /// When each update was handed to the bot by getUpdates.
    delivered_at: HashMap<i64, Instant>,
    /// When each (chat, text) was first sent successfully: an index for `wait_text`.
    sent_texts: HashMap<(i64, String), Instant>,
    /// When the first getUpdates request arrived.
    first_poll: Option<Instant>,
    /// Calls per method still to leave unanswered forever (a Telegram that stopped answering).
    hang: HashMap<String, usize>,
    /// Calls left unanswered so far.
    hung: usize,
    /// Set by `release_hung`: calls left unanswered are answered now.
    hung_released: bool,
    /// Files the bot may download, by file id (`getFile` names them `files/<id>`).
    files: HashMap<String, Vec<u8>>,
    /// The paths of every file download, in order.
    downloads: Vec<String>,
    /// Where sendMessageDraft is refused, by chat (`None`: every chat): the HTTP status it
    /// gets (404: a Bot API server without the method; 400: drafts refused there).
    refuse_drafts: HashMap<Option<i64>, u16>,
    /// sendMessageDraft refuses `can_stop` (a Bot API server older than 9.5).
    refuse_can_stop: bool,
    /// `getUpdates` naming `stopped_message_generation` is refused (a 400).
    refuse_stop_updates: bool,
}

#[derive(Clone)]
pub(crate) struct FakeTelegram {
    pub(crate) url: String,
    inner: Arc<Mutex<Inner>>,
    notify: Arc<Notify>,
    /// Woken on every call the bot makes (waiters then look at what arrived).
    called: Arc<Notify>,
}

impl FakeTelegram {
    pub(crate) async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            next_update_id: 1,
            next_message_id: 1000,
            ..Default::default()
        }));
        let fake = Self {
            url: String::new(),
            inner,
            notify: Arc::new(Notify::new()),
            called: Arc::new(Notify::new()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new().fallback(handle).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, ..fake }
    }

    fn push_update(&self, body: impl FnOnce(i64, i64) -> Value) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        let update_id = inner.next_update_id;
        inner.next_update_id += 1;
        let message_id = inner.next_message_id;
        inner.next_message_id += 1;
        let mut update = body(update_id, message_id);
        update["update_id"] = json!(update_id);
        inner.delivered.push(update.clone());
        inner.updates.push(update);
        drop(inner);
        self.notify.notify_waiters();
        update_id
    }

    /// A text message from `user` in the private chat with the same id.
    pub(crate) fn send_text(&self, user: i64, text: &str) -> i64 {
        self.send_in_chat(user, user, text)
    }

    pub(crate) fn send_in_chat(&self, chat: i64, user: i64, text: &str) -> i64 {
        let text = text.to_string();
        self.push_update(move |_, message_id| {
            json!({"message": message(message_id, chat, user_json(user), json!({"text": text}))})
        })
    }

    /// A channel post forwarded by `user` into their private chat: someone else wrote `text`.
    pub(crate) fn send_forwarded(&self, user: i64, text: &str) -> i64 {
        let text = text.to_string();
        self.push_update(move |_, message_id| {
            let origin = json!({
                "type": "channel",
                "date": 1_699_999_000,
                "chat": {"id": -100_999, "type": "channel", "title": "Deals"},
                "message_id": 12,
            });
            let content = json!({"text": text, "forward_origin": origin});
            json!({"message": message(message_id, user, user_json(user), content)})
        })
    }

    /// A text message from `user` in forum topic `topic` (its `message_thread_id`) of the
    /// forum supergroup `chat`.
    pub(crate) fn send_in_topic(&self, chat: i64, topic: i64, user: i64, text: &str) -> i64 {
        let text = text.to_string();
        self.push_update(move |_, message_id| {
            let content =
                json!({"text": text, "message_thread_id": topic, "is_topic_message": true});
            let mut msg = message(message_id, chat, user_json(user), content);
            msg["chat"]["is_forum"] = json!(true);
            json!({"message": msg})
        })
    }

    /// The id of the message that update `update_id` carried.
    pub(crate) fn message_id_of(&self, update_id: i64) -> i64 {
        let inner = self.inner.lock().unwrap();
        let update = inner
            .delivered
            .iter()
            .find(|u| u["update_id"] == update_id)
            .unwrap();
        update["message"]["message_id"].as_i64().unwrap()
    }

    /// Delivers update `update_id` again, as Telegram does when a bot crashed before
    /// confirming it.
    pub(crate) fn redeliver(&self, update_id: i64) {
        let mut inner = self.inner.lock().unwrap();
        let update = inner
            .delivered
            .iter()
            .find(|u| u["update_id"] == update_id)
            .unwrap()
            .clone();
        inner.updates.push(update);
        drop(inner);
        self.notify.notify_waiters();
    }

    /// A text message in `chat` that replies to the bot's message `reply_to`.
    pub(crate) fn send_reply_to_bot(&self, chat: i64, user: i64, text: &str, reply_to: i64) -> i64 {
        let text = text.to_string();
        self.push_update(move |_, message_id| {
            let replied = message(reply_to, chat, bot_json(), json!({"text": "earlier answer"}));
            json!({"message": message(message_id, chat, user_json(user), json!({"text": text, "reply_to_message": replied}))})
        })
    }

    /// Makes `bytes` downloadable as file `file_id` (through `getFile` and `/file/bot<token>/`).
    pub(crate) fn serve_file(&self, file_id: &str, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
        inner.files.insert(file_id.to_string(), bytes.to_vec());
    }

    /// The paths of the files downloaded so far.
    pub(crate) fn downloads(&self) -> Vec<String> {
        self.inner.lock().unwrap().downloads.clone()
    }

    /// A voice note from `user`: file `file_id`, `seconds` long, `size` bytes as Telegram says.
    pub(crate) fn send_voice_note(&self, user: i64, file_id: &str, seconds: u32, size: u64) -> i64 {
        let file_id = file_id.to_string();
        self.push_update(move |_, message_id| {
            let voice = json!({"voice": {"file_id": file_id, "file_unique_id": "uv",
                "duration": seconds, "mime_type": "audio/ogg", "file_size": size}});
            json!({"message": message(message_id, user, user_json(user), voice)})
        })
    }

    /// A voice note `user` forwards from a channel: file `file_id`, `seconds` long, `size`
    /// bytes.
    pub(crate) fn send_forwarded_voice_note(
        &self,
        user: i64,
        file_id: &str,
        seconds: u32,
        size: u64,
    ) -> i64 {
        let file_id = file_id.to_string();
        self.push_update(move |_, message_id| {
            let origin = json!({"type": "channel", "date": 1_699_999_000,
                "chat": {"id": -100_999, "type": "channel", "title": "Deals"}, "message_id": 12});
            let voice = json!({"voice": {"file_id": file_id, "file_unique_id": "uv",
                "duration": seconds, "mime_type": "audio/ogg", "file_size": size},
                "forward_origin": origin});
            json!({"message": message(message_id, user, user_json(user), voice)})
        })
    }

    /// A round video note from `user`: file `file_id`, `seconds` long as the client claims,
    /// `size` bytes as Telegram says (video notes carry no MIME type nor name).
    pub(crate) fn send_video_note(&self, user: i64, file_id: &str, seconds: u32, size: u64) -> i64 {
        let file_id = file_id.to_string();
        self.push_update(move |_, message_id| {
            let note = json!({"video_note": {"file_id": file_id, "file_unique_id": "un",
                "length": 384, "duration": seconds, "file_size": size}});
            json!({"message": message(message_id, user, user_json(user), note)})
        })
    }

    /// A document from `user`: file `file_id` named `name` of type `mime`, `size` bytes as
    /// Telegram says, with an optional caption.
    pub(crate) fn send_document(
        &self,
        user: i64,
        file_id: &str,
        (name, mime): (&str, &str),
        size: u64,
        caption: Option<&str>,
    ) -> i64 {
        let mut document = json!({"document": {"file_id": file_id, "file_unique_id": "ud",
            "file_name": name, "mime_type": mime, "file_size": size}});
        if let Some(caption) = caption {
            document["caption"] = json!(caption);
        }
        self.push_update(move |_, message_id| {
            json!({"message": message(message_id, user, user_json(user), document)})
        })
    }

    /// A location from `user`: neither text, a photo, a recording nor a document.
    pub(crate) fn send_location(&self, user: i64) -> i64 {
        self.push_update(move |_, message_id| {
            let location = json!({"location": {"latitude": 52.5, "longitude": 13.4}});
            json!({"message": message(message_id, user, user_json(user), location)})
        })
    }

    /// A photo from `user`, in two sizes, with an optional caption.
    pub(crate) fn send_photo_with_caption(&self, user: i64, caption: Option<&str>) -> i64 {
        let caption = caption.map(str::to_string);
        self.push_update(move |_, message_id| {
            let mut photo = json!({"photo": [
                {"file_id": "small", "file_unique_id": "us", "width": 90, "height": 90, "file_size": 4},
                {"file_id": "large", "file_unique_id": "ul", "width": 800, "height": 800, "file_size": 4},
            ]});
            if let Some(caption) = caption {
                photo["caption"] = json!(caption);
            }
            json!({"message": message(message_id, user, user_json(user), photo)})
        })
    }

    /// A press of an inline button with `data` under the bot's message `message_id`.
    pub(crate) fn press(&self, user: i64, chat: i64, message_id: i64, data: &str) -> String {
        let (query_id, markup, topic) = {
            let inner = self.inner.lock().unwrap();
            let markup = inner.markups.get(&(chat, message_id)).cloned();
            let topic = inner.topics.get(&(chat, message_id)).copied();
            (format!("cq{}", inner.next_update_id), markup, topic)
        };
        let id = query_id.clone();
        let data = data.to_string();
        // The message as Telegram hands it back: with the keyboard it shows now.
        let mut content = json!({"text": "answer"});
        if let Some(markup) = markup.filter(Value::is_object) {
            content["reply_markup"] = markup;
        }
        // A message in a forum topic comes back with its topic.
        if let Some(topic) = topic {
            content["message_thread_id"] = json!(topic);
            content["is_topic_message"] = json!(true);
        }
        self.push_update(move |_, _| {
            json!({"callback_query": {
                "id": id,
                "from": user_json(user),
                "chat_instance": "ci",
                "data": data,
                "message": message(message_id, chat, bot_json(), content),
            }})
        });
        query_id
    }

    /// `user` changes their reactions on message `message_id` of `chat` from the emoji `old`
    /// to the emoji `new` (a `message_reaction` update; empty `new`: taken off).
    pub(crate) fn react(
        &self,
        user: i64,
        chat: i64,
        message_id: i64,
        old: &[&str],
        new: &[&str],
    ) -> i64 {
        let emoji = |list: &[&str]| -> Vec<Value> {
            list.iter()
                .map(|e| json!({"type": "emoji", "emoji": e}))
                .collect()
        };
        let (old, new) = (emoji(old), emoji(new));
        self.push_update(move |_, _| {
            json!({"message_reaction": {
                "chat": chat_json(chat),
                "message_id": message_id,
                "user": user_json(user),
                "date": 1_700_000_000,
                "old_reaction": old,
                "new_reaction": new,
            }})
        })
    }

    /// When getUpdates handed `update_id` to the bot.
    pub(crate) fn delivered_at(&self, update_id: i64) -> Option<Instant> {
        self.inner
            .lock()
            .unwrap()
            .delivered_at
            .get(&update_id)
            .copied()
    }

    /// When the first getUpdates request arrived (not when its long poll was answered).
    pub(crate) fn first_poll(&self) -> Option<Instant> {
        self.inner.lock().unwrap().first_poll
    }

    /// Waits (event-driven, up to `limit`) until `chat` was sent `text`; returns when it was.
    pub(crate) async fn wait_text(
        &self,
        chat: i64,
        text: &str,
        limit: Duration,
    ) -> Option<Instant> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let called = self.called.notified();
            if let Some(at) = self.sent_at(chat, text) {
                return Some(at);
            }
            if tokio::time::timeout_at(until, called).await.is_err() {
                return self.sent_at(chat, text);
            }
        }
    }

    fn sent_at(&self, chat: i64, text: &str) -> Option<Instant> {
        let inner = self.inner.lock().unwrap();
        inner.sent_texts.get(&(chat, text.to_string())).copied()
    }

    /// Enforces at most one send or edit per `interval` per chat, answering 429 otherwise.
    pub(crate) fn enforce_chat_rate(&self, interval: Duration) {
        self.inner.lock().unwrap().chat_rate = Some(interval);
    }

    pub(crate) fn flood_refusals(&self) -> usize {
        self.inner.lock().unwrap().flood_refusals
    }

    /// The next call of `method` is not answered (the connection stays open) until
    /// [`Self::release_hung`].
    pub(crate) fn hang_next(&self, method: &str) {
        let mut inner = self.inner.lock().unwrap();
        *inner.hang.entry(method.to_string()).or_default() += 1;
    }

    /// Answers the calls [`Self::hang_next`] held.
    pub(crate) fn release_hung(&self) {
        self.inner.lock().unwrap().hung_released = true;
    }

    /// From now on, sendMessageDraft in `chat` (`None`: in every chat) is answered `status`:
    /// 404 as a Bot API server without the method answers, 400 as a chat refusing drafts.
    pub(crate) fn refuse_drafts(&self, chat: Option<i64>, status: u16) {
        self.inner
            .lock()
            .unwrap()
            .refuse_drafts
            .insert(chat, status);
    }

    /// From now on, a sendMessageDraft with `can_stop` is refused with a 400 naming it.
    pub(crate) fn refuse_can_stop(&self) {
        self.inner.lock().unwrap().refuse_can_stop = true;
    }

    /// Refuses (400) every `getUpdates` whose `allowed_updates` names draft stops, as a Bot
    /// API server that does not know the update would.
    pub(crate) fn refuse_stop_updates(&self) {
        self.inner.lock().unwrap().refuse_stop_updates = true;
    }

    /// `user` presses the stop control of draft `draft_id` in their private chat: Telegram
    /// sends a `stopped_message_generation` update.
    pub(crate) fn stop_draft(&self, user: i64, draft_id: i64) -> i64 {
        self.push_update(move |_, _| {
            json!({"stopped_message_generation": {
                "chat": {"id": user, "type": "private", "first_name": "Tester"},
                "draft_id": draft_id}})
        })
    }

    /// The sendMessageDraft calls to `chat`, answered or refused, in order.
    pub(crate) fn drafts_to(&self, chat: i64) -> Vec<Call> {
        self.calls("sendMessageDraft")
            .into_iter()
            .filter(|c| c.params["chat_id"] == json!(chat))
            .collect()
    }

    /// How many calls were left unanswered by [`Self::hang_next`].
    pub(crate) fn hung(&self) -> usize {
        self.inner.lock().unwrap().hung
    }

    /// The user deletes a message (the bot's next edit of it finds nothing).
    pub(crate) fn delete_on_screen(&self, chat: i64, message_id: i64) {
        self.inner
            .lock()
            .unwrap()
            .screen
            .entry(chat)
            .or_default()
            .remove(&message_id);
    }

    /// The texts `chat` currently shows, oldest message first.
    pub(crate) fn screen(&self, chat: i64) -> Vec<String> {
        self.screen_with_keyboards(chat)
            .into_iter()
            .map(|(text, _)| text)
            .collect()
    }

    /// The texts and keyboards (`callback_data`s, comma-separated) `chat` currently shows.
    pub(crate) fn screen_with_keyboards(&self, chat: i64) -> Vec<(String, String)> {
        let inner = self.inner.lock().unwrap();
        inner
            .screen
            .get(&chat)
            .map(|m| {
                m.values()
                    .map(|s| {
                        let (text, keyboard) = s.split_once('\u{0}').unwrap();
                        (text.to_string(), keyboard.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The next call of `method` gets this HTTP status and body instead of success.
    pub(crate) fn script(&self, method: &str, status: u16, body: Value) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .scripted
            .entry(method.to_string())
            .or_default()
            .push_back((status, body));
    }

    /// The next call of `method` is answered only after `delay` (recorded at once).
    pub(crate) fn slow_answer(&self, method: &str, delay: Duration) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .slow
            .entry(method.to_string())
            .or_default()
            .push_back(delay);
    }

    pub(crate) fn calls(&self, method: &str) -> Vec<Call> {
        let inner = self.inner.lock().unwrap();
        inner
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Successful sendMessage calls to `chat`.
    pub(crate) fn messages_to(&self, chat: i64) -> Vec<Call> {
        self.calls("sendMessage")
            .into_iter()
            .filter(|c| c.ok && c.params["chat_id"] == json!(chat))
            .collect()
    }

    /// The voice notes sent to `chat` (their multipart fields, the audio as lossy text).
    pub(crate) fn voices_to(&self, chat: i64) -> Vec<Call> {
        self.calls("sendVoice")
            .into_iter()
            .filter(|c| c.ok && c.params["chat_id"] == json!(chat.to_string()))
            .collect()
    }

    /// Waits until `chat` received at least `count` messages; panics after 10 s.
    pub(crate) async fn wait_messages(&self, chat: i64, count: usize) -> Vec<Call> {
        self.wait_for(|t| {
            let sent = t.messages_to(chat);
            (sent.len() >= count).then_some(sent)
        })
        .await
    }

    /// Waits until `f` returns `Some`; panics after 10 s with what was sent.
    /// Waits until the last message on `chat`'s screen, as text and keyboard (see
    /// [`Self::screen_with_keyboards`]), is one `wanted` accepts, and returns it.
    pub(crate) async fn wait_last(
        &self,
        chat: i64,
        wanted: impl Fn(&str, &str) -> bool,
    ) -> (String, String) {
        self.wait_for(|t| {
            t.screen_with_keyboards(chat)
                .last()
                .filter(|(text, keyboard)| wanted(text, keyboard))
                .cloned()
        })
        .await
    }

    pub(crate) async fn wait_for<T>(&self, f: impl Fn(&Self) -> Option<T>) -> T {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(value) = f(self) {
                return value;
            }
            if Instant::now() > until {
                let calls: Vec<_> = self
                    .inner
                    .lock()
                    .unwrap()
                    .calls
                    .iter()
                    .map(|c| (c.method.clone(), c.params.clone()))
                    .collect();
                panic!("timed out waiting; Telegram calls so far: {calls:#?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub(crate) fn user_json(user: i64) -> Value {
    json!({"id": user, "is_bot": false, "first_name": format!("User{user}")})
}

fn bot_json() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Heurist", "username": BOT_USERNAME})
}

fn chat_json(chat: i64) -> Value {
    if chat < 0 {
        json!({"id": chat, "type": "supergroup", "title": "Group"})
    } else {
        json!({"id": chat, "type": "private", "first_name": format!("User{chat}")})
    }
}

fn message(message_id: i64, chat: i64, from: Value, content: Value) -> Value {
    let mut msg = json!({
        "message_id": message_id,
        "date": 1_700_000_000,
        "chat": chat_json(chat),
        "from": from,
    });
    for (k, v) in content.as_object().unwrap() {
        msg[k] = v.clone();
    }
    msg
}

/// A keyboard as the callback data of its buttons; none and empty are the same.
fn keyboard_of(markup: &Value) -> String {
    callback_data(markup).join(",")
}

fn ok(result: Value) -> (u16, Value) {
    (200, json!({"ok": true, "result": result}))
}

fn bad_request(description: &str) -> (u16, Value) {
    (
        400,
        json!({"ok": false, "error_code": 400, "description": format!("Bad Request: {description}")}),
    )
}

/// Where `needle` first starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Form fields of a multipart body (teloxide sends `setWebhook` as multipart).
fn multipart_fields(content_type: &str, body: &[u8]) -> Value {
    let Some(boundary) = content_type.split("boundary=").nth(1) else {
        return json!({});
    };
    let body = String::from_utf8_lossy(body);
    let mut fields = serde_json::Map::new();
    for part in body.split(&format!("--{}", boundary.trim_matches('"'))) {
        let Some((head, value)) = part.split_once("\r\n\r\n") else {
            continue;
        };
        let Some(name) = head
            .split("name=\"")
            .nth(1)
            .and_then(|n| n.split('"').next())
        else {
            continue;
        };
        fields.insert(name.to_string(), json!(value.trim_end_matches("\r\n")));
    }
    Value::Object(fields)
}

async fn handle(
    State(fake): State<FakeTelegram>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Method names are case-insensitive; teloxide sends `SendMessage`, we record `sendMessage`.
    if uri.path().starts_with("/file/") {
        // A file download: a served file's bytes, else a tiny JPEG header, whatever the path.
        // teloxide sends the file path's `/` as `%2F`.
        let path = uri.path().replace("%2F", "/");
        let mut inner = fake.inner.lock().unwrap();
        inner.downloads.push(path.clone());
        let served = path
            .split_once("/files/")
            .and_then(|(_, id)| inner.files.get(id).cloned());
        if let Some(bytes) = served {
            return (StatusCode::OK, Bytes::from(bytes)).into_response();
        }
        return (
            StatusCode::OK,
            Bytes::from_static(&[0xFF, 0xD8, 0xFF, 0xE0]),
        )
            .into_response();
    }
    let raw = uri.path().rsplit('/').next().unwrap_or_default();
    let mut chars = raw.chars();
    let method: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase())
        .into_iter()
        .chain(chars)
        .collect();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let params: Value = if content_type.starts_with("multipart/") {
        multipart_fields(content_type, &body)
    } else if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&body).unwrap_or(json!({}))
    };
    if method == "getUpdates" {
        return get_updates(&fake, params).await;
    }
    let hang = {
        let mut inner = fake.inner.lock().unwrap();
        let hang = inner.hang.get_mut(&method).is_some_and(|left| {
            let hang = *left > 0;
            *left = left.saturating_sub(1);
            hang
        });
        inner.hung += usize::from(hang);
        hang
    };
    while hang && !fake.inner.lock().unwrap().hung_released {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sent = body.clone();
    let (status, body, delay) = {
        let mut inner = fake.inner.lock().unwrap();
        let delay = inner.slow.get_mut(&method).and_then(VecDeque::pop_front);
        let scripted = inner
            .scripted
            .get_mut(&method)
            .and_then(VecDeque::pop_front);
        let (status, body) = scripted.unwrap_or_else(|| answer(&mut inner, &method, &params));
        let result = if status == 200 {
            body["result"].clone()
        } else {
            body.clone()
        };
        if status == 200 && method == "sendMessage" {
            let key = (
                params["chat_id"].as_i64().unwrap_or_default(),
                params["text"].as_str().unwrap_or_default().to_string(),
            );
            inner.sent_texts.entry(key).or_insert_with(Instant::now);
        }
        inner.calls.push(Call {
            method,
            params,
            at: Instant::now(),
            ok: status == 200,
            result,
            multipart: if content_type.starts_with("multipart/") {
                sent.to_vec()
            } else {
                Vec::new()
            },
        });
        (status, body, delay)
    };
    fake.called.notify_waiters();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

async fn get_updates(fake: &FakeTelegram, params: Value) -> Response {
    let names_stops = params["allowed_updates"]
        .as_array()
        .is_some_and(|names| names.contains(&json!("stopped_message_generation")));
    if names_stops && fake.inner.lock().unwrap().refuse_stop_updates {
        let (_, body) = bad_request("unsupported update type stopped_message_generation");
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    fake.inner
        .lock()
        .unwrap()
        .first_poll
        .get_or_insert_with(Instant::now);
    let offset = params["offset"].as_i64().unwrap_or(0);
    let until = Instant::now() + Duration::from_millis(250);
    loop {
        let notified = fake.notify.notified();
        {
            let mut inner = fake.inner.lock().unwrap();
            // Like Telegram, an offset confirms (and forgets) every earlier update.
            inner
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap() >= offset);
            let ready: Vec<Value> = inner
                .updates
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap() >= offset)
                .cloned()
                .collect();
            if !ready.is_empty() || Instant::now() >= until {
                let now = Instant::now();
                for update in &ready {
                    let id = update["update_id"].as_i64().unwrap();
                    inner.delivered_at.entry(id).or_insert(now);
                }
                inner.calls.push(Call {
                    method: "getUpdates".into(),
                    params,
                    at: Instant::now(),
                    ok: true,
                    result: json!(ready.len()),
                    multipart: Vec::new(),
                });
                return axum::Json(json!({"ok": true, "result": ready})).into_response();
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
    }
}

fn answer(inner: &mut Inner, method: &str, params: &Value) -> (u16, Value) {
    let chat = params["chat_id"].as_i64().unwrap_or_default();
    if let Some(interval) = inner.chat_rate
        && matches!(
            method,
            "sendMessage" | "editMessageText" | "editMessageReplyMarkup" | "sendMessageDraft"
        )
    {
        let now = Instant::now();
        if inner
            .last_in_chat
            .get(&chat)
            .is_some_and(|&last| now.duration_since(last) < interval)
        {
            inner.flood_refusals += 1;
            return (
                429,
                json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
            );
        }
        inner.last_in_chat.insert(chat, now);
    }
    match method {
        "deleteMessage" => {
            let id = params["message_id"].as_i64().unwrap_or_default();
            inner.screen.entry(chat).or_default().remove(&id);
            ok(json!(true))
        }
        "getMe" => ok(json!({
            "id": BOT_ID, "is_bot": true, "first_name": "Heurist", "username": BOT_USERNAME,
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "has_main_web_app": false,
        })),
        "getFile"
            if inner
                .files
                .contains_key(params["file_id"].as_str().unwrap_or_default()) =>
        {
            let id = params["file_id"].as_str().unwrap_or_default();
            ok(json!({
                "file_id": id, "file_unique_id": "u", "file_size": inner.files[id].len(),
                "file_path": format!("files/{id}"),
            }))
        }
        "getFile" => ok(json!({
            "file_id": params["file_id"], "file_unique_id": "u", "file_size": 4,
            "file_path": format!("photos/{}.jpg", params["file_id"].as_str().unwrap_or("x")),
        })),
        "getWebhookInfo" => {
            ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0}))
        }
        "sendMessage" | "editMessageText" => {
            let text = params["text"].as_str().unwrap_or_default();
            if let Err(e) = check_text(text, params["parse_mode"].as_str()) {
                return bad_request(&e);
            }
            if let Err(e) = check_markup(&params["reply_markup"]) {
                return bad_request(&e);
            }
            let message_id = if method == "sendMessage" {
                inner.next_message_id += 1;
                inner.next_message_id
            } else {
                params["message_id"].as_i64().unwrap_or_default()
            };
            let screen = inner.screen.entry(chat).or_default();
            if method == "editMessageText" && !screen.contains_key(&message_id) {
                return bad_request("message to edit not found");
            }
            // Telegram compares text and keyboard: only an edit that changes neither is refused.
            let shown = format!("{text}\u{0}{}", keyboard_of(&params["reply_markup"]));
            if method == "editMessageText"
                && screen.get(&message_id).map(String::as_str) == Some(shown.as_str())
            {
                return bad_request(
                    "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                );
            }
            screen.insert(message_id, shown);
            inner
                .markups
                .insert((chat, message_id), params["reply_markup"].clone());
            let mut content = json!({"text": text});
            if params["reply_markup"].is_object() {
                content["reply_markup"] = params["reply_markup"].clone();
            }
            // A message sent to a forum topic is in that topic.
            if let Some(topic) = params["message_thread_id"].as_i64() {
                content["message_thread_id"] = json!(topic);
                content["is_topic_message"] = json!(true);
                inner.topics.insert((chat, message_id), topic);
            }
            ok(message(message_id, chat, bot_json(), content))
        }
        "sendMessageDraft" => draft(inner, chat, params),
        "sendVoice" => {
            // A multipart form: its fields are text.
            let chat = params["chat_id"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or_default();
            let id = inner.next_message_id;
            inner.next_message_id += 1;
            let voice = json!({"voice": {"file_id": "sent-voice", "file_unique_id": "sv",
                "duration": 1}});
            ok(message(id, chat, bot_json(), voice))
        }
        "editMessageReplyMarkup" => {
            if let Err(e) = check_markup(&params["reply_markup"]) {
                return bad_request(&e);
            }
            let chat = params["chat_id"].as_i64().unwrap_or_default();
            let message_id = params["message_id"].as_i64().unwrap_or_default();
            inner
                .markups
                .insert((chat, message_id), params["reply_markup"].clone());
            ok(message(
                message_id,
                chat,
                bot_json(),
                json!({"text": "answer"}),
            ))
        }
        _ => ok(json!(true)),
    }
}

/// sendMessageDraft as Bot API 9.3 answers it: private chats only, a non-zero draft id, a text
/// of 1–4096 characters (the refusal's wording is illustrative: the bot reads only its code).
/// A draft is not a message: nothing goes on screen.
fn draft(inner: &Inner, chat: i64, params: &Value) -> (u16, Value) {
    let refused = inner
        .refuse_drafts
        .get(&Some(chat))
        .or_else(|| inner.refuse_drafts.get(&None));
    match refused {
        Some(404) => {
            return (
                404,
                json!({"ok": false, "error_code": 404, "description": "Not Found"}),
            );
        }
        Some(_) => return bad_request("TEXTDRAFT_PEER_INVALID"),
        None if chat <= 0 => return bad_request("TEXTDRAFT_PEER_INVALID"),
        None => {}
    }
    if params["draft_id"].as_i64().unwrap_or_default() == 0 {
        return bad_request("draft_id must be non-zero");
    }
    if inner.refuse_can_stop && params.get("can_stop").is_some() {
        return bad_request("unknown parameter can_stop");
    }
    let text = params["text"].as_str().unwrap_or_default();
    if let Err(e) = check_text(text, params["parse_mode"].as_str()) {
        return bad_request(&e);
    }
    ok(json!(true))
}

/// Telegram's length limit and its HTML parser, strictly.
pub(crate) fn check_text(text: &str, parse_mode: Option<&str>) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("message text is empty".into());
    }
    if text.encode_utf16().count() > 4096 {
        return Err("message is too long".into());
    }
    if parse_mode == Some("HTML") {
        check_html(text).map_err(|e| format!("can't parse entities: {e}"))?;
    }
    Ok(())
}

fn check_html(text: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
        "span",
    ];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['<', '&']) {
        rest = &rest[i..];
        if rest.starts_with('&') {
            let end = rest.find(';').ok_or("unterminated entity")?;
            let name = &rest[1..end];
            if !matches!(name, "lt" | "gt" | "amp" | "quot") && !name.starts_with('#') {
                return Err(format!("unsupported entity &{name};"));
            }
            rest = &rest[end + 1..];
            continue;
        }
        let end = rest.find('>').ok_or("unclosed start tag")?;
        let tag = &rest[1..end];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop().as_deref() != Some(name) {
                return Err(format!("unmatched end tag </{name}>"));
            }
        } else {
            let name = tag
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            if !TAGS.contains(&name.as_str()) {
                return Err(format!("unsupported start tag \"{name}\""));
            }
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    if let Some(open) = stack.pop() {
        return Err(format!(
            "can't find end tag corresponding to start tag \"{open}\""
        ));
    }
    Ok(())
}

fn check_markup(markup: &Value) -> Result<(), String> {
    let Some(rows) = markup["inline_keyboard"].as_array() else {
        return Ok(());
    };
    for button in rows
        .iter()
        .flat_map(|r| r.as_array().cloned().unwrap_or_default())
    {
        if let Some(data) = button["callback_data"].as_str()
            && (data.is_empty() || data.len() > 64)
        {
            return Err("BUTTON_DATA_INVALID".into());
        }
    }
    Ok(())
}
