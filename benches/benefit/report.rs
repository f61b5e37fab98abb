//! What a run measured, as a table and as a JSON line, and the pooled report over every run
//! in a results file: per family and overall, the mean and spread (min–max) across runs, per
//! model, layout and review mode, with the runs it pooled named.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::families::{FAMILIES, Kind};
use crate::run::{Layout, Model, Outcome, ReviewMode, Run, Setup, family_of_tool, harmed};

/// Counts over a set of held-out tasks.
#[derive(Default, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Totals {
    pub(crate) tasks: usize,
    pub(crate) right_form: usize,
    pub(crate) exact: usize,
    pub(crate) success: usize,
    /// Tasks that succeeded with learning off and failed with it on (learning on only).
    pub(crate) harm: usize,
    pub(crate) parroted: usize,
    /// Vague lessons stored about the family's tools (learning on only).
    pub(crate) vague_stored: usize,
    pub(crate) tool_errors: usize,
    pub(crate) llm_calls: usize,
    pub(crate) tokens: usize,
    pub(crate) block_tokens: usize,
    pub(crate) prompt_estimate: usize,
    pub(crate) honest: usize,
    /// Calls the bot rewrote to the form their tool taught (results files from before it
    /// counted them read 0).
    #[serde(default)]
    pub(crate) rewritten: usize,
}

impl Totals {
    /// The counts of these tasks (harm and vague lessons are the run's, added after).
    fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Self {
        let mut t = Self::default();
        for o in outcomes {
            t.tasks += 1;
            t.right_form += usize::from(o.right_form);
            t.exact += usize::from(o.exact);
            t.success += usize::from(o.success);
            t.parroted += usize::from(o.parroted.is_some());
            t.tool_errors += o.tool_errors;
            t.llm_calls += o.llm_calls;
            t.tokens += o.tokens;
            t.block_tokens += o.block_tokens;
            t.prompt_estimate += o.prompt_estimate;
            t.honest += usize::from(o.honest);
            t.rewritten += o.rewritten;
        }
        t
    }

    /// Adds another set's counts.
    fn add(&mut self, other: &Self) {
        self.tasks += other.tasks;
        self.right_form += other.right_form;
        self.exact += other.exact;
        self.success += other.success;
        self.harm += other.harm;
        self.parroted += other.parroted;
        self.vague_stored += other.vague_stored;
        self.tool_errors += other.tool_errors;
        self.llm_calls += other.llm_calls;
        self.tokens += other.tokens;
        self.block_tokens += other.block_tokens;
        self.prompt_estimate += other.prompt_estimate;
        self.honest += other.honest;
        self.rewritten += other.rewritten;
    }

    /// `n` as a percentage of the tasks.
    pub(crate) fn pct(&self, n: usize) -> f64 {
        if self.tasks == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.tasks as f64
        }
    }

    /// `n` per task.
    fn per_task(&self, n: usize) -> f64 {
        if self.tasks == 0 {
            0.0
        } else {
            n as f64 / self.tasks as f64
        }
    }

    /// The injected block's share of the prompt tokens, in percent.
    pub(crate) fn block_share(&self) -> f64 {
        if self.prompt_estimate == 0 {
            0.0
        } else {
            100.0 * self.block_tokens as f64 / self.prompt_estimate as f64
        }
    }

    /// A row of one run's table.
    fn row(&self, name: &str, mode: &str) -> String {
        format!(
            "| {name} | {mode} | {:.0}% | {:.0}% | {:.0}% | {} | {} | {} | {} | {:.2} | {:.1} | {:.0} | {:.0} ({:.0}%) |",
            self.pct(self.right_form),
            self.pct(self.exact),
            self.pct(self.success),
            self.harm,
            self.parroted,
            self.vague_stored,
            self.rewritten,
            self.per_task(self.tool_errors),
            self.per_task(self.llm_calls),
            self.per_task(self.tokens),
            self.per_task(self.block_tokens),
            self.block_share(),
        )
    }
}

/// One family's counts with learning on and off.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct FamilyResult {
    pub(crate) family: String,
    pub(crate) on: Totals,
    pub(crate) off: Totals,
}

/// A lesson stored with learning on.
#[derive(Serialize, Deserialize)]
struct LessonRecord {
    text: String,
    tool: Option<String>,
    review: String,
    vague: bool,
}

/// One held-out task, as asked.
#[derive(Serialize, Deserialize)]
struct TaskRecord {
    learning: bool,
    family: String,
    task: String,
    success: bool,
    right_form: bool,
    exact: bool,
    parroted: Option<String>,
    answer: String,
    calls: Vec<String>,
    /// What the model was shown when it wrote a parroted answer (runs before this field
    /// have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    evidence: Vec<String>,
}

/// One invocation: a layout, a seed and a review mode, learning on and off. A JSON line of
/// the results file.
#[derive(Serialize, Deserialize)]
pub(crate) struct Record {
    /// Unix seconds when it ended.
    at: i64,
    /// The commit it measured (`git describe --always --dirty`), when known.
    commit: String,
    model: String,
    real: bool,
    temperature: f32,
    seed: u64,
    layout: String,
    review: String,
    pub(crate) results: Vec<FamilyResult>,
    /// Vague lessons stored with learning on, whatever their tool.
    pub(crate) vague_stored: usize,
    wall_secs_on: f64,
    wall_secs_off: f64,
    lessons: Vec<LessonRecord>,
    tasks: Vec<TaskRecord>,
}

/// The layout's name on the command line and in the results file.
fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::Fresh => "fresh",
        Layout::Chat => "chat",
    }
}

/// The review mode's name on the command line and in the results file.
fn review_name(review: ReviewMode) -> &'static str {
    match review {
        ReviewMode::None => "none",
        ReviewMode::Default => "default",
    }
}

/// The commit the run measures, read when the invocation starts ([`remember_commit`]): a run
/// takes most of an hour, and the tree may move on meanwhile.
static COMMIT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Reads the commit now, for the results written at the end.
pub(crate) fn remember_commit() {
    COMMIT.get_or_init(describe);
}

/// The commit the invocation started on.
fn commit() -> String {
    COMMIT.get_or_init(describe).clone()
}

/// The commit of the working tree (`-dirty` with changes not committed), if git can tell.
fn describe() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

impl Record {
    /// The record of an invocation's two runs.
    pub(crate) fn new(model: &Model, setup: &Setup, on: &Run, off: &Run) -> Self {
        let harm = harmed(on, off);
        let results = setup
            .families
            .iter()
            .map(|family| {
                let of =
                    |run: &Run| Totals::of(run.outcomes.iter().filter(|o| o.family == family.name));
                let mut on_totals = of(on);
                on_totals.harm = harm.iter().filter(|(f, _)| *f == family.name).count();
                on_totals.vague_stored = on
                    .lessons
                    .iter()
                    .filter(|l| l.vague && family_of_tool(l.tool.as_deref()) == Some(family.name))
                    .count();
                FamilyResult {
                    family: family.name.to_string(),
                    on: on_totals,
                    off: of(off),
                }
            })
            .collect();
        let tasks = [(true, on), (false, off)]
            .into_iter()
            .flat_map(|(learning, run)| {
                run.outcomes.iter().map(move |o| TaskRecord {
                    learning,
                    family: o.family.to_string(),
                    task: o.task.to_string(),
                    success: o.success,
                    right_form: o.right_form,
                    exact: o.exact,
                    parroted: o.parroted.clone(),
                    answer: o.answer.chars().take(400).collect(),
                    calls: o.calls.clone(),
                    evidence: o.evidence.clone(),
                })
            })
            .collect();
        Self {
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            commit: commit(),
            model: model.name.clone(),
            real: model.real,
            temperature: setup.temperature,
            seed: setup.seed,
            layout: layout_name(setup.layout).into(),
            review: review_name(setup.review).into(),
            results,
            vague_stored: on.lessons.iter().filter(|l| l.vague).count(),
            wall_secs_on: on.wall.as_secs_f64(),
            wall_secs_off: off.wall.as_secs_f64(),
            lessons: on
                .lessons
                .iter()
                .map(|l| LessonRecord {
                    text: l.text.clone(),
                    tool: l.tool.clone(),
                    review: l.review.clone(),
                    vague: l.vague,
                })
                .collect(),
            tasks,
        }
    }

    /// The counts over the families of one kind (all with `None`), learning on or off; the
    /// overall row's vague lessons are all of them, a tool's or not.
    pub(crate) fn totals(&self, kind: Option<Kind>, on: bool) -> Totals {
        let mut sum = Totals::default();
        for result in &self.results {
            let family_kind = FAMILIES
                .iter()
                .find(|f| f.name == result.family)
                .map(|f| f.kind);
            if kind.is_none() || family_kind == kind {
                sum.add(if on { &result.on } else { &result.off });
            }
        }
        if kind.is_none() && on {
            sum.vague_stored = self.vague_stored;
        }
        sum
    }

    /// The run's table, as today's single run shows it.
    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "| family | learning | first call in the right form | first call exactly right | task success | harm | parroted | vague stored | calls rewritten | tool errors per task | LLM calls per task | tokens per task | injected block tokens per task (share of prompt) |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for result in &self.results {
            for (mode, totals) in [("on", &result.on), ("off", &result.off)] {
                let _ = writeln!(out, "{}", totals.row(&result.family, mode));
            }
        }
        for (name, kind) in [
            ("**tool conventions**", Some(Kind::Convention)),
            ("**all**", None),
        ] {
            for (mode, on) in [("on", true), ("off", false)] {
                let _ = writeln!(out, "{}", self.totals(kind, on).row(name, mode));
            }
        }
        out
    }

    /// Appends the record to `path` as one JSON line.
    pub(crate) fn append(&self, path: &str) -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        writeln!(file, "{}", serde_json::to_string(self)?)
    }

    /// How the run is named in a report.
    fn label(&self) -> String {
        let families: Vec<&str> = self.results.iter().map(|r| r.family.as_str()).collect();
        let when = chrono::DateTime::from_timestamp(self.at, 0)
            .map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M UTC").to_string());
        format!(
            "seed {} (temperature {}, commit {}, {when}, families: {})",
            self.seed,
            self.temperature,
            if self.commit.is_empty() {
                "?"
            } else {
                &self.commit
            },
            if families.len() == FAMILIES.len() {
                "all".to_string()
            } else {
                families.join(", ")
            }
        )
    }
}

/// Values across runs, shown as their mean and, when they differ, their min–max.
fn spread(values: &[f64], decimals: usize, range_decimals: usize, suffix: &str) -> String {
    if values.is_empty() {
        return "–".into();
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if (max - min).abs() < 1e-9 {
        format!("{mean:.decimals$}{suffix}")
    } else {
        format!("{mean:.decimals$}{suffix} ({min:.range_decimals$}–{max:.range_decimals$})")
    }
}

/// One row of the pooled table: a family (or a sum) with learning on or off, over runs.
fn pooled_row(name: &str, mode: &str, runs: &[Totals]) -> String {
    let column = |f: &dyn Fn(&Totals) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    format!(
        "| {name} | {mode} | {} | {} | {} | {} | {} | {} | {} | {} |",
        runs.len(),
        spread(&column(&|t| t.pct(t.right_form)), 0, 0, "%"),
        spread(&column(&|t| t.pct(t.exact)), 0, 0, "%"),
        spread(&column(&|t| t.pct(t.success)), 0, 0, "%"),
        spread(&column(&|t| t.harm as f64), 1, 0, ""),
        spread(&column(&|t| t.parroted as f64), 1, 0, ""),
        spread(&column(&|t| t.vague_stored as f64), 1, 0, ""),
        spread(&column(&|t| t.per_task(t.tokens)), 0, 0, ""),
    )
}

/// The pooled report over every run in `path`, and how many runs it pooled.
pub(crate) fn pooled(path: &str) -> Result<(String, usize), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut records: Vec<Record> = Vec::new();
    let mut unreadable = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(record) => records.push(record),
            Err(_) => unreadable += 1,
        }
    }
    let mut groups: BTreeMap<(String, String, String), Vec<&Record>> = BTreeMap::new();
    for record in &records {
        let key = (
            record.model.clone(),
            record.layout.clone(),
            record.review.clone(),
        );
        groups.entry(key).or_default().push(record);
    }
    let mut out = format!(
        "Pooled {} run{} from {path}",
        records.len(),
        if records.len() == 1 { "" } else { "s" }
    );
    if unreadable > 0 {
        let _ = write!(out, " ({unreadable} unreadable lines left out)");
    }
    out.push_str(".\nEach cell: the mean across runs, then (min–max) when they differ.\n");
    for ((model, layout, review), runs) in &groups {
        out.push_str(&group_report(model, layout, review, runs));
    }
    Ok((out, records.len()))
}

/// The table of one model, layout and review mode.
fn group_report(model: &str, layout: &str, review: &str, runs: &[&Record]) -> String {
    let mut out = format!(
        "\n### model {model}, layout {layout}, review {review}: {} run{}\n\n",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    for run in runs {
        let _ = writeln!(out, "- {}", run.label());
    }
    out.push_str(
        "\n| family | learning | runs | first call in the right form | first call exactly right | task success | harm (tasks) | parroted | vague stored | tokens per task |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    let mut worse = Vec::new();
    for family in FAMILIES {
        let mut on = Vec::new();
        let mut off = Vec::new();
        for run in runs {
            if let Some(r) = run.results.iter().find(|r| r.family == family.name) {
                on.push(r.on);
                off.push(r.off);
            }
        }
        if on.is_empty() {
            continue;
        }
        let mean =
            |ts: &[Totals]| ts.iter().map(|t| t.pct(t.success)).sum::<f64>() / ts.len() as f64;
        if mean(&on) < mean(&off) {
            worse.push(family.name);
        }
        let _ = writeln!(out, "{}", pooled_row(family.name, "on", &on));
        let _ = writeln!(out, "{}", pooled_row(family.name, "off", &off));
    }
    for (name, kind) in [
        ("**tool conventions**", Some(Kind::Convention)),
        ("**all**", None),
    ] {
        for (mode, on) in [("on", true), ("off", false)] {
            let totals: Vec<Totals> = runs.iter().map(|r| r.totals(kind, on)).collect();
            let _ = writeln!(out, "{}", pooled_row(name, mode, &totals));
        }
    }
    let gains: Vec<f64> = runs
        .iter()
        .map(|r| {
            let (on, off) = (
                r.totals(Some(Kind::Convention), true),
                r.totals(Some(Kind::Convention), false),
            );
            on.pct(on.success) - off.pct(off.success)
        })
        .collect();
    let parroted: usize = runs
        .iter()
        .map(|r| r.totals(None, true).parroted + r.totals(None, false).parroted)
        .sum();
    let vague: usize = runs.iter().map(|r| r.vague_stored).sum();
    let shares: Vec<f64> = runs
        .iter()
        .map(|r| r.totals(None, true).block_share())
        .collect();
    let gain_mean = gains.iter().sum::<f64>() / gains.len().max(1) as f64;
    let share_max = shares.iter().copied().fold(0.0, f64::max);
    let met =
        gain_mean >= 30.0 && worse.is_empty() && parroted == 0 && vague == 0 && share_max <= 25.0;
    let sign = if gain_mean >= 0.0 { "+" } else { "" };
    let _ = writeln!(
        out,
        "\nTask success over the tool conventions, learning on − off: {sign}{} points; families \
         worse on mean task success: {}; parroted answers (on and off): {parroted}; vague \
         lessons stored: {vague}; the block's share of prompt tokens: {}.\nIssue 34's goals \
         (≥ +30 points, no family worse, 0 parroted, 0 vague, block ≤ 25 %): {}",
        spread(&gains, 0, 0, ""),
        if worse.is_empty() {
            "none".to_string()
        } else {
            worse.join(", ")
        },
        spread(&shares, 1, 1, "%"),
        if met { "met" } else { "NOT met" },
    );
    out
}
