//! PDFs built to break the parser, sent to the real binary: a form that draws itself (the
//! parser's stack overflows, which aborts a process), a page tree that loops (the parser never
//! returns) and a double-deflated gigabyte of spaces (the parser's memory balloons). Each is
//! read in a jailed child process, so the bot stays up, answers another chat meanwhile, keeps
//! its memory, and tells the sender within 30 s that the PDF is malformed or too complex.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::support::pdf;
use crate::support::*;

/// No follow-ups, fast pacing: every message a chat gets is its answer or the notice.
const TOML: &str = "[llm]\nretry_base_ms = 20\n\
    [learning]\nskills_dir = \"/nonexistent\"\nreflect = false\nfeedback_buttons = false\n\
    [options]\nenabled = false\n\
    [telegram]\nchat_interval_ms = 20\npoll_timeout_secs = 1\nstreaming = false\n";

/// What the sender of a PDF the jail could not read is told, in the issue's words.
const TOO_COMPLEX: &str = "I could not read this PDF: it is malformed or too complex";

/// An LLM that echoes the user message it was asked about.
async fn echoing_llm() -> FakeLlm {
    FakeLlm::start(|req, _| Reply::text(&format!("you said: {}", last_user_text(req)))).await
}

/// A field of `/proc/<pid>/status` in kB (`VmRSS`, `VmHWM`).
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Sends `pdf` as `name` from Alice to a fresh bot, then a message from Bob while it is read,
/// and checks the issue's promises: the process lives, Bob is answered within seconds, Alice
/// is told within 30 s, and the bot's peak RSS stays within 100 MB of its idle RSS.
async fn survives(pdf: Vec<u8>, name: &str) {
    let llm = echoing_llm().await;
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut bot = BotProcess::spawn_with(&tg, &llm.url, dir.path(), &[], TOML);
    bot.started(&tg, 0, Duration::from_secs(30)).await;
    tg.send_text(BOB, "warm up");
    tg.wait_messages(BOB, 1).await;
    let pid = bot.child.id();
    let idle = memory_kb(pid, "VmRSS");

    tg.serve_file("crafted", &pdf);
    let size = pdf.len() as u64;
    let file = (name, "application/pdf");
    tg.send_document(ALICE, "crafted", file, size, Some("What does it say?"));
    let sent = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tg.send_text(BOB, "still there?");
    let asked = Instant::now();
    let told = loop {
        if let Some(status) = bot.child.try_wait().unwrap() {
            panic!(
                "{name}: the bot died ({status}) after {:?}; peak RSS {} kB over idle {idle} kB; log tail:\n{}",
                sent.elapsed(),
                memory_kb(pid, "VmHWM"),
                tail(&bot.logs())
            );
        }
        let bob = tg.messages_to(BOB);
        if bob.len() < 2 {
            assert!(
                asked.elapsed() < Duration::from_secs(5),
                "{name}: Bob is not answered while the PDF is read"
            );
        }
        if let Some(answer) = tg.messages_to(ALICE).first() {
            break answer.text();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(30),
            "{name}: Alice not told in 30 s; peak RSS {} kB over idle {idle} kB",
            memory_kb(pid, "VmHWM")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let told_in = sent.elapsed();
    tg.wait_messages(BOB, 2).await;
    assert!(told.contains(TOO_COMPLEX), "{name}: {told}");
    let peak = memory_kb(pid, "VmHWM");
    let logs = bot.logs();
    let how = logs
        .lines()
        .find(|line| line.contains("a parser child failed"))
        .unwrap_or_else(|| panic!("{name}: the failure is logged"));
    // The figures of a run (`--nocapture` shows them).
    eprintln!("{name}: told in {told_in:?}; idle RSS {idle} kB, peak {peak} kB; {how}");
    assert!(
        peak < idle + 100 * 1024,
        "{name}: peak RSS {peak} kB, idle {idle} kB"
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "{name}: alive");
    assert!(
        llm.agent_requests()
            .iter()
            .all(|r| !last_user_text(r).contains("What does it say?"))
    );
    tg.send_text(ALICE, "and now?");
    let sent = tg.wait_messages(ALICE, 2).await;
    assert_eq!(
        sent[1].text(),
        "you said: and now?",
        "{name}: the bot goes on"
    );
}

/// The last warnings and errors of a log, for a failure message.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") || line.contains("ERROR") || !line.contains('['))
        .collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[tokio::test]
async fn a_form_that_draws_itself_does_not_take_the_bot_down() {
    survives(pdf::self_drawing_form(), "form.pdf").await;
}

#[tokio::test]
async fn a_page_tree_that_loops_is_answered_within_30_seconds() {
    survives(pdf::looping_page_tree(), "loop.pdf").await;
}

#[tokio::test]
async fn a_double_deflated_gigabyte_does_not_grow_the_bots_memory() {
    survives(pdf::flate_bomb(1 << 30), "bomb.pdf").await;
}

#[test]
fn the_crafted_pdfs_are_as_small_as_the_issue_says() {
    let sizes = [
        ("form", pdf::self_drawing_form().len(), 1_000),
        ("loop", pdf::looping_page_tree().len(), 500),
        ("bomb", pdf::flate_bomb(1 << 30).len(), 100_000),
    ];
    for (name, size, most) in sizes {
        assert!(size <= most, "{name}: {size} bytes");
    }
}

/// The bomb's two layers inflate to what they claim (checked on 1 MB by a real inflater, so a
/// mistake in the hand-written encoder cannot make the bomb test pass for nothing).
#[test]
fn the_bomb_inflates_twice_to_spaces() {
    let spaces = 1_000_003;
    let twice = pdf::zlib_repeating(&pdf::zlib_spaces(spaces));
    let mut once = Vec::new();
    flate2::read::ZlibDecoder::new(&twice[..])
        .read_to_end(&mut once)
        .unwrap();
    let mut text = Vec::new();
    flate2::read::ZlibDecoder::new(&once[..])
        .read_to_end(&mut text)
        .unwrap();
    assert_eq!(text.len() as u64, spaces);
    assert!(text.iter().all(|&b| b == b' '));
    assert!(
        twice.len() * 1_000 < spaces as usize,
        "{} bytes",
        twice.len()
    );
}

/// A parser child that never ends (a script that sleeps, standing for a parser in an endless
/// loop) is killed at `parser_timeout_secs`; Bob is answered meanwhile and Alice told after.
#[tokio::test]
async fn a_parser_that_never_ends_is_killed_at_the_timeout_and_the_bot_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hang.sh");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 60\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, mode).unwrap();
    let h = Harness::start_with(echoing_llm().await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.documents.parser_program = Some(script);
        c.documents.parser_timeout_secs = 2;
    })
    .await;
    let pdf = pdf::one_line("never read");
    h.tg.serve_file("hang", &pdf);
    let sent = Instant::now();
    let file = ("hang.pdf", "application/pdf");
    h.tg.send_document(ALICE, "hang", file, pdf.len() as u64, None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.tg.send_text(BOB, "still there?");
    h.tg.wait_messages(BOB, 1).await;
    assert!(
        h.tg.messages_to(ALICE).is_empty(),
        "Bob first: Alice's PDF is still read"
    );
    let told = h.tg.wait_messages(ALICE, 1).await;
    let waited = sent.elapsed();
    assert!(told[0].text().contains(TOO_COMPLEX), "{}", told[0].text());
    assert!(
        waited >= Duration::from_secs(2),
        "told at the timeout, {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(8),
        "told at the timeout, {waited:?}"
    );
    h.stop().await;
}

/// A parser child that writes without end (`yes`, whose every line is its own arguments) is
/// read only as far as the document's cap needs, then killed: the model gets the start, with a
/// note that the document was longer.
#[tokio::test]
async fn a_parser_that_writes_without_end_is_cut_and_the_start_is_read() {
    let h = Harness::start_with(echoing_llm().await, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
        c.documents.parser_program = Some("/usr/bin/yes".into());
        c.documents.max_document_chars = 30;
    })
    .await;
    let pdf = pdf::one_line("never read");
    h.tg.serve_file("endless", &pdf);
    let file = ("endless.pdf", "application/pdf");
    h.tg.send_document(ALICE, "endless", file, pdf.len() as u64, Some("Sum it up"));
    h.tg.wait_messages(ALICE, 1).await;
    let asked = last_user_text(h.llm.agent_requests().last().unwrap());
    // 30 characters × 4 bytes + 4 KiB read: 4,216 bytes of "__read-document pdf\n", trimmed.
    assert!(
        asked.ends_with(
            "\n__read-document pdf\n__read-doc\n>>>end of document\n\
             [the document was cut: 30 of its more than 4215 characters are above]"
        ),
        "{asked}"
    );
    h.stop().await;
}

/// The child confines itself before it reads a byte: no new descriptor (so no socket and no
/// file), no new process, no new privilege, and where the kernel allows it, a network
/// namespace of its own. Seen from outside while it waits for its stdin.
#[test]
fn the_child_can_open_nothing_before_it_reads() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_heurist"))
        .args(["__read-document", "pdf"])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let proc = format!("/proc/{}", child.id());
    let until = Instant::now() + Duration::from_secs(10);
    let limits = loop {
        let limits = std::fs::read_to_string(format!("{proc}/limits")).unwrap();
        let nofile = limits.lines().find(|l| l.starts_with("Max open files"));
        if nofile.is_some_and(|l| l.split_whitespace().nth(3) == Some("0")) {
            break limits;
        }
        assert!(Instant::now() < until, "not confined: {limits}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let field = |name: &str| {
        let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace()
            .skip(name.split(' ').count())
            .take(2)
            .collect::<Vec<_>>()
    };
    assert_eq!(field("Max open files"), ["0", "0"]);
    assert_eq!(field("Max processes"), ["0", "0"]);
    let status = std::fs::read_to_string(format!("{proc}/status")).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    let netns = |proc: &str| std::fs::read_link(format!("{proc}/ns/net")).ok();
    let own = netns(&proc) != netns("/proc/self");
    eprintln!("the child has a network namespace of its own: {own}");
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "an empty file is refused");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("invalid file header"),
        "the parser's reason: {said}"
    );
}

/// `heurist doctor` reads a test PDF through the jail, and says what to fix when it cannot.
#[tokio::test]
async fn the_doctor_warns_when_the_pdf_reader_cannot_start() {
    let tg = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&tg, "http://127.0.0.1:9/v1", dir.path());
    config.documents.parser_program = Some("/nonexistent/heurist".into());
    let report = heurist::ops::doctor::run(&config).await.unwrap();
    let line = report.line("PDF reader").unwrap();
    assert_eq!(line.status, heurist::ops::doctor::Status::Warn, "{line:?}");
    assert!(
        line.found
            .starts_with("cannot read a test PDF: No such file"),
        "{line:?}"
    );
    let fix = line.fix.as_deref().unwrap_or_default();
    assert!(fix.contains("/proc/self/exe __read-document pdf"), "{fix}");
}
