//! The running service: gRPC (rate limit + gRPC health) on one listener, HTTP (`/healthz`,
//! `/metrics`) on another, both stopping gracefully on one signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;

use crate::{Backend, Decider, RateLimitGrpc};

/// Renders the metrics served on `/metrics` (the Prometheus exporter's handle, in the binary).
pub type RenderMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// The two listeners, bound beforehand (so a caller can bind port 0 and report the ports).
#[derive(Debug)]
pub struct Listeners {
    /// For `ShouldRateLimit` and `grpc.health.v1.Health`.
    pub grpc: TcpListener,
    /// For `/healthz` and `/metrics`.
    pub http: TcpListener,
}

impl Listeners {
    /// Binds both.
    pub async fn bind(grpc: SocketAddr, http: SocketAddr) -> std::io::Result<Listeners> {
        Ok(Listeners { grpc: TcpListener::bind(grpc).await?, http: TcpListener::bind(http).await? })
    }
}

/// Serves until `shutdown` completes, then stops taking calls, answers those in flight and
/// returns; after `grace` it returns even if some connection is still open.
pub async fn serve<B: Backend>(
    decider: Arc<Decider<B>>,
    listeners: Listeners,
    metrics: RenderMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer<RateLimitGrpc<B>>>()
        .await;
    let grpc = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(RateLimitGrpc::new(decider).into_server())
        .serve_with_incoming_shutdown(no_delay(listeners.grpc), stopped(stop_rx.clone()));

    let app = axum::Router::new().route("/healthz", get(|| async { "OK\n" })).route(
        "/metrics",
        get(move || {
            let metrics = Arc::clone(&metrics);
            async move { metrics() }
        }),
    );
    let http = axum::serve(listeners.http, app).with_graceful_shutdown(stopped(stop_rx));

    let grpc = tokio::spawn(grpc);
    let http = tokio::spawn(async move { http.await });
    shutdown.await;
    tracing::info!("shutting down: answering the calls in flight");
    let _ = stop_tx.send(true);
    let drained = async {
        let grpc = grpc.await;
        let http = http.await;
        (grpc, http)
    };
    match tokio::time::timeout(grace, drained).await {
        Ok((grpc, http)) => {
            if let Ok(Err(e)) = grpc {
                return Err(std::io::Error::other(e));
            }
            if let Ok(Err(e)) = http {
                return Err(e);
            }
            Ok(())
        }
        Err(_) => {
            tracing::warn!(?grace, "connections still open after the grace period; stopping anyway");
            Ok(())
        }
    }
}

/// The gRPC listener's connections with Nagle's algorithm off (as tonic sets it on listeners it
/// binds itself): an answer written in more than one segment (one that waited on Redis) must
/// not wait for the peer's delayed ACK.
fn no_delay(
    listener: TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    TcpListenerStream::new(listener).map(|accepted| {
        let stream = accepted?;
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
        Ok(stream)
    })
}
