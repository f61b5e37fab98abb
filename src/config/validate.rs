//! The checks serde cannot make, run once the file and the environment are applied: each
//! problem is one line that says what to set.

use anyhow::bail;

use super::{BackupConfig, Config, DocumentsConfig, McpServerConfig, ModelConfig, TasksConfig};

impl Config {
    /// Checks what serde cannot, once the file and the environment are applied: the first
    /// problem, in one line.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        self.validate_values()?;
        validate_tasks(&self.tasks)?;
        validate_backup(&self.backup)
    }

    /// Checks what serde cannot: a usable token, models and URLs.
    fn validate_values(&self) -> anyhow::Result<()> {
        if self.token.is_empty() {
            bail!(
                "TELOXIDE_TOKEN is not set: put TELOXIDE_TOKEN=<token from @BotFather> in .env \
                 (see .env.example) or in the environment"
            );
        }
        if self.models.is_empty() {
            bail!("no model configured: set HEURIST_MODELS or add a [[models]] entry");
        }
        if !(self.compact_factor == 0.0 || self.compact_factor >= 1.1) {
            bail!(
                "compact_factor = {} would compact the store at every check: set it to 1.1 or \
                 more (2.0 is the default), or 0 to turn compaction off",
                self.compact_factor
            );
        }
        self.validate_addresses()?;
        reqwest::Url::parse(&self.llm.base_url)
            .map_err(|e| anyhow::anyhow!("OPENAI_BASE_URL / llm.base_url is not a URL: {e}"))?;
        self.agent.time_zone.parse::<chrono_tz::Tz>().map_err(|_| {
            anyhow::anyhow!(
                "agent.time_zone {:?} is not an IANA time zone (e.g. Europe/Berlin)",
                self.agent.time_zone
            )
        })?;
        if self.agent.max_iterations == 0 {
            bail!("agent.max_iterations must be at least 1");
        }
        if self.llm.max_concurrent == 0 {
            bail!("llm.max_concurrent must be at least 1 (1 makes every LLM call queue)");
        }
        if !self.tools.searxng_url.is_empty() {
            http_url(&self.tools.searxng_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_SEARXNG_URL / tools.searxng_url {e}"))?;
        }
        if !self.speech.base_url.is_empty() {
            http_url(&self.speech.base_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_SPEECH_URL / speech.base_url {e}"))?;
        }
        if !self.speech.tts_url.is_empty() {
            http_url(&self.speech.tts_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_TTS_URL / speech.tts_url {e}"))?;
        }
        validate_turn_attempts(self.max_turn_attempts)
            .and_then(|()| validate_mcp_servers(&self.mcp.servers))
            .and_then(|()| validate_models(&self.models))
            .and_then(|()| validate_parser_limits(&self.documents))
    }

    /// The Bot API, webhook and metrics addresses and the webhook secret, when set.
    fn validate_addresses(&self) -> anyhow::Result<()> {
        if !self.telegram.api_url.is_empty() {
            reqwest::Url::parse(&self.telegram.api_url).map_err(|e| {
                anyhow::anyhow!("TELOXIDE_API_URL / telegram.api_url is not a URL: {e}")
            })?;
        }
        if !self.telegram.webhook_url.is_empty() {
            reqwest::Url::parse(&self.telegram.webhook_url)
                .map_err(|e| anyhow::anyhow!("HEURIST_WEBHOOK_URL is not a URL: {e}"))?;
            self.telegram
                .webhook_listen
                .parse::<std::net::SocketAddr>()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "HEURIST_WEBHOOK_LISTEN must be host:port, e.g. 127.0.0.1:8443: {e}"
                    )
                })?;
        }
        if !self.metrics.listen.is_empty() {
            self.metrics
                .listen
                .parse::<std::net::SocketAddr>()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "HEURIST_METRICS_LISTEN / metrics.listen must be host:port, e.g. \
                     127.0.0.1:9464: {e}"
                    )
                })?;
        }
        let secret = &self.telegram.webhook_secret;
        if secret.len() > 256
            || !secret
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!(
                "HEURIST_WEBHOOK_SECRET may only use A-Z, a-z, 0-9, _ and -, up to 256 characters"
            );
        }
        Ok(())
    }
}

/// `text` as an http(s) URL, or what is wrong with it (to follow the setting's name).
fn http_url(text: &str) -> anyhow::Result<reqwest::Url> {
    let url = reqwest::Url::parse(text).map_err(|e| anyhow::anyhow!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("must be an http:// or https:// URL");
    }
    Ok(url)
}

/// The smallest address space a parser child can start in: it runs this binary (about 30 MB
/// mapped in a release build, 55 MB in a debug one) before it reads a byte.
const MIN_PARSER_MEMORY_MB: u64 = 64;

/// The parser child's limits: a zero would refuse every PDF, or never end one.
fn validate_parser_limits(documents: &DocumentsConfig) -> anyhow::Result<()> {
    if documents.parser_timeout_secs == 0 {
        bail!("documents.parser_timeout_secs must be at least 1 (10 is the default)");
    }
    if documents.parser_cpu_secs == 0 {
        bail!("documents.parser_cpu_secs must be at least 1 (5 is the default)");
    }
    if documents.parser_memory_mb < MIN_PARSER_MEMORY_MB {
        bail!(
            "documents.parser_memory_mb must be at least {MIN_PARSER_MEMORY_MB}: the PDF parser \
             runs this program, which needs that much to start (256 is the default)"
        );
    }
    Ok(())
}

/// `max_turn_attempts` counts starts, the first one too: 0 would never run a turn.
fn validate_turn_attempts(attempts: u32) -> anyhow::Result<()> {
    if attempts == 0 {
        bail!(
            "max_turn_attempts must be at least 1: 1 never runs again a turn a crash \
             interrupted, 2 (the default) runs it once more"
        );
    }
    Ok(())
}

/// Longest MCP server name: with the `__` separator, tools keep at least 30 of OpenAI's 64
/// characters of a tool name.
const MAX_MCP_NAME: usize = 32;

/// The checks of `[tasks]`: a task may not repeat more often than once a minute, whatever
/// the daily cap says (0 there means no cap, so 0 here would run a task every second).
fn validate_tasks(tasks: &TasksConfig) -> anyhow::Result<()> {
    if tasks.min_interval_mins == 0 {
        bail!(
            "tasks.min_interval_mins must be at least 1: 0 would let a task run every second \
             (max_runs_per_day = 0 means no daily cap, not no interval)"
        );
    }
    Ok(())
}

/// The checks of `[backup]`: an interval that fits in a year, and at least the backup just
/// written kept.
fn validate_backup(backup: &BackupConfig) -> anyhow::Result<()> {
    if backup.every_hours > 24 * 366 {
        bail!("backup.every_hours must be at most a year (8784); 0 turns backups off");
    }
    if backup.keep == 0 {
        bail!("backup.keep must be at least 1 (the backup just written is kept)");
    }
    Ok(())
}

/// The checks of `[[mcp.servers]]` serde cannot make; the first problem, in one line.
fn validate_mcp_servers(servers: &[McpServerConfig]) -> anyhow::Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for server in servers {
        let name = &server.name;
        if name.is_empty()
            || name.len() > MAX_MCP_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            bail!(
                "mcp.servers: name {name:?} must be 1 to {MAX_MCP_NAME} characters of a-z, 0-9, \
                 _ and - (its tools are offered as <name>__<tool>)"
            );
        }
        if !seen.insert(name.as_str()) {
            bail!("mcp.servers: two servers are named {name:?}; names must be unique");
        }
        let at = format!("mcp server {name:?}");
        match (&server.command, &server.url) {
            (Some(_), Some(_)) => {
                bail!("{at}: set either command (stdio) or url (streamable HTTP), not both")
            }
            (None, None) => bail!("{at}: set command (stdio) or url (streamable HTTP)"),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    bail!("{at}: command is empty");
                }
                if !server.headers.is_empty() {
                    bail!("{at}: headers only apply to url servers; use env for a command");
                }
            }
            (None, Some(url)) => {
                http_url(url).map_err(|e| anyhow::anyhow!("{at}: url {e}"))?;
                if !server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some() {
                    bail!("{at}: args, env and cwd only apply to command servers");
                }
                for (header, value) in &server.headers {
                    reqwest::header::HeaderName::from_bytes(header.as_bytes())
                        .map_err(|_| anyhow::anyhow!("{at}: {header:?} is not a header name"))?;
                    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                        anyhow::anyhow!("{at}: the value of header {header:?} is not valid")
                    })?;
                }
            }
        }
        if server.timeout_secs == 0 {
            bail!("{at}: timeout_secs must be at least 1");
        }
    }
    Ok(())
}

/// The checks of `[[models]]` serde cannot make (their own endpoints and fallbacks); the first
/// problem, in one line. A fallback list may lead back to a model already tried: the turn
/// tries each model once (see `llm::fallback`), so only a model naming itself is refused.
fn validate_models(models: &[ModelConfig]) -> anyhow::Result<()> {
    let known = || {
        models
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for model in models {
        let at = format!("model {:?}", model.id);
        if let Some(url) = &model.base_url {
            http_url(url).map_err(|e| anyhow::anyhow!("{at}: base_url {e}"))?;
        }
        if let Some(name) = &model.api_key_env {
            // Not echoed when it is not a name: it may be the key itself, pasted by mistake.
            if !is_env_name(name) {
                bail!(
                    "{at}: api_key_env must be the name of an environment variable (A-Z, 0-9, _) \
                     that holds the key, not the key itself"
                );
            }
            if model.api_key.is_none() {
                bail!("{at}: api_key_env names {name}, which is not set: put {name}=<key> in .env");
            }
        }
        for id in &model.fallback {
            if *id == model.id {
                bail!("{at}: its fallback list names itself; list other models");
            }
            if !models.iter().any(|m| m.id == *id) {
                bail!(
                    "{at}: fallback {id:?} is not a configured model (configured: {})",
                    known()
                );
            }
        }
    }
    Ok(())
}

/// Whether `name` reads as an environment variable's name: letters, digits and `_`, not
/// starting with a digit.
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use crate::config::testing::env;

    #[test]
    fn defaults_parse_and_need_a_token() {
        let mut config = Config::from_toml(None, Path::new("x.toml")).unwrap();
        let err = config.apply_env(env(&[])).unwrap_err().to_string();
        assert!(err.starts_with("TELOXIDE_TOKEN is not set"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn a_compact_factor_that_would_compact_at_every_check_is_refused() {
        for (factor, ok) in [
            (0.0, true),
            (1.1, true),
            (2.0, true),
            (1.0, false),
            (0.5, false),
        ] {
            let file = format!("compact_factor = {factor:?}\n");
            let mut config = Config::from_toml(Some(&file), Path::new("x.toml")).unwrap();
            let checked = config.apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")]));
            match checked {
                Ok(()) => assert!(ok, "{factor} was accepted"),
                Err(e) => {
                    assert!(!ok, "{factor} was refused: {e}");
                    assert!(e.to_string().contains("compact_factor"), "{e}");
                }
            }
        }
    }

    /// A task may not repeat more often than once a minute, whatever the daily cap says: an
    /// interval of 0 with no daily cap would run a task every second.
    #[test]
    fn a_task_interval_under_a_minute_is_refused() {
        struct Case {
            name: &'static str,
            tasks: &'static str,
            refused: bool,
        }
        let cases = [
            Case {
                name: "the shipped caps",
                tasks: "",
                refused: false,
            },
            Case {
                name: "once a minute, no daily cap",
                tasks: "min_interval_mins = 1\nmax_runs_per_day = 0\n",
                refused: false,
            },
            Case {
                name: "every second, no daily cap",
                tasks: "min_interval_mins = 0\nmax_runs_per_day = 0\n",
                refused: true,
            },
            Case {
                name: "every second, even with a daily cap",
                tasks: "min_interval_mins = 0\nmax_runs_per_day = 48\n",
                refused: true,
            },
        ];
        for case in cases {
            let file = format!("[tasks]\n{}", case.tasks);
            let mut config = Config::from_toml(Some(&file), Path::new("x.toml")).unwrap();
            match config.apply_env(env(&[("TELOXIDE_TOKEN", "123:abc")])) {
                Ok(()) => assert!(!case.refused, "{}: accepted", case.name),
                Err(e) => {
                    assert!(case.refused, "{}: refused: {e}", case.name);
                    let said = e.to_string();
                    assert!(
                        said.contains("tasks.min_interval_mins must be at least 1"),
                        "{}: {said}",
                        case.name
                    );
                    assert!(!said.contains('\n'), "{}: {said}", case.name);
                }
            }
        }
    }

    #[test]
    fn errors_are_one_clear_line() {
        struct Case {
            name: &'static str,
            toml: &'static str,
            env: &'static [(&'static str, &'static str)],
            expect: &'static str,
        }
        let cases = [
            Case {
                name: "syntax error names the line",
                toml: "[llm]\nbase_url = \n",
                env: &[],
                expect: "x.toml line 2",
            },
            Case {
                name: "unknown key is rejected",
                toml: "[llm]\nbase_ur = \"x\"\n",
                env: &[],
                expect: "unknown field `base_ur`",
            },
            Case {
                name: "bad user id",
                toml: "",
                env: &[("TELOXIDE_TOKEN", "t"), ("HEURIST_ADMINS", "12,abc")],
                expect: "HEURIST_ADMINS must be comma-separated",
            },
            Case {
                name: "no request slots",
                toml: "[llm]\nmax_concurrent = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "llm.max_concurrent must be at least 1",
            },
            Case {
                name: "a parser that may never run",
                toml: "[documents]\nparser_timeout_secs = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_timeout_secs must be at least 1",
            },
            Case {
                name: "a parser without CPU time",
                toml: "[documents]\nparser_cpu_secs = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_cpu_secs must be at least 1",
            },
            Case {
                name: "a parser without room to start",
                toml: "[documents]\nparser_memory_mb = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "documents.parser_memory_mb must be at least 64",
            },
            Case {
                name: "a turn that may never start",
                toml: "max_turn_attempts = 0\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "max_turn_attempts must be at least 1",
            },
            Case {
                name: "a removed key is rejected",
                toml: "[tools]\nfetch_max_chars = 20000\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown field `fetch_max_chars`",
            },
            Case {
                name: "bad time zone",
                toml: "[agent]\ntime_zone = \"Mars/Base\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "not an IANA time zone",
            },
            Case {
                name: "searxng url that is not http",
                toml: "",
                env: &[("TELOXIDE_TOKEN", "t"), ("HEURIST_SEARXNG_URL", "ftp://s")],
                expect: "HEURIST_SEARXNG_URL / tools.searxng_url must be an http",
            },
            Case {
                name: "metrics address without a port",
                toml: "[metrics]\nlisten = \"localhost\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "HEURIST_METRICS_LISTEN / metrics.listen must be host:port",
            },
            Case {
                name: "mcp name with capitals",
                toml: "[[mcp.servers]]\nname = \"Files\"\ncommand = \"x\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "name \"Files\" must be 1 to 32 characters of a-z",
            },
            Case {
                name: "mcp names must be unique",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\n\
                       [[mcp.servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "two servers are named \"a\"",
            },
            Case {
                name: "mcp command and url",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "set either command (stdio) or url (streamable HTTP), not both",
            },
            Case {
                name: "mcp neither command nor url",
                toml: "[[mcp.servers]]\nname = \"a\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "mcp server \"a\": set command (stdio) or url",
            },
            Case {
                name: "mcp bad url",
                toml: "[[mcp.servers]]\nname = \"a\"\nurl = \"mcp.example.com\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "mcp server \"a\": url is not a URL",
            },
            Case {
                name: "mcp unknown role",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nroles = \"root\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown variant `root`",
            },
            Case {
                name: "mcp unknown key",
                toml: "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nenviron = {}\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "unknown field `environ`",
            },
            Case {
                name: "the SSRF guard cannot be turned off by a file",
                toml: "[tools]\nfetch_allow_private = true\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "tools.fetch_allow_private is not a setting (fetch_url never reaches \
                         loopback or private addresses); remove that line",
            },
            Case {
                name: "nor by a file that writes it as a string",
                toml: "[tools]\nfetch_allow_private = \"true\"\n",
                env: &[("TELOXIDE_TOKEN", "t")],
                expect: "tools.fetch_allow_private is not a setting",
            },
        ];
        for case in cases {
            let err = Config::from_toml(Some(case.toml), Path::new("x.toml"))
                .and_then(|mut c| c.apply_env(env(case.env)).map(|()| c))
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(err.contains(case.expect), "case {}: {err}", case.name);
            assert!(!err.contains('\n'), "case {}: {err}", case.name);
        }
    }

    /// `[[models]]`' own endpoints and fallback lists: what loads, and the one clear line
    /// for what does not.
    #[test]
    fn model_endpoints_and_fallbacks_are_checked_at_load() {
        struct Case {
            name: &'static str,
            toml: &'static str,
            env: &'static [(&'static str, &'static str)],
            /// `None`: it loads.
            error: Option<&'static str>,
        }
        const LOCAL_AND_HOSTED: &str = "[[models]]\nid = \"local\"\n\
            base_url = \"http://localhost:8080/v1\"\nfallback = [\"hosted\"]\n\
            [[models]]\nid = \"hosted\"\nbase_url = \"https://openrouter.ai/api/v1\"\n\
            api_key_env = \"HOSTED_KEY\"\nfallback = [\"local\"]\n";
        let cases = [
            Case {
                name: "a local model falls back to a hosted one, and back (a cycle)",
                toml: LOCAL_AND_HOSTED,
                env: &[("HOSTED_KEY", "sk-hosted-12345678")],
                error: None,
            },
            Case {
                name: "the key's variable is not set",
                toml: LOCAL_AND_HOSTED,
                env: &[],
                error: Some(
                    "model \"hosted\": api_key_env names HOSTED_KEY, which is not set: put \
                     HOSTED_KEY=<key> in .env",
                ),
            },
            Case {
                name: "the key itself instead of a variable's name, not echoed",
                toml: "[[models]]\nid = \"m\"\napi_key_env = \"sk-or-v1-abcdef\"\n",
                env: &[],
                error: Some("model \"m\": api_key_env must be the name of an environment variable"),
            },
            Case {
                name: "an unknown fallback",
                toml: "[[models]]\nid = \"a\"\nfallback = [\"b\"]\n",
                env: &[],
                error: Some(
                    "model \"a\": fallback \"b\" is not a configured model (configured: a)",
                ),
            },
            Case {
                name: "a model that falls back to itself",
                toml: "[[models]]\nid = \"a\"\nfallback = [\"a\"]\n",
                env: &[],
                error: Some("model \"a\": its fallback list names itself"),
            },
            Case {
                name: "a base_url that is not http",
                toml: "[[models]]\nid = \"a\"\nbase_url = \"localhost:8080\"\n",
                env: &[],
                error: Some("model \"a\": base_url "),
            },
        ];
        for case in cases {
            let mut env_pairs = vec![("TELOXIDE_TOKEN", "t")];
            env_pairs.extend_from_slice(case.env);
            let loaded = Config::from_toml(Some(case.toml), Path::new("x.toml"))
                .and_then(|mut c| c.apply_env(env(&env_pairs)).map(|()| c));
            match (loaded, case.error) {
                (Ok(config), None) => {
                    let hosted = config.model("hosted").expect("hosted is configured");
                    assert_eq!(hosted.api_key.as_deref(), Some("sk-hosted-12345678"));
                    assert!(
                        config.secrets().contains(&"sk-hosted-12345678".to_string()),
                        "case {}: a model's key is redacted from logs",
                        case.name
                    );
                }
                (Err(e), Some(expect)) => {
                    let e = e.to_string();
                    assert!(e.contains(expect), "case {}: {e}", case.name);
                    assert!(!e.contains("sk-or"), "case {}: {e}", case.name);
                    assert!(!e.contains('\n'), "case {}: {e}", case.name);
                }
                (loaded, _) => panic!("case {}: {:?}", case.name, loaded.map(|_| ())),
            }
        }
    }
}
