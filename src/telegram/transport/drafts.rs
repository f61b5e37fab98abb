//! Native draft streaming (Bot API 9.3 `sendMessageDraft`): in a private chat, a live answer
//! is a draft that Telegram animates as it grows, not a message edited in place; when the
//! answer is kept, it is persisted with one `sendMessage` (the answer with nothing live, see
//! [`super::stream::finish`]), which also takes the draft away.
//!
//! A draft is not a message: it has no id and no keyboard, and it fades by itself about 30 s
//! after its last update (so a long tool run shows it again now and then). A crash while a
//! draft is up therefore leaves nothing to clean up, and the visibility protocol
//! (`turn::visibility`) is untouched: the answer's one send is recorded exactly as a
//! non-streamed answer's is, before and after it.
//!
//! Each draft carries the client's stop control (`can_stop` "Pass True to show
//! the user a button to stop further drafts") once Telegram was told to send the bot the
//! stops ([`Drafts::stops_reach_bot`]: until then a press would take the draft away while the
//! turn went on), without `keep_on_stop`, so a stopped draft goes
//! from the screen: a stop cancels the turn exactly as ⏹ and `/cancel` do, nothing kept. The
//! press reaches the bot as a `stopped_message_generation` update naming the chat and the draft
//! ([`super::draft_stop`]); [`Drafts`] knows which turn each draft on screen shows. A server
//! that refuses the parameter (a 400 naming it) gets drafts without it, found out once.
//!
//! Where drafts cannot be had, the display falls back to edits, and [`Drafts`] remembers why,
//! so it is found out once: a Bot API server without the method (404, "method not found")
//! for the whole bot, a chat or topic that refuses drafts (any other 400) for that
//! conversation. Groups never try: drafts are for private chats (positive chat ids).
//! teloxide 0.17 does not know the method, so it is a raw JSON POST through the bot's own
//! HTTP client, in the chat's paced slot and with 429s waited out like every other call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::Seconds;

use super::send::{Destination, SendPolicy, with_retry};
use crate::cancel::TurnId;
use crate::config::TelegramConfig;
use crate::conversation::Conversation;
use crate::ids::ChatId;
use crate::telegram::render::html_to_plain;

/// What became of one draft, as a live display acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drafted {
    /// On screen.
    Shown,
    /// Not shown this time (the network, Telegram busy or unwell): the next frame tries again.
    Missed,
    /// Drafts cannot be had here (remembered): the display goes on with edits.
    Refused,
}

/// What one answer of Telegram's to `sendMessageDraft` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DraftOutcome {
    Done,
    /// The Bot API server has no such method (before 9.3, or a proxy that lacks it).
    NoMethod,
    /// This chat or topic takes no drafts.
    Refused,
    /// Telegram could not parse our HTML: the plain text is tried.
    BadHtml,
    /// The server does not take `can_stop`: drafts go on without it.
    NoStop,
    /// Anything else (blocked by the user, a server error): this draft only.
    Failed,
}

/// Reads an answer by its `ok`, its error code (the body's `error_code`, else the HTTP
/// status) and its description. Only a 400 refuses drafts for a conversation: 403 (blocked)
/// and 5xx say nothing about drafts.
fn verdict(ok: bool, code: u16, description: &str) -> DraftOutcome {
    let description = description.to_ascii_lowercase();
    if ok {
        DraftOutcome::Done
    } else if description.contains("can't parse entities") {
        DraftOutcome::BadHtml
    } else if code == 400 && description.contains("can_stop") {
        DraftOutcome::NoStop
    } else if code == 404 || description.contains("method not found") {
        DraftOutcome::NoMethod
    } else if code == 400 {
        DraftOutcome::Refused
    } else {
        DraftOutcome::Failed
    }
}

/// Where drafts may be tried: one per bot, shared by every live display.
pub(crate) struct Drafts {
    /// `telegram.drafts`.
    wanted: bool,
    /// Set once the Bot API server answered that it has no `sendMessageDraft`.
    no_method: AtomicBool,
    /// Conversations that refused a draft; as small as the chats that ever did.
    refused: Mutex<HashSet<Conversation>>,
    /// The last draft id handed out: each answer animates a draft of its own. Seeded from the
    /// clock ([`first_id`]), so a restart does not hand out the ids of the run before (a stale
    /// stop delivered again must not stop a new turn).
    last_id: AtomicU32,
    /// Set once the server refused `can_stop`: drafts are sent without it from then on.
    no_stop: AtomicBool,
    /// Set once Telegram agreed to send the bot draft stops: only then is `can_stop` offered.
    stops_heard: AtomicBool,
    /// The drafts of answers being written, by draft id: where, and which turn a stop of it
    /// cancels. As small as the answers streaming now.
    live: Mutex<HashMap<u32, (Conversation, TurnId)>>,
}

impl Drafts {
    pub(crate) fn new(config: &TelegramConfig) -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self::started_at(config, now)
    }

    /// Drafts of a bot started `now` after the Unix epoch.
    fn started_at(config: &TelegramConfig, now: Duration) -> Self {
        Self {
            wanted: config.drafts,
            no_method: AtomicBool::new(false),
            refused: Mutex::default(),
            last_id: AtomicU32::new(first_id(now)),
            no_stop: AtomicBool::new(false),
            stops_heard: AtomicBool::new(false),
            live: Mutex::default(),
        }
    }

    /// Telegram agreed to send the bot `stopped_message_generation` updates: drafts offer the
    /// stop control from now on.
    pub(crate) fn stops_reach_bot(&self) {
        self.stops_heard.store(true, Ordering::Relaxed);
    }

    /// Whether drafts carry the client's stop control: its presses reach the bot, and the
    /// server did not refuse it.
    fn stop_offered(&self) -> bool {
        self.stops_heard.load(Ordering::Relaxed) && !self.no_stop.load(Ordering::Relaxed)
    }

    /// Draft `id` shows turn `turn`'s answer in `at`, until [`Drafts::ended`].
    pub(crate) fn track(&self, id: u32, at: Conversation, turn: TurnId) {
        self.lock_live().insert(id, (at, turn));
    }

    /// Draft `id`'s answer is no longer being written.
    pub(crate) fn ended(&self, id: u32) {
        self.lock_live().remove(&id);
    }

    /// The turn whose draft `id` a stop in `chat` names, and its conversation; `None` for a
    /// draft that is over, or one of another chat (a stop names its chat: it must match).
    pub(crate) fn stopped(&self, chat: ChatId, id: u32) -> Option<(Conversation, TurnId)> {
        let live = self.lock_live();
        let &(at, turn) = live.get(&id)?;
        (at.chat == chat).then_some((at, turn))
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (Conversation, TurnId)>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a live display in `at` streams as a draft: drafts wanted, a private chat, and
    /// nothing refused them there yet.
    pub(crate) fn offered(&self, at: Conversation) -> bool {
        self.wanted
            && at.chat.0 > 0
            && !self.no_method.load(Ordering::Relaxed)
            && !self
                .refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&at)
    }

    /// A new draft id, never 0 (Telegram's rule) and within an Integer's 31 bits.
    pub(crate) fn next_id(&self) -> u32 {
        self.last_id.fetch_add(1, Ordering::Relaxed) % (i32::MAX as u32) + 1
    }

    /// Shows `html` as draft `id` in `to`'s chat and topic (its plain text if Telegram cannot
    /// parse the HTML), and remembers a refusal.
    pub(crate) async fn show(
        &self,
        bot: &Bot,
        policy: &SendPolicy,
        to: Destination,
        id: u32,
        html: &str,
    ) -> Drafted {
        let mut stop = self.stop_offered();
        let mut answer = post_paced(bot, policy, to, id, html, true, stop).await;
        if answer == Some(DraftOutcome::NoStop) {
            if !self.no_stop.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    "the Bot API server refused sendMessageDraft's can_stop: drafts go on without the client's stop control (⏹ and /cancel still stop)"
                );
            }
            stop = false;
            answer = post_paced(bot, policy, to, id, html, true, stop).await;
        }
        if answer == Some(DraftOutcome::BadHtml) {
            answer = post_paced(bot, policy, to, id, &html_to_plain(html), false, stop).await;
        }
        match answer {
            Some(DraftOutcome::Done) => Drafted::Shown,
            Some(DraftOutcome::NoMethod) => {
                tracing::info!(
                    "the Bot API server has no sendMessageDraft: live answers are edited messages from now on"
                );
                self.no_method.store(true, Ordering::Relaxed);
                Drafted::Refused
            }
            Some(DraftOutcome::Refused) => {
                let at = to.conversation();
                tracing::info!(%at, "Telegram refused a draft here: live answers are edited messages in this chat from now on");
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(at);
                Drafted::Refused
            }
            Some(DraftOutcome::BadHtml | DraftOutcome::NoStop | DraftOutcome::Failed) | None => {
                Drafted::Missed
            }
        }
    }
}

/// Where the draft ids of a bot started `now` after the epoch begin: its milliseconds, within
/// an Integer's 31 bits. A run hands out ids from there one by one, so the next run's start
/// (milliseconds later) is past every id of the one before unless that one drafted more than
/// an answer a millisecond; the ids come round every 24.8 days, far past the 24 hours Telegram
/// keeps an unconfirmed update.
fn first_id(now: Duration) -> u32 {
    u32::try_from(now.as_millis() % u128::from(i32::MAX as u32)).unwrap_or(0)
}

/// One draft in the chat's paced slot, with the client's stop control if `stop`; `None` if
/// it never got an answer (the network, or a `retry_after` longer than we wait).
async fn post_paced(
    bot: &Bot,
    policy: &SendPolicy,
    to: Destination,
    id: u32,
    text: &str,
    html: bool,
    stop: bool,
) -> Option<DraftOutcome> {
    let mut body = json!({"chat_id": to.chat.0, "draft_id": id, "text": text});
    if stop {
        body["can_stop"] = json!(true);
    }
    if let Some(thread) = to.thread {
        body["message_thread_id"] = json!(thread.0.0);
    }
    if html {
        body["parse_mode"] = json!("HTML");
    }
    let answer = with_retry(policy, to.chat, "sendMessageDraft", || post(bot, &body)).await;
    match answer {
        Ok((ok, code, description)) => {
            let verdict = verdict(ok, code, &description);
            if verdict != DraftOutcome::Done {
                tracing::debug!(chat = to.chat.0, code, %description, "a draft was not shown");
            }
            Some(verdict)
        }
        Err(e) => {
            tracing::debug!(chat = to.chat.0, error = %e, "a draft was not sent");
            None
        }
    }
}

/// One `sendMessageDraft` POST: Telegram's answer as (ok, error code, description), or the
/// error [`with_retry`] acts on (a 429's `retry_after`, a connection failure). The URL, which
/// holds the token, is kept out of errors.
async fn post(bot: &Bot, body: &Value) -> Result<(bool, u16, String), RequestError> {
    let mut url = bot.api_url();
    url.path_segments_mut()
        .map_err(|()| std::io::Error::other("the Bot API URL cannot take a method"))
        .map_err(|e| RequestError::Io(e.into()))?
        .push(&format!("bot{}", bot.token()))
        .push("sendMessageDraft");
    let response = bot
        .client()
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| RequestError::from(e.without_url()))?;
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .map_err(|e| RequestError::from(e.without_url()))?;
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if let Some(seconds) = answer["parameters"]["retry_after"].as_u64() {
        let seconds = u32::try_from(seconds).unwrap_or(u32::MAX);
        return Err(RequestError::RetryAfter(Seconds::from_seconds(seconds)));
    }
    let ok = answer["ok"].as_bool() == Some(true);
    let code = answer["error_code"]
        .as_u64()
        .and_then(|code| u16::try_from(code).ok())
        .unwrap_or(status);
    let description = answer["description"].as_str().unwrap_or_default();
    Ok((ok, code, description.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TopicId;

    #[test]
    fn an_answer_is_read_by_its_code_and_description() {
        let cases = [
            ("shown", true, 200, "", DraftOutcome::Done),
            (
                "Telegram without the method",
                false,
                404,
                "Not Found",
                DraftOutcome::NoMethod,
            ),
            (
                "a proxy that says so in a 400",
                false,
                400,
                "Bad Request: method not found",
                DraftOutcome::NoMethod,
            ),
            (
                "a chat that takes no drafts",
                false,
                400,
                "Bad Request: TEXTDRAFT_PEER_INVALID",
                DraftOutcome::Refused,
            ),
            (
                "a server that does not take the stop control",
                false,
                400,
                "Bad Request: unknown parameter can_stop",
                DraftOutcome::NoStop,
            ),
            (
                "our HTML",
                false,
                400,
                "Bad Request: can't parse entities: unclosed tag",
                DraftOutcome::BadHtml,
            ),
            (
                "blocked by the user",
                false,
                403,
                "Forbidden: bot was blocked",
                DraftOutcome::Failed,
            ),
            (
                "Telegram unwell",
                false,
                502,
                "Bad Gateway",
                DraftOutcome::Failed,
            ),
        ];
        for (name, ok, code, description, expected) in cases {
            assert_eq!(verdict(ok, code, description), expected, "case {name}");
        }
    }

    /// The shipped `[telegram]` settings.
    fn shipped() -> TelegramConfig {
        crate::Config::from_toml(None, std::path::Path::new("config/heurist.toml"))
            .expect("the shipped config loads")
            .telegram
    }

    #[test]
    fn drafts_are_offered_in_private_chats_until_refused() {
        let drafts = Drafts::new(&shipped());
        let private = Conversation::new(ChatId(7), None);
        let topic = Conversation::new(ChatId(7), Some(TopicId(3)));
        let group = Conversation::new(ChatId(-5), None);
        assert!(drafts.offered(private), "a private chat");
        assert!(!drafts.offered(group), "never in a group");
        drafts.refused.lock().unwrap().insert(topic);
        assert!(!drafts.offered(topic), "a topic that refused");
        assert!(drafts.offered(private), "the rest of its chat still drafts");
        drafts.no_method.store(true, Ordering::Relaxed);
        assert!(!drafts.offered(private), "a server without the method");
        let off = Drafts::new(&TelegramConfig {
            drafts: false,
            ..shipped()
        });
        assert!(!off.offered(private), "telegram.drafts = false");
    }

    #[test]
    fn a_stop_finds_the_turn_of_a_live_draft_in_its_own_chat_only() {
        let drafts = Drafts::new(&shipped());
        let at = Conversation::new(ChatId(7), None);
        drafts.track(3, at, TurnId(11));
        assert_eq!(drafts.stopped(ChatId(7), 3), Some((at, TurnId(11))));
        assert_eq!(drafts.stopped(ChatId(8), 3), None, "another chat's stop");
        assert_eq!(drafts.stopped(ChatId(7), 4), None, "another draft");
        drafts.ended(3);
        assert_eq!(drafts.stopped(ChatId(7), 3), None, "a draft that is over");
    }

    #[test]
    fn a_restart_does_not_hand_out_the_ids_of_the_run_before() {
        let at = |ms: u64| Duration::from_millis(ms);
        let cases = [
            (
                "a second later",
                at(1_700_000_000_000),
                500,
                at(1_700_000_001_000),
            ),
            (
                "a day later",
                at(1_700_000_000_000),
                80_000,
                at(1_700_086_400_000),
            ),
            (
                "across the 31-bit wrap",
                at(2_147_483_000),
                100,
                at(2_147_483_900),
            ),
        ];
        for (name, first_start, drafted, second_start) in cases {
            let first = Drafts::started_at(&shipped(), first_start);
            let before: HashSet<u32> = (0..drafted).map(|_| first.next_id()).collect();
            let second = Drafts::started_at(&shipped(), second_start);
            let after: Vec<u32> = (0..drafted).map(|_| second.next_id()).collect();
            assert!(
                after.iter().all(|id| !before.contains(id) && *id != 0),
                "{name}: {:?} then {:?}..{:?}",
                (before.iter().min(), before.iter().max()),
                after.first(),
                after.last()
            );
        }
    }

    #[test]
    fn draft_ids_are_never_zero() {
        let drafts = Drafts::new(&shipped());
        drafts.last_id.store(i32::MAX as u32 - 1, Ordering::Relaxed);
        let ids: Vec<u32> = (0..3).map(|_| drafts.next_id()).collect();
        assert_eq!(ids, vec![i32::MAX as u32, 1, 2]);
    }
}
