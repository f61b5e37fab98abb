//! The `heurist` binary: parse the command line, load the configuration, start logging, then
//! run the bot or one of the operator's commands (see [`heurist::ops`]).
//!
//! Before any of that, `heurist __read-document <parser>` is the jail's child (see
//! [`heurist::agent::jail`]): a hidden subcommand the bot runs itself, which reads no
//! configuration, starts no logging and no runtime, and only parses the bytes on its stdin.

use std::process::ExitCode;

use heurist::agent::jail;
use heurist::logging;
use heurist::ops::cli::{self, Command};
use heurist::ops::{doctor, lessons, restore};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some((jail::CHILD_COMMAND, rest)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        return jail::child_main(rest);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("heurist: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args))
}

/// The bot or an operator's command, on the runtime `main` built.
async fn run(args: Vec<String>) -> ExitCode {
    let command = match cli::parse(&args) {
        Ok(command) => command,
        Err(problem) => {
            eprintln!("heurist: {problem}");
            return ExitCode::from(2);
        }
    };
    if command == Command::Help {
        println!("{}", heurist::texts::ops::HELP);
        return ExitCode::SUCCESS;
    }
    let config = heurist::Config::load();
    let secrets = config
        .as_ref()
        .map(heurist::Config::secrets)
        .unwrap_or_default();
    logging::init(secrets.clone());
    if command == Command::Doctor {
        return run_doctor(config, &secrets).await;
    }
    let result = match config {
        Ok(config) => match command {
            Command::Export {
                file,
                include_pending,
            } => lessons::export(&config, &file, include_pending).map(|said| println!("{said}")),
            Command::Import { file, trust } => lessons::import(&config, &file, trust)
                .await
                .map(|imported| print!("{}", imported.render())),
            Command::Restore { file } => {
                restore::restore(&config, &file).map(|said| println!("{said}"))
            }
            _ => heurist::run(config).await,
        },
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors can quote URLs that carry the token: redact here too.
            eprintln!("heurist: {}", logging::redact(&format!("{e:#}"), &secrets));
            ExitCode::from(2)
        }
    }
}

/// `heurist doctor`: the report on stdout, exit 0 only when everything needed works.
async fn run_doctor(config: anyhow::Result<heurist::Config>, secrets: &[String]) -> ExitCode {
    let report = match config {
        Ok(config) => match doctor::run(&config).await {
            Ok(report) => report,
            Err(e) => doctor::Report::unloadable(&e),
        },
        Err(e) => doctor::Report::unloadable(&e),
    };
    print!("{}", report.render(secrets));
    if report.healthy() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
