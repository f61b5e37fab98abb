//! Loading: the shipped defaults, the user's file deep-merged over them, then the
//! environment ([`Config::apply_env`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::Config;

/// The shipped defaults; also the documentation of every key.
const DEFAULT_TOML: &str = include_str!("../../config/heurist.toml");

/// Where the user's config file is looked for when `HEURIST_CONFIG` is not set.
const DEFAULT_CONFIG_PATH: &str = "config/heurist.toml";

impl Config {
    /// Loads `.env`, the config file and the environment, as the binary does at start-up.
    pub fn load() -> anyhow::Result<Self> {
        // A missing .env is normal (the environment may carry everything); a broken one is not.
        if let Err(e) = dotenvy::dotenv()
            && !e.not_found()
        {
            bail!("cannot read .env: {e} (fix the line or remove the file)");
        }
        let explicit = std::env::var_os("HEURIST_CONFIG").map(PathBuf::from);
        let path = explicit
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH));
        let user_toml = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => None,
            Err(e) => bail!(
                "cannot read config file {}: {e} (set HEURIST_CONFIG to an existing file)",
                path.display()
            ),
        };
        let mut config = Self::from_toml(user_toml.as_deref(), &path)?;
        config.apply_env(|name| std::env::var(name).ok())?;
        Ok(config)
    }

    /// The shipped defaults with `user_toml` merged over them; `path` is only used in errors.
    /// A file that turns `tools.fetch_allow_private` on is refused: turning the SSRF guard off
    /// is a test hook, not a setting (the line with the guard on, as earlier versions shipped
    /// it, is dropped with a warning).
    pub fn from_toml(user_toml: Option<&str>, path: &Path) -> anyhow::Result<Self> {
        let mut merged: toml::Value =
            toml::from_str(DEFAULT_TOML).context("the built-in config/heurist.toml is invalid")?;
        if let Some(text) = user_toml {
            let user: toml::Value = toml::from_str(text)
                .map_err(|e| anyhow::anyhow!(toml_error_line(path, text, &e)))?;
            let mut user = user;
            let guard_off = user
                .get_mut("tools")
                .and_then(toml::Value::as_table_mut)
                .and_then(|tools| tools.remove("fetch_allow_private"));
            match guard_off {
                None => {}
                // The shipped file of earlier versions had this line, with the guard on: such a
                // copy still starts, with a word to the operator.
                Some(toml::Value::Boolean(false)) => tracing::warn!(
                    path = %path.display(),
                    "tools.fetch_allow_private is no longer a setting (the guard is always on); \
                     remove that line"
                ),
                Some(_) => bail!(
                    "invalid config in {}: tools.fetch_allow_private is not a setting (fetch_url \
                     never reaches loopback or private addresses); remove that line",
                    path.display()
                ),
            }
            merge(&mut merged, user);
        }
        let text = toml::to_string(&merged).context("cannot re-serialise the merged config")?;
        toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "invalid config in {}: {} (see the comments in config/heurist.toml)",
                path.display(),
                one_line(e.message())
            )
        })
    }
}

/// Tables merge key by key; any other value in `over` replaces the one in `base`.
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(base), toml::Value::Table(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// One line for a TOML syntax error: file, line number and the parser's message.
fn toml_error_line(path: &Path, text: &str, e: &toml::de::Error) -> String {
    let message = one_line(e.message());
    let line = e
        .span()
        .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
    match line {
        Some(line) => format!(
            "invalid config in {} line {line}: {message}",
            path.display()
        ),
        None => format!("invalid config in {}: {message}", path.display()),
    }
}

/// Parser messages can span lines; start-up errors are one line.
fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::McpRoles;
    use crate::config::testing::env;
    use crate::role::Role;

    /// The shipped file cannot turn the SSRF guard off; a user's file that tries is refused
    /// (see `errors_are_one_clear_line`), and no environment variable names it. A copy of an
    /// earlier shipped file, which had the line with the guard on, still starts.
    #[test]
    fn a_loaded_config_keeps_the_ssrf_guard_on() {
        for (name, toml) in [
            ("no line", "[tools]\n"),
            (
                "an earlier version's shipped line",
                "[tools]\nfetch_allow_private = false\n",
            ),
        ] {
            let mut config = Config::from_toml(Some(toml), Path::new("x.toml")).unwrap();
            config.apply_env(env(&[("TELOXIDE_TOKEN", "t")])).unwrap();
            assert!(!config.tools.fetch_allow_private, "{name}");
        }
    }

    #[test]
    fn the_documented_mcp_block_parses() {
        let file = r#"
[[mcp.servers]]
name = "files"                 # [a-z0-9_-], unique; tools are offered as "<name>__<tool>"
command = "npx"                # stdio: command + args + env ...
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
env = { }                      # the child gets only this env plus PATH/HOME, never the bot's secrets
# cwd = "/srv/docs"              # its working directory; unset: an empty one, <data_dir>/mcp/<name>/
# url = "https://mcp.example.com/mcp"   # ... or streamable HTTP
# headers = { Authorization = "Bearer …" }
allowed_tools = []             # empty: all the server lists
roles = "user"                 # "user": offered to every allowed user; "admin": only in admins' turns
timeout_secs = 30

[[mcp.servers]]
name = "search-docs"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer abcdefgh12345" }
roles = "admin"
"#;
        let mut config = Config::from_toml(Some(file), Path::new("x.toml")).unwrap();
        config
            .apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")]))
            .unwrap();
        let [files, docs] = &config.mcp.servers[..] else {
            panic!("two servers: {:?}", config.mcp.servers);
        };
        assert_eq!(files.command.as_deref(), Some("npx"));
        assert_eq!(files.args.len(), 3);
        assert_eq!((files.roles, files.timeout_secs), (McpRoles::User, 30));
        assert_eq!(docs.url.as_deref(), Some("https://mcp.example.com/mcp"));
        assert_eq!(
            (docs.roles.min_role(), docs.timeout_secs),
            (Role::Admin, 30)
        );
        assert!(
            config
                .secrets()
                .contains(&"Bearer abcdefgh12345".to_string()),
            "header values are redacted from logs"
        );
    }

    /// Where the reference of every setting lives; its first lines say how a key is written.
    const CONFIG_DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    /// The environment variables a deployment may set, each on a line `NAME=` or `# NAME=`.
    const ENV_EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.env.example");

    /// A table header, real (`[llm]`, `[[models]]`) or shown commented out (`# [[mcp.servers]]`):
    /// the table's dotted name.
    fn table_header(line: &str) -> Option<&str> {
        let line = line.trim_start_matches(['#', ' ']).trim_end();
        let name = line.strip_prefix('[')?.strip_suffix(']')?;
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let dotted = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.".contains(c);
        (!name.is_empty() && name.chars().all(dotted)).then_some(name)
    }

    /// A key the file shows commented out, `# key = value` (or `# # key = value` inside a
    /// commented example), as opposed to a comment in words.
    fn commented_key(line: &str) -> Option<&str> {
        let rest = line.strip_prefix('#')?.trim_start_matches(['#', ' ']);
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let (key, after) = rest.split_at(end);
        let assigns = after.trim_start().starts_with('=') && !after.trim_start().starts_with("==");
        (key.starts_with(|c: char| c.is_ascii_lowercase()) && assigns).then_some(key)
    }

    /// A key as docs/configuration.md writes it: `section.key`, or bare before any section.
    fn dotted(section: &str, key: &str) -> String {
        if section.is_empty() {
            key.to_string()
        } else {
            format!("{section}.{key}")
        }
    }

    /// Every key under `table`, written as docs/configuration.md writes it: a key of an array of
    /// tables under the array's name (`models.id`), an empty array as a key of its own.
    fn parsed_keys(prefix: &str, table: &toml::Table, keys: &mut BTreeMap<String, String>) {
        for (key, value) in table {
            let path = dotted(prefix, key);
            match value {
                toml::Value::Table(inner) => parsed_keys(&path, inner, keys),
                toml::Value::Array(items)
                    if !items.is_empty() && items.iter().all(toml::Value::is_table) =>
                {
                    for item in items.iter().filter_map(toml::Value::as_table) {
                        parsed_keys(&path, item, keys);
                    }
                }
                _ => {
                    let place = if prefix.is_empty() {
                        "top level"
                    } else {
                        prefix
                    };
                    keys.entry(path).or_insert(format!("set in [{place}]"));
                }
            }
        }
    }

    /// The keys of config/heurist.toml, each with where it is: those it sets and those it shows
    /// commented out (found by line, under the last header above them).
    fn shipped_keys() -> BTreeMap<String, String> {
        let mut keys = BTreeMap::new();
        let parsed: toml::Table = toml::from_str(DEFAULT_TOML).expect("config/heurist.toml parses");
        parsed_keys("", &parsed, &mut keys);
        let mut section = "";
        for (n, line) in DEFAULT_TOML.lines().enumerate() {
            if let Some(header) = table_header(line) {
                section = header;
            } else if let Some(key) = commented_key(line) {
                keys.entry(dotted(section, key))
                    .or_insert(format!("commented out at line {}", n + 1));
            }
        }
        keys
    }

    /// The first code span of each table row of docs/configuration.md, by line number.
    fn documented_names(docs: &str) -> Vec<(usize, &str)> {
        docs.lines()
            .enumerate()
            .filter_map(|(n, line)| {
                let name = line.strip_prefix("| `")?.split('`').next()?;
                Some((n + 1, name))
            })
            .collect()
    }

    /// A config key (`llm.base_url`), as opposed to an environment variable (`OPENAI_BASE_URL`).
    fn is_config_key(name: &str) -> bool {
        name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.".contains(c))
    }

    #[test]
    fn every_config_key_is_documented_and_every_documented_key_exists() {
        let docs = std::fs::read_to_string(CONFIG_DOCS).expect("docs/configuration.md is readable");
        let documented: BTreeMap<&str, usize> = documented_names(&docs)
            .into_iter()
            .filter(|(_, name)| is_config_key(name))
            .map(|(line, name)| (name, line))
            .collect();
        let shipped = shipped_keys();
        let mut drift = Vec::new();
        for (key, place) in &shipped {
            if !documented.contains_key(key.as_str()) {
                drift.push(format!(
                    "config/heurist.toml has `{key}` ({place}), but docs/configuration.md has no \
                     table row whose first cell is `{key}`: add one (key, default, meaning) \
                     under its section"
                ));
            }
        }
        for (key, line) in &documented {
            if !shipped.contains_key(*key) {
                drift.push(format!(
                    "docs/configuration.md line {line} documents `{key}`, which \
                     config/heurist.toml does not have (set or commented out)"
                ));
            }
        }
        assert!(
            drift.is_empty(),
            "config and its docs drifted:\n{}",
            drift.join("\n")
        );
        assert!(shipped.contains_key("mcp.servers.cwd") && shipped.contains_key("models.id"));
    }

    #[test]
    fn every_environment_variable_is_documented() {
        let docs = std::fs::read_to_string(CONFIG_DOCS).expect("docs/configuration.md is readable");
        let documented: Vec<&str> = documented_names(&docs)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let example = std::fs::read_to_string(ENV_EXAMPLE).expect(".env.example is readable");
        let names: Vec<&str> = example
            .lines()
            .filter_map(|line| {
                let (name, _) = line.trim_start_matches(['#', ' ']).split_once('=')?;
                let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
                (!name.is_empty() && name.chars().all(upper)).then_some(name)
            })
            .collect();
        assert!(names.contains(&"TELOXIDE_TOKEN"), "{names:?}");
        let missing: Vec<&&str> = names.iter().filter(|n| !documented.contains(n)).collect();
        assert!(
            missing.is_empty(),
            ".env.example names {missing:?}, which docs/configuration.md has no row for"
        );
    }

    #[test]
    fn the_commented_out_examples_of_the_shipped_file_are_real_keys() {
        // Each table that shows keys commented out, uncommented on its own, must parse as the
        // real Config (unknown keys are refused), so an example cannot name a key that is gone.
        let lines: Vec<&str> = DEFAULT_TOML.lines().collect();
        let starts: Vec<usize> = (0..lines.len())
            .filter(|&n| table_header(lines[n]).is_some())
            .chain([lines.len()])
            .collect();
        let mut checked = 0;
        for pair in starts.windows(2) {
            let section = &lines[pair[0]..pair[1]];
            if !section.iter().any(|line| commented_key(line).is_some()) {
                continue;
            }
            let uncommented: String = section
                .iter()
                .map(|line| match (table_header(line), commented_key(line)) {
                    (Some(_), _) | (_, Some(_)) => line.trim_start_matches(['#', ' ']),
                    _ => line,
                })
                .collect::<Vec<_>>()
                .join("\n");
            if let Err(e) = Config::from_toml(Some(&uncommented), Path::new("x.toml")) {
                panic!(
                    "config/heurist.toml line {}: its commented-out keys do not parse: {e}",
                    pair[0] + 1
                );
            }
            checked += 1;
        }
        assert_eq!(
            checked, 2,
            "[[models]] and [[mcp.servers]] show their optional keys"
        );
    }
}
