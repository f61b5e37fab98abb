//! The bot's commands, and who may use which.

use teloxide::utils::command::BotCommands;

use crate::role::Role;

/// Every command. Who may use which is decided by [`ChatCommand::min_role`] on the server, not by
/// the client's menu.
#[derive(BotCommands, Clone, Debug, PartialEq)]
#[command(rename_rule = "lowercase")]
pub(crate) enum ChatCommand {
    #[command(description = "what this bot is")]
    Start,
    #[command(description = "what this bot can do")]
    Help,
    #[command(description = "forget this chat's conversation")]
    Clear,
    #[command(description = "stop the answer being worked on")]
    Cancel,
    #[command(description = "token usage")]
    Stats,
    #[command(description = "choose the model for this chat (admins)")]
    Model(String),
    // The lessons review: the command keeps its first name, `/heuristics`; `/lessons` works
    // too (an alias the menu does not show). Not a doc comment: teloxide shows those as the
    // command's description.
    #[command(
        rename = "heuristics",
        aliases = ["lessons"],
        hide_aliases,
        description = "learned heuristics; \"/heuristics pending\": those to approve (admins)"
    )]
    Lessons(String),
    #[command(description = "loaded skills and how often each matched (admins)")]
    Skills,
    #[command(description = "tools, their sources and MCP servers' status (admins)")]
    Tools,
    #[command(description = "facts you asked me to remember, with Forget buttons")]
    Memory,
    #[command(description = "your scheduled tasks and reminders, with Cancel buttons")]
    Tasks,
    #[command(description = "your time zone for reminders, e.g. /timezone Europe/Berlin")]
    Timezone(String),
    #[command(description = "answers to your voice notes spoken too: /voice on or /voice off")]
    Voice(String),
    #[command(
        description = "write a backup of everything the bot keeps now (admins, private chat)"
    )]
    Backup,
}

impl ChatCommand {
    /// The least role that may use the command.
    pub(crate) fn min_role(&self) -> Role {
        match self {
            Self::Model(_) | Self::Lessons(_) | Self::Skills | Self::Tools | Self::Backup => {
                Role::Admin
            }
            _ => Role::User,
        }
    }

    /// The command list a user of `role` sees (in /help and in Telegram's menu).
    pub(crate) fn visible_to(role: Role) -> Vec<teloxide::types::BotCommand> {
        Self::bot_commands()
            .into_iter()
            .filter(|c| Self::parse(&c.command, "").is_ok_and(|cmd| cmd.min_role() <= role))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_only_what_the_role_may_use() {
        let names = |role| {
            ChatCommand::visible_to(role)
                .into_iter()
                .map(|c| c.command)
                .collect::<Vec<_>>()
        };
        assert!(!names(Role::User).iter().any(|c| c.contains("model")));
        assert!(names(Role::Admin).iter().any(|c| c.contains("model")));
        assert!(names(Role::User).iter().any(|c| c.contains("cancel")));
    }

    #[test]
    fn the_lessons_review_answers_to_both_names_and_the_menu_shows_one() {
        for text in [
            "/heuristics pending",
            "/lessons pending",
            "/lessons@heurist_bot pending",
        ] {
            assert_eq!(
                ChatCommand::parse(text, "heurist_bot").ok(),
                Some(ChatCommand::Lessons("pending".into())),
                "{text}"
            );
        }
        let entries = ChatCommand::visible_to(Role::Admin);
        let menu: Vec<&str> = entries.iter().map(|c| c.command.as_str()).collect();
        assert!(!menu.iter().any(|c| c.contains("lessons")), "{menu:?}");
        let review = entries.iter().find(|c| c.command.ends_with("heuristics"));
        assert_eq!(
            review.map(|c| c.description.as_str()),
            Some("learned heuristics; \"/heuristics pending\": those to approve (admins)"),
            "the menu's text is the description alone"
        );
    }
}
