//! Does learning transfer? Heuristics learned from tasks must reach the later tasks they fit,
//! and only those, at a store size a busy bot reaches.
//!
//! 1. Twenty-two task families with distinct vocabularies. Each is learned once through the
//!    real bot: a user's task in the family is answered, the (fake) model's reflection names
//!    the family's lesson, and the bot stores it (dedupe, trust and capacity rules included).
//! 2. 1,000 distractor heuristics on unrelated subjects are learned on top (through
//!    `Learning::learn`, the code a reflection ends in), written with the generic words
//!    advice uses ("check", "first", "answer", "explain"...).
//! 3. Three fresh tasks per family, from another user, each a new question on the topic. The
//!    agent request the bot sends is read: which heuristics its prompt carried.
//!
//! Reported: hit rate (the family's lesson was injected), irrelevant heuristics per turn (any
//! other), preamble tokens per turn (the injected block), and retrieval time at 2,000 and
//! 20,000 stored heuristics (`Learning::retrieve`, the per-turn work).
//!
//! `cargo bench --bench learning` runs it (about a minute on 2 cores); `-- --smoke` a small
//! version that CI runs with the goals checked, so it cannot rot.

// A benchmark's scenario may read longer than a production function (Cargo.toml's `[lints]` hold
// `clippy::too_many_lines` for production code; unit tests are exempt alike in src/lib.rs).
#![allow(clippy::too_many_lines)]

#[path = "../tests/e2e/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use heurist::learning::Source;
use heurist::learning::lessons::NewLesson;
use heurist::learning::text::text_similarity;
use heurist::llm::{ChatMessage, estimate_tokens};
use serde_json::{Value, json};
use support::{ALICE, BOB, FakeLlm, Harness, Reply, is_options_request, is_reflection_request};

struct Family {
    learn_task: &'static str,
    lesson: &'static str,
    fresh: [&'static str; 3],
}

const FAMILIES: &[Family] = &[
    Family {
        learn_task: "Convert 9am Berlin time to Tokyo time for a call",
        lesson: "Confirm both time zones and daylight saving before converting a meeting time",
        fresh: [
            "What time is 3pm New York in London for our meeting?",
            "Convert 18:00 CET to Pacific time",
            "Which time zone offset does Sydney have in March?",
        ],
    },
    Family {
        learn_task: "Convert my cake recipe from cups to grams",
        lesson: "Give recipe quantities in grams and cups, and oven temperatures in Celsius and Fahrenheit",
        fresh: [
            "How many grams is two cups of flour in a recipe?",
            "What oven temperature in Fahrenheit is 180 Celsius?",
            "Scale this pancake recipe up for six people",
        ],
    },
    Family {
        learn_task: "How do I undo my last git commit?",
        lesson: "Before suggesting git reset or revert, ask whether the commit was already pushed",
        fresh: [
            "git revert or reset for a commit I pushed yesterday?",
            "How do I remove a commit from my git branch?",
            "Undo a git rebase that went wrong",
        ],
    },
    Family {
        learn_task: "Write a SQL query for monthly sales totals",
        lesson: "Ask which database engine runs the SQL: date functions and LIMIT syntax differ",
        fresh: [
            "SQL query for the top 5 customers by revenue",
            "How do I select rows from last week in SQL?",
            "Paginate SQL results with LIMIT and OFFSET",
        ],
    },
    Family {
        learn_task: "pip install fails with a version conflict",
        lesson: "For Python dependency conflicts after pip installs or upgrades, use a virtual environment and pinned package requirements",
        fresh: [
            "How should I manage Python dependencies for a new project?",
            "ImportError after upgrading packages with pip",
            "Two Python packages need different versions of the same dependency",
        ],
    },
    Family {
        learn_task: "Write a regex that matches dates like 2024-01-31",
        lesson: "Test a regex against edge cases and explain what each group of the regex captures",
        fresh: [
            "Regex to match phone-like strings with dashes",
            "Why does my regex match too much text?",
            "Explain the groups in this regex: (\\w+)@(\\w+)",
        ],
    },
    Family {
        learn_task: "Plan my trip to Canada next month",
        lesson: "Check passport validity and visa rules of the destination before planning an international trip",
        fresh: [
            "Do I need a visa for a trip to Brazil?",
            "My passport expires in four months, can I still travel abroad?",
            "What documents do I need for an international trip to Japan?",
        ],
    },
    Family {
        learn_task: "Make me a workout plan for the gym",
        lesson: "Ask about injuries and current fitness before suggesting a workout plan",
        fresh: [
            "A workout plan to build strength at home",
            "Beginner workout with a sore knee",
            "Three-day workout routine to improve my fitness",
        ],
    },
    Family {
        learn_task: "Write an email to my landlord about the broken heating",
        lesson: "In a professional email, state the purpose in the first sentence and end with one clear request",
        fresh: [
            "Draft an email asking my manager for a raise",
            "Write a professional email to a client about a delayed delivery",
            "An email declining a job offer politely",
        ],
    },
    Family {
        learn_task: "My Docker container exits immediately after start",
        lesson: "When a Docker container exits, read its logs and check the entrypoint before changing the image",
        fresh: [
            "Docker container keeps restarting in a loop",
            "docker compose service exits with code 1",
            "How do I debug a container that stops right away in Docker?",
        ],
    },
    Family {
        learn_task: "Help me make a monthly budget",
        lesson: "Split a monthly budget into needs, wants and savings, with the percentage of each",
        fresh: [
            "Budget for 3000 euros a month with rent and groceries",
            "How much of my salary should go to savings each month?",
            "Make a budget that lets me pay off a loan",
        ],
    },
    Family {
        learn_task: "Rust says my borrowed value does not live long enough",
        lesson: "For Rust borrow checker errors, quote the error code and show the smallest change that satisfies the lifetimes",
        fresh: [
            "How do I fix error E0502 in Rust, cannot borrow as mutable?",
            "Lifetime error when returning a reference from a Rust function",
            "The borrow checker rejects my loop over a vector",
        ],
    },
    Family {
        learn_task: "Why are my houseplant leaves turning yellow?",
        lesson: "Ask about light and watering before diagnosing yellow or drooping leaves on a houseplant",
        fresh: [
            "My monstera leaves have brown spots",
            "How often should I water a houseplant in winter?",
            "The leaves of my basil plant are drooping",
        ],
    },
    Family {
        learn_task: "What is 15 percent of 240?",
        lesson: "When computing a percentage or an average, show the formula and then the numbers substituted",
        fresh: [
            "Percentage increase from 80 to 100?",
            "Average of 3, 8 and 10",
            "What percent of 50 is 12?",
        ],
    },
    Family {
        learn_task: "Excel formula to add up a column",
        lesson: "Name the spreadsheet function and give a formula example with cell references",
        fresh: [
            "Spreadsheet formula to count unique values in column A",
            "How do I use VLOOKUP in an Excel sheet?",
            "Google Sheets function to join text from two cells",
        ],
    },
    Family {
        learn_task: "Improve my resume for a developer job",
        lesson: "Tailor a resume to the job ad: mirror its keywords and quantify each achievement",
        fresh: [
            "What should my resume say for a marketing job?",
            "How do I list achievements on a resume?",
            "Rewrite my resume summary for a data analyst job ad",
        ],
    },
    Family {
        learn_task: "My domain stopped resolving after I changed DNS",
        lesson: "For DNS problems, check the record type, the TTL and propagation before changing settings",
        fresh: [
            "How long does DNS propagation take?",
            "Which DNS record does a mail server need?",
            "DNS lookup still shows the old address for my domain",
        ],
    },
    Family {
        learn_task: "How should I pick a good password?",
        lesson: "Recommend a password manager and a unique passphrase per account, never a reused password",
        fresh: [
            "Is it fine to reuse one password everywhere?",
            "How do I store my passwords safely?",
            "Ideas for a strong passphrase",
        ],
    },
    Family {
        learn_task: "How do I train my dog to sit?",
        lesson: "Ask the dog's age and breed before giving training advice",
        fresh: [
            "My dog pulls on the leash on walks",
            "Training a puppy to stop biting",
            "How do I stop my dog barking at visitors?",
        ],
    },
    Family {
        learn_task: "How much does a car service cost?",
        lesson: "Ask the car model and mileage before estimating maintenance costs",
        fresh: [
            "When should I change the oil of my car?",
            "Car brake pads replacement cost",
            "Maintenance schedule for a car at 60000 km mileage",
        ],
    },
    Family {
        learn_task: "Teach me some Italian words",
        lesson: "When teaching vocabulary of a language, give each word with an example sentence and its pronunciation",
        fresh: [
            "Teach me basic Spanish vocabulary for greetings",
            "How do I pronounce these French words?",
            "Useful German vocabulary for a restaurant",
        ],
    },
    Family {
        learn_task: "Why are my photos blurry?",
        lesson: "Explain photo exposure through aperture, shutter speed and ISO together",
        fresh: [
            "Which aperture for portrait photos?",
            "Night photos come out dark, what ISO should I use?",
            "Shutter speed for sharp photos of running kids",
        ],
    },
];

/// Subjects of distractor heuristics: none is what a family's tasks are about.
const SUBJECTS: &[&str] = &[
    "sonnets",
    "glaciers",
    "mosaics",
    "falconry",
    "tapestries",
    "lighthouses",
    "calligraphy",
    "beekeeping",
    "canals",
    "sundials",
    "harpsichords",
    "windmills",
    "monasteries",
    "quilts",
    "meteorites",
    "cathedrals",
    "fjords",
    "totems",
    "pagodas",
    "caravans",
    "amphorae",
    "archery",
    "bonsai",
    "cartography",
    "dominoes",
    "embroidery",
    "fencing",
    "gondolas",
    "heraldry",
    "igloos",
    "juggling",
    "kites",
    "lacrosse",
    "marionettes",
    "nebulae",
    "opera",
    "parchment",
    "quarries",
    "rowing",
    "sculpture",
    "tundra",
    "unicycles",
    "vineyards",
    "weaving",
    "xylophones",
    "yurts",
    "ziggurats",
    "abacus",
    "bagpipes",
    "compasses",
    "dunes",
    "etchings",
    "ferns",
    "geysers",
    "hieroglyphs",
    "icebergs",
    "jade",
    "kayaks",
    "lutes",
    "mazes",
    "novellas",
    "oases",
    "pyramids",
    "quills",
    "reefs",
    "satellites",
    "tiaras",
    "urns",
    "volleyball",
    "wrestling",
    "yodeling",
    "zeppelins",
    "astrolabes",
    "barometers",
    "chandeliers",
    "dirigibles",
    "easels",
    "frescoes",
    "gargoyles",
    "hammocks",
    "inkwells",
    "jousting",
    "kilns",
    "lanterns",
    "minarets",
    "nomads",
    "obelisks",
    "puppetry",
    "runes",
    "saddles",
    "tambourines",
    "umbrellas",
    "viaducts",
    "waterfalls",
    "aqueducts",
    "bridges",
    "catapults",
    "druids",
    "eclipses",
    "folklore",
];

/// Generic advice, as real reflections word it, around two subjects.
const TEMPLATES: &[&str] = &[
    "When asked about {a} and {b}, give the short answer first",
    "For questions on {a}, check the facts about {b} before answering",
    "Explain {a} step by step, then relate it to {b}",
    "List the main kinds of {a} first, then mention {b}",
    "Always ask what the user already knows about {a} or {b}",
    "Give one concrete example of {a} next to {b}",
    "Keep answers about {a} brief and cite where {b} facts come from",
    "Compare {a} with {b} in a short table",
    "Start with the history of {a}, then describe {b}",
    "Check which region the user means before discussing {a} or {b}",
];

/// The distractor heuristics: `count` texts about two of the real `SUBJECTS` each, none the
/// same lesson as another by the bot's own dedupe rule (word-set Jaccard 0.8), so every one is
/// stored.
fn distractors(count: usize) -> Vec<String> {
    let mut by_template: Vec<Vec<String>> = vec![Vec::new(); TEMPLATES.len()];
    let mut out = Vec::with_capacity(count);
    let n = SUBJECTS.len();
    'outer: for offset in 1..n {
        for (i, a) in SUBJECTS.iter().enumerate() {
            let t = (i + offset) % TEMPLATES.len();
            let text = TEMPLATES[t]
                .replace("{a}", a)
                .replace("{b}", SUBJECTS[(i + offset) % n]);
            if by_template[t]
                .iter()
                .any(|known| text_similarity(known, &text) >= 0.8)
            {
                continue;
            }
            by_template[t].push(text.clone());
            out.push(text);
            if out.len() == count {
                break 'outer;
            }
        }
    }
    out
}

/// `count` heuristics about made-up subjects, two of their own each, for a store larger than
/// the real subjects can fill.
fn made_up_distractors(count: usize) -> Vec<String> {
    let subjects = made_up_subjects(2 * count);
    (0..count)
        .map(|k| {
            TEMPLATES[k % TEMPLATES.len()]
                .replace("{a}", &subjects[2 * k])
                .replace("{b}", &subjects[2 * k + 1])
        })
        .collect()
}

/// Made-up subject words (`zorvakipli`, ...), distinct, as many as asked (up to 331,776).
fn made_up_subjects(count: usize) -> Vec<String> {
    const SYLLABLES: &[&str] = &[
        "zor", "va", "ki", "pli", "me", "tu", "dra", "so", "ne", "gu", "fa", "lo", "bri", "xe",
        "qua", "mi", "ta", "ru", "sel", "po", "ka", "vin", "do", "ly",
    ];
    let n = SYLLABLES.len();
    (0..count)
        .map(|i| {
            format!(
                "{}{}{}{}",
                SYLLABLES[i % n],
                SYLLABLES[(i / n) % n],
                SYLLABLES[(i / (n * n)) % n],
                SYLLABLES[(i / (n * n * n)) % n]
            )
        })
        .collect()
}

fn entry(text: &str) -> NewLesson {
    serde_json::from_value(json!({"text": text, "skill_name": null})).unwrap()
}

fn last_user(request: &Value) -> String {
    support::last_user_text(request)
}

/// The heuristics a request's user message carries, and the length of the learned block.
fn injected(request: &Value, task: &str) -> (Vec<String>, usize) {
    let content = last_user(request);
    let block = content.len().saturating_sub(task.len());
    let Some(section) = content.split("## Learned Heuristics\n").nth(1) else {
        return (Vec::new(), block);
    };
    let lines = section
        .lines()
        .map_while(|line| line.strip_prefix("- "))
        .map(str::to_string)
        .collect();
    (lines, block)
}

struct Transfer {
    turns: usize,
    hits: usize,
    irrelevant: usize,
    preamble_tokens: usize,
    stored: usize,
    misses: Vec<String>,
}

/// Learns each family once through the bot, adds the distractors, asks the fresh tasks.
async fn transfer(families: &[Family], distractor_count: usize) -> Transfer {
    let lessons: Vec<(&'static str, &'static str)> =
        families.iter().map(|f| (f.learn_task, f.lesson)).collect();
    let llm = FakeLlm::start(move |req, _| {
        if is_reflection_request(req) {
            let prompt = last_user(req);
            let lesson = lessons
                .iter()
                .find(|(task, _)| prompt.contains(&format!("Task summary: {task}")))
                .map(|(_, lesson)| *lesson);
            let heuristics: Vec<Value> = lesson
                .into_iter()
                .map(|text| json!({"text": text, "skill_name": null}))
                .collect();
            Reply::text(&json!({ "heuristics": heuristics }).to_string())
        } else if is_options_request(req) {
            Reply::text(r#"{"options": []}"#)
        } else {
            // An answer of its own to each task: the same one again would be parroted.
            Reply::text(&format!("Here is my answer to: {}", last_user(req)))
        }
    })
    .await;
    let h = Harness::start_with(llm, |c| {
        c.limits.turns_per_minute = 0;
        c.telegram.chat_interval_ms = 0;
        // This measures retrieval: the fake's lessons come from no evidence (the grounding
        // gate is measured by the benefit benchmark and its own tests).
        c.learning.grounded_only = false;
    })
    .await;
    for (i, family) in families.iter().enumerate() {
        h.tg.send_text(ALICE, family.learn_task);
        h.tg.wait_messages(ALICE, i + 1).await;
        h.tg.wait_for(|_| (h.app().store().learning().lessons().len() > i).then_some(()))
            .await;
    }
    let source = Source {
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        skills: Vec::new(),
        tools: Vec::new(),
        given: Vec::new(),
    };
    for chunk in distractors(distractor_count).chunks(3) {
        let entries = chunk.iter().map(|t| entry(t)).collect();
        h.app().learning().learn(entries, &source).await.unwrap();
    }
    let stored = h.app().store().learning().lessons().len();
    let mut figures = Transfer {
        turns: 0,
        hits: 0,
        irrelevant: 0,
        preamble_tokens: 0,
        stored,
        misses: Vec::new(),
    };
    for family in families {
        for task in family.fresh {
            figures.turns += 1;
            h.tg.send_text(BOB, task);
            h.tg.wait_messages(BOB, figures.turns).await;
            let request = h
                .llm
                .agent_requests()
                .into_iter()
                .find(|r| last_user(r).ends_with(task))
                .expect("the task's agent request");
            let (carried, block) = injected(&request, task);
            if carried.iter().any(|c| c == family.lesson) {
                figures.hits += 1;
            } else {
                figures.misses.push(format!("{task} → {carried:?}"));
            }
            figures.irrelevant += carried.iter().filter(|c| *c != family.lesson).count();
            let preamble: String = "x".repeat(block);
            figures.preamble_tokens += estimate_tokens(&[ChatMessage::user(preamble)]);
        }
    }
    h.stop().await;
    figures
}

/// Mean and p99 time of one retrieval at a store of `size` heuristics.
async fn retrieval_time(size: usize) -> (Duration, Duration) {
    let tg = support::FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = support::config(&tg, "http://127.0.0.1:9/v1", dir.path());
    let store = heurist::store::Store::open_with_cache(dir.path(), 8 << 20).unwrap();
    let llm = heurist::llm::LlmClient::new(&config.llm).unwrap();
    let mut learning_config = config.learning.clone();
    learning_config.max_lessons = size + 100;
    let ledger = heurist::budget::Ledger::new(&config, store.clone());
    let learning =
        heurist::learning::Learning::new(learning_config, &config.llm, store, llm, ledger);
    let source = Source::default();
    let mut texts: Vec<String> = FAMILIES.iter().map(|f| f.lesson.to_string()).collect();
    texts.extend(made_up_distractors(size - texts.len()));
    for chunk in texts.chunks(500) {
        learning
            .learn(chunk.iter().map(|t| entry(t)).collect(), &source)
            .await
            .unwrap();
    }
    let stored = learning.listing(false).len();
    assert!(stored * 10 >= size * 9, "only {stored} of {size} stored");
    let queries: Vec<&str> = FAMILIES.iter().flat_map(|f| f.fresh).collect();
    let mut times = Vec::new();
    for _ in 0..10 {
        for query in &queries {
            let start = Instant::now();
            std::hint::black_box(learning.retrieve(query, None, &[]));
            times.push(start.elapsed());
        }
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    (mean, times[times.len() * 99 / 100])
}

#[tokio::main]
async fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let (families, distractor_count, sizes): (&[Family], usize, &[usize]) = if smoke {
        (&FAMILIES[..6], 200, &[500])
    } else {
        (FAMILIES, 1000, &[2000, 20_000])
    };
    let t = transfer(families, distractor_count).await;
    let turns = t.turns as f64;
    let hit_rate = t.hits as f64 / turns;
    let irrelevant = t.irrelevant as f64 / turns;
    let preamble = t.preamble_tokens as f64 / turns;
    println!(
        "Transfer: {} families learned once each, {} heuristics stored in all, {} fresh tasks",
        families.len(),
        t.stored,
        t.turns
    );
    println!("| hit rate | irrelevant heuristics per turn | preamble tokens per turn |");
    println!("|---|---|---|");
    println!(
        "| {:.1}% ({}/{}) | {irrelevant:.2} | {preamble:.0} |",
        hit_rate * 100.0,
        t.hits,
        t.turns
    );
    for miss in &t.misses {
        println!("  missed: {miss}");
    }
    println!();
    println!("| stored heuristics | retrieval mean | retrieval p99 |");
    println!("|---|---|---|");
    for &size in sizes {
        let (mean, p99) = retrieval_time(size).await;
        println!(
            "| {size} | {:.3} ms | {:.3} ms |",
            mean.as_secs_f64() * 1000.0,
            p99.as_secs_f64() * 1000.0
        );
    }
    if smoke {
        assert!(hit_rate >= 0.95, "hit rate {hit_rate}");
        assert!(irrelevant <= 0.5, "irrelevant per turn {irrelevant}");
        assert!(preamble <= 400.0, "preamble tokens {preamble}");
        println!("\n1 passed, 0 failed");
    }
}
