//! `/tools`: every tool the agent can be offered, where it comes from, and how each MCP server
//! is doing, as plain-text messages (tool names are full of `_`, which Markdown would eat).

use chrono::{DateTime, Utc};

use crate::agent::mcp::{Catalog, MAX_SCHEMA_BYTES, ServerStatus};
use crate::conversation::Conversation;
use crate::telegram::handlers::Deps;
use crate::telegram::transport::replies;
use crate::texts::telegram as texts;

/// Telegram's limit on one message, in UTF-16 units.
const MESSAGE_LIMIT: usize = 4096;

/// `/tools` (admins, checked by the caller): the list now, in as many messages as it takes.
pub(crate) fn command(deps: &Deps, chat: Conversation) {
    let catalog = deps.app.agent().tools().catalog();
    for part in render(&catalog, Utc::now()) {
        replies::notice(deps, chat, part);
    }
}

/// Characters shown of a server's last error: enough to act on, short enough to scan.
const ERROR_CHARS: usize = 300;

/// The listing, split on line boundaries into messages Telegram accepts.
pub(crate) fn render(catalog: &Catalog, now: DateTime<Utc>) -> Vec<String> {
    let mut lines = vec![texts::TOOLS_HEAD.to_string()];
    for tool in &catalog.tools {
        let source = match &tool.server {
            None => texts::BUILT_IN.to_string(),
            Some(server) => texts::tool_server(server),
        };
        lines.push(texts::tool_line(&tool.name, &source, tool.admins_only));
    }
    lines.push(String::new());
    if catalog.servers.is_empty() {
        lines.push(texts::NO_SERVERS.to_string());
    } else {
        lines.push(texts::SERVERS_HEAD.to_string());
    }
    for server in &catalog.servers {
        let status = match &server.status {
            ServerStatus::Starting => texts::SERVER_STARTING.to_string(),
            ServerStatus::Up { tools, left_out } if left_out.is_empty() => texts::server_up(*tools),
            ServerStatus::Up { tools, left_out } => {
                let names: Vec<String> = left_out
                    .iter()
                    .map(|t| format!("{} ({} bytes)", t.name, t.bytes))
                    .collect();
                texts::server_up_left_out(*tools, MAX_SCHEMA_BYTES, &names.join(", "))
            }
            ServerStatus::Down {
                error,
                since,
                retry_at,
            } => {
                let error: String = error.chars().take(ERROR_CHARS).collect();
                let wait = (*retry_at - now).num_seconds().max(0);
                let since = since.format("%Y-%m-%d %H:%M:%S").to_string();
                texts::server_down(&since, &error, wait)
            }
        };
        let (name, transport) = (&server.name, &server.transport);
        lines.push(texts::server_line(
            name,
            transport,
            server.admins_only,
            &status,
        ));
    }
    split_lines(&lines, MESSAGE_LIMIT)
}

/// `lines` joined into as few messages of at most `limit` UTF-16 units as fit; a line longer
/// than a whole message is cut.
fn split_lines(lines: &[String], limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = cut_utf16(line, limit);
        let needed = utf16_len(&current) + usize::from(!current.is_empty()) + utf16_len(&line);
        if !current.is_empty() && needed > limit {
            parts.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&line);
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    parts
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The longest prefix of `text` of at most `limit` UTF-16 units.
fn cut_utf16(text: &str, limit: usize) -> String {
    let mut units = 0;
    text.chars()
        .take_while(|c| {
            units += c.len_utf16();
            units <= limit
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::mcp::{CatalogTool, ServerReport};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn lists_sources_roles_and_statuses() {
        let catalog = Catalog {
            tools: vec![
                CatalogTool {
                    name: "fetch_url".into(),
                    server: None,
                    admins_only: false,
                },
                CatalogTool {
                    name: "ops__restart".into(),
                    server: Some("ops".into()),
                    admins_only: true,
                },
            ],
            servers: vec![
                ServerReport {
                    name: "files".into(),
                    transport: "stdio: npx".into(),
                    admins_only: false,
                    status: ServerStatus::Down {
                        error: "cannot start \"npx\": No such file".into(),
                        since: at(0),
                        retry_at: at(40),
                    },
                },
                ServerReport {
                    name: "ops".into(),
                    transport: "http: https://ops.example/mcp".into(),
                    admins_only: true,
                    status: ServerStatus::Up {
                        tools: 1,
                        left_out: Vec::new(),
                    },
                },
            ],
        };
        let parts = render(&catalog, at(10));
        assert_eq!(parts.len(), 1);
        let text = &parts[0];
        for want in [
            "• fetch_url — built-in\n",
            "• ops__restart — MCP server ops (admins only)\n",
            "• files (stdio: npx) — DOWN since 2023-11-14 22:13:20 UTC: cannot start \"npx\": No such file; next try in 30 s",
            "• ops (http: https://ops.example/mcp, admins only) — up, 1 tool(s)",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
    }

    #[test]
    fn no_servers_says_where_to_add_them() {
        let catalog = Catalog {
            tools: Vec::new(),
            servers: Vec::new(),
        };
        assert!(render(&catalog, at(0))[0].contains("none configured ([[mcp.servers]]"));
    }

    #[test]
    fn long_listings_split_on_lines_within_the_limit() {
        struct Case {
            name: &'static str,
            lines: Vec<String>,
            limit: usize,
            expect: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "fits in one",
                lines: vec!["ab".into(), "cd".into()],
                limit: 5,
                expect: vec!["ab\ncd"],
            },
            Case {
                name: "split on a line boundary",
                lines: vec!["ab".into(), "cd".into(), "ef".into()],
                limit: 6,
                expect: vec!["ab\ncd", "ef"],
            },
            Case {
                name: "a line longer than a message is cut, counted in UTF-16",
                lines: vec!["😀😀😀".into(), "x".into()],
                limit: 4,
                expect: vec!["😀😀", "x"],
            },
        ];
        for case in cases {
            assert_eq!(
                split_lines(&case.lines, case.limit),
                case.expect,
                "case {}",
                case.name
            );
        }
    }
}
