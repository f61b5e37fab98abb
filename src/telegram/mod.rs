//! Telegram, the adapter: the bot client, the one dptree schema of every route, the
//! handlers, and the listener that takes updates until the shutdown (the runtime, see
//! [`crate::runtime`], starts it after the services and stops it first).
//!
//! Every route is visible in [`schema`]: the sender's role is computed once, then messages
//! (strangers refused first, then commands, text, anything else) and button presses
//! (their data parsed once by [`CallbackData::parse`]; a stranger's "Request access" first,
//! then strangers refused; then an option, or one branch per action; anything else is
//! expired), and reactions (allowed users' only). Handlers live in
//! [`handlers`]; what a turn shows goes through [`outbox::Outbox`], the adapter's side of
//! [`crate::turn::Messenger`].

pub(crate) mod access;
pub mod callback_data;
pub(crate) mod commands;
pub(crate) mod draft_stop;
pub(crate) mod drafts;
pub(crate) mod handlers;
pub(crate) mod id_conversions;
pub mod keyboards;
pub mod limiter;
pub(crate) mod listener;
pub(crate) mod media;
pub(crate) mod memory_list;
pub(crate) mod outbox;
pub(crate) mod reactions;
pub mod render;
pub(crate) mod replies;
pub(crate) mod scrape;
pub(crate) mod send;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod task_list;
pub(crate) mod tool_list;
pub(crate) mod views;

use std::sync::Arc;
use std::time::Duration;

use dptree::case;
use teloxide::RequestError;
use teloxide::dispatching::UpdateHandler;
use teloxide::prelude::*;
use teloxide::types::{BotCommandScope, Me, Recipient};
use teloxide::update_listeners::{UpdateListener, webhooks};

use crate::app::App;
use crate::config::{Config, TelegramConfig};
use crate::role::Role;
use crate::shutdown::Shutdown;
use callback_data::{Action, CallbackData};
use commands::Command;
use drafts::Drafts;
use handlers::{Deps, presses};
use listener::{Intake, OnDraftStop, Polling};
use outbox::Outbox;

/// How many updates of one chat teloxide queues for its worker before the dispatcher waits
/// (its default is 64). Handlers never wait for a paced send ([`replies`]), only for the inbox
/// and for answering a button press, so a chat's queue drains within moments; this bound is
/// ten of Telegram's largest batches, so even a flood of presses in one chat does not make
/// every other chat's next update wait for it. The queue's memory grows only as it fills.
const WORKER_QUEUE: usize = 1024;

/// Every route of the bot, in one place.
pub(crate) fn schema() -> UpdateHandler<anyhow::Error> {
    let messages = Update::filter_message()
        .filter(|msg: Message, me: Me| handlers::addressed(&msg, &me))
        .map(|msg: Message| handlers::conversation_of(&msg))
        .branch(
            dptree::filter(|role: Role| role == Role::Stranger).endpoint(access::refuse_stranger),
        )
        .branch(
            dptree::entry()
                .filter_command::<Command>()
                .endpoint(handlers::commands::command),
        )
        .branch(
            dptree::filter_map(|msg: Message| msg.text().map(str::to_string))
                .endpoint(handlers::messages::text),
        )
        .branch(dptree::endpoint(handlers::messages::non_text));
    let actions = case![CallbackData::Action(action)]
        .branch(case![Action::SetModel(key)].endpoint(presses::set_model_pressed))
        .branch(case![Action::Clear].endpoint(presses::clear_pressed))
        .branch(case![Action::Feedback { ticket, up }].endpoint(presses::feedback_pressed))
        .branch(case![Action::Page { list, page }].endpoint(presses::page_pressed))
        .branch(case![Action::Approve { id, list, page }].endpoint(presses::approve_pressed))
        .branch(case![Action::Forget { id, list, page }].endpoint(presses::forget_pressed))
        .branch(case![Action::Stop(turn)].endpoint(presses::stop_pressed))
        .branch(case![Action::Chosen].endpoint(presses::chosen_pressed))
        .branch(case![Action::Retry { ticket }].endpoint(presses::retry_pressed))
        .branch(case![Action::MemoryPage { owner, page }].endpoint(presses::memory_page_pressed))
        .branch(
            case![Action::MemoryForget { owner, id, page }]
                .endpoint(presses::memory_forget_pressed),
        )
        .branch(
            case![Action::MemoryForgetAll { owner }].endpoint(presses::memory_forget_all_pressed),
        )
        .branch(case![Action::MemoryGroups { owner, on }].endpoint(presses::memory_groups_pressed))
        .branch(case![Action::Confirm { id, yes }].endpoint(presses::confirm_pressed))
        .branch(case![Action::TasksPage { owner, page }].endpoint(handlers::tasks::page_pressed))
        .branch(case![Action::CancelTask { id, page }].endpoint(handlers::tasks::cancel_pressed));
    let options = case![CallbackData::Option(press)].endpoint(presses::option_pressed);
    let presses = Update::filter_callback_query()
        // The data, parsed once for every route: `None` if forged, garbled or unknown.
        .map(|query: CallbackQuery| query.data.as_deref().and_then(CallbackData::parse))
        .branch(
            // The one button strangers may press: "Request access" under their refusal.
            dptree::filter_map(|data: Option<CallbackData>| match data? {
                CallbackData::Action(Action::RequestAccess(user)) => Some(user),
                _ => None,
            })
            .endpoint(access::request_pressed),
        )
        .branch(dptree::filter(|role: Role| role == Role::Stranger).endpoint(presses::refuse_press))
        .branch(
            // The chat the button was pressed in (none for inline messages: nothing to do).
            dptree::filter_map(|query: CallbackQuery| Some(query.message.as_ref()?.chat().id))
                // And the forum topic in it, if any.
                .filter_map(|query: CallbackQuery| handlers::pressed_in(&query))
                .filter_map(|data: Option<CallbackData>| data)
                .branch(options)
                .branch(actions),
        )
        .endpoint(presses::expired_press);
    // Reactions from allowed users on the bot's answers; strangers' are ignored.
    let reactions = Update::filter_message_reaction_updated()
        .filter(|role: Role| role != Role::Stranger)
        .endpoint(handlers::reactions::reacted);
    let routes = dptree::filter_map(|update: Update, deps: Deps| {
        Some(
            deps.app
                .config()
                .role_of(crate::ids::UserId(update.from()?.id.0)),
        )
    })
    .branch(messages)
    .branch(presses)
    .branch(reactions);
    // Telegram gets the update confirmed only once its handler is done (see `listener`).
    dptree::map(|update: Update, intake: Arc<Intake>| intake.handling(&update)).chain(routes)
}

/// The Telegram client for this configuration (`TELOXIDE_API_URL` honoured).
pub(crate) fn bot(config: &Config) -> anyhow::Result<Bot> {
    let bot = Bot::new(&config.token);
    if config.telegram.api_url.is_empty() {
        return Ok(bot);
    }
    Ok(bot.set_api_url(reqwest::Url::parse(&config.telegram.api_url)?))
}

/// The webhook listener: an axum server on `webhook_listen` that answers 401 to any request
/// without the secret token, registered with Telegram through setWebhook. Telegram's POST is
/// answered only once the update was handled (see [`listener::answer_when_handled`]).
async fn webhook(
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

/// Telegram's command menu: user commands for everyone, admin commands in admins' private
/// chats. Only a menu: every command is checked again on the server.
async fn register_commands(bot: &Bot, config: &Config) {
    if let Err(e) = bot.set_my_commands(Command::visible_to(Role::User)).await {
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
            .set_my_commands(Command::visible_to(Role::Admin))
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

/// Starts taking updates: the dispatcher of [`schema`], its handlers given `app` and `tg`, on
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
        let (listener, server) = webhook(bot, telegram, hook, &drafts).await?;
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
