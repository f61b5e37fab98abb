//! Telegram, the adapter: the bot client, its connection, and the listener that takes
//! updates until the shutdown (the runtime, see [`crate::runtime`], starts it after the
//! services and stops it first).
//!
//! Its rooms: [`schema`](mod@schema) (every route, in one place), [`handlers`] (the
//! endpoints: messages, commands, presses, reactions, and the one way a turn starts),
//! [`transport`] (updates in, messages out: listener, webhook, outbox, pacing, live replies,
//! drafts, media), the features' own rooms ([`features`]: their commands, button actions and
//! views side by side), and what they share: [`callback_data`] (the one parse of a button's
//! data), [`commands`] (the command list), [`keyboards`], [`views`], [`render`] (Markdown to
//! Telegram HTML), [`access`] (strangers). What a turn shows goes through
//! [`transport::outbox::Outbox`], the adapter's side of [`crate::turn::Messenger`].

pub(crate) mod access;
pub mod callback_data;
pub(crate) mod commands;
pub(crate) mod features;
pub(crate) mod handlers;
pub(crate) mod id_conversions;
pub mod keyboards;
pub mod render;
pub(crate) mod schema;
pub mod transport;
pub(crate) mod views;

use std::sync::Arc;
use std::time::Duration;

use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::{BotCommandScope, Recipient};
use teloxide::update_listeners::UpdateListener;

use crate::app::App;
use crate::config::Config;
use crate::role::Role;
use crate::shutdown::Shutdown;
use commands::ChatCommand;
use handlers::Deps;
use schema::schema;
use transport::listener::{self, Intake, OnDraftStop, Polling};
use transport::outbox::Outbox;
use transport::{draft_stop, webhook};

/// How many updates of one chat teloxide queues for its worker before the dispatcher waits
/// (its default is 64). Handlers never wait for a paced send ([`transport::replies`]), only for the inbox
/// and for answering a button press, so a chat's queue drains within moments; this bound is
/// ten of Telegram's largest batches, so even a flood of presses in one chat does not make
/// every other chat's next update wait for it. The queue's memory grows only as it fills.
const WORKER_QUEUE: usize = 1024;

/// The Telegram client for this configuration (`TELOXIDE_API_URL` honoured).
pub(crate) fn bot(config: &Config) -> anyhow::Result<Bot> {
    let bot = Bot::new(&config.token);
    if config.telegram.api_url.is_empty() {
        return Ok(bot);
    }
    Ok(bot.set_api_url(reqwest::Url::parse(&config.telegram.api_url)?))
}

/// Telegram's command menu: user commands for everyone, admin commands in admins' private
/// chats. Only a menu: every command is checked again on the server.
async fn register_commands(bot: &Bot, config: &Config) {
    if let Err(e) = bot
        .set_my_commands(ChatCommand::visible_to(Role::User))
        .await
    {
        tracing::warn!(error = %e, "cannot register the command list");
    }
    for &admin in &config.access.admins {
        let Some(chat) = admin.private_chat() else {
            continue;
        };
        let scope = BotCommandScope::Chat {
            chat_id: Recipient::Id(ChatId::from(chat)),
        };
        if let Err(e) = bot
            .set_my_commands(ChatCommand::visible_to(Role::Admin))
            .scope(scope)
            .await
        {
            // Telegram knows a private chat only once the admin has written to the bot.
            tracing::debug!(admin = admin.0, error = %e, "cannot register admin commands");
        }
    }
}

/// The adapter's connection: the client for this configuration, its token checked with
/// Telegram, and the command menu registered.
pub(crate) async fn connect(config: &Config) -> anyhow::Result<Bot> {
    let bot = bot(config)?;
    let me = bot.get_me().await.map_err(|e| match e {
        RequestError::Api(_) => {
            anyhow::anyhow!("Telegram did not accept the bot token (check TELOXIDE_TOKEN): {e}")
        }
        e => anyhow::anyhow!(
            "cannot reach the Telegram Bot API (check the network and TELOXIDE_API_URL): {}",
            crate::error_chain(&e)
        ),
    })?;
    tracing::info!(username = %me.username(), "connected to Telegram");
    register_commands(&bot, config).await;
    Ok(bot)
}

/// The adapter taking updates: the dispatcher on its listener (long polling, or the webhook's
/// server), until the app's shutdown begins.
pub(crate) struct Listening {
    dispatcher: tokio::task::JoinHandle<()>,
    /// Set when the dispatcher's task has ended.
    ended: tokio::sync::watch::Receiver<bool>,
    /// The webhook's HTTP server, in webhook mode: stopped with the listener, and awaited so
    /// its port is free when [`Listening::stopped`] returns.
    server: Option<tokio::task::JoinHandle<()>>,
}

/// Starts taking updates: the dispatcher of [`schema()`], its handlers given `app` and `tg`, on
/// long polling or the webhook. It stops when `app`'s shutdown begins.
pub(crate) async fn listen(app: &Arc<App>, bot: Bot, tg: Arc<Outbox>) -> anyhow::Result<Listening> {
    let intake = intake(app.config().clone());
    let deps = Deps {
        app: app.clone(),
        tg,
    };
    let stops = deps.clone();
    let drafts = deps.tg.drafts().clone();
    let on_stop: OnDraftStop = Box::new(move |stop| draft_stop::stopped(&stops, stop));
    let dispatcher = Dispatcher::builder(bot.clone(), schema())
        .dependencies(dptree::deps![
            deps,
            intake.clone(),
            Arc::new(access::Strangers::default())
        ])
        .default_handler(|update| async move {
            tracing::debug!(update_id = update.id.0, "update not handled");
        })
        .error_handler(LoggingErrorHandler::with_custom_text("a handler failed"))
        .worker_queue_size(WORKER_QUEUE)
        .build();
    let telegram = &app.config().telegram;
    let shutdown = app.shutdown().clone();
    let (ended, ended_rx) = tokio::sync::watch::channel(false);
    let (dispatcher, server) = if telegram.webhook_url.is_empty() {
        let listener = Polling::new(bot, intake, telegram.poll_timeout_secs, on_stop, drafts).await;
        (dispatch(dispatcher, listener, ended, shutdown), None)
    } else {
        let on_stop = Arc::new(on_stop);
        let hook = listener::Webhook {
            intake,
            on_stop,
            secret: String::new(),
        };
        let (listener, server) = webhook::serve(bot, telegram, hook, &drafts).await?;
        tracing::info!(url = %telegram.webhook_url, listen = %telegram.webhook_listen, "webhook mode");
        (
            dispatch(dispatcher, listener, ended, shutdown),
            Some(server),
        )
    };
    Ok(Listening {
        dispatcher,
        ended: ended_rx,
        server,
    })
}

/// The intake of updates: an allowed user's update that may start a turn is held until it is
/// durable; strangers' messages start no turn (they are refused, and not held).
fn intake(config: Config) -> Arc<Intake> {
    Arc::new(Intake::new(Box::new(move |update: &Update| {
        let allowed = update.from().is_some_and(|user| {
            config.role_of(crate::ids::UserId::from(user.id)) != Role::Stranger
        });
        allowed && listener::may_start_turn(update)
    })))
}

/// Runs `dispatcher` on `listener` in a task, which sets `ended` when it ends (stopped, or
/// failed as it began: teloxide asks Telegram for the bot once more first), and stops it when
/// `shutdown` begins. Returns the task.
fn dispatch<L>(
    mut dispatcher: Dispatcher<Bot, anyhow::Error, teloxide::dispatching::DefaultKey>,
    mut listener: L,
    ended: tokio::sync::watch::Sender<bool>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()>
where
    L: UpdateListener + Send + 'static,
    L::Err: std::fmt::Debug + Send,
{
    // teloxide's shutdown sets its state and wakes the dispatcher only if it is waiting for an
    // update at that moment (a notification nobody awaits is lost), so the listener is stopped
    // directly too: its stream ends, and with it the dispatcher's loop, once the batch in hand
    // is handled.
    let token = dispatcher.shutdown_token();
    let stop_listening = listener.stop_token();
    tokio::spawn(async move {
        shutdown.begun().await;
        let _ = token.shutdown();
        stop_listening.stop();
    });
    let errors = LoggingErrorHandler::with_custom_text("cannot get updates from Telegram");
    tokio::spawn(async move {
        if let Err(e) = dispatcher
            .try_dispatch_with_listener(listener, errors)
            .await
        {
            tracing::error!(error = %e, "cannot start taking updates");
        }
        ended.send_replace(true);
    })
}

impl Listening {
    /// Resolves if the adapter stops taking updates by itself (teloxide could not start, or
    /// its task failed): the runtime starts the bot again.
    pub(crate) async fn ended(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Waits, once the shutdown has begun, until the dispatcher has handled the batch in hand
    /// and the webhook's server (if any) has answered the requests in flight.
    pub(crate) async fn stopped(self) {
        let _ = self.dispatcher.await;
        if let Some(server) = self.server {
            // Graceful: it waits for the requests in flight, which are answered by now.
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
    }
}
