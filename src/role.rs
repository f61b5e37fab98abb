//! Who is asking: a user's [`Role`], and the [`Caller`] a turn's tools serve.
//!
//! The role is decided on the server, from the allow-lists of the configuration
//! ([`crate::config::Config::role_of`]), for every message, command and button press; what a
//! role may do is decided where it is done (commands, limits, MCP servers). Both types are
//! plain values, kept apart from the configuration that fills them, so every layer can name
//! them without reaching into the configuration.

use crate::ids::ChatId;

/// What a user may do; decided on the server for every command and callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Role {
    Stranger,
    User,
    Admin,
}

/// Whose turn a tool serves: the sender's role, and whether the chat is their private one.
/// Which MCP servers' tools are offered (and may be called) depends on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller {
    pub role: Role,
    /// The turn is in the sender's private chat with the bot, where nobody else writes.
    pub private: bool,
}

impl Caller {
    /// The caller of a turn by a user of `role` in `chat`.
    pub(crate) fn new(role: Role, chat: ChatId) -> Self {
        Self {
            role,
            private: chat.is_private(),
        }
    }

    /// A user's turn (extraction and reflection calls made without a turn offer these).
    pub(crate) const USER: Self = Self {
        role: Role::User,
        private: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_users_own_chat_is_private() {
        struct Case {
            name: &'static str,
            chat: i64,
            private: bool,
        }
        let cases = [
            Case {
                name: "a private chat has the user's positive id",
                chat: 42,
                private: true,
            },
            Case {
                name: "a group",
                chat: -5,
                private: false,
            },
            Case {
                name: "a supergroup",
                chat: -1_001_234_567_890,
                private: false,
            },
        ];
        for case in cases {
            let caller = Caller::new(Role::Admin, ChatId(case.chat));
            assert_eq!(caller.private, case.private, "case {}", case.name);
        }
    }
}
