//! The `people` tree: what the bot knows of the people who write to it, beyond their turns.
//!
//! - `name:<user>`: the user's display name as Telegram last showed it (UTF-8), so `/stats`
//!   can name its top users.
//! - `refused:<user>:<chat>`: the UTC day (`YYYY-MM-DD`) a stranger was last told that the bot
//!   is private in that chat, so the refusal comes at most once a day per chat, restarts
//!   included.
//! - `request:<user>`: the unix second a stranger asked for access, so the admins hear of
//!   it once however often the button is pressed.

use super::db::{self, Store};
use super::error::Result;
use super::records::read;
use crate::ids::{ChatId, UserId};

const TREE: &str = db::PEOPLE;

fn name_key(user: UserId) -> String {
    format!("name:{user}")
}

fn refused_key(user: UserId, chat: ChatId) -> String {
    format!("refused:{user}:{chat}")
}

fn request_key(user: UserId) -> String {
    format!("request:{user}")
}

/// Users' names, strangers' refusals and access requests (tree `people`):
/// [`Store::people`], a borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct People<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    /// Users' names, strangers' refusals and access requests.
    pub(crate) fn people(&self) -> People<'_> {
        People { store: self }
    }
}

impl People<'_> {
    /// Remembers `name` for `user`; written only when it changed, so a message costs a read.
    pub(crate) fn remember_name(&self, user: UserId, name: &str) -> Result<()> {
        let key = name_key(user);
        if self.store.people.get(key.as_bytes())?.as_deref() != Some(name.as_bytes()) {
            self.store.people.insert(key.as_bytes(), name.as_bytes())?;
        }
        Ok(())
    }

    /// The name last remembered for `user`; `None` if unknown or unreadable.
    pub(crate) fn name_of(&self, user: UserId) -> Option<String> {
        let bytes = read(&self.store.people, TREE, name_key(user).as_bytes())?;
        String::from_utf8(bytes.to_vec()).ok()
    }

    /// Records that stranger `user` is refused in `chat` on `today`; `true` if they were not
    /// refused there yet that day (one atomic step, so two messages at once give one refusal).
    pub(crate) fn first_refusal_on(
        &self,
        user: UserId,
        chat: ChatId,
        today: chrono::NaiveDate,
    ) -> Result<bool> {
        let day = today.to_string();
        let before = self
            .store
            .people
            .fetch_and_update(refused_key(user, chat).as_bytes(), |_| {
                Some(day.as_bytes().to_vec())
            })?;
        Ok(before.as_deref() != Some(day.as_bytes()))
    }

    /// Removes the refusal days before the UTC day of `older_than_unix` (an unreadable one is
    /// logged and kept): only today's matter, so strangers who wrote once do not stay forever.
    /// Returns how many.
    pub(super) fn prune_refusals(&self, older_than_unix: i64) -> Result<usize> {
        let Some(cutoff) = chrono::DateTime::from_timestamp(older_than_unix, 0) else {
            return Ok(0);
        };
        let cutoff = cutoff.date_naive();
        let mut removed = 0;
        for (key, value) in self
            .store
            .people
            .scan_prefix(b"refused:")
            .filter_map(Result::ok)
        {
            let day = std::str::from_utf8(&value)
                .ok()
                .and_then(|day| day.parse::<chrono::NaiveDate>().ok());
            let Some(day) = day else {
                tracing::warn!(tree = "people", key = %String::from_utf8_lossy(&key), "skipping an unreadable refusal day");
                continue;
            };
            if day < cutoff {
                self.store.people.remove(&key)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Records stranger `user`'s request for access at `now_unix`; `true` only for the first
    /// request (an atomic insert-if-absent, so a double press notifies the admins once).
    pub(crate) fn claim_access_request(&self, user: UserId, now_unix: i64) -> Result<bool> {
        let swapped = self.store.people.compare_and_swap(
            request_key(user).as_bytes(),
            None as Option<&[u8]>,
            Some(now_unix.to_be_bytes().to_vec()),
        )?;
        Ok(swapped.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChatId, UserId};

    #[test]
    fn a_stranger_is_refused_once_a_day_per_chat() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let day = |d| chrono::NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        // (name, user, chat, day, first refusal that day)
        let steps = [
            ("first message", 7, 7, day(1), true),
            ("second message the same day", 7, 7, day(1), false),
            ("another chat the same day", 7, -100, day(1), true),
            ("another stranger", 8, 7, day(1), true),
            ("the next day", 7, 7, day(2), true),
            ("the next day again", 7, 7, day(2), false),
        ];
        for (name, user, chat, today, first) in steps {
            assert_eq!(
                store
                    .people()
                    .first_refusal_on(UserId(user), ChatId(chat), today)
                    .unwrap(),
                first,
                "{name}"
            );
        }
        store
            .people
            .insert(
                refused_key(UserId(9), ChatId(9)).as_bytes(),
                &b"\xff garbage"[..],
            )
            .unwrap();
        assert!(
            store
                .people()
                .first_refusal_on(UserId(9), ChatId(9), day(1))
                .unwrap(),
            "an unreadable day refuses"
        );
    }

    #[test]
    fn old_refusal_days_are_pruned_and_unreadable_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let day = |d| chrono::NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        store
            .people()
            .first_refusal_on(UserId(1), ChatId(1), day(1))
            .unwrap();
        store
            .people()
            .first_refusal_on(UserId(2), ChatId(2), day(29))
            .unwrap();
        store
            .people()
            .first_refusal_on(UserId(3), ChatId(3), day(30))
            .unwrap();
        store
            .people
            .insert(
                refused_key(UserId(4), ChatId(4)).as_bytes(),
                &b"not a day"[..],
            )
            .unwrap();
        store.people().claim_access_request(UserId(1), 0).unwrap();
        // Cutoff: 2026-11-30 12:00 UTC.
        let cutoff = day(30).and_hms_opt(12, 0, 0).unwrap().and_utc().timestamp();
        assert_eq!(store.people().prune_refusals(cutoff).unwrap(), 2);
        assert!(
            store
                .people
                .contains_key(refused_key(UserId(4), ChatId(4)).as_bytes())
                .unwrap(),
            "an unreadable day is kept"
        );
        assert!(
            !store
                .people()
                .first_refusal_on(UserId(3), ChatId(3), day(30))
                .unwrap(),
            "the cutoff's day stays"
        );
        assert!(
            store
                .people()
                .first_refusal_on(UserId(2), ChatId(2), day(29))
                .unwrap(),
            "older days went"
        );
        assert!(
            !store.people().claim_access_request(UserId(1), 1).unwrap(),
            "requests are kept"
        );
    }

    #[test]
    fn an_access_request_is_claimed_once_and_names_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.people().claim_access_request(UserId(5), 100).unwrap());
        assert!(!store.people().claim_access_request(UserId(5), 101).unwrap());
        assert!(store.people().claim_access_request(UserId(6), 102).unwrap());

        assert_eq!(store.people().name_of(UserId(5)), None);
        store.people().remember_name(UserId(5), "Zoë").unwrap();
        assert_eq!(store.people().name_of(UserId(5)).as_deref(), Some("Zoë"));
        store.people().remember_name(UserId(5), "Zoë B").unwrap();
        assert_eq!(store.people().name_of(UserId(5)).as_deref(), Some("Zoë B"));
        store
            .people
            .insert(name_key(UserId(6)).as_bytes(), &b"\xff"[..])
            .unwrap();
        assert_eq!(
            store.people().name_of(UserId(6)),
            None,
            "an unreadable name is unknown"
        );
    }
}
