//! The webhook's server: an axum server on `webhook_listen`, registered with Telegram through
//! setWebhook (with draft stops when Telegram takes them), whose middleware answers Telegram's
//! POST only once the update was handled.

use teloxide::prelude::*;
use teloxide::update_listeners::{UpdateListener, webhooks};

use super::drafts::Drafts;
use super::{draft_stop, listener};
use crate::config::TelegramConfig;

/// The webhook listener: an axum server on `webhook_listen` that answers 401 to any request
/// without the secret token, registered with Telegram through setWebhook. Telegram's POST is
/// answered only once the update was handled (see [`listener::answer_when_handled`]).
pub(crate) async fn serve(
    bot: Bot,
    config: &TelegramConfig,
    mut webhook: listener::Webhook,
    drafts: &Drafts,
) -> anyhow::Result<(
    impl UpdateListener<Err = std::convert::Infallible> + use<>,
    tokio::task::JoinHandle<()>,
)> {
    let address: std::net::SocketAddr = config.webhook_listen.parse()?;
    let url = reqwest::Url::parse(&config.webhook_url)?;
    let mut options = webhooks::Options::new(address, url);
    if config.webhook_secret.is_empty() {
        options.get_or_gen_secret_token();
    } else {
        options = options.secret_token(config.webhook_secret.clone());
    }
    let server = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for the webhook on {address}: {e}"))?;
    // Registered here, not by teloxide, whose setWebhook names no `allowed_updates`: Telegram
    // then sends no reactions. By hand first, to name draft stops too.
    let secret = options.get_or_gen_secret_token().to_string();
    webhook.secret.clone_from(&secret);
    let allowed = listener::ALLOWED_UPDATES;
    if draft_stop::register_webhook(&bot, &options.url, &secret, &allowed).await {
        drafts.stops_reach_bot();
    } else {
        tracing::warn!(
            "the webhook is registered without draft stops: drafts go without the stop control (⏹ and /cancel still stop)"
        );
        bot.set_webhook(options.url.clone())
            .secret_token(secret)
            .drop_pending_updates(false)
            .allowed_updates(allowed.to_vec())
            .await
            .map_err(|e| anyhow::anyhow!("cannot register the webhook with Telegram: {e}"))?;
    }
    let (listener, stopped, router) = webhooks::axum_no_setup(options);
    let stopped = async move {
        stopped.await;
        if let Err(e) = bot.delete_webhook().await {
            tracing::error!(error = %e, "cannot delete the webhook");
        }
    };
    let router = router.layer(axum::middleware::from_fn_with_state(
        webhook,
        listener::answer_when_handled,
    ));
    let serving = tokio::spawn(async move {
        let served = axum::serve(server, router)
            .with_graceful_shutdown(stopped)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the webhook server failed");
        }
    });
    Ok((listener, serving))
}
