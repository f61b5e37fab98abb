//! What the informational commands show: `/help`, `/stats`, `/heuristics`, `/skills`.
//!
//! Plain functions from the bot's state to a message text, so each reads on its own and the
//! handlers only send.

use super::commands::Command;
use super::keyboards::shorten;
use super::render::escape_html;
use crate::app::App;
use crate::config::Role;
use crate::learning::heuristics::rank;
use crate::store::UsageTotals;
use crate::turn::actions::MAX_LISTED;

/// Characters of each heuristic `/heuristics` shows: with at most [`MAX_LISTED`] entries, the
/// list always fits one Telegram message.
const LISTED_TEXT_CHARS: usize = 150;

/// `/start` and `/help`: what the bot is, and the commands `role` may use.
pub fn help_text(role: Role) -> String {
    let commands: String = Command::visible_to(role)
        .iter()
        .map(|c| format!("{} — {}\n", c.command, c.description))
        .collect();
    format!(
        "I am Heurist, an AI assistant. Write to me and I answer, using tools when they help \
         (the current time, reading public web pages). Tap a suggested option under an answer \
         instead of typing. In groups, mention me or reply to my messages.\n\n{commands}"
    )
}

/// `/stats`: this chat's usage per model, and the whole bot's for admins.
pub fn stats_text(app: &App, chat: i64, role: Role) -> String {
    fn lines(rows: Vec<(String, UsageTotals)>) -> String {
        if rows.is_empty() {
            return "  nothing yet\n".to_string();
        }
        rows.iter()
            .map(|(model, t)| {
                format!(
                    "  {model}: {} turns, {} calls; tokens {} prompt ({} cached), {} completion\n",
                    t.turns, t.calls, t.prompt_tokens, t.cached_tokens, t.completion_tokens
                )
            })
            .collect()
    }
    let mut text = format!("This chat:\n{}", lines(app.store().usage(Some(chat))));
    if role == Role::Admin {
        text.push_str(&format!("\nWhole bot:\n{}", lines(app.store().usage(None))));
    }
    text
}

/// `/heuristics`: per skill (general first), ranked as injected, with confidence and uses.
pub fn heuristics_html(app: &App) -> String {
    let mut all = app.store().heuristics();
    all.truncate(MAX_LISTED);
    if all.is_empty() {
        return "No heuristics learned yet.".to_string();
    }
    rank(&mut all);
    all.sort_by(|a, b| a.skill.cmp(&b.skill));
    let mut html = String::from("<b>Learned heuristics</b> (confidence, uses)\n");
    let mut current: Option<Option<String>> = None;
    for h in &all {
        if current.as_ref() != Some(&h.skill) {
            let title = h.skill.as_deref().unwrap_or("general");
            html.push_str(&format!("\n<b>{}</b>\n", escape_html(title)));
            current = Some(h.skill.clone());
        }
        html.push_str(&format!(
            "#{} [{:.2}, {}×] {}\n",
            h.id,
            h.confidence,
            h.uses,
            escape_html(&shorten(&h.text, LISTED_TEXT_CHARS))
        ));
    }
    html
}

/// `/skills`: what is loaded and how often each skill matched a message.
pub fn skills_text(app: &App) -> String {
    let skills = app.learning().skills();
    if skills.is_empty() {
        return format!(
            "No skills loaded (folder: {}).",
            app.config().learning.skills_dir.display()
        );
    }
    let mut text = String::from("Skills (times matched):\n");
    for skill in skills {
        text.push_str(&format!(
            "• {} ({}): {}\n",
            skill.name,
            app.store().skill_matches(&skill.name),
            skill.description
        ));
    }
    text
}
