//! Does what the bot learns help what users live with? Task families where a lesson matters,
//! run through the real bot (dispatcher, agent loop, MCP client, reflection, sled) with
//! learning on and with learning off, in the same invocation.
//!
//! The tools are the in-process "desk" MCP server (`tests/e2e/support/desk.rs`), whose
//! conventions only its errors tell:
//! - tool-argument conventions: `ticket` ids (`TCK-004411`), `booking` dates (`14.12.2026`),
//!   and issue 34's server: `stock_level` SKUs by item number (`SKU-004411`) and
//!   `shipping_quote` weights in whole grams (`2500`), whose errors state the rule but not the
//!   fix;
//! - a procedure where the order matters: `lock` a service before `deploy`;
//! - an output convention a user insists on: temperatures in °F as well ("No, always give…").
//!
//! One invocation is one layout × one seed × one review mode, learning on and off:
//! - `--layout fresh` asks each held-out task by a new user in a fresh chat; `--layout chat`
//!   has one user per family ask all its tasks in one chat, the history growing;
//! - `--seed N` shuffles the held-out order and goes into every request as its sampling
//!   `seed`, at `--temperature T` (`llm.temperature`, 0.7 unless given): at temperature 0
//!   llama-server answers the same whatever the seed;
//! - `--review default` (`review = "external"`, the benchmark approving what waits as an admin
//!   would) or `--review none` (the operator trusts the bot's own lessons).
//!
//! Learning goes on through the held-out tasks: each task's reflection is done (and in the
//! default mode approved) before the next task. Reported per family and overall: first call
//! in the right form, first call exactly right, task success (the answer carries the desk's
//! figure), harm (tasks that succeeded with learning off and failed with it on), parroted
//! answers and vague lessons stored (judged by `benefit/judge.rs`, not by the bot's code),
//! tool errors, LLM calls and tokens per task, the injected block's tokens.
//!
//! ```text
//! cargo bench --bench benefit                      # against the fake model below
//! cargo test --bench benefit -- --smoke            # both layouts and review modes, goals asserted (CI)
//! HEURIST_BENCH_LLM_URL=http://127.0.0.1:8081/v1 HEURIST_BENCH_MODEL=qwen \
//!   HEURIST_BENCH_API_KEY=local-key cargo bench --bench benefit -- \
//!   --layout chat --seed 2 --review none --out results.jsonl
//! cargo bench --bench benefit -- --report results.jsonl   # pools every run in the file
//! ```
//!
//! `--families ticket,stock` (or `HEURIST_BENCH_FAMILIES`) runs only the families whose
//! names start so; `--out FILE` appends the invocation's results as a JSON line;
//! `HEURIST_BENCH_DUMP=<file>` appends every exchange with the model as a JSON line;
//! `--verbose` prints each held-out task's calls and answer.
//!
//! Without `HEURIST_BENCH_LLM_URL` the model is a fake that follows lessons
//! (`benefit/fake.rs`): that proves the plumbing, evidence → reflection → quality gate →
//! storage → retrieval → prompt. Against a real server, it measures the model.

// A benchmark's scenario may read longer than a production function (Cargo.toml's `[lints]` hold
// `clippy::too_many_lines` for production code; unit tests are exempt alike in src/lib.rs).
#![allow(clippy::too_many_lines)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

#[path = "benefit/exchange.rs"]
mod exchange;
#[path = "benefit/fake.rs"]
mod fake;
#[path = "benefit/families.rs"]
mod families;
#[path = "benefit/judge.rs"]
mod judge;
#[path = "benefit/report.rs"]
mod report;
#[path = "benefit/run.rs"]
mod run;

use std::time::Duration;

use families::Kind;
use report::Record;
use run::{Layout, Model, ReviewMode, Run, Setup};

/// What the command line takes.
const USAGE: &str = "usage: benefit [--layout fresh|chat] [--seed N] [--review default|none] \
[--temperature T] [--families a,b] [--out FILE] [--verbose] | --report FILE | --smoke";

/// What the command line asks for.
struct Args {
    smoke: bool,
    verbose: bool,
    layout: Layout,
    review: ReviewMode,
    seed: u64,
    temperature: f32,
    families: Option<String>,
    out: Option<String>,
    report: Option<String>,
}

/// Reads the arguments (`cargo bench` adds `--bench`, which is ignored).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args {
        smoke: false,
        verbose: std::env::var_os("HEURIST_BENCH_VERBOSE").is_some(),
        layout: Layout::Fresh,
        review: ReviewMode::Default,
        seed: 1,
        temperature: 0.7,
        families: std::env::var("HEURIST_BENCH_FAMILIES").ok(),
        out: None,
        report: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--smoke" => parsed.smoke = true,
            "--verbose" => parsed.verbose = true,
            "--bench" => {}
            "--layout" => {
                parsed.layout = match value()?.as_str() {
                    "fresh" => Layout::Fresh,
                    "chat" => Layout::Chat,
                    other => return Err(format!("--layout is fresh or chat, not {other}")),
                }
            }
            "--review" => {
                parsed.review = match value()?.as_str() {
                    "default" => ReviewMode::Default,
                    "none" => ReviewMode::None,
                    other => return Err(format!("--review is default or none, not {other}")),
                }
            }
            "--seed" => {
                let seed = value()?;
                parsed.seed = seed
                    .parse()
                    .map_err(|_| format!("--seed takes a whole number, not {seed}"))?;
            }
            "--temperature" => {
                let t = value()?;
                parsed.temperature = t
                    .parse()
                    .ok()
                    .filter(|t: &f32| (0.0..=2.0).contains(t))
                    .ok_or(format!("--temperature takes a number from 0 to 2, not {t}"))?;
            }
            "--families" => parsed.families = Some(value()?),
            "--out" => parsed.out = Some(value()?),
            "--report" => parsed.report = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(parsed)
}

/// What one invocation measured, and the goals the fake model must meet (`--smoke`).
struct Invocation {
    record: Record,
    /// Goals the fake did not meet, each said.
    missed: Vec<String>,
}

/// One layout × seed × review mode: learning on, then off; the tables printed.
async fn invocation(model: &Model, setup: &Setup, verbose: bool) -> Invocation {
    println!(
        "\nBenefit: layout {:?}, review {:?}, seed {}, temperature {}; {} families, {} held-out tasks per mode; model {} ({})",
        setup.layout,
        setup.review,
        setup.seed,
        setup.temperature,
        setup.families.len(),
        setup
            .families
            .iter()
            .map(|f| f.held_out.len())
            .sum::<usize>(),
        model.name,
        if model.real {
            model.url.as_str()
        } else {
            "the fake that follows lessons"
        }
    );
    let on = run::run(model, setup, true).await;
    let off = run::run(model, setup, false).await;
    let record = Record::new(model, setup, &on, &off);
    println!("\nLessons stored with learning on:");
    for lesson in &on.lessons {
        println!(
            "- {} [tool: {}; {}{}]",
            lesson.text,
            lesson.tool.as_deref().unwrap_or("none"),
            lesson.review,
            if lesson.vague { "; VAGUE" } else { "" }
        );
    }
    println!("\n{}", record.table());
    if verbose {
        print_tasks(&on, &off);
    }
    let missed = summary(&record, &on, &off, model.real);
    Invocation { record, missed }
}

/// Every held-out task's calls and answer, and the first reflection's prompt.
fn print_tasks(on: &Run, off: &Run) {
    if let Some(reflection) = &on.reflection {
        println!("\nThe first reflection's prompt:\n{reflection}\n");
    }
    for (mode, run) in [("on", on), ("off", off)] {
        for o in &run.outcomes {
            println!(
                "  [{mode}] {} | {}: {} → {:?}{}",
                o.family,
                o.task,
                o.calls.join(", "),
                o.answer.chars().take(160).collect::<String>(),
                o.parroted
                    .as_ref()
                    .map_or(String::new(), |why| format!(" PARROTED: {why}"))
            );
        }
    }
}

/// Prints the invocation's summary and returns the fake model's goals it missed (a real
/// model's goals are issue 34's, which `--report` checks over seeds).
fn summary(record: &Record, on: &Run, off: &Run, real: bool) -> Vec<String> {
    let conventions = |learning| record.totals(Some(Kind::Convention), learning);
    let (c_on, c_off) = (conventions(true), conventions(false));
    let form_gain = c_on.pct(c_on.right_form) - c_off.pct(c_off.right_form);
    let success_gain = c_on.pct(c_on.success) - c_off.pct(c_off.success);
    let worse: Vec<&str> = record
        .results
        .iter()
        .filter(|r| r.on.success < r.off.success || r.on.right_form < r.off.right_form)
        .map(|r| r.family.as_str())
        .collect();
    let (all_on, all_off) = (record.totals(None, true), record.totals(None, false));
    let share = all_on.block_share();
    let dishonest = all_on.tasks - all_on.honest + all_off.tasks - all_off.honest;
    println!(
        "Over the tool conventions, learning on − off: first calls in the right form {form_gain:+.0} \
         points, task success {success_gain:+.0} points. Harm: {} tasks; parroted answers: {} on, \
         {} off; vague lessons stored: {}; families worse with learning on: {}; injected block: \
         {share:.1}% of the prompt tokens; answers that were not honest: {dishonest}. Wall time: \
         on {:.0} s, off {:.0} s.",
        all_on.harm,
        all_on.parroted,
        all_off.parroted,
        record.vague_stored,
        if worse.is_empty() {
            "none".to_string()
        } else {
            worse.join(", ")
        },
        on.wall.as_secs_f64(),
        off.wall.as_secs_f64(),
    );
    let goals = [
        // Without a tool convention among the families, there is no form to gain.
        (
            form_gain >= 30.0 || c_on.tasks == 0,
            format!("right-form gain {form_gain:+.0} < +30"),
        ),
        (worse.is_empty(), format!("families worse: {worse:?}")),
        (share <= 25.0, format!("block {share:.1}% > 25%")),
        (dishonest == 0, format!("{dishonest} answers not honest")),
        (all_on.harm == 0, format!("harm {}", all_on.harm)),
        (
            all_on.parroted + all_off.parroted == 0,
            format!("{} parroted answers", all_on.parroted + all_off.parroted),
        ),
        (
            record.vague_stored == 0,
            format!("{} vague lessons stored", record.vague_stored),
        ),
    ];
    let missed: Vec<String> = goals
        .into_iter()
        .filter(|(met, _)| !met)
        .map(|(_, why)| why)
        .collect();
    if real {
        return Vec::new();
    }
    println!(
        "The fake model's goals (≥ +30 points of right first calls, no family worse, block ≤ 25 %, \
         every answer honest, no harm, none parroted, no vague lesson stored): {}",
        if missed.is_empty() {
            "met".to_string()
        } else {
            format!("NOT met: {}", missed.join("; "))
        }
    );
    missed
}

/// The fake model, as a `Model` (the fake must outlive the runs).
fn fake_model(fake: &support::FakeLlm) -> Model {
    Model {
        url: fake.url.clone(),
        name: "test-model".into(),
        api_key: None,
        real: false,
        patience: Duration::from_secs(30),
    }
}

/// CI: the judge's own checks, then both layouts and both review modes against the fake,
/// each run's goals asserted, and the pooled report over them.
async fn smoke(families: Vec<&'static families::Family>) {
    let judge_failures = judge::self_check();
    assert!(judge_failures.is_empty(), "{judge_failures:#?}");
    let fake = fake::start().await;
    let model = fake_model(&fake);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.jsonl").display().to_string();
    let mut missed = Vec::new();
    let combinations = [
        (Layout::Fresh, ReviewMode::Default),
        (Layout::Chat, ReviewMode::Default),
        (Layout::Fresh, ReviewMode::None),
        (Layout::Chat, ReviewMode::None),
    ];
    for (seed, (layout, review)) in (1..).zip(combinations) {
        let setup = Setup {
            layout,
            review,
            seed,
            temperature: 0.7,
            families: families.clone(),
        };
        let done = invocation(&model, &setup, false).await;
        done.record.append(&out).unwrap();
        missed.extend(
            done.missed
                .into_iter()
                .map(|m| format!("{layout:?}/{review:?}: {m}")),
        );
    }
    missed.extend(judge_wired(&model, &families).await);
    let (report, pooled) = report::pooled(&out).unwrap();
    println!("\n{report}");
    assert_eq!(pooled, combinations.len(), "the report pools every run");
    assert!(
        missed.is_empty(),
        "the benefit goals are not met: {missed:#?}"
    );
    println!("\n1 passed, 0 failed");
}

/// The bot's guard against parroted answers, seen through the judge in a run: with the fake
/// parroting every held-out answer of the stock family in one chat (a lesson, then the chat's
/// last answer; a described call, then the same again), none of them reaches the user, who
/// gets the bot's honest note instead (the judge's own table is `judge::self_check`), learning
/// on and off.
async fn judge_wired(model: &Model, families: &[&'static families::Family]) -> Vec<String> {
    let Some(stock) = families.iter().find(|f| f.name == "stock SKUs") else {
        return Vec::new();
    };
    let setup = Setup {
        layout: Layout::Chat,
        review: ReviewMode::None,
        seed: 1,
        temperature: 0.7,
        families: vec![stock],
    };
    fake::parrot(true);
    let on = run::run(model, &setup, true).await;
    let off = run::run(model, &setup, false).await;
    fake::parrot(false);
    let mut missed = Vec::new();
    for (mode, run) in [("on", &on), ("off", &off)] {
        for o in &run.outcomes {
            if let Some(why) = &o.parroted {
                missed.push(format!(
                    "a parroted answer was shown ({mode}, {why}): {:?}",
                    o.answer
                ));
            } else if !o.answer.starts_with("Sorry") {
                missed.push(format!("not the honest note ({mode}): {:?}", o.answer));
            }
        }
        for o in &run.outcomes {
            println!(
                "  parroted [{mode}]: {:?} ({})",
                o.answer,
                o.parroted.as_deref().unwrap_or("missed")
            );
        }
    }
    missed
}

#[tokio::main]
async fn main() {
    report::remember_commit();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Some(path) = &args.report {
        match report::pooled(path) {
            Ok((text, _)) => println!("{text}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let families = families::select(args.families.as_deref());
    if families.is_empty() {
        eprintln!("no family's name starts with any of {:?}", args.families);
        std::process::exit(2);
    }
    if args.smoke {
        smoke(families).await;
        return;
    }
    let fake;
    let model = match std::env::var("HEURIST_BENCH_LLM_URL") {
        Ok(url) => Model {
            url,
            name: std::env::var("HEURIST_BENCH_MODEL").unwrap_or_else(|_| "qwen".into()),
            api_key: std::env::var("HEURIST_BENCH_API_KEY").ok(),
            real: true,
            patience: Duration::from_secs(1800),
        },
        Err(_) => {
            fake = fake::start().await;
            fake_model(&fake)
        }
    };
    let setup = Setup {
        layout: args.layout,
        review: args.review,
        seed: args.seed,
        temperature: args.temperature,
        families,
    };
    let done = invocation(&model, &setup, args.verbose).await;
    if let Some(out) = &args.out {
        match done.record.append(out) {
            Ok(()) => println!("Appended to {out}."),
            Err(e) => eprintln!("cannot append to {out}: {e}"),
        }
    }
}
