//! What the bot counts for Prometheus (`[metrics] listen`): turns, their latency, LLM calls
//! and tokens, Telegram calls and 429s, reflections, backups, and the gauges read when scraped
//! (queue depths, lessons by review state, MCP servers up, the store's size and its disk).
//!
//! One [`Metrics`] per running bot, built with the app and handed to every layer that records
//! (it sits at the bottom of the layers for that). Recording is an atomic add behind a
//! read-locked map lookup of static labels: no lock is held across an await, and only the LLM
//! families (whose label is the model id) allocate, once per LLM call. The gauges are not kept
//! current by the code that changes them: the scrape reads them from the app ([`Gauges`]) and
//! sets them just before encoding, so nothing on a turn's path pays for them.
//!
//! Names follow Prometheus' conventions: a `heurist_` prefix, `_total` on counters, base
//! units (`_seconds`), and labels of few values (never a chat, a user or their text), and every
//! family has its help text. The exposition is the OpenMetrics text format, which Prometheus
//! asks for and scrapes natively; to anything else (`curl`, `promtool check metrics`) the
//! same families are served in Prometheus' own text format ([`to_prometheus_text`]), where a
//! counter's help is under the name its samples carry.
//!
//! ```
//! use heurist::metrics::{Metrics, TurnOutcome};
//! let metrics = Metrics::new();
//! metrics.turn(TurnOutcome::Answered);
//! let text = metrics.render(&Default::default());
//! assert!(text.contains("heurist_turns_total{outcome=\"answered\"} 1"));
//! ```

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// How a turn ended (`heurist_turns_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model answered.
    Answered,
    /// The LLM failed (unreachable, refused, context too long) or the history was unreadable.
    Failed,
    /// The model's answer was empty, also when asked again.
    NoAnswer,
    /// The iteration cap ended the agent's loop.
    IterationCap,
    /// Stopped (⏹, /cancel, shutdown) before its answer was kept.
    Cancelled,
    /// Not run: over the user's turn rate or daily budget when it came, or, when its time to
    /// run came, its user no longer allowed or their budget spent.
    Refused,
}

impl TurnOutcome {
    fn label(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Failed => "failed",
            Self::NoAnswer => "no_answer",
            Self::IterationCap => "iteration_cap",
            Self::Cancelled => "cancelled",
            Self::Refused => "refused",
        }
    }
}

/// What an LLM call was for (`kind` of the LLM families).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// The agent's turn (its answer and its tool rounds).
    Agent,
    /// The options offered under an answer.
    Extraction,
    /// A reflection that learns lessons from a finished turn.
    Reflection,
    /// An embeddings request (a message, skills, new lessons).
    Embedding,
}

impl CallKind {
    fn label(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Extraction => "extraction",
            Self::Reflection => "reflection",
            Self::Embedding => "embedding",
        }
    }
}

/// How a reflection ended (`heurist_reflections_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReflectionOutcome {
    /// It stored or reinforced at least one lesson.
    Learned,
    /// It ran, and nothing it said was worth keeping.
    Nothing,
    /// The model gave nothing usable, or its lessons could not be stored.
    Failed,
}

impl ReflectionOutcome {
    fn label(self) -> &'static str {
        match self {
            Self::Learned => "learned",
            Self::Nothing => "nothing",
            Self::Failed => "failed",
        }
    }
}

/// Tokens one LLM call used, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cached: u64,
}

/// What the scrape reads from the app and shows as gauges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Conversations with a turn running or queued.
    pub queue_chats: usize,
    /// Turns running or queued, over all conversations.
    pub queue_turns: usize,
    /// Accepted updates whose answer is not known to be sent.
    pub inbox_pending: usize,
    /// 🔁 Retry tickets not pressed yet.
    pub retries_pending: usize,
    /// Lessons by review state (`approved`, `pending`), exported as `heurist_heuristics`.
    pub lessons: Vec<(&'static str, usize)>,
    /// Each MCP server by name, and whether it is up.
    pub mcp_servers: Vec<(String, bool)>,
    /// What the store's files take on disk.
    pub store_bytes: u64,
    /// The data directory's file system: bytes available to the bot, and its size.
    pub volume: Option<(u64, u64)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    kind: &'static str,
    model: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    kind: &'static str,
    model: String,
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabel {
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

/// The bot's metrics; cheap to clone (clones share the counts).
#[derive(Clone)]
pub struct Metrics(Arc<MetricFamilies>);

struct MetricFamilies {
    registry: Registry,
    turns: Family<OutcomeLabel, Counter>,
    turn_duration: Histogram,
    first_text: Histogram,
    llm_calls: Family<CallLabels, Counter>,
    llm_tokens: Family<TokenLabels, Counter>,
    telegram_calls: Family<MethodLabel, Counter>,
    telegram_rate_limited: Family<MethodLabel, Counter>,
    reflections: Family<OutcomeLabel, Counter>,
    queue_chats: Gauge,
    queue_turns: Gauge,
    inbox_pending: Gauge,
    retries_pending: Gauge,
    lessons: Family<StateLabel, Gauge>,
    mcp_up: Family<ServerLabel, Gauge>,
    backups: Family<OutcomeLabel, Counter>,
    backup_last_success: Gauge,
    store_bytes: Gauge,
    volume_available: Gauge,
    volume_size: Gauge,
}

/// The Telegram methods that go through the paced sender (`telegram::transport::send`): their counts
/// show from the start, at zero, so a rate of 429s is there to alert on before the first one.
const TELEGRAM_METHODS: [&str; 5] = [
    "sendMessage",
    "editMessageText",
    "editMessageReplyMarkup",
    "deleteMessage",
    "getFile",
];

/// Buckets of the turn histograms, in seconds: 0.1 s to about 2 minutes, each twice the last.
fn turn_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 11))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every family registered, all counts at zero.
    pub fn new() -> Self {
        let inner = MetricFamilies {
            registry: Registry::with_prefix("heurist"),
            turns: Family::default(),
            turn_duration: turn_buckets(),
            first_text: turn_buckets(),
            llm_calls: Family::default(),
            llm_tokens: Family::default(),
            telegram_calls: Family::default(),
            telegram_rate_limited: Family::default(),
            reflections: Family::default(),
            queue_chats: Gauge::default(),
            queue_turns: Gauge::default(),
            inbox_pending: Gauge::default(),
            retries_pending: Gauge::default(),
            lessons: Family::default(),
            mcp_up: Family::default(),
            backups: Family::default(),
            backup_last_success: Gauge::default(),
            store_bytes: Gauge::default(),
            volume_available: Gauge::default(),
            volume_size: Gauge::default(),
        };
        Self(Arc::new(inner.registered()))
    }

    /// Counts a turn that ended with `outcome`.
    pub fn turn(&self, outcome: TurnOutcome) {
        let label = OutcomeLabel {
            outcome: outcome.label(),
        };
        self.0.turns.get_or_create(&label).inc();
    }

    /// A turn's answer is on screen, `elapsed` after the turn began.
    pub fn turn_shown(&self, elapsed: Duration) {
        self.0.turn_duration.observe(elapsed.as_secs_f64());
    }

    /// A turn's first text is visible, `elapsed` after the turn began.
    pub fn first_text(&self, elapsed: Duration) {
        self.0.first_text.observe(elapsed.as_secs_f64());
    }

    /// Counts an LLM call of `kind` to `model`: what it used, or `None` if it failed.
    pub fn llm_call(&self, kind: CallKind, model: &str, used: Option<Tokens>) {
        let (kind, model) = (kind.label(), model.to_string());
        let outcome = if used.is_some() { "ok" } else { "error" };
        let labels = CallLabels {
            kind,
            model,
            outcome,
        };
        self.0.llm_calls.get_or_create(&labels).inc();
        let Some(used) = used else {
            return;
        };
        let mut labels = TokenLabels {
            kind,
            model: labels.model,
            direction: "prompt",
        };
        for (direction, tokens) in [
            ("prompt", used.prompt),
            ("completion", used.completion),
            ("cached", used.cached),
        ] {
            labels.direction = direction;
            self.0.llm_tokens.get_or_create(&labels).inc_by(tokens);
        }
    }

    /// Counts one attempt of Telegram request `method` (`sendMessage`, ...).
    pub fn telegram_call(&self, method: &'static str) {
        let label = MethodLabel { method };
        self.0.telegram_calls.get_or_create(&label).inc();
    }

    /// Counts a 429 (retry_after) Telegram answered to `method`.
    pub fn telegram_rate_limited(&self, method: &'static str) {
        let label = MethodLabel { method };
        self.0.telegram_rate_limited.get_or_create(&label).inc();
    }

    /// Counts a reflection that ended with `outcome`.
    pub fn reflection(&self, outcome: ReflectionOutcome) {
        let label = OutcomeLabel {
            outcome: outcome.label(),
        };
        self.0.reflections.get_or_create(&label).inc();
    }

    /// Counts a backup written (`ok`, at `unix_secs`) or failed (`None`).
    pub fn backup(&self, written_at: Option<i64>) {
        let outcome = if written_at.is_some() { "ok" } else { "failed" };
        self.0
            .backups
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
        if let Some(at) = written_at {
            self.backup_seen(at);
        }
    }

    /// The newest backup was written at `unix_secs` (at start: the newest file found).
    pub fn backup_seen(&self, unix_secs: i64) {
        let gauge = &self.0.backup_last_success;
        gauge.set(gauge.get().max(unix_secs));
    }

    /// The exposition (OpenMetrics text) with the gauges set to `gauges`.
    pub fn render(&self, gauges: &Gauges) -> String {
        let inner = &self.0;
        inner.store_bytes.set(bytes(gauges.store_bytes));
        if let Some((available, size)) = gauges.volume {
            inner.volume_available.set(bytes(available));
            inner.volume_size.set(bytes(size));
        }
        inner.queue_chats.set(count(gauges.queue_chats));
        inner.queue_turns.set(count(gauges.queue_turns));
        inner.inbox_pending.set(count(gauges.inbox_pending));
        inner.retries_pending.set(count(gauges.retries_pending));
        for &(state, n) in &gauges.lessons {
            inner
                .lessons
                .get_or_create(&StateLabel { state })
                .set(count(n));
        }
        for (server, up) in &gauges.mcp_servers {
            let label = ServerLabel {
                server: server.clone(),
            };
            inner.mcp_up.get_or_create(&label).set(i64::from(*up));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &inner.registry);
        text
    }
}

/// A gauge's value from a count (saturating: no count reaches `i64::MAX`).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A gauge's value from a size in bytes (saturating).
fn bytes(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The OpenMetrics exposition `text` in Prometheus' own text format (0.0.4), for a reader that
/// did not ask for OpenMetrics: a counter's `HELP` and `TYPE` name its samples (`x_total`, not
/// `x`), and the `UNIT` and `EOF` lines, which that format has not, are left out. Without this,
/// `promtool check metrics` reads each counter's samples as a family with no help text.
///
/// ```
/// let open = "# HELP heurist_turns Turns.\n# TYPE heurist_turns counter\nheurist_turns_total 1\n# EOF\n";
/// let text = heurist::metrics::to_prometheus_text(open);
/// assert_eq!(text, "# HELP heurist_turns_total Turns.\n# TYPE heurist_turns_total counter\nheurist_turns_total 1\n");
/// ```
pub fn to_prometheus_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut help: Option<(&str, &str)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').or(Some((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), kind),
                "unknown" => (name.to_string(), "untyped"),
                _ => (name.to_string(), kind),
            };
            if let Some((_, said)) = help.take() {
                out.push_str(&format!("# HELP {name} {said}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The samples in `text` (Prometheus' text format) whose family has no `HELP` or no `TYPE`
/// line under the name they are exposed with: what `promtool check metrics` reports as "no
/// help text". Empty for a clean exposition; the live scrape is checked with it end to end.
pub fn samples_without_help(text: &str) -> Vec<String> {
    let declared = |prefix: &str| -> std::collections::BTreeMap<&str, &str> {
        text.lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(|rest| rest.split_once(' ').unwrap_or((rest, "")))
            .collect()
    };
    let (helps, types) = (declared("# HELP "), declared("# TYPE "));
    let mut missing = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap_or(line);
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .find(|base| types.get(base) == Some(&"histogram"))
            .unwrap_or(name);
        let declared = helps.contains_key(family) && types.contains_key(family);
        if !declared && !missing.iter().any(|m| m == name) {
            missing.push(name.to_string());
        }
    }
    missing
}

impl MetricFamilies {
    /// Registers every family under its name and help text, with the label values known
    /// beforehand at zero (the model ids, the MCP servers' names show with their first count).
    fn registered(mut self) -> Self {
        use TurnOutcome as T;
        let turns = [
            T::Answered,
            T::Failed,
            T::NoAnswer,
            T::IterationCap,
            T::Cancelled,
            T::Refused,
        ];
        // Each created at zero; the guards the lookups return are let go at once.
        for outcome in turns.map(TurnOutcome::label) {
            let _ = self.turns.get_or_create(&OutcomeLabel { outcome });
        }
        use ReflectionOutcome as R;
        for outcome in [R::Learned, R::Nothing, R::Failed].map(ReflectionOutcome::label) {
            let _ = self.reflections.get_or_create(&OutcomeLabel { outcome });
        }
        for method in TELEGRAM_METHODS {
            let _ = self.telegram_calls.get_or_create(&MethodLabel { method });
            let _ = self
                .telegram_rate_limited
                .get_or_create(&MethodLabel { method });
        }
        let r = &mut self.registry;
        r.register("turns", "Turns by how they ended", self.turns.clone());
        let help = "From a turn's start to its answer on screen";
        r.register_with_unit(
            "turn_duration",
            help,
            Unit::Seconds,
            self.turn_duration.clone(),
        );
        let help = "From a turn's start to its first visible text";
        r.register_with_unit(
            "turn_first_text",
            help,
            Unit::Seconds,
            self.first_text.clone(),
        );
        let help = "LLM calls by kind, model and outcome (ok, error)";
        r.register("llm_calls", help, self.llm_calls.clone());
        let help = "LLM tokens by kind, model and direction (prompt, completion, cached)";
        r.register("llm_tokens", help, self.llm_tokens.clone());
        let help = "Telegram requests sent (each attempt), by method";
        r.register("telegram_calls", help, self.telegram_calls.clone());
        let help = "Telegram requests answered 429 (retry_after), by method";
        r.register(
            "telegram_rate_limited",
            help,
            self.telegram_rate_limited.clone(),
        );
        r.register(
            "reflections",
            "Reflections by how they ended",
            self.reflections.clone(),
        );
        let help = "Conversations with a turn running or queued";
        r.register("queue_chats", help, self.queue_chats.clone());
        let help = "Turns running or queued, over all conversations";
        r.register("queue_turns", help, self.queue_turns.clone());
        let help = "Accepted updates whose answer is not known to be sent";
        r.register("inbox_pending", help, self.inbox_pending.clone());
        let help = "Retry tickets (Retry buttons) not pressed yet";
        r.register("retries_pending", help, self.retries_pending.clone());
        let help = "Heuristics by review state (approved, pending)";
        r.register("heuristics", help, self.lessons.clone());
        let help = "MCP servers: 1 up, 0 starting or down";
        r.register("mcp_server_up", help, self.mcp_up.clone());
        self.register_storage();
        self
    }

    /// The backups' and the disk's families (the backups' outcomes at zero from the start).
    fn register_storage(&mut self) {
        for outcome in ["ok", "failed"] {
            let _ = self.backups.get_or_create(&OutcomeLabel { outcome });
        }
        let r = &mut self.registry;
        let help = "Backups written (ok) or failed, scheduled and /backup";
        r.register("backups", help, self.backups.clone());
        let help = "When the newest backup was written (Unix time; 0: none since the start found)";
        r.register_with_unit(
            "backup_last_success_timestamp",
            help,
            Unit::Seconds,
            self.backup_last_success.clone(),
        );
        let help = "What the store's files take on disk";
        r.register_with_unit("store_size", help, Unit::Bytes, self.store_bytes.clone());
        let help = "Bytes available to the bot on the data directory's file system";
        r.register_with_unit(
            "data_volume_available",
            help,
            Unit::Bytes,
            self.volume_available.clone(),
        );
        let help = "Size of the data directory's file system";
        r.register_with_unit(
            "data_volume_size",
            help,
            Unit::Bytes,
            self.volume_size.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each family, recorded once, shows in the exposition under its conventional name.
    #[test]
    fn every_family_is_exposed_under_its_name() {
        struct Case {
            name: &'static str,
            record: fn(&Metrics),
            gauges: fn() -> Gauges,
            lines: &'static [&'static str],
        }
        let none = Gauges::default;
        let cases = [
            Case {
                name: "turns by outcome",
                record: |m| {
                    m.turn(TurnOutcome::Answered);
                    m.turn(TurnOutcome::Answered);
                    m.turn(TurnOutcome::Refused);
                },
                gauges: none,
                lines: &[
                    "# TYPE heurist_turns counter",
                    "heurist_turns_total{outcome=\"answered\"} 2",
                    "heurist_turns_total{outcome=\"refused\"} 1",
                ],
            },
            Case {
                name: "turn latency",
                record: |m| m.turn_shown(Duration::from_millis(300)),
                gauges: none,
                lines: &[
                    "# TYPE heurist_turn_duration_seconds histogram",
                    "# UNIT heurist_turn_duration_seconds seconds",
                    "heurist_turn_duration_seconds_count 1",
                    "heurist_turn_duration_seconds_bucket{le=\"0.2\"} 0",
                    "heurist_turn_duration_seconds_bucket{le=\"0.4\"} 1",
                ],
            },
            Case {
                name: "time to first text",
                record: |m| m.first_text(Duration::from_millis(50)),
                gauges: none,
                lines: &[
                    "# TYPE heurist_turn_first_text_seconds histogram",
                    "heurist_turn_first_text_seconds_count 1",
                    "heurist_turn_first_text_seconds_bucket{le=\"0.1\"} 1",
                ],
            },
            Case {
                name: "LLM calls and tokens",
                record: |m| {
                    let used = Tokens {
                        prompt: 100,
                        completion: 20,
                        cached: 64,
                    };
                    m.llm_call(CallKind::Agent, "m1", Some(used));
                    m.llm_call(CallKind::Reflection, "m1", None);
                },
                gauges: none,
                lines: &[
                    "# TYPE heurist_llm_calls counter",
                    "heurist_llm_calls_total{kind=\"agent\",model=\"m1\",outcome=\"ok\"} 1",
                    "heurist_llm_calls_total{kind=\"reflection\",model=\"m1\",outcome=\"error\"} 1",
                    "# TYPE heurist_llm_tokens counter",
                    "heurist_llm_tokens_total{kind=\"agent\",model=\"m1\",direction=\"prompt\"} 100",
                    "heurist_llm_tokens_total{kind=\"agent\",model=\"m1\",direction=\"completion\"} 20",
                    "heurist_llm_tokens_total{kind=\"agent\",model=\"m1\",direction=\"cached\"} 64",
                ],
            },
            Case {
                name: "Telegram calls and 429s",
                record: |m| {
                    m.telegram_call("sendMessage");
                    m.telegram_call("sendMessage");
                    m.telegram_rate_limited("sendMessage");
                },
                gauges: none,
                lines: &[
                    "heurist_telegram_calls_total{method=\"sendMessage\"} 2",
                    "heurist_telegram_rate_limited_total{method=\"sendMessage\"} 1",
                ],
            },
            Case {
                name: "reflections by outcome",
                record: |m| m.reflection(ReflectionOutcome::Learned),
                gauges: none,
                lines: &["heurist_reflections_total{outcome=\"learned\"} 1"],
            },
            Case {
                name: "gauges read at the scrape",
                record: |_| {},
                gauges: || Gauges {
                    queue_chats: 2,
                    queue_turns: 5,
                    inbox_pending: 3,
                    retries_pending: 1,
                    lessons: vec![("approved", 7), ("pending", 2)],
                    mcp_servers: vec![("desk".into(), true), ("files".into(), false)],
                    store_bytes: 4096,
                    volume: Some((1 << 30, 4 << 30)),
                },
                lines: &[
                    "# TYPE heurist_queue_chats gauge",
                    "heurist_queue_chats 2",
                    "heurist_queue_turns 5",
                    "heurist_inbox_pending 3",
                    "heurist_retries_pending 1",
                    "heurist_heuristics{state=\"approved\"} 7",
                    "heurist_heuristics{state=\"pending\"} 2",
                    "heurist_mcp_server_up{server=\"desk\"} 1",
                    "heurist_mcp_server_up{server=\"files\"} 0",
                ],
            },
        ];
        for case in cases {
            let metrics = Metrics::new();
            (case.record)(&metrics);
            let text = metrics.render(&(case.gauges)());
            let lines: Vec<&str> = text.lines().collect();
            for line in case.lines {
                assert!(
                    lines.contains(line),
                    "{}: no {line:?} in\n{text}",
                    case.name
                );
            }
            assert_eq!(lines.last(), Some(&"# EOF"), "{}", case.name);
        }
    }

    /// Served in Prometheus' text format, every sample's family has its help and type under
    /// the sample's name, and nothing else changes; served as OpenMetrics, a counter's samples
    /// (`x_total`) are not under its help's name (`x`), which is what promtool found.
    #[test]
    fn in_prometheus_text_every_sample_has_its_help() {
        let metrics = Metrics::new();
        metrics.turn(TurnOutcome::Answered);
        metrics.turn_shown(Duration::from_millis(300));
        metrics.llm_call(CallKind::Agent, "m1", Some(Tokens::default()));
        metrics.backup(Some(1_700_000_000));
        let gauges = Gauges {
            lessons: vec![("approved", 1)],
            mcp_servers: vec![("desk".into(), true)],
            volume: Some((1, 2)),
            ..Gauges::default()
        };
        let open = metrics.render(&gauges);
        assert!(samples_without_help(&open).contains(&"heurist_turns_total".to_string()));
        let text = to_prometheus_text(&open);
        assert_eq!(samples_without_help(&text), Vec::<String>::new(), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        for line in [
            "# HELP heurist_turns_total Turns by how they ended.",
            "# TYPE heurist_turns_total counter",
            "heurist_turns_total{outcome=\"answered\"} 1",
            "# TYPE heurist_turn_duration_seconds histogram",
            "heurist_turn_duration_seconds_count 1",
            "# TYPE heurist_backup_last_success_timestamp_seconds gauge",
            "heurist_backup_last_success_timestamp_seconds 1700000000",
            "heurist_backups_total{outcome=\"ok\"} 1",
            "heurist_data_volume_available_bytes 1",
            "heurist_data_volume_size_bytes 2",
        ] {
            assert!(lines.contains(&line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
        let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(samples(&text), samples(&open));
    }

    /// Before anything was recorded, every family whose label values are known beforehand
    /// shows at zero, so a dashboard or an alert on a rate finds it; the families labelled by
    /// model or MCP server show with their first sample.
    #[test]
    fn the_known_label_values_show_at_zero_from_the_start() {
        let text = Metrics::new().render(&Gauges::default());
        let samples = [
            "heurist_turns_total{outcome=\"answered\"} 0",
            "heurist_turns_total{outcome=\"cancelled\"} 0",
            "heurist_turns_total{outcome=\"refused\"} 0",
            "heurist_turn_duration_seconds_count 0",
            "heurist_turn_first_text_seconds_count 0",
            "heurist_telegram_calls_total{method=\"sendMessage\"} 0",
            "heurist_telegram_rate_limited_total{method=\"getFile\"} 0",
            "heurist_reflections_total{outcome=\"nothing\"} 0",
            "heurist_queue_chats 0",
            "heurist_queue_turns 0",
            "heurist_inbox_pending 0",
            "heurist_retries_pending 0",
        ];
        let lines: Vec<&str> = text.lines().collect();
        for sample in samples {
            assert!(lines.contains(&sample), "{sample}:\n{text}");
        }
    }
}
