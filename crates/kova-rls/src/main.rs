//! `kova-rls`: Envoy's rate limit service on kova. See the crate's README for the Envoy side.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use kova::keyed::TableFullPolicy;
use kova_redis::{Leasing, RedisLimiter, StoreFailurePolicy};
use kova_rls::{
    telemetry, Backend, Config, Decider, Listeners, MemoryBackend, MemoryOptions, RedisBackend, Reloader,
    RequestLimits,
};
use metrics_exporter_prometheus::PrometheusBuilder;

/// Envoy's rate limit service (envoy.service.ratelimit.v3) on kova, configured with
/// envoyproxy/ratelimit's YAML.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The configuration: one YAML file, or a directory of them (one domain per file).
    #[arg(long, env = "KOVA_RLS_CONFIG")]
    config: PathBuf,
    /// Where `ShouldRateLimit` and gRPC health are served (envoyproxy/ratelimit's gRPC port).
    #[arg(long, env = "KOVA_RLS_GRPC_ADDR", default_value = "0.0.0.0:8081")]
    grpc_addr: SocketAddr,
    /// Where `/healthz` and `/metrics` are served.
    #[arg(long, env = "KOVA_RLS_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// How often the configuration's files are read for changes, in milliseconds (0: never).
    #[arg(long, env = "KOVA_RLS_RELOAD_INTERVAL_MS", default_value_t = 1000)]
    reload_interval_ms: u64,
    /// Where limits' state lives: this process's memory, or Redis (shared by every kova-rls
    /// on it).
    #[arg(long, env = "KOVA_RLS_BACKEND", value_enum, default_value_t = BackendKind::Memory)]
    backend: BackendKind,
    /// The Redis node (`--backend redis`).
    #[arg(long, env = "KOVA_RLS_REDIS_URL", default_value = "redis://127.0.0.1:6379/")]
    redis_url: String,
    /// A Redis Cluster instead of one node: any of its nodes, comma-separated
    /// (`redis://10.0.0.1:6379/,redis://10.0.0.2:6379/`); connected at start (an error stops
    /// the service). `--redis-url` is then unused.
    #[arg(long, env = "KOVA_RLS_REDIS_CLUSTER", value_delimiter = ',')]
    redis_cluster: Vec<String>,
    /// The prefix of every Redis key (`prefix:{tag}:algorithm`).
    #[arg(long, env = "KOVA_RLS_REDIS_PREFIX", default_value = "kova-rls")]
    redis_prefix: String,
    /// How long one Redis call may take before the failure policy decides, in milliseconds.
    #[arg(long, env = "KOVA_RLS_REDIS_TIMEOUT_MS", default_value_t = 50)]
    redis_timeout_ms: u64,
    /// What a decision is when Redis cannot answer in time (every such decision is counted in
    /// kova_rls_fallbacks_total).
    #[arg(long, env = "KOVA_RLS_REDIS_FAILURE", value_enum, default_value_t = RedisFailure::Open)]
    redis_failure: RedisFailure,
    /// How many kova-rls share the Redis limits: under `--redis-failure degrade` each decides
    /// locally at this share of every limit.
    #[arg(long, env = "KOVA_RLS_REDIS_SERVERS", default_value_t = std::num::NonZeroU32::MIN)]
    redis_servers: std::num::NonZeroU32,
    /// Units a hot key leases from Redis at a time, spent here without a round trip (0: no
    /// leasing). Across N servers a limit may be passed by at most N times this (exact per
    /// window for fixed_window).
    #[arg(long, env = "KOVA_RLS_REDIS_LEASE", default_value_t = 0)]
    redis_lease: u64,
    /// How long a lease may be spent, in milliseconds.
    #[arg(long, env = "KOVA_RLS_REDIS_LEASE_TTL_MS", default_value_t = 100)]
    redis_lease_ttl_ms: u64,
    /// The most keys each algorithm's table holds.
    #[arg(long, env = "KOVA_RLS_MAX_KEYS", default_value_t = MemoryOptions::default().max_keys)]
    max_keys: usize,
    /// What a full table does with a new key (every such decision is counted in
    /// kova_rls_fallbacks_total).
    #[arg(long, env = "KOVA_RLS_TABLE_FULL", value_enum, default_value_t = TableFull::Evict)]
    table_full: TableFull,
    /// The most descriptors one request may carry.
    #[arg(long, env = "KOVA_RLS_MAX_DESCRIPTORS", default_value_t = RequestLimits::default().max_descriptors)]
    max_descriptors: usize,
    /// The most entries one descriptor may carry.
    #[arg(long, env = "KOVA_RLS_MAX_ENTRIES", default_value_t = RequestLimits::default().max_entries)]
    max_entries: usize,
    /// How long shutdown waits for open calls, in milliseconds.
    #[arg(long, env = "KOVA_RLS_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    shutdown_grace_ms: u64,
    /// Log filter (tracing-subscriber's EnvFilter syntax).
    #[arg(long, env = "KOVA_RLS_LOG", default_value = "info")]
    log: String,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendKind {
    /// kova's keyed tables in this process.
    Memory,
    /// kova-redis on `--redis-url`.
    Redis,
}

/// `--redis-failure`: kova-redis's failure policies.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RedisFailure {
    /// Allow (fail open).
    Open,
    /// Deny, `Retry-After` 1 s (fail closed).
    Closed,
    /// Answer the call with UNAVAILABLE: Envoy's `failure_mode_deny` decides.
    Error,
    /// Decide locally at this server's share of the limit (`--redis-servers`), and charge
    /// Redis with what was admitted when it answers again.
    Degrade,
}

/// `--table-full`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum TableFull {
    /// Evict the key closest to idle (never one being limited); deny when all are limited.
    Evict,
    /// Deny new keys (fail closed).
    Deny,
    /// Allow new keys untracked (fail open).
    Allow,
}

impl From<TableFull> for TableFullPolicy {
    fn from(policy: TableFull) -> Self {
        match policy {
            TableFull::Evict => TableFullPolicy::EvictClosestToIdle,
            TableFull::Deny => TableFullPolicy::DenyNew,
            TableFull::Allow => TableFullPolicy::AllowUntracked,
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "kova-rls stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    telemetry::describe();

    let sources = kova_rls::read_sources(&args.config)?;
    let config = Config::from_sources(&sources)?;
    telemetry::reload(true);
    let domains: Vec<&str> = config.domain_names().collect();
    tracing::info!(path = %args.config.display(), ?domains, "configuration loaded");

    let limits = RequestLimits { max_descriptors: args.max_descriptors, max_entries: args.max_entries };
    match args.backend {
        BackendKind::Memory => {
            let options = MemoryOptions { max_keys: args.max_keys, table_full: args.table_full.into() };
            serve(args, MemoryBackend::new(options)?, config, sources, limits, prometheus).await
        }
        BackendKind::Redis => {
            let backend = RedisBackend::new(redis_limiter(&args).await?);
            match args.redis_cluster.as_slice() {
                [] => {
                    tracing::info!(url = %args.redis_url, policy = ?args.redis_failure, "limits kept in Redis")
                }
                nodes => tracing::info!(?nodes, policy = ?args.redis_failure, "limits kept in Redis Cluster"),
            }
            serve(args, backend, config, sources, limits, prometheus).await
        }
    }
}

/// The kova-redis limiter the `--redis-*` flags describe. On one node it connects on first use
/// (and again after Redis restarts), so the service starts while Redis is down; a cluster is
/// connected now.
async fn redis_limiter(args: &Args) -> Result<RedisLimiter, kova_redis::Error> {
    let policy = match args.redis_failure {
        RedisFailure::Open => StoreFailurePolicy::FailOpen,
        RedisFailure::Closed => StoreFailurePolicy::FailClosed,
        RedisFailure::Error => StoreFailurePolicy::ReturnError,
        RedisFailure::Degrade => StoreFailurePolicy::Degrade { servers: args.redis_servers },
    };
    let mut builder = RedisLimiter::builder()
        .prefix(&args.redis_prefix)
        .timeout(Duration::from_millis(args.redis_timeout_ms))
        .store_failure(policy);
    if args.redis_lease > 0 {
        builder =
            builder.leasing(Leasing::new(args.redis_lease, Duration::from_millis(args.redis_lease_ttl_ms)));
    }
    match args.redis_cluster.as_slice() {
        [] => builder.open(&args.redis_url),
        nodes => builder.connect_cluster(&nodes.iter().map(String::as_str).collect::<Vec<_>>()).await,
    }
}

async fn serve<B: Backend>(
    args: Args,
    backend: B,
    config: Config,
    sources: Vec<(PathBuf, String)>,
    limits: RequestLimits,
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
) -> Result<(), Box<dyn std::error::Error>> {
    // A limit the backend cannot serve is refused now, naming its line, not on every request.
    config.check_limits(|l| backend.accepts(l))?;
    let decider = Arc::new(Decider::new(config, backend, limits));
    let _reloader = match args.reload_interval_ms {
        0 => None,
        ms => Some(Reloader::spawn(
            Arc::clone(&decider),
            args.config.clone(),
            Duration::from_millis(ms),
            sources,
        )?),
    };

    let listeners = Listeners::bind(args.grpc_addr, args.http_addr).await?;
    let shutdown = shutdown_signal();
    // The one line a supervisor (or a test that bound port 0) reads to find the ports.
    println!(
        "kova-rls listening grpc={} http={}",
        listeners.grpc.local_addr()?,
        listeners.http.local_addr()?
    );
    let render = Arc::new(move || prometheus.render());
    kova_rls::serve(decider, listeners, render, shutdown, Duration::from_millis(args.shutdown_grace_ms))
        .await?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM (what Kubernetes and systemd send) or Ctrl-C. The SIGTERM handler is installed when
/// this is called, not when the future is first polled: called before the ports are announced,
/// a supervisor's SIGTERM right after the announcement never meets the default action (which
/// ends the process at once).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        #[cfg(unix)]
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = ctrl_c => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
        #[cfg(not(unix))]
        ctrl_c.await;
    }
}
