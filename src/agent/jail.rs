//! Third-party bytes parsed in a child process with limits (the jail), so a file built to make
//! a parser recurse, loop or balloon costs a child process, never the bot.
//!
//! The child is this same program run as `heurist __read-document pdf` (a hidden subcommand,
//! [`CHILD_COMMAND`], that `main.rs` dispatches before it reads a configuration, starts logging
//! or a runtime): the bytes go to its stdin, the text comes back on its stdout, and a parser's
//! own refusal ("invalid file header") on its stderr with exit code 3. Anything else — a crash,
//! a signal, a limit, the timeout, another exit code — is [`JailFailure::Broke`]: the sender is told
//! once that the file is malformed or too complex, and the bot goes on.
//!
//! What it guarantees:
//! - the bot's own process never runs the parser: a stack overflow, an abort, an endless loop
//!   or a gigabyte of allocations ends the child only;
//! - the child's address space is at most `documents.parser_memory_mb` (RLIMIT_AS), its CPU
//!   time `parser_cpu_secs` (RLIMIT_CPU), its life `parser_timeout_secs` of wall-clock time
//!   (then the bot kills it; it is killed too when the turn is dropped, and on Linux when the
//!   bot dies); it leaves no core dump;
//! - it starts with an empty environment (no token, no API key) in `/`, and before it reads a
//!   byte it can open no new descriptor (RLIMIT_NOFILE 0: no socket, no file), start no process
//!   (RLIMIT_NPROC 0, unless it runs as root), gain no privilege (`no_new_privs`), and where the
//!   kernel allows it, it sits in a user and a network namespace of its own (no network at all);
//! - the bot reads at most what the document's `max_document_chars` can use (four bytes a
//!   character, and 4 KiB more) of its text and 4 KiB of its errors; past that it kills the
//!   child and keeps the start of the text;
//! - at most [`PARSERS_AT_ONCE`] children run at once, so a flood of PDFs waits its turn
//!   instead of multiplying the memory they may take.
//!
//! What it does not: it is no sandbox against code that takes over the child (no seccomp
//! filter; the child may still make system calls over the descriptors it has), and the
//! namespaces are best effort (containers often refuse them; the descriptor limit holds
//! anyway). A wait for a free slot is not bounded by the timeout. The limits are Unix ones;
//! the namespaces, `no_new_privs`, non-dumpable and the death signal are Linux only.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use super::document::{Unreadable, pdf_text};
use super::output::one_line;
use crate::config::DocumentsConfig;

/// The hidden subcommand the child runs: `heurist __read-document <parser>`.
pub const CHILD_COMMAND: &str = "__read-document";

/// Parser children running at once across the bot. Two keep a PDF from waiting behind another
/// one's timeout, and bound the memory they take to twice `parser_memory_mb`.
pub(crate) const PARSERS_AT_ONCE: usize = 2;

/// The exit code of a child whose parser refused the bytes, its reason on stderr (not 1, an
/// error's usual code, nor 101, an uncaught panic's).
const REFUSED: u8 = 3;

/// Bytes of the child's stderr kept: a reason, or how it died, for the log.
const ERROR_BYTES: usize = 4096;

/// Bytes of text read beyond four a character: room for the white space trimmed off.
const OUTPUT_SLACK: usize = 4096;

/// A parser the child can run; its name is the subcommand's argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parser {
    /// A PDF's text, through `pdf-extract`.
    Pdf,
}

impl Parser {
    fn name(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
        }
    }

    fn named(name: &str) -> Option<Self> {
        (name == "pdf").then_some(Self::Pdf)
    }

    /// What the child does: the text of `bytes`, or the parser's reason to refuse them.
    fn parse(self, bytes: &[u8]) -> Result<String, String> {
        match self {
            Self::Pdf => pdf_text(bytes).map_err(|e| match e {
                Unreadable::Pdf(reason) => reason,
                other => other.to_string(),
            }),
        }
    }
}

/// The limits of one child, from `[documents]`.
#[derive(Debug, Clone, Copy)]
struct JailLimits {
    timeout: Duration,
    /// RLIMIT_AS, in bytes.
    memory: u64,
    /// RLIMIT_CPU, in seconds.
    cpu_secs: u64,
    /// Bytes of its stdout read at most.
    output: usize,
}

/// The jail: how to start a child, its limits, and the slots that bound how many run.
pub(crate) struct Jail {
    program: PathBuf,
    /// Arguments before the parser's name.
    args: Vec<String>,
    limits: JailLimits,
    slots: tokio::sync::Semaphore,
}

/// The text a child read.
#[derive(Debug, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) text: String,
    /// False when the child wrote more than the bot reads: `text` is the start of it.
    pub(crate) whole: bool,
}

/// Why a child gave no text.
#[derive(Debug, PartialEq)]
pub(crate) enum JailFailure {
    /// The parser refused the bytes and said why (one line, for the sender).
    Refused(String),
    /// It crashed, hit a limit or the timeout, or broke the protocol: how, for the log.
    Broke(String),
    /// It could not be started (the operator's problem, logged).
    NotStarted(String),
}

impl Jail {
    /// The jail `[documents]` describes; its child is `parser_program`, or this very binary.
    pub(crate) fn new(config: &DocumentsConfig) -> Self {
        let program = config.parser_program.clone().unwrap_or_else(own_program);
        let limits = JailLimits {
            timeout: Duration::from_secs(config.parser_timeout_secs),
            memory: config.parser_memory_mb.saturating_mul(1 << 20),
            cpu_secs: config.parser_cpu_secs,
            output: config
                .max_document_chars
                .saturating_mul(4)
                .saturating_add(OUTPUT_SLACK),
        };
        Self::with_command(program, vec![CHILD_COMMAND.to_string()], limits)
    }

    fn with_command(program: PathBuf, args: Vec<String>, limits: JailLimits) -> Self {
        Self {
            program,
            args,
            limits,
            slots: tokio::sync::Semaphore::new(PARSERS_AT_ONCE),
        }
    }

    /// The text `parser` reads from `bytes`, in a child with the jail's limits; waits for a
    /// free slot first.
    pub(crate) async fn read(&self, parser: Parser, bytes: Vec<u8>) -> Result<Parsed, JailFailure> {
        // The semaphore is never closed, so this only waits.
        let _slot = self.slots.acquire().await;
        let mut child = self.command(parser).spawn().map_err(|e| {
            let program = self.program.display();
            tracing::error!(%program, error = %e, "cannot start a parser child");
            JailFailure::NotStarted(e.to_string())
        })?;
        let limits = self.limits;
        let exchanged = tokio::time::timeout(limits.timeout, exchange(&mut child, bytes, limits));
        let read = match exchanged.await {
            Ok(Ok(exchanged)) => exchanged.judge(),
            Ok(Err(e)) => Err(JailFailure::Broke(format!("its pipes failed: {e}"))),
            Err(_) => Err(JailFailure::Broke(format!(
                "it ran past the {} s timeout",
                limits.timeout.as_secs()
            ))),
        };
        // Killed and reaped whatever happened (a child that ended is neither hurt nor waited on).
        let _ = child.start_kill();
        let _ = child.wait().await;
        if let Err(JailFailure::Broke(how)) = &read {
            let parser = parser.name();
            tracing::warn!(parser, %how, "a parser child failed: the file is malformed or too complex");
        }
        read
    }

    /// The child's command: the program, an empty environment, piped stdio, and the limits
    /// set between fork and exec, so they hold before it runs a single instruction of its own.
    fn command(&self, parser: Parser) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .arg(parser.name())
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let limits = self.limits;
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed: it makes system calls only (setrlimit, prctl),
        // with values computed before the fork, and allocates nothing.
        unsafe {
            command.pre_exec(move || limit_child(limits));
        }
        command
    }
}

/// `/proc/self/exe` where there is one: the running binary's own file, which is still there
/// (and of the same version as the bot) after an upgrade replaced the path, where
/// `current_exe` names a deleted file. Elsewhere, `current_exe`.
fn own_program() -> PathBuf {
    let own = Path::new("/proc/self/exe");
    if own.exists() {
        return own.to_path_buf();
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("heurist"))
}

// The resource argument of `setrlimit`, whose type differs between C libraries.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
use libc::__rlimit_resource_t as RlimitResource;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
use libc::c_int as RlimitResource;

/// Lowers `resource` to `soft` (and `hard`, never above the hard limit the bot already has,
/// which an unprivileged process cannot raise).
fn lower(resource: RlimitResource, soft: u64, hard: u64) -> std::io::Result<()> {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct they are given.
    unsafe {
        if libc::getrlimit(resource, &mut now) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let hard = hard.min(now.rlim_max);
        let wanted = libc::rlimit {
            rlim_cur: soft.min(hard),
            rlim_max: hard,
        };
        if libc::setrlimit(resource, &wanted) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The limits a child gets from the bot, between fork and exec (see [`Jail::command`]): its
/// memory, its CPU time (SIGXCPU at the soft limit, SIGKILL a second later), no core dump,
/// and on Linux, SIGKILL when the thread that started it (a runtime worker) ends.
fn limit_child(limits: JailLimits) -> std::io::Result<()> {
    lower(libc::RLIMIT_AS, limits.memory, limits.memory)?;
    lower(
        libc::RLIMIT_CPU,
        limits.cpu_secs,
        limits.cpu_secs.saturating_add(1),
    )?;
    lower(libc::RLIMIT_CORE, 0, 0)?;
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What came back from a child that ended (or was killed for writing too much).
struct Exchanged {
    out: Vec<u8>,
    /// It wrote more than the bot reads: killed, `out` holds the start.
    over: bool,
    err: Vec<u8>,
    status: ExitStatus,
}

/// Writes `bytes` to the child's stdin while reading its stdout (up to `limits.output`, then it
/// is killed) and its stderr (the first [`ERROR_BYTES`], the rest drained so it never blocks),
/// then waits for it to end.
async fn exchange(
    child: &mut tokio::process::Child,
    bytes: Vec<u8>,
    limits: JailLimits,
) -> std::io::Result<Exchanged> {
    let missing = || std::io::Error::other("a pipe was not set up");
    let mut stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    let write = async move {
        // A child that died before reading all of it is judged by how it ended.
        let _ = stdin.write_all(&bytes).await;
    };
    let read = async {
        let mut out = Vec::new();
        let most = limits.output as u64 + 1;
        stdout.take(most).read_to_end(&mut out).await?;
        let over = out.len() > limits.output;
        if over {
            out.truncate(limits.output);
            // An error says it ended already.
            let _ = child.start_kill();
        }
        Ok::<_, std::io::Error>((out, over))
    };
    let ((), read, err) = tokio::join!(write, read, keep_start(stderr, ERROR_BYTES));
    let (out, over) = read?;
    let status = child.wait().await?;
    Ok(Exchanged {
        out,
        over,
        err,
        status,
    })
}

/// The first `keep` bytes `from` sends; the rest is read and dropped until it ends.
async fn keep_start(mut from: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(read @ 1..) = from.read(&mut buffer).await {
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&buffer[..read.min(room)]);
    }
    kept
}

impl Exchanged {
    /// What the child's end means: its text (all of it, or the start when it wrote too much),
    /// the parser's refusal, or how it broke.
    fn judge(self) -> Result<Parsed, JailFailure> {
        let text = || String::from_utf8_lossy(&self.out).into_owned();
        if self.over {
            return Ok(Parsed {
                text: text(),
                whole: false,
            });
        }
        let said = one_line(&String::from_utf8_lossy(&self.err));
        match self.status.code() {
            Some(0) => Ok(Parsed {
                text: text(),
                whole: true,
            }),
            Some(code) if code == i32::from(REFUSED) => {
                Err(JailFailure::Refused(said.chars().take(300).collect()))
            }
            _ => {
                let how = match self.status.signal() {
                    Some(libc::SIGXCPU) => "it ran out of CPU time".to_string(),
                    _ => format!("it ended with {}", self.status),
                };
                Err(JailFailure::Broke(match said.is_empty() {
                    true => how,
                    false => format!("{how}: {said}"),
                }))
            }
        }
    }
}

/// The child's side: `heurist __read-document <parser>` (`args` are the words after the
/// subcommand). Confines itself, reads the bytes from stdin and writes their text to stdout,
/// or the parser's reason to stderr with exit code 3. Nothing else is printed: no panic
/// message, no log.
pub fn child_main(args: &[String]) -> ExitCode {
    std::panic::set_hook(Box::new(|_| {}));
    confine();
    let Some(parser) = args.first().and_then(|name| Parser::named(name)) else {
        eprintln!("{CHILD_COMMAND} takes the name of a parser: pdf");
        return ExitCode::from(2);
    };
    let mut bytes = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut bytes).is_err() {
        return ExitCode::from(2);
    }
    match parser.parse(&bytes) {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::from(2),
            }
        }
        Err(reason) => {
            eprint!("{reason}");
            ExitCode::from(REFUSED)
        }
    }
}

/// What the child does to itself before it reads a byte, each step best effort (the limits
/// the bot set before exec hold anyway): a user and network namespace of its own, no new
/// privileges, not dumpable, then no new descriptor and no new process.
fn confine() {
    #[cfg(target_os = "linux")]
    // SAFETY: system calls with integer arguments only, in a process with one thread.
    unsafe {
        libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let _ = lower(libc::RLIMIT_NOFILE, 0, 0);
    let _ = lower(libc::RLIMIT_NPROC, 0, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jail whose child is `sh -c script` (the parser's name is `$0`): one second of CPU
    /// time, `timeout` seconds of wall-clock time, `output` bytes of text.
    fn shell(script: &str, timeout: u64, output: usize) -> Jail {
        let limits = JailLimits {
            timeout: Duration::from_secs(timeout),
            memory: 256 << 20,
            cpu_secs: 1,
            output,
        };
        let args = vec!["-c".to_string(), script.to_string()];
        Jail::with_command(PathBuf::from("/bin/sh"), args, limits)
    }

    #[test]
    fn how_a_child_ended_is_judged() {
        struct Case {
            name: &'static str,
            out: &'static str,
            over: bool,
            err: &'static str,
            /// A raw wait status: the exit code shifted left by 8, or the signal.
            status: i32,
            want: Result<Parsed, JailFailure>,
        }
        let read = |text: &str, whole| {
            Ok(Parsed {
                text: text.to_string(),
                whole,
            })
        };
        let cases = [
            Case {
                name: "text",
                out: "Revenue: 42",
                over: false,
                err: "",
                status: 0,
                want: read("Revenue: 42", true),
            },
            Case {
                name: "too much text: the start, killed",
                out: "Revenue",
                over: true,
                err: "",
                status: libc::SIGKILL,
                want: read("Revenue", false),
            },
            Case {
                name: "the parser's refusal",
                out: "",
                over: false,
                err: "invalid file header\n",
                status: 3 << 8,
                want: Err(JailFailure::Refused("invalid file header".into())),
            },
            Case {
                name: "a stack overflow aborts",
                out: "",
                over: false,
                err: "thread 'main' has overflowed its stack\nfatal runtime error: stack overflow",
                status: libc::SIGABRT,
                want: Err(JailFailure::Broke(
                    "it ended with signal: 6 (SIGABRT): thread 'main' has overflowed its stack \
                     fatal runtime error: stack overflow"
                        .into(),
                )),
            },
            Case {
                name: "out of CPU time",
                out: "",
                over: false,
                err: "",
                status: libc::SIGXCPU,
                want: Err(JailFailure::Broke("it ran out of CPU time".into())),
            },
            Case {
                name: "another exit code, text or not",
                out: "half",
                over: false,
                err: "",
                status: 101 << 8,
                want: Err(JailFailure::Broke("it ended with exit status: 101".into())),
            },
        ];
        for case in cases {
            let exchanged = Exchanged {
                out: case.out.as_bytes().to_vec(),
                over: case.over,
                err: case.err.as_bytes().to_vec(),
                status: ExitStatus::from_raw(case.status),
            };
            assert_eq!(exchanged.judge(), case.want, "{}", case.name);
        }
    }

    #[tokio::test]
    async fn a_child_past_its_timeout_is_killed_and_told_as_broken() {
        let jail = shell("exec sleep 30", 2, 100);
        let started = std::time::Instant::now();
        let read = jail.read(Parser::Pdf, b"%PDF".to_vec()).await;
        assert_eq!(
            read,
            Err(JailFailure::Broke("it ran past the 2 s timeout".into()))
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn endless_output_is_cut_and_the_child_killed() {
        let jail = shell("exec yes 'a line of text'", 20, 1_000);
        let started = std::time::Instant::now();
        let read = jail.read(Parser::Pdf, Vec::new()).await.unwrap();
        assert!(!read.whole);
        assert_eq!(read.text.len(), 1_000);
        assert!(read.text.starts_with("a line of text\na line"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_spinning_child_runs_out_of_cpu_time() {
        let jail = shell("while :; do :; done", 20, 100);
        let read = jail.read(Parser::Pdf, Vec::new()).await;
        assert_eq!(
            read,
            Err(JailFailure::Broke("it ran out of CPU time".into()))
        );
    }

    #[tokio::test]
    async fn the_child_gets_the_bytes_the_parser_name_and_no_environment() {
        let jail = shell("printf '%s|' \"$0\" \"$HOME\"; cat", 20, 100);
        let read = jail.read(Parser::Pdf, b"bytes in".to_vec()).await.unwrap();
        assert_eq!(read.text, "pdf||bytes in");
        assert!(read.whole);
    }

    #[tokio::test]
    async fn the_limits_hold_from_the_childs_first_instruction() {
        let jail = shell("exec cat /proc/self/limits", 20, 10_000);
        let limits = jail.read(Parser::Pdf, Vec::new()).await.unwrap().text;
        let field = |name: &str| {
            let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
            let words = name.split(' ').count();
            line.split_whitespace()
                .skip(words)
                .take(2)
                .collect::<Vec<_>>()
        };
        assert_eq!(field("Max address space"), ["268435456", "268435456"]);
        assert_eq!(field("Max cpu time"), ["1", "2"]);
        assert_eq!(field("Max core file size"), ["0", "0"]);
    }

    #[tokio::test]
    async fn a_refusal_and_a_missing_program_are_told_apart() {
        let jail = shell("echo 'no PDF header' >&2; exit 3", 20, 100);
        let read = jail.read(Parser::Pdf, Vec::new()).await;
        assert_eq!(read, Err(JailFailure::Refused("no PDF header".into())));
        let mut jail = shell("", 20, 100);
        jail.program = PathBuf::from("/nonexistent/heurist");
        let read = jail.read(Parser::Pdf, Vec::new()).await;
        assert!(matches!(read, Err(JailFailure::NotStarted(_))), "{read:?}");
    }
}
