//! How precisely skills are matched: the real matcher, built as the bot builds it (the shipped
//! `config/skills`, the default config, no embeddings model), on every message of the labelled
//! set `tests/data/skill_labels.tsv`. A skill injected into a message it does not fit costs
//! tokens and steers the model off the question, so precision has a floor of 90 %; recall has
//! a floor too, so that precision is not bought by matching nothing.
//!
//! `cargo test --lib skill_precision -- --nocapture` prints both and every mistake.

use std::collections::BTreeSet;
use std::path::Path;

use super::Learning;
use crate::budget::Ledger;
use crate::config::Config;
use crate::llm::LlmClient;
use crate::store::Store;

/// The share of injected skills that must be labelled right.
const MIN_PRECISION: f64 = 0.90;
/// The share of labelled skills that must be injected (measured 0.62: see docs/learning.md,
/// "Skills"). Most of what is missed shares one word with its skill, or is not in English.
const MIN_RECALL: f64 = 0.60;

struct Labelled {
    message: String,
    skills: BTreeSet<String>,
}

/// The labelled set: `<skills, comma-separated, or -> TAB <message>` lines; `#` starts a
/// comment line.
fn labelled_set() -> Vec<Labelled> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/skill_labels.tsv");
    let text = std::fs::read_to_string(path).expect("the labelled set");
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (skills, message) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("no tab in {line:?}"));
            Labelled {
                message: message.to_string(),
                skills: skills
                    .split(',')
                    .map(str::trim)
                    .filter(|s| *s != "-")
                    .map(str::to_string)
                    .collect(),
            }
        })
        .collect()
}

/// The learning service as `App::new` builds it, on a temporary store.
fn production_learning(dir: &Path) -> Learning {
    let mut config =
        Config::from_toml(None, Path::new("config/heurist.toml")).expect("the shipped config");
    config.learning.skills_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/skills").into();
    assert!(
        config.learning.embedding_model.is_empty(),
        "measured without embeddings"
    );
    let store = Store::open(dir).expect("a temporary store");
    let llm = LlmClient::new(&config.llm).expect("an LLM client");
    let ledger = Ledger::new(&config, store.clone());
    Learning::new(config.learning.clone(), &config.llm, store, llm, ledger)
}

#[tokio::test]
async fn skills_are_injected_only_into_messages_they_fit() {
    let dir = tempfile::tempdir().unwrap();
    let learning = production_learning(dir.path());
    let names: BTreeSet<String> = learning.skills().iter().map(|s| s.name.clone()).collect();
    let set = labelled_set();
    assert!(set.len() >= 80, "{} labelled messages", set.len());
    let (mut injected, mut right, mut labelled) = (0_usize, 0_usize, 0_usize);
    let mut mistakes = Vec::new();
    for case in &set {
        assert!(
            case.skills.is_subset(&names),
            "unknown skill in {:?}",
            case.message
        );
        let matched: BTreeSet<String> = learning
            .match_skills(&case.message)
            .await
            .into_iter()
            .map(|s| s.name.clone())
            .collect();
        injected += matched.len();
        labelled += case.skills.len();
        right += matched.intersection(&case.skills).count();
        let wrong: Vec<&String> = matched.difference(&case.skills).collect();
        let missed: Vec<&String> = case.skills.difference(&matched).collect();
        if !wrong.is_empty() || !missed.is_empty() {
            mistakes.push(format!(
                "{:?}: injected {wrong:?} wrongly, missed {missed:?}",
                case.message
            ));
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            1.0
        } else {
            part as f64 / whole as f64
        }
    };
    let precision = share(right, injected);
    let recall = share(right, labelled);
    println!(
        "skill matching on {} labelled messages: precision {:.1} % ({right}/{injected}), \
         recall {:.1} % ({right}/{labelled})",
        set.len(),
        100.0 * precision,
        100.0 * recall
    );
    for mistake in &mistakes {
        println!("  {mistake}");
    }
    assert!(
        precision >= MIN_PRECISION && recall >= MIN_RECALL,
        "precision {precision:.3} (at least {MIN_PRECISION}), recall {recall:.3} (at least \
         {MIN_RECALL}); mistakes:\n{}",
        mistakes.join("\n")
    );
}
