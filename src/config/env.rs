//! The environment: the documented variables (`.env.example`) win over the file, and secrets
//! come only from here.

use std::path::PathBuf;

use super::{Config, ModelConfig};
use crate::ids::UserId;

impl Config {
    /// Applies the documented environment variables, then checks the whole configuration (see
    /// `validate.rs`); `var` is injectable for tests.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let set = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if let Some(url) = set("TELOXIDE_API_URL") {
            self.telegram.api_url = url;
        }
        if let Some(url) = set("OPENAI_BASE_URL") {
            self.llm.base_url = url;
        }
        self.llm.api_key = set("OPENAI_API_KEY");
        if let Some(url) = set("HEURIST_WEBHOOK_URL") {
            self.telegram.webhook_url = url;
        }
        if let Some(listen) = set("HEURIST_WEBHOOK_LISTEN") {
            self.telegram.webhook_listen = listen;
        }
        if let Some(secret) = set("HEURIST_WEBHOOK_SECRET") {
            self.telegram.webhook_secret = secret;
        }
        if let Some(url) = set("HEURIST_SEARXNG_URL") {
            self.tools.searxng_url = url;
        }
        if let Some(url) = set("HEURIST_SPEECH_URL") {
            self.speech.base_url = url;
        }
        self.speech.api_key = set("HEURIST_SPEECH_API_KEY");
        if let Some(url) = set("HEURIST_TTS_URL") {
            self.speech.tts_url = url;
        }
        self.speech.tts_api_key = set("HEURIST_TTS_API_KEY");
        if let Some(listen) = set("HEURIST_METRICS_LISTEN") {
            self.metrics.listen = listen;
        }
        if let Some(dir) = set("HEURIST_DATA_DIR") {
            self.data_dir = PathBuf::from(dir);
        }
        if let Some(dir) = set("HEURIST_BACKUP_DIR") {
            self.backup.dir = PathBuf::from(dir);
        }
        if let Some(ids) = set("HEURIST_ALLOWED_USERS") {
            self.access.allowed_users = parse_user_ids("HEURIST_ALLOWED_USERS", &ids)?;
        }
        if let Some(ids) = set("HEURIST_ADMINS") {
            self.access.admins = parse_user_ids("HEURIST_ADMINS", &ids)?;
        }
        if let Some(models) = set("HEURIST_MODELS") {
            // Ids named in the file keep their settings; new ids get defaults.
            let configured = std::mem::take(&mut self.models);
            self.models = models
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(|id| {
                    configured
                        .iter()
                        .find(|m| m.id == id)
                        .cloned()
                        .unwrap_or_else(|| ModelConfig::with_id(id))
                })
                .collect();
        }
        self.token = set("TELOXIDE_TOKEN").unwrap_or_default();
        for model in &mut self.models {
            model.api_key = model.api_key_env.as_deref().and_then(set);
        }
        self.validate()
    }
}

fn parse_user_ids(name: &str, list: &str) -> anyhow::Result<Vec<UserId>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>().map(UserId).map_err(|_| {
                anyhow::anyhow!(
                    "{name} must be comma-separated numeric Telegram user ids, got {s:?}"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::config::testing::env;
    use crate::role::Role;

    #[test]
    fn environment_overrides_file() {
        let file = "data_dir = \"/srv\"\n[llm]\nbase_url = \"http://file/v1\"\n";
        let mut config = Config::from_toml(Some(file), Path::new("x.toml")).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/srv"));
        config
            .apply_env(env(&[
                ("TELOXIDE_TOKEN", "123:abc"),
                ("OPENAI_BASE_URL", "http://env/v1"),
                ("HEURIST_ALLOWED_USERS", "1, 2"),
                ("HEURIST_ADMINS", "3"),
                ("HEURIST_MODELS", "a/b, llama3.1:8b"),
                ("HEURIST_DATA_DIR", "/tmp/h"),
                ("HEURIST_SEARXNG_URL", "http://10.0.0.5:8888"),
                ("HEURIST_METRICS_LISTEN", "127.0.0.1:9464"),
            ]))
            .unwrap();
        assert_eq!(config.tools.searxng_url, "http://10.0.0.5:8888");
        assert_eq!(config.metrics.listen, "127.0.0.1:9464");
        assert_eq!(config.llm.base_url, "http://env/v1");
        assert_eq!(config.data_dir, PathBuf::from("/tmp/h"));
        assert_eq!(config.default_model().id, "a/b");
        assert_eq!(config.models.len(), 2);
        assert_eq!(config.role_of(UserId(1)), Role::User);
        assert_eq!(config.role_of(UserId(3)), Role::Admin);
        assert_eq!(config.role_of(UserId(4)), Role::Stranger);
    }

    #[test]
    fn the_speech_endpoint_comes_from_the_environment_and_its_key_is_a_secret() {
        let with = |vars: &[(&str, &str)]| {
            let mut config = Config::from_toml(None, Path::new("x.toml")).unwrap();
            config.apply_env(env(vars)).map(|()| config)
        };
        let token = ("TELOXIDE_TOKEN", "123:abc");
        let config = with(&[
            token,
            ("HEURIST_SPEECH_URL", "http://127.0.0.1:8080/v1"),
            ("HEURIST_SPEECH_API_KEY", "sk-speech-0123456789"),
        ])
        .unwrap();
        assert_eq!(config.speech.base_url, "http://127.0.0.1:8080/v1");
        assert!(
            config
                .secrets()
                .contains(&"sk-speech-0123456789".to_string())
        );
        assert!(
            with(&[token]).unwrap().speech.base_url.is_empty(),
            "off by default"
        );
        let refused = with(&[token, ("HEURIST_SPEECH_URL", "ftp://x")]).unwrap_err();
        assert!(
            refused.to_string().contains("HEURIST_SPEECH_URL"),
            "{refused}"
        );
    }
}
