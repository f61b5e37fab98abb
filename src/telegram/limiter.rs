//! Pacing of everything Heurist sends or edits, so Telegram's flood control never triggers.
//!
//! Telegram allows about one message per second per chat and about thirty per second per bot,
//! and counts edits like sends. teloxide's `Throttle` adaptor queues sends but lets edits
//! through, which a streamed answer (one edit a second) would turn into 429s; so every send and
//! edit reserves a slot here instead: the next free slot of its chat, no earlier than the next
//! free global slot. Slots are reserved in call order (fair), and a `retry_after` from Telegram
//! pushes the chat's next slot back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Chats whose next slot lies this far in the past are forgotten (the map stays small).
const FORGET_AFTER: Duration = Duration::from_secs(60);

pub struct Limiter {
    per_chat: Duration,
    global: Duration,
    state: Mutex<State>,
}

struct State {
    chats: HashMap<i64, Instant>,
    global_next: Instant,
}

impl Limiter {
    /// `per_chat`: spacing within one chat; `global_per_second`: all chats together.
    pub fn new(per_chat: Duration, global_per_second: u32) -> Self {
        Self {
            per_chat,
            global: Duration::from_secs(1) / global_per_second.max(1),
            state: Mutex::new(State {
                chats: HashMap::new(),
                global_next: Instant::now(),
            }),
        }
    }

    /// Waits for `chat`'s next slot (reserving it).
    pub async fn acquire(&self, chat: i64) {
        let slot = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if state.chats.len() > 1024 {
                state.chats.retain(|_, next| *next + FORGET_AFTER > now);
            }
            let chat_next = state.chats.get(&chat).copied().unwrap_or(now).max(now);
            let slot = chat_next.max(state.global_next);
            state.chats.insert(chat, slot + self.per_chat);
            state.global_next = slot + self.global;
            slot
        };
        tokio::time::sleep_until(slot).await;
    }

    /// Telegram said "retry after": nothing more for `chat` until then.
    pub fn penalize(&self, chat: i64, retry_after: Duration) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let until = Instant::now() + retry_after;
        let next = state.chats.entry(chat).or_insert(until);
        *next = (*next).max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn slots_are_spaced_per_chat_and_globally() {
        let limiter = Limiter::new(Duration::from_secs(1), 10);
        let start = Instant::now();
        limiter.acquire(1).await;
        limiter.acquire(1).await;
        limiter.acquire(1).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(2),
            "one per second in a chat"
        );

        let start = Instant::now();
        for chat in 10..20 {
            limiter.acquire(chat).await;
        }
        assert!(
            start.elapsed() <= Duration::from_millis(1000),
            "ten chats in a second"
        );
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "but not faster than the global rate"
        );

        limiter.penalize(5, Duration::from_secs(7));
        let start = Instant::now();
        limiter.acquire(5).await;
        assert!(start.elapsed() >= Duration::from_secs(7));
    }
}
