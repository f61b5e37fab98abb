//! `heurist doctor`: checks a deployment the way the bot will use it and says, line by line,
//! what works (✓), what is optional and broken (!), and what must be fixed (✗), each with the
//! fix. It exits 0 only when nothing is ✗.
//!
//! Each check is a small async function over a shared [`Context`], listed once in [`CHECKS`],
//! in the order an operator fixes things: Telegram ([`telegram`]), the language model
//! ([`llm`]), the services the tools use and the speech endpoint ([`services`]), then this
//! machine ([`local`]). A new check is one function and one entry in that list. Checks that
//! need an earlier one's result (a model needs the endpoint) read it from the context and say
//! "not checked" instead of repeating its error.
//!
//! What is *needed* fails: the token, the LLM endpoint and every configured model, tool
//! calling, the data directory, a non-empty allow-list. What the bot works without warns: no
//! recent backup, a webhook left set (polling deletes it at start), the embeddings model
//! (retrieval falls back to BM25), SearXNG and MCP servers (their tools are missing), the
//! speech endpoint (voice notes get an error), the PDF reader (PDFs get an apology). Nothing
//! here writes to the store; the report is redacted with the configuration's secrets before it
//! is printed.

mod context;
mod llm;
mod local;
mod report;
mod services;
mod telegram;

use crate::config::Config;
use context::{Check, Context};
pub use report::{Line, Report, Status};

/// Every check, in the order they run and are printed.
const CHECKS: &[Check] = &[
    telegram::token,
    telegram::updates,
    llm::endpoint,
    llm::models,
    llm::tool_calling,
    llm::embeddings,
    services::searxng,
    services::mcp,
    services::speech,
    services::voice,
    local::data_dir,
    local::backups,
    local::allow_list,
    local::pdf_reader,
];

/// Runs every check against `config`.
pub async fn run(config: &Config) -> anyhow::Result<Report> {
    let context = Context::new(config)?;
    let mut lines = Vec::new();
    for check in CHECKS {
        lines.extend(check(&context).await);
    }
    Ok(Report { lines })
}
