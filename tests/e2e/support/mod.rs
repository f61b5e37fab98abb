// Shared by tests/e2e and benches/pipeline, each of which uses only a part.
#![allow(dead_code, unused_imports)]

//! What every end-to-end test needs: fake servers, a temporary sled directory, and the real
//! bot configured through its public environment-variable contract.

pub(crate) mod audio;
pub(crate) mod desk;
pub(crate) mod llm;
pub(crate) mod mcp;
pub(crate) mod pdf;
pub(crate) mod telegram;

use std::path::Path;
use std::time::Duration;

use heurist::conversation::Conversation;
use heurist::ids::ChatId;
use heurist::{Config, Running};
use tempfile::TempDir;

pub(crate) use llm::{FakeLlm, Reply, is_options_request, is_reflection_request, last_user_text};
pub(crate) use telegram::FakeTelegram;

/// An allowed user (private chat id = user id).
pub(crate) const ALICE: i64 = 1001;
pub(crate) const BOB: i64 = 1002;
/// An admin.
pub(crate) const ADMIN: i64 = 9001;
/// Nobody allowed this one.
pub(crate) const STRANGER: i64 = 666;

/// The conversation of chat `id` outside any topic (a private chat, a plain group), where the
/// store keeps its history.
pub(crate) fn in_chat(id: i64) -> Conversation {
    Conversation::new(ChatId(id), None)
}

/// The configuration a deployment would get from these environment variables.
pub(crate) fn config(tg: &FakeTelegram, llm_url: &str, data_dir: &Path) -> Config {
    let mut config = Config::from_toml(None, Path::new("config/heurist.toml")).unwrap();
    let data = data_dir.display().to_string();
    let tg_url = tg.url.clone();
    let llm_url = llm_url.to_string();
    config
        .apply_env(|name| {
            Some(match name {
                "TELOXIDE_TOKEN" => "123456:TEST-TOKEN".to_string(),
                "TELOXIDE_API_URL" => tg_url.clone(),
                "OPENAI_BASE_URL" => llm_url.clone(),
                "HEURIST_DATA_DIR" => data.clone(),
                "HEURIST_ALLOWED_USERS" => format!("{ALICE},{BOB}"),
                "HEURIST_ADMINS" => ADMIN.to_string(),
                "HEURIST_MODELS" => "test-model,other/model-with-a-very-long-slug-that-would-not-fit-in-callback-data".to_string(),
                _ => return None,
            })
        })
        .unwrap();
    config.llm.retry_base_ms = 20;
    config.telegram.poll_timeout_secs = 1;
    config.tools.fetch_allow_private = true;
    // Tests of the non-streaming path and fast pacing; the streaming tests turn both back.
    config.telegram.streaming = false;
    config.telegram.chat_interval_ms = 20;
    config.telegram.group_interval_ms = 20;
    // Tests about learning bring their own skills; elsewhere none match by accident.
    config.learning.skills_dir = data_dir.join("no-skills");
    // No scheduled backups (the backup tests turn them on), and none beside the temporary
    // directory, which would be the shared temporary directory itself.
    config.backup.every_hours = 0;
    config.backup.dir = data_dir.join("backups");
    // PDFs are parsed by the real binary's hidden subcommand (this process is a test binary).
    config.documents.parser_program = Some(env!("CARGO_BIN_EXE_heurist").into());
    config
}

/// A bot under test with its fakes and database.
pub(crate) struct Harness {
    pub(crate) tg: FakeTelegram,
    pub(crate) llm: FakeLlm,
    /// The sled directory, deleted when the harness is dropped.
    _dir: TempDir,
    pub(crate) bot: Option<Running>,
    /// The configuration the bot was started with (restarts reuse it).
    pub(crate) config: Config,
    /// The time the bot's scheduler reads, which a test may move forward (restarts reuse it).
    pub(crate) clock: heurist::clock::Clock,
}

impl Harness {
    pub(crate) async fn start(llm: FakeLlm) -> Self {
        Self::start_with(llm, |_| {}).await
    }

    pub(crate) async fn start_with(llm: FakeLlm, tweak: impl FnOnce(&mut Config)) -> Self {
        let tg = FakeTelegram::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(&tg, &llm.url, dir.path());
        tweak(&mut config);
        let clock = heurist::clock::Clock::system();
        let bot = heurist::start_with_clock(config.clone(), clock.clone())
            .await
            .unwrap();
        Self {
            tg,
            llm,
            _dir: dir,
            bot: Some(bot),
            config,
            clock,
        }
    }

    pub(crate) fn app(&self) -> &heurist::App {
        self.bot.as_ref().unwrap().app()
    }

    /// Stops the bot gracefully and starts a new one on the same database.
    pub(crate) async fn restart(&mut self) {
        self.bot.take().unwrap().stop().await;
        self.start_again().await;
    }

    /// Waits (at most 10 s) until no turn, queued turn, reply or follow-up is running: what
    /// was started has been shown.
    pub(crate) async fn settled(&self) {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !self.app().idle() {
            assert!(std::time::Instant::now() < until, "the bot never went idle");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Starts the bot (stopped by the test) on the same database, configuration and clock.
    pub(crate) async fn start_again(&mut self) {
        let bot = heurist::start_with_clock(self.config.clone(), self.clock.clone());
        self.bot = Some(bot.await.unwrap());
    }

    pub(crate) async fn stop(mut self) {
        if let Some(bot) = self.bot.take() {
            bot.stop().await;
        }
    }
}

/// Serves `html` at a loopback URL (the tests enable `fetch_allow_private`).
pub(crate) async fn serve_html(html: &'static str) -> String {
    use axum::response::Html;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/page", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/page",
        axum::routing::get(move || async move { Html(html) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The real `heurist` binary as a deployment runs it: configured only through environment
/// variables and a config file, logging to a file the test can read.
pub(crate) struct BotProcess {
    pub(crate) child: std::process::Child,
    pub(crate) log: std::path::PathBuf,
}

impl BotProcess {
    /// Config for tests: fast LLM retries, no skills, no scheduled backups.
    pub(crate) const TEST_TOML: &str = "[llm]\nretry_base_ms = 20\n[learning]\nskills_dir = \"/nonexistent\"\n[backup]\nevery_hours = 0\n";

    pub(crate) fn spawn(
        tg: &FakeTelegram,
        llm_url: &str,
        data: &Path,
        extra_env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_with(tg, llm_url, data, extra_env, Self::TEST_TOML)
    }

    /// Spawns with `toml` as the config file (over the shipped defaults).
    pub(crate) fn spawn_with(
        tg: &FakeTelegram,
        llm_url: &str,
        data: &Path,
        extra_env: &[(&str, &str)],
        toml: &str,
    ) -> Self {
        let config = data.join("test.toml");
        std::fs::write(&config, toml).unwrap();
        let log = data.join(format!(
            "bot-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_heurist"));
        command
            .current_dir(data)
            .env_clear()
            .env("TELOXIDE_TOKEN", "123456:TEST-TOKEN")
            .env("TELOXIDE_API_URL", &tg.url)
            .env("OPENAI_BASE_URL", llm_url)
            .env("HEURIST_DATA_DIR", data.join("db"))
            .env("HEURIST_ALLOWED_USERS", format!("{ALICE},{BOB}"))
            .env("HEURIST_CONFIG", &config)
            .env("RUST_LOG", "debug")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (key, value) in extra_env {
            command.env(key, value);
        }
        Self {
            child: command.spawn().unwrap(),
            log,
        }
    }

    /// Sends SIGTERM, as a service manager does to stop the bot.
    pub(crate) fn terminate(&self) {
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends SIGKILL and reaps the process: no shutdown code runs, as in a power cut.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit (at most `limit`), returning its exit code.
    pub(crate) async fn wait(&mut self, limit: std::time::Duration) -> Option<i32> {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if std::time::Instant::now() > until {
                let _ = self.child.kill();
                panic!(
                    "the bot did not exit within {limit:?}; log:\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (at most `limit`) until this run asked for the webhook settings, as it does once it
    /// finished what the previous run left, right before it starts polling: `before` is how
    /// many times runs before it asked.
    pub(crate) async fn started(
        &self,
        tg: &FakeTelegram,
        before: usize,
        limit: std::time::Duration,
    ) {
        let until = std::time::Instant::now() + limit;
        while tg.calls("getWebhookInfo").len() == before {
            assert!(
                std::time::Instant::now() < until,
                "the bot did not start; log:\n{}",
                self.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

impl Drop for BotProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The toast the press `query` was answered with.
pub(crate) async fn toast(tg: &FakeTelegram, query: &str) -> String {
    tg.wait_for(|tg| {
        tg.calls("answerCallbackQuery")
            .into_iter()
            .find(|c| c.params["callback_query_id"] == query)
            .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
    })
    .await
}

/// The first confirmation (✅ / ✖ under a fact or task the provenance gate held) sent to
/// `chat` after its first `after` messages.
pub(crate) async fn confirmation(tg: &FakeTelegram, chat: i64, after: usize) -> telegram::Call {
    tg.wait_for(|tg| {
        tg.messages_to(chat)
            .into_iter()
            .skip(after)
            .find(|m| m.text().starts_with("⚠️ Confirm"))
    })
    .await
}
