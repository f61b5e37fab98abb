//! What the operator reads on the command line (see [`crate::texts`]): `heurist --help`, the
//! lines of `heurist doctor` with what to fix, and the summaries of `heurist heuristics export`
//! and `import`. Every fix names the setting or the command that fixes it.

/// `heurist --help`.
pub const HELP: &str = "\
heurist: a self-hosted Telegram AI-agent bot that learns heuristics from its own tasks

Usage:
  heurist                               run the bot
  heurist doctor                        check the deployment and say what to fix
  heurist heuristics export FILE [--include-pending]
                                        write the reviewed lessons (approved or trusted,
                                        not on probation) to FILE (JSON lines, readable by
                                        its owner only); with --include-pending the pending
                                        and probation ones too, which stay so through any
                                        import
  heurist heuristics import FILE [--trust]
                                        learn the lessons in FILE; they wait for review in
                                        /heuristics pending unless --trust
  heurist lessons export|import ...     the same two (and /lessons is /heuristics)
  heurist restore FILE                  restore the backup FILE into HEURIST_DATA_DIR, which
                                        must be empty or missing (its checksum and version
                                        are checked first)
  heurist --help                        this text

Configuration: .env, the environment and HEURIST_CONFIG (default config/heurist.toml); see
docs/configuration.md. Operating it: docs/operations.md.";

/// Arguments the command line does not know.
pub(crate) fn usage_error(problem: &str) -> String {
    format!("{problem}; run `heurist --help` for the commands")
}

/// The configuration could not be loaded: nothing else can be checked.
pub(crate) const CONFIG: &str = "configuration";
pub(crate) const CONFIG_FIX: &str = "fix what the message says in .env, the environment or the config file, then run `heurist doctor` again";

// ---- Telegram ----

pub(crate) const TOKEN: &str = "Telegram token";
pub(crate) fn token_ok(username: &str, id: u64) -> String {
    format!("the bot is @{username} (id {id})")
}
pub(crate) fn token_refused(error: &str) -> String {
    format!("Telegram refused the token (401 Unauthorized: {error})")
}
pub(crate) const TOKEN_REFUSED_FIX: &str =
    "copy the token again from @BotFather (/mybots → API Token) into TELOXIDE_TOKEN";
pub(crate) fn telegram_unreachable(error: &str) -> String {
    format!("cannot ask Telegram (getMe): {error}")
}
pub(crate) const TELEGRAM_UNREACHABLE_FIX: &str =
    "check this machine's network, or TELOXIDE_API_URL if you use your own Bot API server";

pub(crate) const WEBHOOK: &str = "updates";
pub(crate) const SKIPPED_NO_TELEGRAM: &str = "not checked: Telegram did not answer getMe";
pub(crate) const POLLING_OK: &str = "long polling; no webhook is set";
pub(crate) fn webhook_set_while_polling(url: &str) -> String {
    format!(
        "a webhook is set ({url}) but this configuration polls: Telegram refuses getUpdates while it is set"
    )
}
pub(crate) const WEBHOOK_SET_WHILE_POLLING_FIX: &str = "if no other deployment uses that webhook, start the bot: it deletes the webhook and polls; \
     if this one should take updates by webhook, set HEURIST_WEBHOOK_URL to that URL";
pub(crate) fn webhook_ok(url: &str, pending: u32) -> String {
    format!("webhook {url}, {pending} updates waiting")
}
pub(crate) fn webhook_elsewhere(registered: &str, configured: &str) -> String {
    format!(
        "Telegram posts updates to {registered:?}, this configuration to {configured}: the bot registers its URL at start"
    )
}
pub(crate) const WEBHOOK_ELSEWHERE_FIX: &str =
    "start the bot to register HEURIST_WEBHOOK_URL (stop any other deployment of this bot first)";
pub(crate) fn webhook_failing(url: &str, error: &str) -> String {
    format!("webhook {url}: Telegram's last delivery failed: {error}")
}
pub(crate) const WEBHOOK_FAILING_FIX: &str = "make HEURIST_WEBHOOK_URL reach HEURIST_WEBHOOK_LISTEN through your reverse proxy (HTTPS, a valid certificate)";
pub(crate) fn webhook_info_failed(error: &str) -> String {
    format!("cannot read the webhook settings (getWebhookInfo): {error}")
}

// ---- the language model ----

pub(crate) const LLM: &str = "LLM endpoint";
pub(crate) fn llm_reachable(base_url: &str, status: u16) -> String {
    format!("{base_url} answers (GET /models: HTTP {status})")
}
pub(crate) fn llm_unreachable(base_url: &str, error: &str) -> String {
    format!("cannot reach {base_url}: {error}")
}
pub(crate) const LLM_UNREACHABLE_FIX: &str =
    "start the model server, or set OPENAI_BASE_URL to its address (with /v1)";
pub(crate) fn llm_key_refused(base_url: &str, status: u16) -> String {
    format!("{base_url} refused the API key (HTTP {status})")
}
pub(crate) const LLM_KEY_FIX: &str = "set OPENAI_API_KEY to a valid key for this endpoint";
/// The endpoint of the models named (`ids`, comma-separated) when it is not the default one.
pub(crate) fn llm_endpoint_for(ids: &str) -> String {
    format!("LLM endpoint for {ids}")
}
/// The default endpoint when no model and no embeddings model uses it.
pub(crate) const LLM_UNUSED: &str =
    "not checked: every model has a base_url of its own and no embeddings model is set";
pub(crate) const LLM_MODEL_UNREACHABLE_FIX: &str =
    "start the model server, or fix base_url in these models' [[models]] entries";
/// A model's own endpoint refused its key: `env` is the variable its `api_key_env` names.
pub(crate) fn llm_model_key_fix(env: Option<&str>) -> String {
    match env {
        Some(env) => format!("set {env} to a valid key for this endpoint"),
        None => "this endpoint wants a key: set api_key_env in these models' [[models]] \
                 entries to the variable that holds it"
            .to_string(),
    }
}
pub(crate) const SKIPPED_NO_LLM: &str = "not checked: the LLM endpoint is unreachable";

pub(crate) fn model(id: &str) -> String {
    format!("model {id}")
}
pub(crate) fn model_ok(context: &str) -> String {
    format!("answers; {context}")
}
pub(crate) fn context_reported(tokens: usize) -> String {
    format!("context {tokens} tokens (reported by the server)")
}
pub(crate) fn context_configured(tokens: usize) -> String {
    format!("context {tokens} tokens (context_tokens in the config; the server does not say)")
}
pub(crate) const CONTEXT_UNKNOWN: &str = "the server does not report its context size";
pub(crate) fn model_failed(error: &str) -> String {
    format!("a one-token call failed: {error}")
}
pub(crate) const MODEL_UNKNOWN_FIX: &str = "load or pull the model on the server (e.g. `ollama pull <id>`), or fix its id in HEURIST_MODELS / [[models]]";
pub(crate) const MODEL_FAILED_FIX: &str =
    "see the server's log; check the model's id in HEURIST_MODELS / [[models]]";

pub(crate) fn tool_calling(model: &str) -> String {
    format!("tool calling ({model})")
}
pub(crate) const TOOLS_NATIVE: &str = "native tool_calls";
pub(crate) const TOOLS_TEXT: &str =
    "written as text in the answer (Heurist reads those; native tool_calls are more reliable)";
pub(crate) const TOOLS_NONE: &str =
    "the model answered without calling the tool it was asked to call";
pub(crate) const TOOLS_NONE_FIX: &str = "use a model trained for tool calling (Qwen2.5, Llama 3.1+), and enable it on the server (llama.cpp: --jinja; vLLM: --enable-auto-tool-choice)";

pub(crate) fn embeddings(model: &str) -> String {
    format!("embeddings model {model}")
}
pub(crate) fn embeddings_ok(dimensions: usize) -> String {
    format!("answers, {dimensions} dimensions")
}
pub(crate) fn embeddings_failed(error: &str) -> String {
    format!("cannot embed: {error} (retrieval falls back to BM25)")
}
pub(crate) const EMBEDDINGS_FIX: &str = "serve that model on the endpoint, or set learning.embedding_model = \"\" to match by words only";

// ---- services ----

pub(crate) const SPEECH: &str = "speech endpoint";
pub(crate) fn speech_ok(model: &str) -> String {
    format!("transcribes a test recording ({model})")
}
pub(crate) fn speech_failed(error: &str) -> String {
    format!("cannot transcribe a test recording: {error}")
}
pub(crate) const SPEECH_FIX: &str = "start the transcription server, or fix HEURIST_SPEECH_URL \
    (its /audio/transcriptions, e.g. http://127.0.0.1:8000/v1), speech.model and \
    HEURIST_SPEECH_API_KEY; until then voice notes get an error";
pub(crate) const VOICE: &str = "spoken replies";
/// `from`: the format the endpoint answered in (Ogg Opus, or WAV encoded here).
pub(crate) fn voice_ok(model: &str, bytes: usize, from: &str) -> String {
    if from == "Ogg Opus" {
        format!("speaks a test sentence as Ogg Opus ({model}, {bytes} bytes)")
    } else {
        format!(
            "speaks a test sentence as {from}, encoded here to Ogg Opus ({model}, {bytes} bytes)"
        )
    }
}
pub(crate) fn voice_failed(error: &str) -> String {
    format!("cannot speak a test sentence: {error}")
}
pub(crate) const VOICE_FIX: &str = "start the speech server, or fix HEURIST_TTS_URL (its \
    /audio/speech, e.g. http://127.0.0.1:8880/v1), speech.tts_model, speech.tts_voice and \
    HEURIST_TTS_API_KEY; it must answer response_format \"opus\" as Ogg Opus (or as WAV, \
    encoded here); until then answers are text only";
pub(crate) const SEARXNG: &str = "SearXNG";
pub(crate) const NOT_CONFIGURED: &str = "not configured";
pub(crate) fn searxng_ok(results: usize) -> String {
    format!("answers JSON ({results} results for a test query)")
}
pub(crate) const SEARXNG_NO_JSON: &str =
    "the instance refuses the JSON format (HTTP 403), so web_search cannot read it";
pub(crate) const SEARXNG_NO_JSON_FIX: &str =
    "enable it in SearXNG's settings.yml: `search: formats: [html, json]`, then restart SearXNG";
pub(crate) fn searxng_failed(error: &str) -> String {
    format!("cannot search: {error}")
}
pub(crate) const SEARXNG_FIX: &str =
    "start SearXNG, or fix HEURIST_SEARXNG_URL (e.g. http://127.0.0.1:8888)";

pub(crate) fn mcp(name: &str) -> String {
    format!("MCP server {name}")
}
pub(crate) fn mcp_ok(tools: usize, left_out: usize) -> String {
    if left_out == 0 {
        format!("started, {tools} tools")
    } else {
        format!("started, {tools} tools ({left_out} left out for the size of their schema)")
    }
}
pub(crate) fn mcp_down(error: &str) -> String {
    format!("does not start: {error}")
}
pub(crate) const MCP_STARTING: &str = "still starting after its timeout_secs";
pub(crate) const MCP_FIX: &str = "fix its command/args (or url/headers) in [[mcp.servers]]; run the command by hand to see its error";

// ---- this machine ----

pub(crate) const BACKUPS: &str = "backups";
pub(crate) fn backups_ok(dir: &str, age: &str, every_hours: u64, keep: usize) -> String {
    format!("the last one {age} ago in {dir} (every {every_hours} h, {keep} kept)")
}
pub(crate) fn backups_off(dir: &str, last: &str) -> String {
    format!("none scheduled (backup.every_hours = 0); /backup writes one into {dir}; {last}")
}
pub(crate) fn backups_late(dir: &str, age: &str, every_hours: u64) -> String {
    format!("the last one in {dir} is {age} old, past twice the interval ({every_hours} h)")
}
pub(crate) fn backups_first(dir: &str) -> String {
    format!("none yet, and no store to back up: the bot writes the first into {dir} as it starts")
}
pub(crate) fn backups_none(dir: &str) -> String {
    format!("no backup in {dir} yet")
}
pub(crate) const BACKUPS_FIX: &str = "look in the bot's log for \"cannot write a backup\", give it write access to the backup directory (HEURIST_BACKUP_DIR) and room on its disk; /backup writes one now";
pub(crate) fn backups_last(age: &str) -> String {
    format!("the last one {age} ago")
}

/// A restore done.
pub(crate) fn restored(file: &str, dir: &str, trees: usize, records: u64) -> String {
    format!("restored {records} records of {trees} trees from {file} into {dir}")
}

pub(crate) const DATA_DIR: &str = "data directory";
pub(crate) fn data_dir_ok(path: &str, size: &str, compaction: &str) -> String {
    format!("{path} is writable; store {size}; {compaction}")
}
pub(crate) fn data_dir_new(path: &str) -> String {
    format!("{path} is writable; no store yet (the first start creates it)")
}
pub(crate) fn compacts_at(size: &str) -> String {
    format!("compacts at the next start past {size}")
}
pub(crate) const COMPACTION_OFF: &str = "compaction is off (compact_factor = 0)";
pub(crate) fn data_dir_unwritable(path: &str, error: &str) -> String {
    format!("cannot write in {path}: {error}")
}
pub(crate) const DATA_DIR_FIX: &str = "give the bot's user write access to it (in a container: the volume mounted at /data), or set HEURIST_DATA_DIR";
pub(crate) fn data_dir_unreadable(error: &str) -> String {
    format!("the store's CURRENT file: {error}")
}

pub(crate) const ALLOW_LIST: &str = "allow-list";
pub(crate) fn allow_list_ok(users: usize, admins: usize) -> String {
    format!("{users} users, {admins} admins")
}
pub(crate) const ALLOW_LIST_EMPTY: &str = "empty: nobody can use the bot";
pub(crate) const ALLOW_LIST_FIX: &str = "set HEURIST_ALLOWED_USERS and HEURIST_ADMINS to Telegram user ids (message the bot once: it replies with yours)";

pub(crate) const PDF_READER: &str = "PDF reader";
pub(crate) fn pdf_reader_ok(timeout_secs: u64, memory_mb: u64, cpu_secs: u64) -> String {
    format!(
        "reads a test PDF in a child process (at most {timeout_secs} s, {memory_mb} MB, \
         {cpu_secs} s of CPU)"
    )
}
pub(crate) fn pdf_reader_failed(error: &str) -> String {
    format!("cannot read a test PDF: {error}")
}
pub(crate) const PDF_READER_FIX: &str = "the bot reads PDFs by running its own binary (/proc/self/exe __read-document pdf): make sure /proc is mounted and the binary may be executed, or raise documents.parser_memory_mb; until then PDFs get an apology";

/// The last line of the doctor's report.
pub(crate) fn summary(failures: usize, warnings: usize) -> String {
    match (failures, warnings) {
        (0, 0) => "Everything works.".to_string(),
        (0, w) => format!("Ready to run; {w} optional thing(s) to look at."),
        (f, _) => format!("{f} thing(s) to fix before the bot can work."),
    }
}

// ---- moving lessons ----

pub(crate) fn exported(count: usize, left_out: usize, file: &str) -> String {
    if left_out == 0 {
        format!("exported {count} lessons to {file}")
    } else {
        format!(
            "exported {count} lessons to {file} ({left_out} pending or on probation left out: \
             --include-pending adds them, and they stay pending or on probation through any \
             import)"
        )
    }
}
pub(crate) fn malformed_line(line: usize, error: &str) -> String {
    format!("line {line}: not a lesson ({error}); skipped")
}
pub(crate) fn imported(
    added: usize,
    pending: usize,
    on_probation: usize,
    merged: usize,
    refused: usize,
) -> String {
    let probation = if on_probation == 0 {
        String::new()
    } else {
        format!(
            ", {on_probation} on probation until a call to their tool works with them in view \
             (✅ in /heuristics proves one, 🗑 forgets it)"
        )
    };
    format!(
        "imported {added} new lessons ({pending} wait for review in /heuristics pending\
         {probation}), {merged} merged into known ones, {refused} refused by the quality gate"
    )
}
