//! The `heurist` binary: load the configuration, start logging, run the bot.

use std::process::ExitCode;

use heurist::logging;

#[tokio::main]
async fn main() -> ExitCode {
    let config = heurist::Config::load();
    let secrets = config
        .as_ref()
        .map(heurist::Config::secrets)
        .unwrap_or_default();
    logging::init(secrets.clone());
    let result = match config {
        Ok(config) => heurist::run(config).await,
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
