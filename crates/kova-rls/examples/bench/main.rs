//! kova-rls's cost over its transport: `ShouldRateLimit` of one descriptor (in memory and on
//! Redis) beside a no-op unary RPC on the same server (`grpc.health.v1.Health/Check`, the
//! floor of tonic and HTTP/2 on loopback), at 1, 16 and 64 concurrent streams.
//!
//! ```sh
//! cargo run --release -p kova-rls --example bench -- --secs 1 --rounds 5
//! ```
//!
//! Each measurement runs `--secs` seconds; rounds interleave every case and concurrency, and
//! the medians over rounds are printed, with the ratios the targets name (memory's cost per
//! call over the no-op's; Redis's rate at 64 streams over memory's). The client and server
//! share the process and its cores, so figures from a busy host are to be read as ratios. On
//! Redis it starts its own `redis-server` on a free loopback port (or uses `--redis-url`;
//! `--no-redis` skips those rows).

mod redis_server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use kova_rls::{
    Backend, Config, Decider, Listeners, MemoryBackend, MemoryOptions, RedisBackend, RequestLimits,
};
use tonic::transport::Channel;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

#[derive(Debug, Parser)]
struct Args {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    secs: f64,
    /// Rounds (each measures every case at every concurrency once).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// A Redis to use instead of starting one.
    #[arg(long)]
    redis_url: Option<String>,
    /// Skip the Redis rows.
    #[arg(long)]
    no_redis: bool,
}

/// Every call allowed: the bench measures decisions, not denials.
const CONFIG: &str = "domain: bench
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 1000000000 }
";

const STREAMS: [usize; 3] = [1, 16, 64];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Noop,
    Memory,
    Redis,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Noop => "no-op (health Check)",
            Case::Memory => "ShouldRateLimit, memory",
            Case::Redis => "ShouldRateLimit, Redis",
        }
    }
}

/// One measurement: calls per second and latency percentiles in microseconds.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rate: f64,
    p50_us: f64,
    p99_us: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let memory = start(MemoryBackend::new(MemoryOptions::default())?).await?;
    let mut _redis_process = None;
    let mut redis_limiter = None;
    let redis = if args.no_redis {
        None
    } else {
        let url = match &args.redis_url {
            Some(url) => url.clone(),
            None => {
                let server = redis_server::RedisServer::start()?;
                let url = server.url();
                _redis_process = Some(server);
                url
            }
        };
        // A generous timeout, and every failure-policy decision counted: a figure made of
        // fallbacks would not be Redis's.
        let limiter = kova_redis::RedisLimiter::builder()
            .prefix("kova-rls-bench")
            .timeout(Duration::from_secs(1))
            .connect(&url)
            .await?;
        redis_limiter = Some(limiter.clone());
        Some(start(RedisBackend::new(limiter)).await?)
    };
    let mut cases = vec![(Case::Noop, memory), (Case::Memory, memory)];
    cases.extend(redis.map(|addr| (Case::Redis, addr)));

    let secs = Duration::from_secs_f64(args.secs);
    let mut samples: Vec<(Case, usize, Vec<Sample>)> = Vec::new();
    for round in 0..args.rounds {
        for &streams in &STREAMS {
            for &(case, addr) in &cases {
                let sample = measure(case, addr, streams, secs, round).await?;
                match samples.iter_mut().find(|(c, s, _)| *c == case && *s == streams) {
                    Some((_, _, list)) => list.push(sample),
                    None => samples.push((case, streams, vec![sample])),
                }
            }
        }
    }
    report(&samples, args.rounds, args.secs);
    if let Some(limiter) = redis_limiter {
        let stats = limiter.stats();
        let batches = limiter.batch_stats();
        println!(
            "Redis: {} round trips, {} decisions by the failure policy (0 for valid figures); {:?}",
            stats.round_trips, stats.fallback_decisions, batches
        );
    }
    Ok(())
}

/// A kova-rls server on `backend`, on loopback port 0; its gRPC address.
async fn start<B: Backend>(backend: B) -> Result<SocketAddr, Box<dyn std::error::Error>> {
    let config = Config::from_yaml("bench.yaml".as_ref(), CONFIG)?;
    let decider = Arc::new(Decider::new(config, backend, RequestLimits::default()));
    let listeners = Listeners::bind(([127, 0, 0, 1], 0).into(), ([127, 0, 0, 1], 0).into()).await?;
    let addr = listeners.grpc.local_addr()?;
    let render: kova_rls::RenderMetrics = Arc::new(String::new);
    let never = std::future::pending::<()>();
    tokio::spawn(kova_rls::serve(decider, listeners, render, never, Duration::from_secs(1)));
    Ok(addr)
}

/// `streams` tasks calling back to back for `secs` on one HTTP/2 connection (as one Envoy
/// worker multiplexes its calls).
async fn measure(
    case: Case,
    addr: SocketAddr,
    streams: usize,
    secs: Duration,
    round: usize,
) -> Result<Sample, Box<dyn std::error::Error>> {
    let channel = Channel::from_shared(format!("http://{addr}"))?.connect().await?;
    let start = Instant::now() + Duration::from_millis(20);
    let deadline = start + secs;
    let mut tasks = tokio::task::JoinSet::new();
    for stream in 0..streams {
        let channel = channel.clone();
        let key = format!("r{round}s{stream}");
        tasks.spawn(async move { run_stream(case, channel, key, start, deadline).await });
    }
    let mut latencies: Vec<u64> = Vec::new();
    for result in tasks.join_all().await {
        latencies.extend(result?);
    }
    latencies.sort_unstable();
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1e3;
    Ok(Sample { rate: latencies.len() as f64 / secs.as_secs_f64(), p50_us: pick(0.50), p99_us: pick(0.99) })
}

/// One stream's call latencies in nanoseconds (from `start`, until `deadline`).
async fn run_stream(
    case: Case,
    channel: Channel,
    key: String,
    start: Instant,
    deadline: Instant,
) -> Result<Vec<u64>, tonic::Status> {
    let mut health = HealthClient::new(channel.clone());
    let mut rls = RateLimitServiceClient::new(channel);
    let entry = Entry { key: "user".into(), value: key };
    let descriptors = vec![RateLimitDescriptor { entries: vec![entry], ..Default::default() }];
    let request = RateLimitRequest { domain: "bench".into(), descriptors, hits_addend: 1 };
    tokio::time::sleep_until(start.into()).await;
    let mut latencies = Vec::new();
    loop {
        let began = Instant::now();
        if began >= deadline {
            return Ok(latencies);
        }
        match case {
            Case::Noop => {
                health.check(HealthCheckRequest { service: String::new() }).await?;
            }
            Case::Memory | Case::Redis => {
                let response = rls.should_rate_limit(request.clone()).await?.into_inner();
                if response.overall_code != Code::Ok as i32 {
                    return Err(tonic::Status::internal("a bench call was denied"));
                }
            }
        }
        latencies.push(began.elapsed().as_nanos() as u64);
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn report(samples: &[(Case, usize, Vec<Sample>)], rounds: usize, secs: f64) {
    println!("kova-rls bench: medians of {rounds} interleaved rounds of {secs} s per measurement");
    println!("{:<26} {:>7} {:>12} {:>10} {:>10}", "case", "streams", "calls/s", "p50 µs", "p99 µs");
    let medians = |case: Case, streams: usize| {
        samples.iter().find(|(c, s, _)| *c == case && *s == streams).map(|(_, _, list)| Sample {
            rate: median(list.iter().map(|s| s.rate).collect()),
            p50_us: median(list.iter().map(|s| s.p50_us).collect()),
            p99_us: median(list.iter().map(|s| s.p99_us).collect()),
        })
    };
    for case in [Case::Noop, Case::Memory, Case::Redis] {
        for streams in STREAMS {
            if let Some(m) = medians(case, streams) {
                println!(
                    "{:<26} {:>7} {:>12.0} {:>10.1} {:>10.1}",
                    case.name(),
                    streams,
                    m.rate,
                    m.p50_us,
                    m.p99_us
                );
            }
        }
    }
    for streams in STREAMS {
        if let (Some(noop), Some(memory)) = (medians(Case::Noop, streams), medians(Case::Memory, streams)) {
            println!(
                "{streams:>2} streams: memory ShouldRateLimit costs {:.2}x the no-op RPC by rate, {:.2}x by p50 (target <= 1.2x)",
                noop.rate / memory.rate,
                memory.p50_us / noop.p50_us
            );
        }
    }
    if let (Some(memory), Some(redis)) = (medians(Case::Memory, 64), medians(Case::Redis, 64)) {
        println!("64 streams: Redis at {:.2}x the in-memory rate (target >= 0.5x)", redis.rate / memory.rate);
    }
}
