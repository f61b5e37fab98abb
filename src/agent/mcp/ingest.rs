//! A server's tool list, made into what the model is offered: names OpenAI accepts (sanitised,
//! unique, `<server>__<tool>`), descriptions cut short, schemas without `$schema`, and the
//! whole kept within [`MAX_SCHEMA_BYTES`] (the largest tools left out first). Built once per
//! connection, sorted by name, so the tools array stays byte-identical between requests.

use rmcp::model::{JsonObject, Tool};

use crate::config::McpServerConfig;
use crate::llm::ToolSpec;

/// OpenAI's limit on a tool name (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_TOOL_NAME: usize = 64;

/// Characters kept of a tool's description: a server's essay would be sent with every request.
const MAX_DESCRIPTION: usize = 1000;

/// Most bytes of tool specs (name, description, schema, as sent) offered from one server:
/// they go with every request of every turn, so a server listing megabytes of schemas would
/// make each one slow and costly. About 8,000 tokens.
pub(crate) const MAX_SCHEMA_BYTES: usize = 32 * 1024;

/// One tool as the model sees it, and the name the server knows it by.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OfferedTool {
    pub(super) spec: ToolSpec,
    pub(super) original: String,
}

/// A tool left out for the size of its spec.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeftOut {
    pub name: String,
    pub bytes: usize,
}

/// The server's tools that `allowed_tools` lets through, named and described for the model,
/// sorted by offered name. Names are made unique after sanitising (two server names may map
/// to one offered name).
pub(super) fn offered_tools(config: &McpServerConfig, mut tools: Vec<Tool>) -> Vec<OfferedTool> {
    tools.retain(|tool| {
        config.allowed_tools.is_empty() || config.allowed_tools.iter().any(|a| *a == tool.name)
    });
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools.dedup_by(|a, b| a.name == b.name);
    let mut offered: Vec<OfferedTool> = Vec::with_capacity(tools.len());
    for tool in tools {
        let base = sanitize(&format!("{}__{}", config.name, tool.name));
        let name = unique_name(base, |name| {
            offered.iter().any(|o| o.spec.function.name == name)
        });
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("Tool {} of MCP server {}.", tool.name, config.name));
        let description: String = description.chars().take(MAX_DESCRIPTION).collect();
        offered.push(OfferedTool {
            spec: ToolSpec::function(name, description, parameters(&tool.input_schema)),
            original: tool.name.to_string(),
        });
    }
    offered.sort_by(|a, b| a.spec.function.name.cmp(&b.spec.function.name));
    offered
}

/// The tools of `offered` whose specs fit in `budget` bytes together, and those left out:
/// the largest first (ties by name), until the rest fit. The order of the kept ones is kept.
pub(super) fn within_schema_budget(
    offered: Vec<OfferedTool>,
    budget: usize,
) -> (Vec<OfferedTool>, Vec<LeftOut>) {
    let size =
        |tool: &OfferedTool| serde_json::to_string(&tool.spec).map_or(usize::MAX, |s| s.len());
    let sizes: Vec<usize> = offered.iter().map(size).collect();
    let mut total = sizes.iter().fold(0usize, |sum, &n| sum.saturating_add(n));
    let mut by_size: Vec<usize> = (0..offered.len()).collect();
    by_size.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
    let mut dropped = vec![false; offered.len()];
    for i in by_size {
        if total <= budget {
            break;
        }
        dropped[i] = true;
        total -= sizes[i];
    }
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for (i, tool) in offered.into_iter().enumerate() {
        if dropped[i] {
            left_out.push(LeftOut {
                name: tool.spec.function.name.to_string(),
                bytes: sizes[i],
            });
        } else {
            kept.push(tool);
        }
    }
    (kept, left_out)
}

/// A tool name OpenAI accepts: `[a-zA-Z0-9_-]`, other characters as `_`, at most 64.
fn sanitize(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else {
        name
    }
}

/// `base`, or `base` with the first free `_2`, `_3`… suffix (kept within 64 characters).
fn unique_name(base: String, taken: impl Fn(&str) -> bool) -> String {
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            // `base` is ASCII after sanitising: byte and character counts agree.
            let keep = base.len().min(MAX_TOOL_NAME - suffix.len());
            format!("{}{suffix}", &base[..keep])
        })
        .find(|candidate| !taken(candidate))
        .unwrap_or(base)
}

/// A server's input schema as OpenAI-style `parameters`: an object schema, without the
/// `$schema` marker some providers refuse.
fn parameters(schema: &JsonObject) -> serde_json::Value {
    let mut schema = schema.clone();
    schema.remove("$schema");
    schema
        .entry("type")
        .or_insert_with(|| serde_json::Value::String("object".to_string()));
    serde_json::Value::Object(schema)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// A stdio server's config named `name`, letting through `allowed` (all when empty).
    pub(in crate::agent::mcp) fn server(name: &str, allowed: &[&str]) -> McpServerConfig {
        McpServerConfig {
            name: name.to_string(),
            command: Some("x".to_string()),
            args: Vec::new(),
            env: Default::default(),
            cwd: None,
            url: None,
            headers: Default::default(),
            allowed_tools: allowed.iter().map(|a| a.to_string()).collect(),
            roles: Default::default(),
            in_groups: false,
            timeout_secs: 30,
            rewrite_arguments: true,
        }
    }

    fn tool(name: &str, schema: serde_json::Value) -> Tool {
        let serde_json::Value::Object(schema) = schema else {
            panic!("a schema is an object")
        };
        Tool::new(name.to_string(), format!("does {name}"), schema)
    }

    fn names(offered: &[OfferedTool]) -> Vec<String> {
        offered
            .iter()
            .map(|o| o.spec.function.name.to_string())
            .collect()
    }

    #[test]
    fn tool_names_are_sanitised_unique_and_sorted() {
        struct Case<'a> {
            name: &'a str,
            server: &'a str,
            tools: &'a [&'a str],
            allowed: &'a [&'a str],
            expect: &'a [&'a str],
        }
        let long = "a".repeat(80);
        let long_cut = format!("s__{}", "a".repeat(61));
        let cases = [
            Case {
                name: "sorted by offered name",
                server: "files",
                tools: &["write", "read"],
                allowed: &[],
                expect: &["files__read", "files__write"],
            },
            Case {
                name: "other characters become underscores",
                server: "fs",
                tools: &["read.file", "ünï cödé"],
                allowed: &[],
                expect: &["fs___n__c_d_", "fs__read_file"],
            },
            Case {
                name: "clashes after sanitising get a suffix",
                server: "fs",
                tools: &["a.b", "a/b", "a_b"],
                allowed: &[],
                expect: &["fs__a_b", "fs__a_b_2", "fs__a_b_3"],
            },
            Case {
                name: "long names are cut to 64",
                server: "s",
                tools: &[long.as_str()],
                allowed: &[],
                expect: &[long_cut.as_str()],
            },
            Case {
                name: "allowed_tools filters by the server's names",
                server: "files",
                tools: &["read", "write", "delete"],
                allowed: &["read"],
                expect: &["files__read"],
            },
            Case {
                name: "duplicates listed by a server are offered once",
                server: "files",
                tools: &["read", "read"],
                allowed: &[],
                expect: &["files__read"],
            },
        ];
        for case in cases {
            let tools = case
                .tools
                .iter()
                .map(|name| tool(name, json!({"type": "object"})))
                .collect();
            let offered = offered_tools(&server(case.server, case.allowed), tools);
            assert_eq!(names(&offered), case.expect, "case {}", case.name);
            for name in names(&offered) {
                assert!(
                    (1..=64).contains(&name.len())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                    "case {}: {name}",
                    case.name
                );
            }
        }
    }

    #[test]
    fn specs_keep_the_schema_and_the_servers_name_for_calls() {
        let offered = offered_tools(
            &server("fs", &[]),
            vec![tool(
                "read.file",
                json!({"$schema": "http://json-schema.org/draft-07/schema#",
                       "properties": {"path": {"type": "string"}}}),
            )],
        );
        assert_eq!(offered[0].original, "read.file");
        assert_eq!(offered[0].spec.function.description, "does read.file");
        assert_eq!(
            *offered[0].spec.function.parameters,
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        );
        // Built twice from the same listing: the same bytes (prompt caches).
        let again = offered_tools(
            &server("fs", &[]),
            vec![tool(
                "read.file",
                json!({"$schema": "http://json-schema.org/draft-07/schema#",
                       "properties": {"path": {"type": "string"}}}),
            )],
        );
        assert_eq!(
            serde_json::to_string(&offered[0].spec).unwrap(),
            serde_json::to_string(&again[0].spec).unwrap()
        );
    }

    #[test]
    fn schemas_over_the_budget_leave_out_the_largest_tools() {
        struct Case {
            name: &'static str,
            /// Bytes of description per tool (the schema is the same small one).
            tools: &'static [(&'static str, usize)],
            budget: usize,
            kept: &'static [&'static str],
            left_out: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "within the budget: all offered",
                tools: &[("a", 100), ("b", 100)],
                budget: 1000,
                kept: &["s__a", "s__b"],
                left_out: &[],
            },
            Case {
                name: "one huge tool is left out, the rest kept",
                tools: &[("a", 100), ("huge", 900), ("z", 100)],
                budget: 600,
                kept: &["s__a", "s__z"],
                left_out: &["s__huge"],
            },
            Case {
                name: "largest first until the rest fit",
                tools: &[("a", 300), ("b", 400), ("c", 500), ("d", 100)],
                budget: 700,
                kept: &["s__a", "s__d"],
                left_out: &["s__b", "s__c"],
            },
            Case {
                name: "a budget nothing fits in offers nothing",
                tools: &[("a", 100)],
                budget: 10,
                kept: &[],
                left_out: &["s__a"],
            },
        ];
        for case in cases {
            let tools = case
                .tools
                .iter()
                .map(|(name, description)| {
                    let mut tool = tool(name, json!({"type": "object"}));
                    tool.description = Some("d".repeat(*description).into());
                    tool
                })
                .collect();
            let offered = offered_tools(&server("s", &[]), tools);
            let (kept, left_out) = within_schema_budget(offered, case.budget);
            assert_eq!(names(&kept), case.kept, "case {}", case.name);
            let left: Vec<&str> = left_out.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(left, case.left_out, "case {}", case.name);
            let sent: usize = kept
                .iter()
                .map(|t| serde_json::to_string(&t.spec).unwrap().len())
                .sum();
            assert!(sent <= case.budget, "case {}: {sent} bytes", case.name);
        }
    }
}
