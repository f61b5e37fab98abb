//! Bounded storage: how large the sled directory grows with turns, and what pruning gives back.
//!
//! Writes turns through the real store API as a turn writes them: the update accepted into the
//! inbox, the chat's option round retired, the history window read (with the shipped
//! `history_tokens`, which moves the window), the turn appended to the history, the update
//! marked stored, usage counted, a feedback ticket and an option ticket created and tied to the
//! answer's message, the options offered, the update marked answered. The turns are spread
//! evenly over twice `retention_days` (the shipped default), then the store is pruned at
//! `retention_days`, as the bot does in the background, and the next `retention_days` days'
//! turns (half as many) are written on the pruned store. Then the store is opened again, as a
//! restart does, with the shipped compaction policy, which compacts it.
//!
//! Reported: the directory's size after the turns, after the prune, after the next turns (sled
//! gives freed space back to its own later writes, not to the file system), after the
//! restart's compaction, and the live records' bytes (keys and values) at the end: what no
//! compaction can remove, the history windows and the records within the retention.
//!
//! `cargo bench --bench storage` writes 100,000 turns (1,000 chats × 100) and then 50,000,
//! about two minutes on 2 cores; `-- --smoke` a tiny run whose prune counts and compaction CI
//! checks.

// A benchmark's scenario may read longer than a production function (Cargo.toml's `[lints]` hold
// `clippy::too_many_lines` for production code; unit tests are exempt alike in src/lib.rs).
#![allow(clippy::too_many_lines)]

#[path = "common/disk.rs"]
mod disk;

use std::path::Path;
use std::time::{Duration, Instant};

use disk::dir_size;
use heurist::conversation::Conversation;
use heurist::ids::{ChatId, UpdateId, UserId};
use heurist::llm::{ChatMessage, Usage};
use heurist::store::compaction::CompactionPolicy;
use heurist::store::{
    Arrival, FeedbackTicket, InboxEntry, InboxState, OfferedOptions, OptionTicket, ReflectionJob,
    Store, TurnRequest,
};

/// Words the generated texts are made of (sled does not compress, so only sizes matter; the
/// words only keep the texts from being one repeated string).
const WORDS: &[&str] = &[
    "the",
    "deploy",
    "failed",
    "because",
    "config",
    "value",
    "timezone",
    "recipe",
    "budget",
    "query",
    "index",
    "container",
    "network",
    "answer",
    "check",
    "first",
    "explain",
    "version",
    "error",
    "table",
    "please",
    "could",
    "you",
    "schedule",
    "meeting",
    "tomorrow",
    "price",
];

/// A text of about `chars` characters, varied by `seed`.
fn text(seed: u64, chars: usize) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = String::with_capacity(chars + 12);
    while out.len() < chars {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.push_str(WORDS[(state >> 33) as usize % WORDS.len()]);
        out.push(' ');
    }
    out
}

/// Realistic sizes: a question of 80–400 characters, an answer of 400–2,000 (what a chat
/// model writes for a chat question: a few paragraphs).
fn question_and_answer(turn: u64) -> (String, String) {
    let question = text(turn, 80 + (turn * 37 % 321) as usize);
    let answer = text(turn + 1, 400 + (turn * 53 % 1601) as usize);
    (question, answer)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// What one run measured.
struct Figures {
    after_turns: u64,
    after_prune: u64,
    /// After the next period's turns, written on the pruned store.
    after_next: u64,
    /// After the restart that follows, which compacts the store (the shipped policy).
    after_compaction: u64,
    compaction_time: Duration,
    /// Keys and values of every record at the end.
    live: u64,
    /// Turns pruned for being before their history window, of the first turns.
    history_pruned: usize,
    /// Pruned inbox entries, option tickets, feedback tickets.
    pruned: (usize, usize, usize),
    /// Turns received before the cutoff: what the prune had to remove of each.
    expected: usize,
    write_time: Duration,
    prune_time: Duration,
}

/// Writes turn `turn` in `chat`, received at `received`, as the bot does with a history budget
/// of `history_tokens`.
fn write_turn(store: &Store, history_tokens: usize, chat: i64, turn: u64, received: i64) {
    let usage = Usage {
        prompt_tokens: 1_500,
        completion_tokens: 300,
        cached_tokens: 1_200,
    };
    let (chat, user) = (ChatId(chat), UserId(chat as u64));
    let update = UpdateId(turn as u32 + 1);
    let (question, answer) = question_and_answer(turn);
    let entry = InboxEntry::pending(TurnRequest::new(chat, user, question.clone()), received);
    assert_eq!(store.inbox().accept(update, &entry).unwrap(), Arrival::New);
    let at = Conversation::new(chat, None);
    let (round, _) = store.chats().retire_offered(at).unwrap();
    let epoch = store.history().window(at, history_tokens).unwrap().epoch;
    let messages = [
        ChatMessage::user(question.clone()),
        ChatMessage::assistant(answer.clone()),
    ];
    assert!(
        store
            .history()
            .append(at, epoch, Some(update), &messages, &Default::default())
            .unwrap()
    );
    store.inbox().set_state(update, InboxState::Stored).unwrap();
    store.usage().record_user_tokens(user, usage).unwrap();
    store
        .usage()
        .charge(chat, "test-model", 1, 1, usage)
        .unwrap();
    let job = ReflectionJob {
        chat,
        user: Some(user),
        model: "test-model".into(),
        request: question.chars().take(512).collect(),
        tools: vec![],
        outcome: "success".into(),
        external: false,
        untrusted: false,
        grounds: None,
        answer: Some(answer.chars().take(2_000).collect()),
        skills: Vec::new(),
        evidence: String::new(),
        proven: Vec::new(),
    };
    let feedback = store
        .tickets()
        .create_feedback(&FeedbackTicket {
            chat,
            lessons: vec![turn % 97, turn % 89],
            job,
            vote: None,
            changes: 0,
            created: received,
        })
        .unwrap();
    let message = turn as i32 + 10;
    let ticket = store
        .tickets()
        .create(&OptionTicket {
            chat,
            message_id: 0,
            labels: vec![
                "Tell me more about that".into(),
                "Show an example".into(),
                "Thanks, that helps".into(),
            ],
            epoch,
            chosen: None,
            feedback: Some(feedback.clone()),
            created: received,
            topic: None,
            chosen_by: None,
        })
        .unwrap();
    store.tickets().set_message(&ticket, message).unwrap();
    let offered = OfferedOptions {
        ticket,
        message,
        feedback: Some(feedback),
    };
    assert!(store.chats().offer(at, round, &offered).unwrap());
    store
        .inbox()
        .set_state(update, InboxState::Answered)
        .unwrap();
}

/// Writes `chats × per_chat` turns, received evenly over the `2 × days` days before `now`
/// (round-robin over the chats, so every chat's turns span the whole period), prunes at
/// `days`, then writes the next `days` days' turns (half as many) on the pruned store.
fn run(
    chats: u64,
    per_chat: u64,
    days: u32,
    now: i64,
    history_tokens: usize,
    policy: CompactionPolicy,
) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_data_dir(dir.path(), 1 << 30, policy).unwrap();
    let turns = chats * per_chat;
    let span = 2 * i64::from(days) * 86_400;
    let cutoff = now - i64::from(days) * 86_400;
    let chat_of = |turn: u64| 1_000 + (turn % chats) as i64;
    let received_at = |turn: u64| now - span + (turn as i64 * span / turns as i64);
    let write = |store: &Store, turns: std::ops::Range<u64>| {
        for turn in turns {
            write_turn(
                store,
                history_tokens,
                chat_of(turn),
                turn,
                received_at(turn),
            );
        }
    };
    let started = Instant::now();
    write(&store, 0..turns);
    store.db().flush().unwrap();
    let write_time = started.elapsed();
    let expected = (0..turns).filter(|&t| received_at(t) < cutoff).count();
    let after_turns = dir_size(dir.path());

    let started = Instant::now();
    let report = store.db().prune(cutoff).unwrap();
    store.db().flush().unwrap();
    let prune_time = started.elapsed();
    let after_prune = dir_size(dir.path());

    write(&store, turns..turns + turns / 2);
    store.db().flush().unwrap();
    let after_next = dir_size(dir.path());
    let live_before = store.db().live_bytes().unwrap();
    drop(store);

    let started = Instant::now();
    let (store, _) = Store::open_data_dir(dir.path(), 1 << 30, policy).unwrap();
    let compaction_time = started.elapsed();
    let after_compaction = dir_size(dir.path());
    let live = store.db().live_bytes().unwrap();
    drop(store);
    // The copy holds every record; the id counter is the one it may add.
    assert!(
        (live_before..=live_before + 16).contains(&live),
        "compaction kept every record: {live_before} live bytes before, {live} after"
    );
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["CURRENT", "LOCK", "store-2"],
        "only the new generation is left"
    );
    Figures {
        after_turns,
        after_prune,
        after_next,
        after_compaction,
        compaction_time,
        live,
        history_pruned: report.history,
        pruned: (report.inbox, report.tickets, report.feedback),
        expected,
        write_time,
        prune_time,
    }
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let config = heurist::Config::from_toml(None, Path::new("config/heurist.toml")).unwrap();
    let days = config.retention_days;
    let (chats, per_chat) = if smoke { (10, 30) } else { (1_000, 100) };
    let now = chrono::Utc::now().timestamp();
    let shipped = CompactionPolicy::configured(&config);
    // The smoke run's store is far below compact_min_mb: it compacts on any doubling.
    let policy = if smoke {
        CompactionPolicy {
            min_growth: 0,
            ..shipped
        }
    } else {
        shipped
    };
    let f = run(
        chats,
        per_chat,
        days,
        now,
        config.agent.history_tokens,
        policy,
    );
    let turns = chats * per_chat;
    println!(
        "{turns} turns ({chats} chats × {per_chat}) received over {} days, pruned at retention_days = {days}:",
        2 * days
    );
    println!(
        "| sled after the turns | after the prune | after {} more turns | after the restart's compaction | live records | pruned (inbox / options / feedback / turns before their window) | writing | pruning | compacting |",
        turns / 2
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {:.1} MB ({:.2} KB/turn) | {:.1} MB | {:.1} MB | {:.1} MB | {:.1} MB | {} / {} / {} / {} | {:.1} s | {:.1} s | {:.1} s |",
        mb(f.after_turns),
        f.after_turns as f64 / 1024.0 / turns as f64,
        mb(f.after_prune),
        mb(f.after_next),
        mb(f.after_compaction),
        mb(f.live),
        f.pruned.0,
        f.pruned.1,
        f.pruned.2,
        f.history_pruned,
        f.write_time.as_secs_f64(),
        f.prune_time.as_secs_f64(),
        f.compaction_time.as_secs_f64(),
    );
    // Every record older than the retention goes, and only those: a turn's inbox entry
    // (answered), its option ticket and its feedback ticket.
    assert_eq!(
        f.pruned,
        (f.expected, f.expected, f.expected),
        "prune counts"
    );
    // The restart compacts: what is left is smaller than before it. Only at full size: a
    // smoke run's store is a few of sled's 512 KB segments either way.
    if !smoke {
        assert!(
            f.after_compaction < f.after_next,
            "compaction must shrink the store: {} → {} bytes",
            f.after_next,
            f.after_compaction
        );
    }
    if smoke {
        println!("\n1 passed, 0 failed");
    }
}
