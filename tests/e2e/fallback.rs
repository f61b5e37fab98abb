//! Model fallback: a model whose endpoint fails (500, a refused connection, an unknown model)
//! hands the turn to its fallback on another endpoint, with that endpoint's own key; the answer
//! says once which model answered, the rest of the turn (option buttons) runs on it, and
//! `/stats` counts the fallbacks per model; streamed answers get the note once too. A model
//! without fallbacks fails as before.

use std::path::Path;
use std::time::Duration;

use heurist::config::ModelConfig;
use serde_json::Value;

use crate::support::*;

const LOCAL_KEY: &str = "local-key-12345678";
const HOSTED_KEY: &str = "hosted-key-87654321";

/// The `[[models]]` of `toml`, loaded as a deployment loads them: the file, then the
/// environment, where `LOCAL_KEY` and `HOSTED_KEY` hold the models' keys.
fn models(toml: &str) -> Vec<ModelConfig> {
    let mut config = heurist::Config::from_toml(Some(toml), Path::new("fallback.toml")).unwrap();
    config
        .apply_env(|name| {
            let value = match name {
                "TELOXIDE_TOKEN" => "123456:TEST-TOKEN",
                "LOCAL_KEY" => LOCAL_KEY,
                "HOSTED_KEY" => HOSTED_KEY,
                _ => return None,
            };
            Some(value.to_string())
        })
        .unwrap();
    config.models
}

/// A hosted model's server: the agent's calls answered with the model's name, options calls
/// with two options.
async fn hosted() -> FakeLlm {
    FakeLlm::start(|req, _| {
        if is_options_request(req) {
            Reply::text(r#"{"options": ["Tell me more", "Thanks"]}"#)
        } else {
            Reply::text(&format!("answer from {}", req["model"].as_str().unwrap()))
        }
    })
    .await
}

fn model_of(request: &Value) -> &str {
    request["model"].as_str().unwrap()
}

/// Waits (at most 10 s) until `llm` got `count` requests.
async fn wait_requests(llm: &FakeLlm, count: usize) -> Vec<Value> {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let requests = llm.requests();
        if requests.len() >= count {
            return requests;
        }
        assert!(std::time::Instant::now() < until, "{requests:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A local model whose server answers 500 hands the turn to a hosted one on another server:
/// each server sees only its own model and key, the answer comes from the hosted model with
/// one note naming it, the option buttons are extracted by the same model on the same request
/// prefix, and `/stats` charges the answer to it and counts the fallback for the local one.
#[tokio::test]
async fn a_failing_model_answers_through_its_fallback_on_another_endpoint() {
    let local = FakeLlm::start(|_, _| Reply::error(500, "llama-server crashed")).await;
    let hosted = hosted().await;
    let toml = format!(
        "[[models]]\nid = \"local\"\nbase_url = \"{}\"\napi_key_env = \"LOCAL_KEY\"\n\
         fallback = [\"hosted\"]\n\
         [[models]]\nid = \"hosted\"\nbase_url = \"{}\"\napi_key_env = \"HOSTED_KEY\"\n",
        local.url, hosted.url
    );
    let models = models(&toml);
    let h = Harness::start_with(hosted.clone(), |c| {
        c.models = models;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].text();
    assert!(text.starts_with("answer from hosted"), "{text}");
    assert_eq!(text.matches("Answered by").count(), 1, "one note: {text}");
    assert!(
        text.contains("<code>hosted</code>") && text.contains("<code>local</code>"),
        "the note names both models: {text}"
    );

    let tried = local.requests();
    assert!(
        tried.len() > 1,
        "the local model was retried first: {tried:?}"
    );
    assert!(tried.iter().all(|r| model_of(r) == "local"));
    assert!(local.statuses().iter().all(|s| *s == 500));
    let bearer = |key: &str| Some(format!("Bearer {key}"));
    assert!(
        local
            .authorizations()
            .iter()
            .all(|a| *a == bearer(LOCAL_KEY)),
        "{:?}",
        local.authorizations()
    );
    // The agent's answer and the options extraction after it.
    let requests = wait_requests(&hosted, 2).await;
    assert!(
        requests.iter().all(|r| model_of(r) == "hosted"),
        "{requests:?}"
    );
    assert!(
        hosted
            .authorizations()
            .iter()
            .all(|a| *a == bearer(HOSTED_KEY)),
        "{:?}",
        hosted.authorizations()
    );
    let options = requests.iter().find(|r| is_options_request(r)).unwrap();
    let agent = &hosted.agent_requests()[0];
    let prefix = agent["messages"].as_array().unwrap();
    assert_eq!(
        options["messages"].as_array().unwrap()[..prefix.len()],
        prefix[..],
        "the extraction extends the answering call's prompt (its cache hits)"
    );
    assert_eq!(options["tools"], agent["tools"]);

    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let stats = sent[1].text();
    assert!(stats.contains("<code>hosted</code>: 1 answer"), "{stats}");
    assert!(!stats.contains("<code>local</code>:"), "{stats}");
    assert!(
        stats.contains("Handed to a fallback model: <code>local</code> 1 time"),
        "{stats}"
    );
    h.stop().await;
}

/// A chain of two fallbacks: the first model's endpoint refuses connections, the second's does
/// not know its model (a 400 that says so), and the third answers; the note names only the
/// model that answered and the chat's own, and `/stats` counts both failed models.
#[tokio::test]
async fn a_chain_of_two_fallbacks_past_a_dead_port_and_an_unknown_model() {
    let down = FakeLlm::down_url().await;
    let unknown = FakeLlm::start(|req, _| {
        let model = model_of(req);
        Reply::error(400, &format!("The model `{model}` does not exist"))
    })
    .await;
    let hosted = hosted().await;
    let toml = format!(
        "[[models]]\nid = \"local\"\nbase_url = \"{down}\"\nfallback = [\"renamed\"]\n\
         [[models]]\nid = \"renamed\"\nbase_url = \"{}\"\nfallback = [\"hosted\", \"local\"]\n\
         [[models]]\nid = \"hosted\"\nbase_url = \"{}\"\napi_key_env = \"HOSTED_KEY\"\n",
        unknown.url, hosted.url
    );
    let models = models(&toml);
    let h = Harness::start_with(hosted.clone(), |c| {
        c.models = models;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].text();
    assert!(text.starts_with("answer from hosted"), "{text}");
    assert_eq!(text.matches("Answered by").count(), 1, "one note: {text}");
    assert!(!text.contains("renamed"), "{text}");
    assert_eq!(
        unknown.requests().len(),
        1,
        "an unknown model is not retried"
    );
    assert_eq!(
        unknown.authorizations(),
        [None],
        "a model on its own base_url without api_key_env sends no key"
    );
    assert_eq!(hosted.agent_requests().len(), 1);

    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    let stats = sent[1].text();
    assert!(
        stats.contains(
            "Handed to a fallback model: <code>local</code> 1 time, <code>renamed</code> 1 time"
        ),
        "{stats}"
    );
    h.stop().await;
}

/// A 403 is the provider refusing this content (OpenRouter's moderation answers 403): the turn
/// ends with its own message, and the conversation is never sent to the fallback's endpoint.
#[tokio::test]
async fn a_403_ends_the_turn_and_sends_nothing_to_the_fallback() {
    let local = FakeLlm::start(|_, _| Reply::error(403, "Input flagged by moderation")).await;
    let hosted = hosted().await;
    let toml = format!(
        "[[models]]\nid = \"local\"\nbase_url = \"{}\"\nfallback = [\"hosted\"]\n\
         [[models]]\nid = \"hosted\"\nbase_url = \"{}\"\napi_key_env = \"HOSTED_KEY\"\n",
        local.url, hosted.url
    );
    let models = models(&toml);
    let h = Harness::start_with(hosted.clone(), |c| {
        c.models = models;
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "something the provider's moderation flags");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].text();
    assert!(text.contains("provider refused this request"), "{text}");
    assert!(text.contains("did not send it to another model"), "{text}");
    assert!(!text.contains("Answered by"), "{text}");
    assert_eq!(local.requests().len(), 1, "a 403 is not retried");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        hosted.requests().is_empty(),
        "the content went to the fallback: {:?}",
        hosted.requests()
    );
    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert!(!sent[1].text().contains("fallback"), "{}", sent[1].text());
    h.stop().await;
}

/// A model without fallbacks fails as it always did: the unreachable note and 🔁 Retry, no
/// note about another model, no fallback counted.
#[tokio::test]
async fn a_model_without_fallback_still_fails_as_before() {
    let llm = FakeLlm::start(|_, _| Reply::error(500, "down")).await;
    let h = Harness::start_with(llm, |c| {
        c.options.enabled = false;
        c.learning.reflect = false;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    let sent = h.tg.wait_messages(ALICE, 1).await;
    let text = sent[0].text();
    assert!(text.contains("not reachable"), "{text}");
    assert!(!text.contains("Answered by"), "{text}");
    assert!(h.llm.requests().iter().all(|r| model_of(r) == "test-model"));
    h.tg.send_text(ALICE, "/stats");
    let sent = h.tg.wait_messages(ALICE, 2).await;
    assert!(!sent[1].text().contains("fallback"), "{}", sent[1].text());
    h.stop().await;
}

/// Streamed, as deployed: the local model's 503 shows nothing, the fallback's answer streams
/// in place, and its one message ends with the note, once.
#[tokio::test]
async fn a_streamed_answer_from_the_fallback_carries_the_note_once() {
    let local = FakeLlm::start(|_, _| Reply::error(503, "loading the model")).await;
    let hosted = FakeLlm::start(|req, _| {
        assert_eq!(req["stream"], true);
        Reply::streamed("streamed from hosted", 4, Duration::from_millis(20))
    })
    .await;
    let toml = format!(
        "[[models]]\nid = \"local\"\nbase_url = \"{}\"\nfallback = [\"hosted\"]\n\
         [[models]]\nid = \"hosted\"\nbase_url = \"{}\"\napi_key_env = \"HOSTED_KEY\"\n",
        local.url, hosted.url
    );
    let models = models(&toml);
    let h = Harness::start_with(hosted.clone(), |c| {
        c.models = models;
        c.telegram.streaming = true;
        c.options.enabled = false;
        c.learning.reflect = false;
        c.learning.feedback_buttons = false;
    })
    .await;
    h.tg.send_text(ALICE, "hello");
    let screen =
        h.tg.wait_for(|t| {
            let screen = t.screen(ALICE);
            screen
                .iter()
                .any(|m| m.contains("Answered by"))
                .then_some(screen)
        })
        .await;
    assert_eq!(screen.len(), 1, "{screen:?}");
    assert!(screen[0].starts_with("streamed from hosted"), "{screen:?}");
    assert_eq!(screen[0].matches("Answered by").count(), 1, "{screen:?}");
    assert!(
        local.requests().len() > 1,
        "the local model was retried first"
    );
    h.stop().await;
}
