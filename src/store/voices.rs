//! The `voices` tree: spoken replies (see `turn::speak`). Two kinds of key:
//! - `p` ‖ user (big-endian): the user's `/voice` choice, `on` or `off` (absent: on);
//! - `o` ‖ update id (big-endian): a spoken reply owed, a JSON [`OwedVoice`]: the text to
//!   speak and where, written (flushed) before the text answer is shown and removed once the
//!   voice note is sent or given up. One marked `sending` may have reached the chat: it is never
//!   sent again (a crash in that moment loses one voice note rather than send it twice).

use serde::{Deserialize, Serialize};

use super::db::Store;
use super::error::Result;
use super::records::decode_json;
use crate::conversation::Conversation;
use crate::ids::{ChatId, TopicId, UpdateId, UserId};

const TREE: &str = "voices";

fn choice_key(user: UserId) -> Vec<u8> {
    [b"p".as_slice(), &user.0.to_be_bytes()].concat()
}

fn owed_key(update: UpdateId) -> Vec<u8> {
    [b"o".as_slice(), &update.0.to_be_bytes()].concat()
}

/// A spoken reply not yet sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwedVoice {
    pub chat: ChatId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<TopicId>,
    /// Whose budget pays for it.
    pub user: UserId,
    /// The message the voice note replies to (the user's voice note).
    pub reply_to: Option<i32>,
    /// What is spoken, already made speakable and capped.
    pub text: String,
    /// The send has begun: it may be in the chat.
    #[serde(default)]
    pub sending: bool,
    /// Syntheses begun for it: a start-up after one that crashed during the synthesis or
    /// encoding counts on from here, so a reply that brings the process down is given up
    /// rather than tried at every start.
    #[serde(default)]
    pub syntheses: u8,
}

impl OwedVoice {
    /// Where the voice note goes.
    pub fn conversation(&self) -> Conversation {
        Conversation::new(self.chat, self.topic)
    }
}

/// Users' `/voice` choices and the spoken replies owed (tree `voices`): [`Store::voices`]. A
/// borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Voices<'s> {
    store: &'s Store,
}

impl Store {
    /// Users' `/voice` choices and the spoken replies owed.
    pub fn voices(&self) -> Voices<'_> {
        Voices { store: self }
    }
}

impl Voices<'_> {
    /// Whether `user` wants answers to their voice notes spoken (on unless they said off).
    pub fn wanted_by(&self, user: UserId) -> bool {
        let Ok(tree) = self.store.tree(TREE) else {
            return true;
        };
        !matches!(tree.get(choice_key(user)), Ok(Some(value)) if value.as_ref() == b"off")
    }

    /// Records `user`'s `/voice on|off`.
    pub fn set_wanted(&self, user: UserId, on: bool) -> Result<()> {
        let value: &[u8] = if on { b"on" } else { b"off" };
        self.store.tree(TREE)?.insert(choice_key(user), value)?;
        Ok(())
    }

    /// Records that `voice` is owed for `update` (the caller flushes before showing the text).
    pub(crate) fn owe(&self, update: UpdateId, voice: &OwedVoice) -> Result<()> {
        let json = serde_json::to_vec(voice)?;
        self.store.tree(TREE)?.insert(owed_key(update), json)?;
        Ok(())
    }

    /// Marks the voice owed for `update` as being sent; `false` if none is owed (any more) or
    /// it is being sent already: the caller sends nothing.
    pub(crate) fn begin_sending(&self, update: UpdateId) -> Result<bool> {
        let tree = self.store.tree(TREE)?;
        let key = owed_key(update);
        let mut began = false;
        tree.fetch_and_update(&key, |old| {
            let mut voice: OwedVoice = decode_json(TREE, &key, old?)?;
            began = !voice.sending;
            voice.sending = true;
            serde_json::to_vec(&voice).ok()
        })?;
        Ok(began)
    }

    /// Counts a synthesis begun for the voice owed for `update` (the caller flushes before
    /// it begins); the syntheses begun before this one, `None` if none is owed (any more).
    pub(crate) fn begin_synthesis(&self, update: UpdateId) -> Result<Option<u8>> {
        let tree = self.store.tree(TREE)?;
        let key = owed_key(update);
        let mut before = None;
        tree.fetch_and_update(&key, |old| {
            let mut voice: OwedVoice = decode_json(TREE, &key, old?)?;
            before = Some(voice.syntheses);
            voice.syntheses = voice.syntheses.saturating_add(1);
            serde_json::to_vec(&voice).ok()
        })?;
        Ok(before)
    }

    /// The voice for `update` is sent or given up.
    pub(crate) fn settle(&self, update: UpdateId) -> Result<()> {
        self.store.tree(TREE)?.remove(owed_key(update))?;
        Ok(())
    }

    /// Every voice owed, oldest update first.
    pub(crate) fn owed(&self) -> Vec<(UpdateId, OwedVoice)> {
        let Ok(tree) = self.store.tree(TREE) else {
            return Vec::new();
        };
        tree.scan_prefix(b"o")
            .filter_map(std::result::Result::ok)
            .filter_map(|(key, value)| {
                let id = u32::from_be_bytes(key.get(1..5)?.try_into().ok()?);
                let voice = decode_json(TREE, &key, &value)?;
                Some((UpdateId(id), voice))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voice_is_owed_sent_once_and_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let voices = store.voices();
        let user = UserId(7);
        assert!(voices.wanted_by(user), "on by default");
        voices.set_wanted(user, false).unwrap();
        assert!(!voices.wanted_by(user));
        voices.set_wanted(user, true).unwrap();
        assert!(voices.wanted_by(user));

        let owed = OwedVoice {
            chat: ChatId(7),
            topic: None,
            user,
            reply_to: Some(3),
            text: "Paris.".into(),
            sending: false,
            syntheses: 0,
        };
        voices.owe(UpdateId(5), &owed).unwrap();
        assert_eq!(voices.owed(), vec![(UpdateId(5), owed.clone())]);
        assert_eq!(voices.begin_synthesis(UpdateId(5)).unwrap(), Some(0));
        assert_eq!(
            voices.begin_synthesis(UpdateId(5)).unwrap(),
            Some(1),
            "counted"
        );
        assert!(voices.begin_sending(UpdateId(5)).unwrap());
        assert!(!voices.begin_sending(UpdateId(5)).unwrap(), "never twice");
        assert!(voices.owed()[0].1.sending);
        voices.settle(UpdateId(5)).unwrap();
        assert!(voices.owed().is_empty());
        assert!(!voices.begin_sending(UpdateId(5)).unwrap(), "nothing owed");
        assert_eq!(
            voices.begin_synthesis(UpdateId(5)).unwrap(),
            None,
            "nothing owed"
        );
    }

    /// A voice owed by the version before the count reads, as never synthesised.
    #[test]
    fn an_owed_voice_stored_before_the_count_reads() {
        let stored = r#"{"chat":7,"user":1,"reply_to":3,"text":"Paris.","sending":false}"#;
        let voice: OwedVoice = serde_json::from_str(stored).unwrap();
        assert_eq!(voice.syntheses, 0);
    }
}
