//! The LLM client every caller shares: one `Endpoint` per distinct base URL and key, and each
//! call sent to its model's endpoint, looked up by the request's model id when it is made.
//!
//! The global `[llm]` `base_url` and key (`OPENAI_API_KEY`) make the default endpoint, which
//! serves every model without settings of its own, the embedding model and a model no longer
//! configured. A `[[models]]` entry with its own `base_url` or `api_key_env` gets its own
//! endpoint (shared with the other models that have the same two): its own connection
//! settings, request slots and context discovery.
//!
//! A key goes only where it was configured for: a model with its own `base_url` and no
//! `api_key_env` sends no key at all, so the global key never reaches a third host by
//! omission.

use std::collections::HashMap;
use std::sync::Arc;

use super::client::{Endpoint, http_client};
use super::concurrency::Priority;
use super::error::LlmError;
use super::types::{ChatRequest, Completion, Usage};
use crate::config::{LlmConfig, ModelConfig};
use crate::metrics::{CallKind, Metrics};

/// Every endpoint the configured models use. Cheap to clone; clones share the endpoints.
#[derive(Clone)]
pub struct LlmClient {
    /// The default endpoint first.
    endpoints: Arc<[Endpoint]>,
    /// Model id → index into `endpoints`, for models whose endpoint is not the default.
    by_model: Arc<HashMap<String, usize>>,
}

/// Where a model's calls go: a base URL (without a trailing slash) and the key sent there.
type Address = (String, Option<String>);

impl LlmClient {
    /// A client with only the default endpoint, which serves every model.
    pub fn new(config: &LlmConfig) -> anyhow::Result<Self> {
        Self::with_models(config, &[])
    }

    /// A client with an endpoint for each distinct address among `config` and `models`.
    pub fn with_models(config: &LlmConfig, models: &[ModelConfig]) -> anyhow::Result<Self> {
        let http = http_client(config)?;
        let (addresses, by_model) = addresses(config, models);
        let endpoints = addresses
            .into_iter()
            .map(|(url, key)| Endpoint::new(config, http.clone(), &url, key))
            .collect();
        Ok(Self {
            endpoints,
            by_model: Arc::new(by_model),
        })
    }

    /// The client counting every endpoint's calls in the bot's `metrics`.
    pub(crate) fn with_metrics(self, metrics: Metrics) -> Self {
        let endpoints = self
            .endpoints
            .iter()
            .map(|e| e.clone().with_metrics(metrics.clone()))
            .collect();
        Self { endpoints, ..self }
    }

    /// The metrics the endpoints count in.
    pub(crate) fn metrics(&self) -> &Metrics {
        self.endpoints[0].metrics()
    }

    /// The endpoint that serves `model`.
    fn endpoint(&self, model: &str) -> &Endpoint {
        let index = self.by_model.get(model).copied().unwrap_or(0);
        &self.endpoints[index]
    }

    /// Runs one completion on the request's model's endpoint (see `Endpoint::complete`),
    /// counted as a call of `kind`.
    pub(crate) async fn complete(
        &self,
        request: &ChatRequest,
        priority: Priority,
        kind: CallKind,
    ) -> Result<Completion, LlmError> {
        self.endpoint(&request.model)
            .complete(request, priority, kind)
            .await
    }

    /// Runs one streamed completion on the request's model's endpoint (see
    /// `Endpoint::complete_streaming`).
    pub(crate) async fn complete_streaming(
        &self,
        request: &ChatRequest,
        priority: Priority,
        kind: CallKind,
        on_text: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        self.endpoint(&request.model)
            .complete_streaming(request, priority, kind, on_text)
            .await
    }

    /// Embeds `inputs` with `model` on its endpoint (see `Endpoint::embed`).
    pub(crate) async fn embed(
        &self,
        model: &str,
        inputs: &[String],
        priority: Priority,
    ) -> Result<(Vec<Vec<f32>>, Option<Usage>), LlmError> {
        self.endpoint(model).embed(model, inputs, priority).await
    }

    /// `model`'s context window, as its endpoint reports it, else `configured`.
    pub(crate) async fn context_window(
        &self,
        model: &str,
        configured: Option<usize>,
    ) -> Option<usize> {
        self.endpoint(model).context_window(model, configured).await
    }
}

/// One distinct endpoint of a configuration: where it is, the key sent there, and the models
/// it serves (none, for a default endpoint every model left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Served {
    /// The base URL, without a trailing slash.
    pub(crate) url: String,
    pub(crate) key: Option<String>,
    /// The ids of the models whose calls go there, in configuration order.
    pub(crate) models: Vec<String>,
}

/// Every distinct endpoint of `config` and `models`, the default one first, as the client
/// makes them: the doctor checks each one once, with its own key, and probes each model
/// where its calls will go.
pub(crate) fn served(config: &LlmConfig, models: &[ModelConfig]) -> Vec<Served> {
    let (addresses, by_model) = addresses(config, models);
    addresses
        .into_iter()
        .enumerate()
        .map(|(index, (url, key))| Served {
            url,
            key,
            models: models
                .iter()
                .filter(|m| by_model.get(&m.id).copied().unwrap_or(0) == index)
                .map(|m| m.id.clone())
                .collect(),
        })
        .collect()
}

/// The distinct addresses, the default one first, and the index of each model's address where
/// it is not the default.
fn addresses(config: &LlmConfig, models: &[ModelConfig]) -> (Vec<Address>, HashMap<String, usize>) {
    let default = (trimmed(&config.base_url), config.api_key.clone());
    let mut addresses = vec![default];
    let mut by_model = HashMap::new();
    for model in models {
        let address = address_of(config, model);
        let index = match addresses.iter().position(|a| *a == address) {
            Some(index) => index,
            None => {
                addresses.push(address);
                addresses.len() - 1
            }
        };
        if index != 0 {
            by_model.insert(model.id.clone(), index);
        }
    }
    (addresses, by_model)
}

/// Where `model`'s calls go: its own base URL, else the global one; the key its `api_key_env`
/// names, else the global key while it uses the global base URL, else none (see the module
/// docs).
fn address_of(config: &LlmConfig, model: &ModelConfig) -> Address {
    let global = trimmed(&config.base_url);
    let url = model.base_url.as_deref().map_or(global.clone(), trimmed);
    let key = match &model.api_key_env {
        Some(_) => model.api_key.clone(),
        None if url == global => config.api_key.clone(),
        None => None,
    };
    (url, key)
}

fn trimmed(url: &str) -> String {
    url.trim_end_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_share_an_endpoint_per_address_and_keys_stay_where_configured() {
        struct Case {
            name: &'static str,
            base_url: Option<&'static str>,
            api_key_env: Option<&'static str>,
            expect: (&'static str, Option<&'static str>),
        }
        let cases = [
            Case {
                name: "no settings: the global endpoint and key",
                base_url: None,
                api_key_env: None,
                expect: ("https://global/v1", Some("global-key")),
            },
            Case {
                name: "its own key on the global endpoint",
                base_url: None,
                api_key_env: Some("OWN_KEY"),
                expect: ("https://global/v1", Some("own-key")),
            },
            Case {
                name: "its own endpoint and key",
                base_url: Some("http://other:8080/v1/"),
                api_key_env: Some("OWN_KEY"),
                expect: ("http://other:8080/v1", Some("own-key")),
            },
            Case {
                name: "its own endpoint without a key gets none, not the global one",
                base_url: Some("http://localhost:8080/v1"),
                api_key_env: None,
                expect: ("http://localhost:8080/v1", None),
            },
            Case {
                name: "the global endpoint spelled with a slash keeps the global key",
                base_url: Some("https://global/v1/"),
                api_key_env: None,
                expect: ("https://global/v1", Some("global-key")),
            },
        ];
        let mut llm: LlmConfig = crate::config::Config::from_toml(None, "x".as_ref())
            .unwrap()
            .llm;
        llm.base_url = "https://global/v1".into();
        llm.api_key = Some("global-key".into());
        for case in cases {
            let model = ModelConfig {
                base_url: case.base_url.map(str::to_string),
                api_key_env: case.api_key_env.map(str::to_string),
                api_key: case.api_key_env.map(|_| "own-key".to_string()),
                ..ModelConfig::with_id("m")
            };
            let (url, key) = address_of(&llm, &model);
            assert_eq!(
                (url.as_str(), key.as_deref()),
                case.expect,
                "case {}",
                case.name
            );
        }
        let models = [
            ModelConfig::with_id("plain"),
            ModelConfig {
                base_url: Some("http://local/v1".into()),
                ..ModelConfig::with_id("local")
            },
            ModelConfig {
                base_url: Some("http://local/v1/".into()),
                ..ModelConfig::with_id("local-too")
            },
        ];
        let (addresses, by_model) = addresses(&llm, &models);
        assert_eq!(
            addresses.len(),
            2,
            "one endpoint per address: {addresses:?}"
        );
        assert_eq!(by_model.get("plain"), None, "the default endpoint");
        assert_eq!((by_model["local"], by_model["local-too"]), (1, 1));
        let served: Vec<(String, Vec<String>)> = served(&llm, &models)
            .into_iter()
            .map(|s| (s.url, s.models))
            .collect();
        let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            served,
            [
                ("https://global/v1".to_string(), ids(&["plain"])),
                ("http://local/v1".to_string(), ids(&["local", "local-too"])),
            ]
        );
    }
}
