//! One run: the real bot (dispatcher, agent loop, MCP client, reflection, sled) with learning
//! on or off, through the training tasks and then the held-out ones, in the layout, review
//! mode and seed of the invocation.
//!
//! Training: each family's tasks in a chat of their own (Alice's first), in order, so a
//! correction follows the answer it corrects. Held out, in the seed's order:
//! - `fresh`: each task by a new user in a fresh chat, so only what the bot learned (never a
//!   chat's history) carries over;
//! - `chat`: one user per family asks all its tasks in one chat, one after the other, the
//!   history growing, as users do.
//!
//! With learning on, reflection goes on through the held-out tasks: after each answer the run
//! waits until the reflections are done, so the next task meets what the last one taught. In
//! the `default` review mode (`review = "external"`) the benchmark then approves what waits,
//! as an admin would in `/heuristics pending`; with `none` nothing is approved by hand.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use heurist::config::Review;
use heurist::ids::UserId;
use heurist::learning::block::context_of;
use serde_json::Value;

use crate::exchange::{Exchange, Recorder, asked, contents, offered_tools};
use crate::families::{FAMILIES, Family, first_call_checks, succeeded};
use crate::judge::{self, Injected};
use crate::support::desk::{DeskCall, DeskServer};
use crate::support::{self, ALICE, FakeTelegram, is_options_request, is_reflection_request};

/// Training chats after Alice's: one per family.
const FIRST_TRAINER: i64 = 4000;

/// The first user of the held-out tasks; each chat gets the next one.
const FIRST_HELD_OUT_USER: i64 = 5001;

/// What the model's answer said when there was none, before the agent loop helped weak
/// models: no user may see it.
const EMPTY_PLACEHOLDER: &str = "(The model returned an empty answer.)";

/// The model the bot talks to, through the recorder.
pub(crate) struct Model {
    pub(crate) url: String,
    pub(crate) name: String,
    pub(crate) api_key: Option<String>,
    pub(crate) real: bool,
    /// How long one task may take.
    pub(crate) patience: Duration,
}

/// Where the held-out tasks are asked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Layout {
    Fresh,
    Chat,
}

/// Who approves what the bot learned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ReviewMode {
    /// `review = "none"`: the operator trusts the bot's own lessons.
    None,
    /// `review = "external"`, the default, with the benchmark approving as an admin would.
    Default,
}

/// What one invocation varies.
pub(crate) struct Setup {
    pub(crate) layout: Layout,
    pub(crate) review: ReviewMode,
    pub(crate) seed: u64,
    /// `llm.temperature`.
    pub(crate) temperature: f32,
    pub(crate) families: Vec<&'static Family>,
}

/// What one held-out task did.
#[derive(Clone)]
pub(crate) struct Outcome {
    pub(crate) family: &'static str,
    pub(crate) task: &'static str,
    pub(crate) right_form: bool,
    pub(crate) exact: bool,
    pub(crate) tool_errors: usize,
    pub(crate) llm_calls: usize,
    pub(crate) tokens: usize,
    pub(crate) block_tokens: usize,
    /// Estimated prompt tokens of the task's agent calls, and the block's share of them.
    pub(crate) prompt_estimate: usize,
    pub(crate) success: bool,
    pub(crate) honest: bool,
    /// Why the answer parrots, if it does.
    pub(crate) parroted: Option<String>,
    /// For a parroted answer, what the model was shown when it wrote it (see [`evidence`]).
    pub(crate) evidence: Vec<String>,
    pub(crate) answer: String,
    /// Every desk call of the task.
    pub(crate) calls: Vec<String>,
    /// Desk calls whose argument the model never wrote: the bot rewrote them to the form the
    /// tool taught (`learning::rewrite`).
    pub(crate) rewritten: usize,
}

/// A lesson in the store at the end of a run.
pub(crate) struct Lesson {
    pub(crate) text: String,
    pub(crate) tool: Option<String>,
    pub(crate) review: String,
    pub(crate) vague: bool,
}

/// What one run (learning on or off) did.
pub(crate) struct Run {
    /// In the order asked.
    pub(crate) outcomes: Vec<Outcome>,
    /// The first reflection's prompt and answer, for `--verbose`.
    pub(crate) reflection: Option<String>,
    pub(crate) lessons: Vec<Lesson>,
    pub(crate) wall: Duration,
}

/// A small, seeded pseudo-random sequence (SplitMix64): the task order a seed gives is the
/// same on every machine.
struct Shuffler(u64);

impl Shuffler {
    /// The next number of the sequence.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher-Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// A held-out task: its family, text and the first call it wants.
type Task = (&'static Family, &'static str, &'static str);

/// The held-out chats in the seed's order, each with its tasks in order.
fn plan(setup: &Setup) -> Vec<Vec<Task>> {
    let mut shuffler = Shuffler(setup.seed);
    match setup.layout {
        Layout::Fresh => {
            let mut tasks: Vec<Task> = setup
                .families
                .iter()
                .flat_map(|f| f.held_out.iter().map(move |(t, e)| (*f, *t, *e)))
                .collect();
            shuffler.shuffle(&mut tasks);
            tasks.into_iter().map(|t| vec![t]).collect()
        }
        Layout::Chat => {
            let mut chats: Vec<Vec<Task>> = setup
                .families
                .iter()
                .map(|f| f.held_out.iter().map(|(t, e)| (*f, *t, *e)).collect())
                .collect();
            shuffler.shuffle(&mut chats);
            for chat in &mut chats {
                shuffler.shuffle(chat);
            }
            chats
        }
    }
}

/// The bot, its fakes and its recorder, for one run.
struct Bench {
    desk: DeskServer,
    recorder: Recorder,
    tg: FakeTelegram,
    bot: heurist::Running,
    _dir: tempfile::TempDir,
    quiet: Duration,
    patience: Duration,
    review: ReviewMode,
    learning: bool,
}

/// Starts the bot for a run.
async fn start(model: &Model, setup: &Setup, learning: bool) -> Bench {
    let desk = DeskServer::start().await;
    let recorder = Recorder::start(&model.url, Some(setup.seed)).await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config(&tg, &recorder.url, dir.path());
    let users = (0..100u64)
        .map(|i| UserId(FIRST_HELD_OUT_USER as u64 + i))
        .chain((0..FAMILIES.len() as u64).map(|i| UserId(FIRST_TRAINER as u64 + i)));
    config.access.allowed_users.extend(users);
    config.models.truncate(1);
    config.models[0].id = model.name.clone();
    config.llm.api_key = model.api_key.clone();
    config.llm.temperature = setup.temperature;
    config.mcp.servers = vec![desk.entry()];
    // The shipped skills, as a deployment has them.
    config.learning.skills_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/skills").into();
    config.options.enabled = false;
    config.learning.reflect = learning;
    if setup.review == ReviewMode::None {
        config.learning.review = Review::None;
    }
    if model.real {
        config.llm.request_timeout_secs = 900;
        config.llm.max_concurrent = 2;
    }
    let bot = heurist::start(config).await.unwrap();
    Bench {
        desk,
        recorder,
        tg,
        bot,
        _dir: dir,
        quiet: if model.real {
            Duration::from_secs(3)
        } else {
            Duration::from_millis(300)
        },
        patience: model.patience,
        review: setup.review,
        learning,
    }
}

impl Bench {
    /// The running bot's app.
    fn app(&self) -> &heurist::App {
        self.bot.app()
    }

    /// Sends `task` to `chat` and waits for its answer; then, learning on, for what it
    /// taught (approved in the default review mode). Returns the answer and how many
    /// exchanges there were when it came.
    async fn ask(&self, chat: i64, task: &str) -> (String, usize) {
        let before = self.tg.messages_to(chat).len();
        self.tg.send_text(chat, task);
        let until = Instant::now() + self.patience;
        while self.tg.messages_to(chat).len() <= before {
            assert!(
                Instant::now() < until,
                "no answer to chat {chat} in {:?}",
                self.patience
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let exchanges = self.recorder.len();
        self.learn().await;
        // A long answer is split: the task's answer is all it sent, as the user reads it.
        let answer = self.tg.messages_to(chat)[before..]
            .iter()
            .map(|c| judge::plain_text(&c.text()))
            .collect::<Vec<_>>()
            .join("\n");
        (answer, exchanges)
    }

    /// Learning on: waits until no reflection has run for a moment, then approves what waits
    /// for review in the default mode.
    async fn learn(&self) {
        if !self.learning {
            tokio::time::sleep(Duration::from_millis(100)).await;
            return;
        }
        let mut idle_since = Instant::now();
        loop {
            if self.app().learning().reflections_running() > 0 {
                idle_since = Instant::now();
            } else if idle_since.elapsed() >= self.quiet {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.review == ReviewMode::Default {
            for listed in self.app().learning().listing(true) {
                self.app().learning().approve(listed.lesson.id).unwrap();
            }
        }
    }

    /// The lessons stored now.
    fn lesson_texts(&self) -> Vec<String> {
        self.app()
            .store()
            .learning()
            .lessons()
            .into_iter()
            .map(|h| h.text)
            .collect()
    }
}

/// How many of `calls` have a first argument that the model's replies that call a tool did
/// not write (in `tool_calls` or as text) up to the reply that made the call: the bot wrote
/// it in the tool's form. Only the replies up to it: Qwen repeats a call that worked, copying
/// the rewritten value from the conversation.
fn rewritten(calls: &[DeskCall], exchanges: &[Exchange]) -> usize {
    let replies: Vec<String> = exchanges
        .iter()
        .map(|e| &e.response["choices"][0]["message"])
        .filter(|m| {
            m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                || m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("\"name\""))
        })
        .map(Value::to_string)
        .collect();
    calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((i, c.arguments.as_object()?.values().next().cloned()?)))
        .filter(|(i, v)| {
            let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            // Whole tokens: `1500` is not written by a reply that wrote `15000`.
            !replies.iter().take(i + 1).any(|reply| {
                reply
                    .split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '-' | '_')))
                    .any(|token| token == value)
            })
        })
        .count()
}

/// The tokens of a text, roughly.
fn tokens_of(text: &str) -> usize {
    text.len() / 3
}

/// What learning added to a request: its block, in the user's message or the system prompt.
fn block_of(request: &Value) -> String {
    let asked = asked(request);
    let mut block = context_of(&asked).unwrap_or_default().to_string();
    for system in contents(request, "system") {
        if let Some(at) = system.find("[Context from Heurist") {
            block.push_str(&system[at..]);
        }
    }
    block
}

/// The skills' instructions, as shipped.
fn skill_texts() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/skills");
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path().join("SKILL.md")) {
            texts.push(text);
        }
    }
    texts
}

/// All the task texts of the benchmark: a user message that holds one is the user's.
fn is_users(message: &str) -> bool {
    FAMILIES.iter().any(|f| {
        f.train.iter().any(|t| message.contains(t))
            || f.held_out.iter().any(|(t, _)| message.contains(t))
    })
}

/// What the bot put in front of the model for a task: the system prompt, blocks, messages
/// it wrote in the user's place, tool messages (results, errors, hints), the stored lessons
/// and the skills.
fn injected(exchanges: &[Exchange], lessons: &[String], skills: &[String]) -> Vec<Injected> {
    let mut injected: Vec<Injected> = Vec::new();
    let mut add = |kind: &'static str, text: &str| {
        if !text.trim().is_empty() && !injected.iter().any(|i| i.text == text) {
            injected.push(Injected {
                kind,
                text: text.to_string(),
            });
        }
    };
    for e in exchanges {
        for message in e.request["messages"].as_array().into_iter().flatten() {
            let content = message["content"].as_str().unwrap_or_default();
            match message["role"].as_str().unwrap_or_default() {
                "system" => add("the system prompt", content),
                "tool" => add("a tool message", content),
                "user" if is_users(content) => {
                    add("the learned block", context_of(content).unwrap_or_default());
                }
                "user" => add("a message the bot added", content),
                _ => {}
            }
        }
    }
    for lesson in lessons {
        add("a stored lesson", lesson);
    }
    for skill in skills {
        add("a skill's instructions", skill);
    }
    injected
}

/// What the model was shown when it wrote an answer and what it wrote: the request's
/// messages after the system prompt (tool calls as `name(arguments)`), then the response, each
/// cut to 600 characters, so a parroted answer in a run's record says where its words came
/// from.
fn evidence(exchange: &Exchange) -> Vec<String> {
    let line = |message: &Value| {
        let calls: Vec<String> = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let f = &c["function"];
                format!(
                    "{}({})",
                    f["name"].as_str().unwrap_or_default(),
                    f["arguments"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let text = format!(
            "{}: {}{}",
            message["role"].as_str().unwrap_or_default(),
            message["content"].as_str().unwrap_or_default(),
            if calls.is_empty() {
                String::new()
            } else {
                format!(" [calls {}]", calls.join(", "))
            }
        );
        text.chars().take(600).collect::<String>()
    };
    exchange.request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system")
        .chain(std::iter::once(&exchange.response["choices"][0]["message"]))
        .map(line)
        .collect()
}

/// Judges one held-out task.
struct Judged<'a> {
    family: &'static Family,
    task: &'static str,
    expected: &'static str,
    answer: String,
    calls: &'a [DeskCall],
    exchanges: Vec<Exchange>,
}

impl Judged<'_> {
    /// The task's outcome, judged against what the bot injected, what an answer may
    /// restate and the chat's earlier answers.
    fn outcome(self, injected: &[Injected], allowed: &[String], earlier: &[String]) -> Outcome {
        let offered: Vec<String> = self
            .exchanges
            .iter()
            .flat_map(|e| offered_tools(&e.request))
            .collect();
        let (right_form, exact) = first_call_checks(self.family, self.expected, self.calls);
        let block = self
            .exchanges
            .first()
            .map_or(0, |e| tokens_of(&block_of(&e.request)));
        let prompt_estimate = self
            .exchanges
            .iter()
            .map(|e| {
                tokens_of(&e.request["messages"].to_string())
                    + tokens_of(&e.request["tools"].to_string())
            })
            .sum();
        let tokens = self
            .exchanges
            .iter()
            .map(|e| {
                e.response["usage"]["total_tokens"].as_u64().map_or_else(
                    || tokens_of(&e.request.to_string()) + tokens_of(&e.response.to_string()),
                    |t| t as usize,
                )
            })
            .sum();
        let honest = !self.answer.trim().is_empty() && !self.answer.contains(EMPTY_PLACEHOLDER);
        let called: Vec<String> = self
            .calls
            .iter()
            .filter(|c| c.error.is_none())
            .map(|c| format!("desk__{}", c.tool))
            .collect();
        let keys = |call: &DeskCall| -> Option<BTreeSet<String>> {
            let keys: BTreeSet<String> = call.arguments.as_object()?.keys().cloned().collect();
            (!keys.is_empty()).then_some(keys)
        };
        let worked_keys: Vec<BTreeSet<String>> = self
            .calls
            .iter()
            .filter(|c| c.error.is_none())
            .filter_map(keys)
            .collect();
        let failed_keys: Vec<BTreeSet<String>> = self
            .calls
            .iter()
            .filter(|c| c.error.is_some())
            .filter_map(keys)
            .filter(|k| !worked_keys.contains(k))
            .collect();
        let model_answers: Vec<String> = self
            .exchanges
            .iter()
            .filter_map(|e| e.response["choices"][0]["message"]["content"].as_str())
            .map(str::to_string)
            .collect();
        let shown: Vec<String> = self
            .exchanges
            .iter()
            .flat_map(|e| judge::shown_texts(&e.request))
            .collect();
        let cx = judge::Context {
            injected,
            allowed,
            earlier_answers: earlier,
            question: self.task,
            offered_tools: &offered,
            called_tools: &called,
            failed_keys: &failed_keys,
            model_answers: &model_answers,
            shown: &shown,
        };
        let parroted = if honest {
            judge::parroted(&self.answer, &cx)
        } else {
            None
        };
        let evidence = match (&parroted, self.exchanges.last()) {
            (Some(_), Some(last)) => evidence(last),
            _ => Vec::new(),
        };
        Outcome {
            family: self.family.name,
            task: self.task,
            right_form,
            exact,
            tool_errors: self.calls.iter().filter(|c| c.error.is_some()).count(),
            rewritten: rewritten(self.calls, &self.exchanges),
            llm_calls: self.exchanges.len(),
            tokens,
            block_tokens: block * self.exchanges.len(),
            prompt_estimate,
            success: succeeded(self.family, self.expected, &self.answer, self.calls),
            honest,
            parroted,
            evidence,
            calls: self
                .calls
                .iter()
                .map(|c| {
                    let failed = if c.error.is_some() { " ✗" } else { "" };
                    format!("{}({}){failed}", c.tool, c.arguments)
                })
                .collect(),
            answer: self.answer,
        }
    }
}

/// Training: each family's tasks in a chat of their own, Alice's first.
async fn train(bench: &Bench, families: &[&'static Family]) {
    for (n, family) in families.iter().enumerate() {
        let trainer = if n == 0 {
            ALICE
        } else {
            FIRST_TRAINER + n as i64
        };
        for task in family.train {
            bench.ask(trainer, task).await;
        }
    }
}

/// The held-out tasks, judged one by one.
async fn held_out(bench: &Bench, setup: &Setup) -> Vec<Outcome> {
    let skills = skill_texts();
    let mut outcomes = Vec::new();
    for (n, chat) in plan(setup).into_iter().enumerate() {
        let user = FIRST_HELD_OUT_USER + n as i64;
        let mut earlier: Vec<String> = Vec::new();
        for (family, task, expected) in chat {
            let calls_before = bench.desk.calls().len();
            let exchanges_before = bench.recorder.len();
            // What could be injected: the lessons stored before the task, not what it taught.
            let lessons = bench.lesson_texts();
            let (answer, exchanges_after) = bench.ask(user, task).await;
            let all_calls = bench.desk.calls();
            let exchanges: Vec<Exchange> = bench.recorder.exchanges()
                [exchanges_before..exchanges_after]
                .iter()
                .filter(|e| !is_reflection_request(&e.request) && !is_options_request(&e.request))
                .cloned()
                .collect();
            let injected = injected(&exchanges, &lessons, &skills);
            let allowed: Vec<String> = FAMILIES
                .iter()
                .flat_map(|f| f.train.iter().chain(f.held_out.iter().map(|(t, _)| t)))
                .map(|t| t.to_string())
                .chain(
                    all_calls
                        .iter()
                        .filter(|c| c.error.is_none())
                        .map(|c| c.reply.clone()),
                )
                .chain(judge::results_that_worked(
                    exchanges.iter().map(|e| &e.request),
                ))
                .collect();
            let judged = Judged {
                family,
                task,
                expected,
                answer: answer.clone(),
                calls: &all_calls[calls_before..],
                exchanges,
            };
            outcomes.push(judged.outcome(&injected, &allowed, &earlier));
            earlier.push(answer);
        }
    }
    outcomes
}

/// One run with learning on or off.
pub(crate) async fn run(model: &Model, setup: &Setup, learning: bool) -> Run {
    let started = Instant::now();
    let bench = start(model, setup, learning).await;
    train(&bench, &setup.families).await;
    let outcomes = held_out(&bench, setup).await;
    let exchanges = bench.recorder.exchanges();
    let tools: Vec<String> = exchanges
        .iter()
        .flat_map(|e| offered_tools(&e.request))
        .fold(Vec::new(), |mut all, t| {
            if !all.contains(&t) {
                all.push(t);
            }
            all
        });
    let lessons = bench
        .app()
        .store()
        .learning()
        .lessons()
        .into_iter()
        .map(|h| Lesson {
            vague: judge::vague(&h.text, &tools),
            text: h.text,
            tool: h.tool,
            review: format!("{:?}", h.review),
        })
        .collect();
    let Bench { bot, tg, .. } = bench;
    bot.stop().await;
    drop(tg);
    if let Ok(path) = std::env::var("HEURIST_BENCH_DUMP") {
        dump(&path, &exchanges, learning);
    }
    let reflection = exchanges
        .iter()
        .find(|e| is_reflection_request(&e.request))
        .map(|e| {
            format!(
                "{}\n--- answered: {}",
                asked(&e.request),
                e.response["choices"][0]["message"]["content"]
            )
        });
    Run {
        outcomes,
        reflection,
        lessons,
        wall: started.elapsed(),
    }
}

/// Appends every exchange with the model to `path`, a JSON line each.
fn dump(path: &str, exchanges: &[Exchange], learning: bool) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for e in exchanges {
        let line =
            serde_json::json!({"learning": learning, "request": e.request, "response": e.response});
        writeln!(file, "{line}").unwrap();
    }
}

/// Held-out tasks that went worse with learning on than off: success off, failure on.
pub(crate) fn harmed(on: &Run, off: &Run) -> Vec<(&'static str, &'static str)> {
    let off_success: HashMap<&str, bool> =
        off.outcomes.iter().map(|o| (o.task, o.success)).collect();
    on.outcomes
        .iter()
        .filter(|o| !o.success && off_success.get(o.task).copied().unwrap_or(false))
        .map(|o| (o.family, o.task))
        .collect()
}

/// The family whose desk tool a lesson is about, from the bot's name of it
/// (`desk__stock_level`).
pub(crate) fn family_of_tool(tool: Option<&str>) -> Option<&'static str> {
    let tool = tool?.rsplit("__").next()?;
    FAMILIES
        .iter()
        .find(|f| f.tools.contains(&tool))
        .map(|f| f.name)
}
