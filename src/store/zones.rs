//! The `zones` tree: each user's time zone, set with `/timezone`. Key: the user id
//! (big-endian); value: an IANA zone name (UTF-8), checked before it is stored. A user without
//! one uses the bot's `agent.time_zone`.

use super::db::Store;
use super::error::Result;
use crate::ids::UserId;

const TREE: &str = "zones";

/// Users' time zones (tree `zones`): [`Store::zones`]. A borrowed view, cheap to make.
#[derive(Clone, Copy)]
pub struct Zones<'s> {
    store: &'s Store,
}

impl Store {
    /// Users' time zones.
    pub fn zones(&self) -> Zones<'_> {
        Zones { store: self }
    }
}

impl Zones<'_> {
    /// `user`'s time zone, if they set one (and it still reads as a zone).
    pub fn of(&self, user: UserId) -> Option<chrono_tz::Tz> {
        let tree = self.store.tree(TREE).ok()?;
        let bytes = tree.get(user.0.to_be_bytes()).ok()??;
        std::str::from_utf8(&bytes).ok()?.parse().ok()
    }

    /// Sets `user`'s time zone.
    pub fn set(&self, user: UserId, zone: chrono_tz::Tz) -> Result<()> {
        let tree = self.store.tree(TREE)?;
        tree.insert(user.0.to_be_bytes(), zone.name().as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_is_kept_per_user() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.zones().of(UserId(1)), None);
        store
            .zones()
            .set(UserId(1), chrono_tz::Asia::Tokyo)
            .unwrap();
        assert_eq!(store.zones().of(UserId(1)), Some(chrono_tz::Asia::Tokyo));
        assert_eq!(store.zones().of(UserId(2)), None);
    }
}
