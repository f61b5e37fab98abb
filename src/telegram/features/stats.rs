//! `/stats`: what the bot's answers cost, in words people use.
//!
//! [`gather`] reads the numbers from the store (on a blocking thread: the scans grow with the
//! users and days kept, and must not hold a runtime thread); [`stats_html`] turns them into the message and
//! does nothing else, so every wording is unit-tested without a bot. Words: an *answer* is a
//! turn the bot answered; *tokens read* are what the model was sent (some of them *reused from
//! cache* by the provider, which makes them cheaper), *tokens written* what it wrote.

use std::sync::Arc;

use crate::app::App;
use crate::ids::{ChatId, UserId};
use crate::role::Role;
use crate::sizes::{Unit, megabytes};
use crate::store::UsageTotals;
use crate::telegram::handlers::{Deps, HandlerResult};
use crate::telegram::render::escape_html;
use crate::telegram::transport::replies;
use crate::telegram::views::thousands;
use crate::texts::telegram as texts;

/// How many users each of the admins' top lists shows.
const TOP_USERS: usize = 5;

/// The numbers `/stats` shows one user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// This chat's usage per model.
    pub chat: Vec<(String, UsageTotals)>,
    /// The user's tokens today (UTC).
    pub today: u64,
    /// The daily token budget, when one applies to this user.
    pub budget: Option<u64>,
    /// How often each model handed a turn in this chat to its fallback.
    pub fallbacks: Vec<(String, u64)>,
    /// The whole bot, for admins only.
    pub bot: Option<BotStats>,
}

/// What admins see beyond their own chat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BotStats {
    pub models: Vec<(String, UsageTotals)>,
    /// How often each model handed a turn to its fallback, in every chat.
    pub fallbacks: Vec<(String, u64)>,
    pub top_today: Vec<TopUser>,
    pub top_all_time: Vec<TopUser>,
    /// The store's size on disk, and the size past which it is compacted (`None`: never).
    pub disk: (u64, Option<u64>),
}

/// One row of a top-users list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopUser {
    pub id: UserId,
    /// The name Telegram last showed for them, if they ever wrote.
    pub name: Option<String>,
    pub tokens: u64,
}

/// `/stats`: the numbers gathered now, for `role` (an admin sees the whole bot too).
pub(crate) async fn command(
    deps: &Deps,
    chat: crate::conversation::Conversation,
    user: UserId,
    role: Role,
) -> HandlerResult {
    let html = stats_html(&gather(&deps.app, chat.chat, user, role).await?);
    replies::html(deps, chat, html, None);
    Ok(())
}

/// The numbers for `user` (with `role`) asking in `chat`, read off the runtime's threads.
pub(crate) async fn gather(
    app: &Arc<App>,
    chat: ChatId,
    user: UserId,
    role: Role,
) -> Result<Stats, tokio::task::JoinError> {
    let app = app.clone();
    tokio::task::spawn_blocking(move || gather_now(&app, chat, user, role)).await
}

/// [`gather`]'s store scans, on the calling thread.
fn gather_now(app: &App, chat: ChatId, user: UserId, role: Role) -> Stats {
    let store = app.store();
    let limits = &app.config().limits;
    let exempt = role == Role::Admin && limits.exempt_admins;
    let top = |rows: Vec<(UserId, u64)>| {
        rows.into_iter()
            .map(|(id, tokens)| TopUser {
                id,
                name: store.people().name_of(id),
                tokens,
            })
            .collect()
    };
    Stats {
        chat: store.usage().totals(Some(chat)),
        today: store.usage().user_tokens_today(user),
        budget: (limits.daily_tokens > 0 && !exempt).then_some(limits.daily_tokens),
        fallbacks: store.fallbacks().counts(Some(chat)),
        // Other users' names, ids and usage: for an admin's private chat only, never posted
        // to a group where every member would read them (private chats have positive ids).
        bot: (role == Role::Admin && chat.is_private()).then(|| BotStats {
            models: store.usage().totals(None),
            fallbacks: store.fallbacks().counts(None),
            top_today: top(store.usage().top_users_today(TOP_USERS)),
            top_all_time: top(store.usage().top_users_all_time(TOP_USERS)),
            disk: (app.data_dir().size(), app.data_dir().compacts_at()),
        }),
    }
}

/// `n` with thousands separators and the right form of the noun: "1 answer", "1,024 tokens".
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// One usage figure: answers, tokens read (and how many reused from cache), tokens written.
fn usage_line(t: &UsageTotals) -> String {
    let cached = if t.cached_tokens > 0 {
        texts::stats_cached(&thousands(t.cached_tokens))
    } else {
        String::new()
    };
    texts::stats_usage(
        &count(t.turns, texts::ANSWER, texts::ANSWERS),
        &count(t.prompt_tokens, texts::TOKEN, texts::TOKENS),
        &cached,
        &count(t.completion_tokens, texts::TOKEN, texts::TOKENS),
    )
}

/// A titled block of usage per model, with a total when there is more than one model.
fn usage_section(title: &str, rows: &[(String, UsageTotals)]) -> String {
    let mut html = format!("<b>{title}</b>\n");
    if rows.is_empty() {
        html.push_str(texts::STATS_NO_ANSWERS);
        return html;
    }
    if rows.len() > 1 {
        let total = rows.iter().fold(UsageTotals::default(), |mut sum, (_, t)| {
            sum.add(t);
            sum
        });
        html.push_str(&texts::stats_total(&usage_line(&total)));
    }
    for (model, t) in rows {
        html.push_str(&format!(
            "• <code>{}</code>: {}\n",
            escape_html(model),
            usage_line(t)
        ));
    }
    html
}

/// The line of fallback counts per model; empty when no model fell back.
fn fallbacks_line(counts: &[(String, u64)]) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let counts: Vec<String> = counts
        .iter()
        .map(|(model, n)| {
            let n = count(*n, texts::TIME, texts::TIMES);
            format!("<code>{}</code> {n}", escape_html(model))
        })
        .collect();
    texts::stats_fallbacks_html(&counts.join(", "))
}

/// A numbered list of top users, names escaped, ids copyable.
fn top_section(title: &str, users: &[TopUser]) -> String {
    let mut html = format!("<b>{title}</b>\n");
    if users.is_empty() {
        html.push_str(texts::STATS_NOBODY);
    }
    for (place, user) in users.iter().enumerate() {
        let name = user
            .name
            .as_deref()
            .map_or_else(|| texts::UNKNOWN_NAME.to_string(), escape_html);
        html.push_str(&format!(
            "{}. {name} (<code>{}</code>): {}\n",
            place + 1,
            user.id,
            count(user.tokens, texts::TOKEN, texts::TOKENS)
        ));
    }
    html
}

/// The `/stats` message (HTML).
pub(crate) fn stats_html(stats: &Stats) -> String {
    let mut html = format!("📊 {}", usage_section(texts::STATS_THIS_CHAT, &stats.chat));
    html.push_str(&fallbacks_line(&stats.fallbacks));
    let used = count(stats.today, texts::TOKEN, texts::TOKENS);
    html.push_str(&match stats.budget {
        Some(budget) => texts::stats_budget_html(
            &used,
            &thousands(budget),
            &thousands(budget.saturating_sub(stats.today)),
        ),
        None => texts::stats_no_budget_html(&used),
    });
    if let Some(bot) = &stats.bot {
        let whole = usage_section(texts::STATS_WHOLE_BOT, &bot.models);
        html.push_str(&format!("\n🤖 {whole}"));
        html.push_str(&fallbacks_line(&bot.fallbacks));
        let today = top_section(texts::STATS_TOP_TODAY, &bot.top_today);
        html.push_str(&format!("\n{today}"));
        let all_time = top_section(texts::STATS_TOP_ALL_TIME, &bot.top_all_time);
        html.push_str(&format!("\n{all_time}"));
        let (size, compacts_at) = bot.disk;
        let compacts_at = compacts_at.map(|bytes| megabytes(bytes, Unit::Binary));
        html.push_str(&texts::stats_storage_html(
            &megabytes(size, Unit::Binary),
            compacts_at.as_deref(),
        ));
    }
    html.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(turns: u64, read: u64, cached: u64, written: u64) -> UsageTotals {
        UsageTotals {
            turns,
            calls: turns * 2,
            prompt_tokens: read,
            completion_tokens: written,
            cached_tokens: cached,
        }
    }

    #[test]
    fn counts_have_separators_and_plurals() {
        let cases = [
            ("none", 0, "0 answers"),
            ("one", 1, "1 answer"),
            ("two", 2, "2 answers"),
            ("thousands", 12_345, "12,345 answers"),
        ];
        for (name, n, want) in cases {
            assert_eq!(count(n, "answer", "answers"), want, "{name}");
        }
    }

    #[test]
    fn the_view_speaks_plainly() {
        struct Case {
            name: &'static str,
            stats: Stats,
            contains: &'static [&'static str],
            absent: &'static [&'static str],
        }
        let top = |id, name: Option<&str>, tokens| TopUser {
            id: UserId(id),
            name: name.map(str::to_string),
            tokens,
        };
        let cases = [
            Case {
                name: "a new chat",
                stats: Stats::default(),
                contains: &[
                    "<b>This chat</b>\nNo answers yet.",
                    "<b>You today</b>: 0 tokens, no daily budget.",
                ],
                absent: &["Whole bot", "Top users"],
            },
            Case {
                name: "one model, one answer, a budget",
                stats: Stats {
                    chat: vec![("m".into(), totals(1, 1_234, 600, 1))],
                    today: 1_235,
                    budget: Some(50_000),
                    fallbacks: Vec::new(),
                    bot: None,
                },
                contains: &[
                    "• <code>m</code>: 1 answer · 1,234 tokens read (600 reused from cache) \
                     · 1 token written",
                    "<b>Your budget today</b>: 1,235 tokens of 50,000 used, 48,765 left. It \
                     renews at midnight UTC.",
                ],
                absent: &[
                    "Total:",
                    "Whole bot",
                    "calls",
                    "cached",
                    "completion",
                    "prompt",
                ],
            },
            Case {
                name: "an exhausted budget shows none left",
                stats: Stats {
                    today: 70_000,
                    budget: Some(50_000),
                    ..Stats::default()
                },
                contains: &["70,000 tokens of 50,000 used, 0 left."],
                absent: &[],
            },
            Case {
                name: "two models get a total; no cache, no cache words",
                stats: Stats {
                    chat: vec![
                        ("a".into(), totals(2, 1_000, 0, 100)),
                        ("b<x>".into(), totals(1, 500, 0, 50)),
                    ],
                    ..Stats::default()
                },
                contains: &[
                    "Total: 3 answers · 1,500 tokens read · 150 tokens written",
                    "• <code>a</code>: 2 answers",
                    "• <code>b&lt;x&gt;</code>: 1 answer",
                ],
                absent: &["reused from cache"],
            },
            Case {
                name: "admins see the whole bot and the top users",
                stats: Stats {
                    bot: Some(BotStats {
                        models: vec![("m".into(), totals(12_000, 9_876_543, 0, 1_000))],
                        fallbacks: vec![("m".into(), 3)],
                        top_today: vec![top(1001, Some("Ann <B>"), 2_000), top(7, None, 1)],
                        top_all_time: vec![],
                        disk: (1_088_421_888, Some(2_176_843_776)),
                    }),
                    ..Stats::default()
                },
                contains: &[
                    "💾 <b>Storage</b>: 1,038 MB on disk; compacted once past 2,076 MB.",
                    "🤖 <b>Whole bot</b>\n• <code>m</code>: 12,000 answers · 9,876,543 tokens read",
                    "<b>Top users today</b>\n1. Ann &lt;B&gt; (<code>1001</code>): 2,000 tokens\n\
                     2. unknown name (<code>7</code>): 1 token",
                    "<b>Top users of all time</b>\nNobody yet.",
                    "↪️ Handed to a fallback model: <code>m</code> 3 times\n",
                ],
                absent: &[],
            },
            Case {
                name: "a chat's fallbacks, per model",
                stats: Stats {
                    chat: vec![("b".into(), totals(1, 10, 0, 1))],
                    fallbacks: vec![("a<x>".into(), 1), ("b".into(), 2)],
                    ..Stats::default()
                },
                contains: &[
                    "1 token written\n↪️ Handed to a fallback model: <code>a&lt;x&gt;</code> 1 \
                     time, <code>b</code> 2 times\n",
                ],
                absent: &[],
            },
        ];
        for case in cases {
            let html = stats_html(&case.stats);
            for want in case.contains {
                assert!(
                    html.contains(want),
                    "{}: {want:?} missing in\n{html}",
                    case.name
                );
            }
            for unwanted in case.absent {
                assert!(
                    !html.contains(unwanted),
                    "{}: {unwanted:?} in\n{html}",
                    case.name
                );
            }
        }
    }
}
