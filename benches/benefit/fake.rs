//! The fake model, used without `HEURIST_BENCH_LLM_URL`: it follows lessons and learns from
//! evidence, which proves the plumbing (evidence → reflection → gates → storage → retrieval →
//! prompt), never a model's quality.
//!
//! It writes an argument in the house form when what it reads this turn (the system prompt,
//! the user's message with any block in front of it, the turn's tool results) tells the form,
//! and fixes a refused call the same way, since the desk's errors tell it too. Its answers are
//! the tool's result, or an honest failure: never injected text. Its reflection turns each
//! failed call's error into a lesson, and a user's insistence on °F, and adds two of the vague
//! lessons small models write (Qwen2.5-Coder-1.5B's among them), which must not be stored.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use heurist::learning::without_context;
use serde_json::{Value, json};

use crate::exchange::{asked, contents, this_turn};
use crate::families::{Family, family_of};
use crate::support::desk;
use crate::support::{FakeLlm, Reply, is_options_request, is_reflection_request};

/// Vague lessons: the first two are issue 34's (Qwen2.5-Coder-1.5B, stored by the quality
/// gate of then), the next two an earlier run's, the rest new wordings of the same nothing.
const VAGUE: &[&str] = &[
    "When the tool reports an error, change the arguments to ensure the SKU is correctly formatted.",
    "When the tool fails repeatedly with the same error, consider changing the SKU or using a different tool.",
    "Use the correct tool: ensure you are using the correct tool to check the status",
    "Verify the id is correct",
    "When a tool returns an error, read the error message carefully and adjust the arguments accordingly.",
    "Always double-check the format of the arguments before calling the tool.",
    "When the weight is rejected, make sure it is given in the unit the tool expects.",
];

/// Whether the fake parrots its held-out answers (`--smoke` checks the judge catches them).
static PARROT: AtomicBool = AtomicBool::new(false);

/// Makes the fake answer held-out tasks the way issue 34 saw a small model do: with the first
/// lesson of the block, else the chat's last answer, else a described call of a tool.
pub(crate) fn parrot(on: bool) {
    PARROT.store(on, Ordering::SeqCst);
}

/// Starts the fake on 127.0.0.1.
pub(crate) async fn start() -> FakeLlm {
    FakeLlm::start(|request, _| {
        if is_reflection_request(request) {
            reflection_reply(request)
        } else if is_options_request(request) {
            Reply::text(r#"{"options": []}"#)
        } else {
            agent_reply(request)
        }
    })
    .await
}

/// What in a prompt tells the fake each family's convention.
fn knows(family: &Family, read: &str) -> bool {
    match family.name {
        "ticket ids" => read.contains("TCK-"),
        "booking dates" => read.contains("DD.MM.YYYY"),
        "stock SKUs" => read.contains("item number as six digits"),
        "shipping grams" => read.contains("whole grams"),
        "lock before deploy" => read.contains("call lock"),
        _ => read.contains("Fahrenheit") || read.contains("°F"),
    }
}

/// The words of a task.
fn words(task: &str) -> Vec<&str> {
    task.split(|c: char| c.is_whitespace() || c == '?' || c == ':' || c == ',')
        .filter(|w| !w.is_empty())
        .collect()
}

/// The argument a naive model passes: the task's number, date, weight, service or city.
fn naive_argument(family: &Family, task: &str) -> Value {
    let words = words(task);
    let number = || {
        words
            .iter()
            .find(|w| w.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or(&"1")
            .to_string()
    };
    match family.name {
        "ticket ids" | "stock SKUs" => number().into(),
        "booking dates" => words
            .iter()
            .find(|w| w.contains('-'))
            .unwrap_or(&"")
            .to_string()
            .into(),
        // The kilograms, as the number they are.
        "shipping grams" => words
            .iter()
            .find_map(|w| w.parse::<f64>().ok())
            .map_or(Value::Null, |kg| json!(kg)),
        "lock before deploy" => {
            let at = words.iter().position(|w| *w == "service").unwrap_or(1);
            words[at.saturating_sub(1)].into()
        }
        _ => words
            .iter()
            .find(|w| {
                w.chars().next().is_some_and(char::is_uppercase)
                    && !["What's", "How", "Tell", "No"].contains(w)
            })
            .unwrap_or(&"Paris")
            .to_string()
            .into(),
    }
}

/// The argument in the house form.
fn house_form(family: &Family, naive: &Value) -> Value {
    let text = naive.as_str().unwrap_or_default();
    match family.name {
        "ticket ids" => desk::ticket_id(text).into(),
        "booking dates" => desk::house_date(text).unwrap_or_default().into(),
        "stock SKUs" => desk::house_sku(text).into(),
        "shipping grams" => naive
            .as_f64()
            .map_or(Value::Null, |kg| json!((kg * 1000.0).round() as u64)),
        _ => naive.clone(),
    }
}

/// A tool call, with an id unique in the process.
fn call(tool: &str, key: &str, value: &Value) -> Reply {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Reply::tool_call(
        &format!("call-{n}"),
        &format!("desk__{tool}"),
        json!({ key: value }),
    )
}

/// A tool result without the bot's data delimiters, on one line.
fn result_text(result: &str) -> String {
    result
        .lines()
        .filter(|line| !line.contains("<<<") && !line.contains(">>>") && !line.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The fake's next step in a task: a call, or the answer.
fn agent_reply(request: &Value) -> Reply {
    let asked = asked(request);
    let task = without_context(&asked);
    let Some(family) = family_of(task) else {
        return Reply::text("Done.");
    };
    let turn = this_turn(request);
    let held_out = family.held_out.iter().any(|(t, _)| *t == task);
    if PARROT.load(Ordering::SeqCst) && held_out && !turn.is_empty() {
        return parroted(request, &asked);
    }
    let results: Vec<&str> = turn
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let read: String = contents(request, "system")
        .chain([asked.as_str()])
        .chain(turn.iter().filter_map(|m| m["content"].as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    let told = knows(family, &read);
    let naive = naive_argument(family, task);
    let naive_text = naive
        .as_str()
        .map_or_else(|| naive.to_string(), str::to_string);
    let last = results.last().copied().unwrap_or_default();
    // The bot marks a failed call's result so.
    let failed = last.starts_with("error: ");
    let last = result_text(last);
    match family.name {
        "temperatures in °F" => weather_reply(task, &naive_text, told, results.len(), &last),
        "lock before deploy" => match results.len() {
            0 if told => call("lock", "service", &naive),
            0 => call("deploy", "service", &naive),
            _ if last.contains("not locked") => call("lock", "service", &naive),
            _ if last.contains("Locked") => call("deploy", "service", &naive),
            _ => Reply::text(&last),
        },
        _ => {
            let (tool, key) = match family.name {
                "ticket ids" => ("ticket", "id"),
                "booking dates" => ("booking", "date"),
                "stock SKUs" => ("stock_level", "sku"),
                _ => ("shipping_quote", "weight"),
            };
            match results.len() {
                0 if told => call(tool, key, &house_form(family, &naive)),
                0 => call(tool, key, &naive),
                1 | 2 if failed && told => call(tool, key, &house_form(family, &naive)),
                _ if failed => Reply::text(&format!("Sorry, I could not look up {naive_text}.")),
                _ => Reply::text(&last),
            }
        }
    }
}

/// A parroted answer: the block's first lesson, else the chat's last answer, else a call
/// described instead of made.
fn parroted(request: &Value, asked: &str) -> Reply {
    let lesson = heurist::learning::block::context_of(asked)
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("- ")));
    let last_answer = contents(request, "assistant")
        .filter(|c| !c.trim().is_empty())
        .last();
    Reply::text(
        lesson
            .or(last_answer)
            .unwrap_or("To look that up, call desk__ticket with the id."),
    )
}

/// The weather: one call, then the answer, with °F when the fake was told to.
fn weather_reply(task: &str, city: &str, told: bool, results: usize, last: &str) -> Reply {
    if task.starts_with("No,") {
        return Reply::text("Paris: 16 °C (61 °F), light rain.");
    }
    if results == 0 {
        return call("weather", "city", &city.into());
    }
    let celsius: i64 = last
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or(10);
    if told {
        Reply::text(&format!(
            "{city}: {celsius} °C ({} °F), light rain.",
            celsius * 9 / 5 + 32
        ))
    } else {
        Reply::text(&format!("{city}: {celsius} °C, light rain."))
    }
}

/// The fake's reflection: a lesson from each failed call's error shown in the evidence, and
/// from a user's insistence; then two vague lessons, a different pair each time.
fn reflection_reply(request: &Value) -> Reply {
    static NEXT_VAGUE: AtomicUsize = AtomicUsize::new(0);
    let prompt = asked(request);
    let mut lessons: Vec<String> = Vec::new();
    let mut lines = prompt.lines();
    while let Some(line) = lines.next() {
        let Some((call, error)) = line.split_once("→ failed: ") else {
            continue;
        };
        let tool = call
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        // A server's words come delimited, on the lines after.
        let error = if line.contains("<<<output of MCP tool") {
            lines
                .by_ref()
                .skip_while(|l| l.starts_with("<<<"))
                .take_while(|l| !l.starts_with(">>>"))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            error.split(';').next().unwrap_or(error).to_string()
        };
        let rule = error
            .split_once(": ")
            .map_or(error.as_str(), |(_, rule)| rule);
        let lesson = format!("When calling {tool}: {rule}");
        if !lessons.contains(&lesson) {
            lessons.push(lesson);
        }
    }
    if prompt.contains("always give temperatures in Fahrenheit") {
        lessons
            .push("When reporting the weather or a temperature, give °F as well as °C".to_string());
    }
    for _ in 0..2 {
        let n = NEXT_VAGUE.fetch_add(1, Ordering::Relaxed);
        lessons.push(VAGUE[n % VAGUE.len()].to_string());
    }
    let heuristics: Vec<Value> = lessons
        .iter()
        .take(3)
        .map(|text| json!({"text": text, "skill_name": null}))
        .collect();
    Reply::text(&json!({ "heuristics": heuristics }).to_string())
}
