//! The Prometheus endpoint (`[metrics] listen`): `GET /metrics` on a listener of its own,
//! bound as the bot starts (so a taken port fails the start with a clear message) and served
//! from the end of the start until the app's shutdown begins.
//!
//! A scrape reads the gauges from the app (the chat queues, the inbox, the retry tickets, the
//! lessons in memory, the MCP servers' states) and answers the exposition of
//! [`crate::metrics`]; the counters were kept by the code they count.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

use crate::agent::mcp::ServerStatus;
use crate::app::App;
use crate::metrics::Gauges;

/// What Prometheus asks for and is answered (it parses OpenMetrics natively).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// What any other reader (`curl`, `promtool check metrics`) is answered: Prometheus' own text
/// format, the same families.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The endpoint while it serves, until the shutdown ([`MetricsServer::stopped`] waits for it).
pub(crate) struct MetricsServer {
    address: SocketAddr,
    serving: tokio::task::JoinHandle<()>,
}

/// A bound listener, not serving yet, and the address it got.
pub(crate) type Bound = (TcpListener, SocketAddr);

/// Binds `listen` (`host:port`); `None` when it is empty (metrics off).
pub(crate) async fn bind(listen: &str) -> anyhow::Result<Option<Bound>> {
    if listen.is_empty() {
        return Ok(None);
    }
    let address: SocketAddr = listen.parse()?;
    let cannot = |e: std::io::Error| {
        anyhow::anyhow!("cannot listen for metrics on {address} (metrics.listen): {e}")
    };
    let listener = TcpListener::bind(address).await.map_err(cannot)?;
    let address = listener.local_addr().map_err(cannot)?;
    Ok(Some((listener, address)))
}

/// Serves `GET /metrics` of `app` on the bound listener until `app`'s shutdown begins.
pub(crate) fn serve((listener, address): Bound, app: Arc<App>) -> MetricsServer {
    let shutdown = app.shutdown().clone();
    let router = axum::Router::new()
        .route("/metrics", axum::routing::get(scrape))
        .with_state(app);
    let serving = tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.begun().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the metrics server failed");
        }
    });
    tracing::info!(%address, "serving metrics at /metrics");
    MetricsServer { address, serving }
}

impl MetricsServer {
    /// The address it listens on (the port chosen, when `listen` asked for port 0).
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Waits (a little), once the shutdown has begun, for the port to be free.
    pub(crate) async fn stopped(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.serving).await;
    }
}

/// One scrape: the gauges read now, then every family, in OpenMetrics when the scraper asks
/// for it (Prometheus does), else in Prometheus' text format. Read off the runtime's threads:
/// the inbox's count decodes each entry retention keeps, which a busy bot has thousands of.
async fn scrape(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"));
    let rendered = tokio::task::spawn_blocking(move || app.metrics().render(&gauges(&app)));
    match rendered.await {
        Ok(body) if openmetrics => ([(header::CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Ok(body) => {
            let body = crate::metrics::to_prometheus_text(&body);
            ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], body).into_response()
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The gauges as the app holds them now.
fn gauges(app: &App) -> Gauges {
    let (approved, pending) = app.learning().review_counts();
    let mcp_servers = app
        .agent()
        .tools()
        .catalog()
        .servers
        .into_iter()
        .map(|server| {
            let up = matches!(server.status, ServerStatus::Up { .. });
            (server.name, up)
        })
        .collect();
    Gauges {
        queue_chats: app.queues().busy_chats(),
        queue_turns: app.queues().jobs(),
        inbox_pending: app.store().inbox().unfinished().len(),
        retries_pending: app.store().retries().unused(),
        lessons: vec![("approved", approved), ("pending", pending)],
        mcp_servers,
        store_bytes: app.data_dir().size(),
        volume: app.data_dir().volume(),
    }
}
