//! The command line, parsed by hand (six forms do not need a parser crate): a pure function
//! from the arguments to a [`Command`], so every form and every mistake is tested without a
//! process.
//!
//! ```
//! use heurist::ops::cli::{Command, parse};
//! assert_eq!(parse(&["doctor".to_string()]), Ok(Command::Doctor));
//! ```

use std::path::PathBuf;

use crate::texts::ops as texts;

/// What the binary was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the bot (no arguments).
    Run,
    Doctor,
    Help,
    /// Write the reviewed lessons to `file`; `include_pending` adds the pending ones.
    Export {
        file: PathBuf,
        include_pending: bool,
    },
    /// Learn the lessons in `file`; `trust` keeps their review state instead of pending.
    Import {
        file: PathBuf,
        trust: bool,
    },
    /// Restore the backup `file` into the (empty or missing) data directory.
    Restore {
        file: PathBuf,
    },
}

/// The command for `args` (without the program name), or what is wrong with them.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut words: Vec<&str> = args.iter().map(String::as_str).collect();
    // `heurist lessons …` is `heurist heuristics …` under the word the code uses; the first
    // name keeps working.
    let group = words.first().copied().unwrap_or_default();
    if group == "lessons" {
        words[0] = "heuristics";
    }
    match words[..] {
        [] => Ok(Command::Run),
        ["--help" | "-h" | "help"] => Ok(Command::Help),
        ["doctor"] => Ok(Command::Doctor),
        ["heuristics", "export", file] if !file.starts_with('-') => Ok(Command::Export {
            file: PathBuf::from(file),
            include_pending: false,
        }),
        ["heuristics", "export", file, "--include-pending"]
        | ["heuristics", "export", "--include-pending", file]
            if !file.starts_with('-') =>
        {
            Ok(Command::Export {
                file: PathBuf::from(file),
                include_pending: true,
            })
        }
        ["heuristics", "import", file] if !file.starts_with('-') => Ok(Command::Import {
            file: PathBuf::from(file),
            trust: false,
        }),
        ["heuristics", "import", file, "--trust"] | ["heuristics", "import", "--trust", file]
            if !file.starts_with('-') =>
        {
            Ok(Command::Import {
                file: PathBuf::from(file),
                trust: true,
            })
        }
        ["restore", file] if !file.starts_with('-') => Ok(Command::Restore {
            file: PathBuf::from(file),
        }),
        ["restore", ..] => Err(texts::usage_error(
            "`heurist restore` takes the backup file to restore",
        )),
        ["heuristics", ..] => Err(texts::usage_error(&format!(
            "`heurist {group}` takes `export FILE [--include-pending]` or `import FILE [--trust]`"
        ))),
        _ => Err(texts::usage_error(&format!(
            "unknown arguments {:?}",
            words.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_mistakes() {
        struct Case {
            name: &'static str,
            args: &'static [&'static str],
            expect: Result<Command, &'static str>,
        }
        let import = |file: &str, trust| Command::Import {
            file: PathBuf::from(file),
            trust,
        };
        let export = |file: &str, include_pending| Command::Export {
            file: PathBuf::from(file),
            include_pending,
        };
        let cases = [
            Case {
                name: "no arguments runs the bot",
                args: &[],
                expect: Ok(Command::Run),
            },
            Case {
                name: "help",
                args: &["--help"],
                expect: Ok(Command::Help),
            },
            Case {
                name: "short help",
                args: &["-h"],
                expect: Ok(Command::Help),
            },
            Case {
                name: "doctor",
                args: &["doctor"],
                expect: Ok(Command::Doctor),
            },
            Case {
                name: "export the reviewed lessons",
                args: &["heuristics", "export", "l.jsonl"],
                expect: Ok(export("l.jsonl", false)),
            },
            Case {
                name: "export the pending ones too",
                args: &["heuristics", "export", "l.jsonl", "--include-pending"],
                expect: Ok(export("l.jsonl", true)),
            },
            Case {
                name: "the flag before the file",
                args: &["heuristics", "export", "--include-pending", "l.jsonl"],
                expect: Ok(export("l.jsonl", true)),
            },
            Case {
                name: "export with import's flag",
                args: &["heuristics", "export", "l.jsonl", "--trust"],
                expect: Err("`heurist heuristics` takes"),
            },
            Case {
                name: "import pending",
                args: &["heuristics", "import", "l.jsonl"],
                expect: Ok(import("l.jsonl", false)),
            },
            Case {
                name: "import trusted",
                args: &["heuristics", "import", "l.jsonl", "--trust"],
                expect: Ok(import("l.jsonl", true)),
            },
            Case {
                name: "trust before the file",
                args: &["heuristics", "import", "--trust", "l.jsonl"],
                expect: Ok(import("l.jsonl", true)),
            },
            Case {
                name: "export without a file",
                args: &["heuristics", "export"],
                expect: Err("`heurist heuristics` takes"),
            },
            Case {
                name: "import with an unknown flag",
                args: &["heuristics", "import", "l.jsonl", "--force"],
                expect: Err("`heurist heuristics` takes"),
            },
            Case {
                name: "a flag is not a file",
                args: &["heuristics", "import", "--trust"],
                expect: Err("`heurist heuristics` takes"),
            },
            Case {
                name: "export under the code's word",
                args: &["lessons", "export", "l.jsonl", "--include-pending"],
                expect: Ok(export("l.jsonl", true)),
            },
            Case {
                name: "import under the code's word",
                args: &["lessons", "import", "--trust", "l.jsonl"],
                expect: Ok(import("l.jsonl", true)),
            },
            Case {
                name: "a mistake under the code's word names it",
                args: &["lessons", "export"],
                expect: Err("`heurist lessons` takes"),
            },
            Case {
                name: "restore a backup",
                args: &["restore", "backups/heurist-1.backup"],
                expect: Ok(Command::Restore {
                    file: PathBuf::from("backups/heurist-1.backup"),
                }),
            },
            Case {
                name: "restore without a file",
                args: &["restore"],
                expect: Err("`heurist restore` takes"),
            },
            Case {
                name: "restore of two files",
                args: &["restore", "a.backup", "b.backup"],
                expect: Err("`heurist restore` takes"),
            },
            Case {
                name: "unknown command",
                args: &["serve"],
                expect: Err("unknown arguments"),
            },
            Case {
                name: "doctor takes nothing",
                args: &["doctor", "x"],
                expect: Err("unknown arguments"),
            },
        ];
        for case in cases {
            let args: Vec<String> = case.args.iter().map(|a| a.to_string()).collect();
            match (parse(&args), case.expect) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{}", case.name),
                (Err(got), Err(want)) => {
                    assert!(got.starts_with(want), "{}: {got}", case.name);
                    assert!(
                        got.ends_with("run `heurist --help` for the commands"),
                        "{}",
                        case.name
                    );
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
            }
        }
    }
}
