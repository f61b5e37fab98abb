//! User-facing texts of the telegram layer (see [`crate::texts`]): command replies, `/start`
//! and `/help`, the admin lists, refusals of strangers, toasts of button presses, notes about
//! photos, and the labels of buttons.
//!
//! HTML texts are Telegram's HTML: a placeholder documented as "escaped" must already be
//! escaped by the caller (this module imports only the id type, not even the escaper).

use crate::ids::UserId;

/// The toast of a press from someone not on the allow-list.
pub(crate) const PRIVATE: &str = "Sorry, this bot is private.";

/// The toast of an option pressed under an answer older than the chat's latest.
pub(crate) const EARLIER_CHOICE: &str = "That choice belongs to an earlier answer";

/// The toast of a second option pressed under one answer.
pub(crate) const ALREADY_CHOSEN: &str = "You already chose an option here";

/// The toast of the ✓ mark of an option already chosen.
pub(crate) const CHOSEN_MARK: &str = "Already chosen";

/// The toast of a 🔁 Retry that runs the message again.
pub(crate) const RETRYING: &str = "Retrying…";

/// The request a photo without a caption makes of a model that sees images.
pub(crate) const IMAGE_QUESTION: &str = "What is in this image?";

/// The answer to a sticker, a location or anything else that is neither text, a photo, a
/// recording nor a document.
pub(crate) const NOT_TEXT: &str = "I can only read text messages, photos, voice notes, video notes and documents. Please send your request as text.";

/// What the model reads after a caption whose photo it cannot see, so its answer does not
/// pretend to have seen it.
pub(crate) const UNSEEN_PHOTO: &str = "[A photo was attached; this model cannot see images.]";

/// The line a stopped turn's live message ends with: the one confirmation of the stop. The
/// partial answer is not stored (the turn stopped before its history write), and it says so.
pub const STOPPED: &str = "⏹ Stopped. This partial answer is not remembered.";

/// Button labels.
pub(crate) const CLEAR_BUTTON: &str = "🧹 Clear history";
pub(crate) const RETRY_BUTTON: &str = "🔁 Retry";
pub(crate) const STOP_BUTTON: &str = "⏹ Stop";
pub(crate) const REQUEST_ACCESS_BUTTON: &str = "🔑 Request access";

/// `/model <id>` switched the chat to `model`.
pub(crate) fn model_switched(model: &str) -> String {
    format!("Model for this chat: {model}")
}

/// The text of `/model`'s message: the chat's model now (`current`, escaped), above the
/// buttons to choose another.
pub(crate) fn model_header_html(current: &str) -> String {
    format!("Model for this chat: <b>{current}</b>. Choose another:")
}

/// `/start`: a greeting and the first thing to try, so a new user is not left guessing; an
/// admin is pointed to their commands.
pub(crate) fn start_html(admin: bool) -> String {
    let admin = if admin {
        "\nYou are an admin here: /help lists your commands too."
    } else {
        ""
    };
    format!(
        "👋 Hi, I am <b>Heurist</b>, an AI assistant that learns from its work.\n\n\
         Try first: ask me something, e.g. <i>What time is it in Tokyo?</i> or <i>Summarise \
         https://example.com</i>. Tap a suggested option under an answer instead of typing.\n\
         /help explains memory, buttons, photos, voice notes, documents and limits.{admin}"
    )
}

/// `/help`'s limits line: messages a minute (0: no rate) and the daily tokens (`daily`, as
/// shown; `None`: no budget).
pub(crate) fn help_limits(turns_per_minute: usize, daily: Option<&str>) -> String {
    let mut rules = Vec::new();
    if turns_per_minute > 0 {
        rules.push(format!("up to {turns_per_minute} messages a minute"));
    }
    if let Some(daily) = daily {
        rules.push(format!("{daily} tokens a day (see /stats)"));
    }
    if rules.is_empty() {
        "No limits are set for you.".to_string()
    } else {
        format!("You may send {}.", rules.join(" and "))
    }
}

/// `/help` up to its list of commands: how the bot behaves, with `limits` (see
/// [`help_limits`]).
pub(crate) fn help_html(limits: &str) -> String {
    format!(
        "<b>How I work</b>\n\
         • <b>Memory</b>: I remember this chat's recent conversation, so you can say \
         \"continue\" or \"shorter\". /clear makes me forget it (what I learned stays).\n\
         • <b>Personal memory</b>: ask me to remember a fact about you (<i>Remember that I am \
         vegetarian</i>) and I keep it for your own messages, in every chat, never for anyone \
         else's. /memory lists the facts with 🗑 Forget buttons; /clear keeps them.\n\
         • <b>Option buttons</b> under an answer are likely next steps: tapping one sends it \
         as your message.\n\
         • <b>👍 / 👎</b> rate an answer (you can change your vote once). I learn short \
         heuristics from my tasks; your ratings decide which ones I keep using, and a 👎 \
         makes me reflect on what went wrong.\n\
         • <b>⏹ Stop</b> under an answer being written, or /cancel, stops it; the partial \
         answer is not remembered. An answer already saved is kept (I say so).\n\
         • <b>🔁 Retry</b> shows when the language model failed for a passing reason: your \
         message is kept, and a tap sends it again, once.\n\
         • <b>Photos</b>: send one with a question as its caption; models that cannot see \
         images answer the caption only.\n\
         • <b>Voice notes and documents</b>: a voice note, round video note or audio \
         file is transcribed (I show what I heard) and answered; a text file, CSV, JSON, code or PDF is read, \
         and its caption is your question (none: I summarise it).\n\
         • <b>Reminders and scheduled tasks</b>: ask \"remind me at 9 to …\" or \"every \
         Monday, summarise …\"; /tasks lists them with ❌ Cancel, /timezone sets your zone.\n\
         • <b>Limits</b>: {limits}\n\n\
         <b>Commands</b>\n"
    )
}

/// `/help`'s line for one command (`description` escaped).
pub(crate) fn help_command(command: &str, description: &str) -> String {
    format!("/{command} — {description}\n")
}

/// The end of `/help` for admins: their commands with their arguments.
pub(crate) const HELP_ADMIN_COMMANDS: &str = "\n<b>Admin commands</b>\n\
     <code>/model</code> — the model of this chat, as buttons\n\
     <code>/model &lt;id&gt;</code> — switch this chat to model <i>id</i>\n\
     <code>/heuristics</code> — what the bot learned, with Forget buttons\n\
     <code>/heuristics pending</code> — learned heuristics waiting for approval\n\
     <code>/skills</code> — loaded skills and how often each matched\n\
     <code>/tools</code> — tools, their sources and MCP servers' status\n";

/// The title of `/heuristics` (`pending`: of `/heuristics pending`).
pub(crate) fn lessons_title(pending: bool) -> &'static str {
    if pending {
        "Heuristics waiting for approval"
    } else {
        "Learned heuristics"
    }
}

/// `/heuristics` (`pending`: `/heuristics pending`) with nothing to list.
pub(crate) fn no_lessons(pending: bool) -> &'static str {
    if pending {
        "No heuristics are waiting for approval."
    } else {
        "No heuristics learned yet."
    }
}

/// The head of a page of `/heuristics`: its title, how many, which page of how many.
pub(crate) fn lessons_head_html(title: &str, count: usize, page: usize, pages: usize) -> String {
    format!("<b>{title}</b> ({count}), best first. Page {page}/{pages}.\n")
}

/// The skill of a lesson that belongs to none.
pub(crate) const GENERAL_SKILL: &str = "general";

/// One lesson of `/heuristics`, as its entry shows it (`skill`, `text`, `outcome` escaped).
pub(crate) struct LessonLine<'a> {
    /// Waiting for approval (⏳) or approved (✅).
    pub pending: bool,
    pub id: u64,
    pub skill: &'a str,
    pub text: &'a str,
    /// Its utility, the rank of the list.
    pub score: f32,
    /// The day it was learned.
    pub learned: &'a str,
    /// What became of the answer it was learned from.
    pub outcome: &'a str,
    /// Learned from external content rather than the user's own words.
    pub external: bool,
    /// How often it was shown to the model, its 👍 and 👎, and how often it was learned.
    pub injected: u32,
    pub votes: (u32, u32),
    pub uses: u32,
}

impl LessonLine<'_> {
    /// The entry's two lines.
    pub(crate) fn html(&self) -> String {
        let mark = if self.pending { "⏳" } else { "✅" };
        let source = if self.external {
            "from external content"
        } else {
            "trusted"
        };
        let Self {
            id,
            skill,
            text,
            score,
            learned,
            outcome,
            injected,
            votes: (up, down),
            uses,
            ..
        } = self;
        format!(
            "\n{mark} <b>#{id}</b> [{skill}] {text}\n<i>score {score:.2} · learned {learned} \
             ({outcome}, {source}) · used {injected}× · 👍 {up} 👎 {down} · learned {uses}×</i>\n"
        )
    }
}

/// A listed lesson's outcome when none was recorded.
pub(crate) const UNKNOWN_OUTCOME: &str = "unknown outcome";

/// The button that approves lesson `id`.
pub(crate) fn approve_button(id: u64) -> String {
    format!("✅ Approve #{id}")
}

/// The button that forgets lesson `id`.
pub(crate) fn forget_button(id: u64) -> String {
    format!("🗑 Forget #{id}")
}

/// `/skills` with no skill loaded from folder `folder` (escaped).
pub(crate) fn no_skills_html(folder: &str) -> String {
    format!("No skills loaded (folder: {folder}).")
}

/// The head of a page of `/skills`.
pub(crate) fn skills_head_html(count: usize, page: usize, pages: usize) -> String {
    format!(
        "<b>Skills</b> ({count}), with the times each matched a message. Page {page}/{pages}.\n"
    )
}

/// The refusal a stranger gets, with their id; `button` adds the line about the button.
pub(crate) fn refusal_html(user: UserId, button: bool) -> String {
    let mut html = format!(
        "Sorry, this bot is private. Your Telegram user id is <code>{user}</code>: to get in, \
         ask the bot's owner to add your id."
    );
    if button {
        html.push_str("\nOr tap <b>Request access</b> to send the owner your name and id.");
    }
    html
}

/// The refusal of several strangers at once (a burst in a group): every id listed, and how
/// many `more`; no button.
pub(crate) fn refusals_html(ids: &[UserId], more: usize) -> String {
    let ids: Vec<String> = ids.iter().map(|id| format!("<code>{id}</code>")).collect();
    let mut html = format!(
        "Sorry, this bot is private. To get in, ask the bot's owner to add your Telegram user \
         id: {}",
        ids.join(", ")
    );
    if more > 0 {
        html.push_str(&format!(" and {more} more"));
    }
    html.push('.');
    html
}

/// The refusal once its request went to the admins.
pub(crate) fn request_sent_html(user: UserId) -> String {
    format!(
        "Sorry, this bot is private. Your Telegram user id is <code>{user}</code>.\n\
         ✅ Request sent: the bot's owner has your name and id."
    )
}

/// What the admins are told of a request: who (`name` and `username`, escaped), with the id
/// to copy, and what to do.
pub(crate) fn admin_notice_html(user: UserId, name: &str, username: Option<&str>) -> String {
    let handle = username.map_or_else(String::new, |u| format!(" (@{u})"));
    format!(
        "🔑 <b>Access request</b>\n{name}{handle} asks to use the bot. Their id: \
         <code>{user}</code>\nTo let them in, add the id to <code>access.allowed_users</code> \
         (or <code>HEURIST_ALLOWED_USERS</code>) and restart the bot."
    )
}

/// The toasts of "Request access".
pub(crate) const ACCESS_BUTTON_INVALID: &str = "That button is not valid";
pub(crate) const ACCESS_ALREADY: &str = "You can use the bot already";
pub(crate) const ACCESS_REQUEST_SENT: &str = "Request sent";
pub(crate) const ACCESS_REQUEST_ALREADY_SENT: &str = "Request already sent";
pub(crate) const ACCESS_REQUEST_FAILED: &str =
    "Cannot send the request now; please try again later";

/// The note for a photo sent to a chat whose model `current` cannot read images: one line that
/// the image was not seen (and, with a `captioned` photo, that the caption is answered), then
/// what works: an admin's `/model <id>` in this chat to one of `vision_models`, or, with none
/// configured, a model with `vision = true` added by the bot's owner.
pub(crate) fn unseen_image_note(current: &str, vision_models: &[&str], captioned: bool) -> String {
    let seen = if captioned {
        "so I answer its caption as text"
    } else {
        "so I cannot answer it; ask your question as text or as a photo's caption"
    };
    let advice = match vision_models {
        [] => "None of the configured models reads images; the bot's owner can add one with \
               vision = true in its [[models]] entry."
            .to_string(),
        [first, ..] => format!(
            "To send images, an admin can switch this chat to a model that reads them: \
             /model {first} here (models with vision: {}).",
            vision_models.join(", ")
        ),
    };
    format!(
        "🖼 I did not see the image: this chat's model, {current}, cannot read images, {seen}.\n{advice}"
    )
}

/// The nouns `/stats` counts, singular and plural.
pub(crate) const ANSWER: &str = "answer";
pub(crate) const ANSWERS: &str = "answers";
pub(crate) const TOKEN: &str = "token";
pub(crate) const TOKENS: &str = "tokens";

/// The titles of `/stats`'s sections.
pub(crate) const STATS_THIS_CHAT: &str = "This chat";
pub(crate) const STATS_WHOLE_BOT: &str = "Whole bot";
pub(crate) const STATS_TOP_TODAY: &str = "Top users today";
pub(crate) const STATS_TOP_ALL_TIME: &str = "Top users of all time";

/// A `/stats` section with no usage, and a top list with nobody on it.
pub(crate) const STATS_NO_ANSWERS: &str = "No answers yet.\n";
pub(crate) const STATS_NOBODY: &str = "Nobody yet.\n";

/// A top user whose name the bot does not know.
pub(crate) const UNKNOWN_NAME: &str = "unknown name";

/// One usage figure of `/stats`: `answers`, tokens `read` (with `cached`, from
/// [`stats_cached`], or empty), tokens `written`; every count already with its noun.
pub(crate) fn stats_usage(answers: &str, read: &str, cached: &str, written: &str) -> String {
    format!("{answers} · {read} read{cached} · {written} written")
}

/// How many of the tokens read were reused from cache.
pub(crate) fn stats_cached(tokens: &str) -> String {
    format!(" ({tokens} reused from cache)")
}

/// The total line of a `/stats` section with several models.
pub(crate) fn stats_total(usage: &str) -> String {
    format!("Total: {usage}\n")
}

/// The user's day against their daily budget: tokens `used` (with its noun) of `budget`,
/// `left`.
pub(crate) fn stats_budget_html(used: &str, budget: &str, left: &str) -> String {
    format!(
        "\n<b>Your budget today</b>: {used} of {budget} used, {left} left. It renews at midnight UTC.\n"
    )
}

/// The user's day without a daily budget.
pub(crate) fn stats_no_budget_html(used: &str) -> String {
    format!("\n<b>You today</b>: {used}, no daily budget.\n")
}

/// The store's `size` on disk, and the size past which it is compacted (`None`: never).
pub(crate) fn stats_storage_html(size: &str, compacts_at: Option<&str>) -> String {
    match compacts_at {
        Some(at) => format!("\n💾 <b>Storage</b>: {size} on disk; compacted once past {at}.\n"),
        None => format!("\n💾 <b>Storage</b>: {size} on disk; compaction is off.\n"),
    }
}

/// The nouns of `/stats`'s fallback counts, singular and plural.
pub(crate) const TIME: &str = "time";
pub(crate) const TIMES: &str = "times";

/// How often each model failed and handed a turn to its fallback: `counts` is a list of
/// "<code>model</code> 2 times", already escaped.
pub(crate) fn stats_fallbacks_html(counts: &str) -> String {
    format!("↪️ Handed to a fallback model: {counts}\n")
}

/// The first line of `/tools`.
pub(crate) const TOOLS_HEAD: &str = "Tools (offered in the turns of the roles shown):";

/// Where a built-in tool comes from.
pub(crate) const BUILT_IN: &str = "built-in";

/// Where a tool of MCP server `server` comes from.
pub(crate) fn tool_server(server: &str) -> String {
    format!("MCP server {server}")
}

/// A tool's line in `/tools`: its name, where it comes from, who is offered it.
pub(crate) fn tool_line(name: &str, source: &str, admins_only: bool) -> String {
    let who = if admins_only { " (admins only)" } else { "" };
    format!("• {name} — {source}{who}")
}

/// The head of `/tools`'s MCP servers, with none configured or some.
pub(crate) const NO_SERVERS: &str =
    "MCP servers: none configured ([[mcp.servers]] in config/heurist.toml).";
pub(crate) const SERVERS_HEAD: &str = "MCP servers:";

/// An MCP server still starting.
pub(crate) const SERVER_STARTING: &str = "starting";

/// An MCP server up, with `tools` tools.
pub(crate) fn server_up(tools: usize) -> String {
    format!("up, {tools} tool(s)")
}

/// An MCP server up with `tools` tools, `left_out` (named with their sizes) as their schemas
/// are over `max_bytes`.
pub(crate) fn server_up_left_out(tools: usize, max_bytes: usize, left_out: &str) -> String {
    format!("up, {tools} tool(s); left out, as its schemas are over {max_bytes} bytes: {left_out}")
}

/// An MCP server down since `since` with `error`, tried again in `wait` seconds.
pub(crate) fn server_down(since: &str, error: &str, wait: i64) -> String {
    format!("DOWN since {since} UTC: {error}; next try in {wait} s (its tools are not offered)")
}

/// An MCP server's line in `/tools`.
pub(crate) fn server_line(name: &str, transport: &str, admins_only: bool, status: &str) -> String {
    let who = if admins_only { ", admins only" } else { "" };
    format!("• {name} ({transport}{who}) — {status}")
}

/// `/memory` when personal memory is off (`memory.max_memories = 0`).
pub(crate) const MEMORY_OFF: &str = "Personal memory is off on this bot.";

/// `/memory` with no facts: what memory is and how to fill it.
pub(crate) const MEMORY_EMPTY_HTML: &str = "🧠 <b>Your memory</b> is empty. Ask me to remember \
     a fact about you, e.g. <i>Remember that I am vegetarian</i>. I use your facts in your own \
     messages only, in our private chat (in groups only if you turn that on here); /clear keeps \
     them, and here you forget them.";

/// The head of a `/memory` page: `count` facts of at most `max`, page `page` of `pages`, and
/// how to forget them.
pub(crate) fn memory_head_html(count: usize, max: usize, page: usize, pages: usize) -> String {
    let paging = if pages > 1 {
        format!(" (page {page}/{pages})")
    } else {
        String::new()
    };
    format!(
        "🧠 <b>Your memory</b>: {count} of at most {max} facts{paging}. I use them in your own \
         messages only; /clear keeps them. Tap 🗑 to forget one, or Forget all. \
         When it is full, a new fact drops the one saved longest ago.\n"
    )
}

/// One fact of a `/memory` page: its number `n` and its text (escaped).
pub(crate) fn memory_entry_html(n: usize, text: &str) -> String {
    format!("\n{n}. {text}")
}

/// The 🗑 button of fact number `n`.
pub(crate) fn memory_forget_button(n: usize) -> String {
    format!("🗑 Forget {n}")
}

pub(crate) const MEMORY_FORGET_ALL_BUTTON: &str = "🗑 Forget all";

/// The line under a `/memory` page that says where the facts are used.
pub(crate) fn memory_groups_html(on: bool) -> &'static str {
    if on {
        "\n\n👥 Used in groups too: members of a group can read answers that draw on them."
    } else {
        "\n\n👥 Used only in our private chat, never in groups."
    }
}

/// The button that turns "use my memory in groups" to the other state.
pub(crate) fn memory_groups_button(on: bool) -> &'static str {
    if on {
        "👥 Stop using them in groups"
    } else {
        "👥 Use them in groups too"
    }
}

/// The toast after "use my memory in groups" was turned on or off.
pub(crate) fn memory_in_groups(on: bool) -> &'static str {
    if on {
        "Your facts are now used in groups too"
    } else {
        "Your facts are now used only in our private chat"
    }
}

/// `/backup` in a group: a backup is an admin's business, answered in a private chat only.
pub(crate) const BACKUP_ASK_PRIVATELY: &str =
    "💾 Backups are written from a private chat with me: send /backup there.";

/// `/backup` done: the file's name and size (plain text).
pub(crate) fn backup_written(name: &str, size: &str) -> String {
    format!("💾 Backup written: {name} ({size})")
}

/// `/backup` failed; the log says why.
pub(crate) const BACKUP_FAILED: &str = "⚠️ The backup could not be written; the bot's log says why (look for \"cannot write a backup\").";

/// `/memory` in a group: the facts are private, so they are shown only in a private chat.
pub(crate) const MEMORY_ASK_PRIVATELY: &str = "🧠 Your memory is private: send /memory to me in \
     our private chat to see and manage it.";

/// A press on a `/memory` list outside its owner's private chat: nothing is shown there.
pub(crate) const MEMORY_PRIVATE_ONLY: &str = "Your memory is shown only in our private chat";

/// A press on someone else's `/memory`: nothing changes.
pub(crate) const MEMORY_NOT_YOURS: &str = "Only the owner of these facts can change them";
pub(crate) const MEMORY_FORGOTTEN: &str = "Forgotten";
pub(crate) const MEMORY_ALREADY_GONE: &str = "Already forgotten";
pub(crate) const MEMORY_FAILED: &str = "Your memory cannot be changed right now; try again";

/// The toast after Forget all forgot `count` facts.
pub(crate) fn memory_all_forgotten(count: usize) -> String {
    match count {
        1 => "Forgot 1 fact".to_string(),
        n => format!("Forgot {n} facts"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strangers_texts_carry_the_id_and_no_jargon() {
        let cases = [
            (
                "refusal",
                refusal_html(UserId(666), false),
                "ask the bot's owner to add your id.",
                false,
            ),
            (
                "refusal with the button",
                refusal_html(UserId(666), true),
                "tap <b>Request access</b>",
                true,
            ),
            (
                "request sent",
                request_sent_html(UserId(666)),
                "✅ Request sent",
                false,
            ),
        ];
        for (name, html, says, mentions_button) in cases {
            assert!(html.contains("<code>666</code>"), "{name}: {html}");
            assert!(html.contains(says), "{name}: {html}");
            assert_eq!(
                html.contains("Request access"),
                mentions_button,
                "{name}: {html}"
            );
            assert!(!html.contains("HEURIST_"), "{name}: {html}");
        }
    }

    #[test]
    fn a_burst_of_strangers_lists_every_id_and_counts_the_rest() {
        let html = refusals_html(&[UserId(1000), UserId(1001), UserId(1002)], 2);
        assert!(
            html.contains("<code>1000</code>, <code>1001</code>"),
            "{html}"
        );
        assert!(html.ends_with("<code>1002</code> and 2 more."), "{html}");
        assert!(html.contains("ask the bot's owner to add your Telegram user id"));
        assert!(
            !html.contains("Request access"),
            "no button to mention: {html}"
        );
        assert!(refusals_html(&[UserId(7)], 0).ends_with("<code>7</code>."));
    }

    #[test]
    fn admins_get_the_name_and_the_id_to_copy() {
        let cases = [
            (
                "with a username",
                "Eve &lt;3",
                Some("eve_x"),
                "Eve &lt;3 (@eve_x) asks",
            ),
            ("without", "Mallory", None, "Mallory asks"),
        ];
        for (name, full_name, username, says) in cases {
            let html = admin_notice_html(UserId(666), full_name, username);
            assert!(html.contains(says), "{name}: {html}");
            assert!(html.contains("<code>666</code>"), "{name}: {html}");
        }
    }

    #[test]
    fn the_limits_line_names_only_the_limits_set() {
        let cases = [
            ("none", 0, None, "No limits are set for you."),
            ("a rate", 5, None, "You may send up to 5 messages a minute."),
            (
                "a budget",
                0,
                Some("1,000"),
                "You may send 1,000 tokens a day (see /stats).",
            ),
            (
                "both",
                5,
                Some("1,000"),
                "You may send up to 5 messages a minute and 1,000 tokens a day (see /stats).",
            ),
        ];
        for (name, rate, daily, want) in cases {
            assert_eq!(help_limits(rate, daily), want, "{name}");
        }
    }

    #[test]
    fn the_note_says_the_image_was_not_seen_and_what_works() {
        struct Case {
            name: &'static str,
            vision: Vec<&'static str>,
            captioned: bool,
            says: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "caption, one vision model",
                vision: vec!["gpt-4o"],
                captioned: true,
                says: &[
                    "did not see the image",
                    "model, m1,",
                    "answer its caption",
                    "/model gpt-4o here (models with vision: gpt-4o)",
                ],
            },
            Case {
                name: "no caption, two vision models",
                vision: vec!["a", "b"],
                captioned: false,
                says: &["cannot answer it", "/model a here", "vision: a, b)"],
            },
            Case {
                name: "no vision model configured",
                vision: vec![],
                captioned: true,
                says: &["None of the configured models", "vision = true"],
            },
        ];
        for case in cases {
            let note = unseen_image_note("m1", &case.vision, case.captioned);
            assert_eq!(note.lines().count(), 2, "case {}: {note}", case.name);
            for said in case.says {
                assert!(
                    note.contains(said),
                    "case {}: {said:?} in {note}",
                    case.name
                );
            }
        }
    }
}
