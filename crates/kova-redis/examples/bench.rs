//! Throughput of the Redis backend against a local redis-server, beside plain `INCR`.
//!
//! ```text
//! cargo run --release -p kova-redis --example bench [-- --secs 2 --reps 3 --url redis://host:port/ --in-flight 2]
//! ```
//!
//! Starts its own redis-server on a free loopback port (unless `--url` is given), then for each
//! repetition and each concurrency N in 1, 16, 64: `redis-benchmark -t incr -c N` (N connections,
//! no pipelining) on the same server, plain `INCR` through redis-rs from N tasks on one
//! multiplexed connection (the limiter's own connection setup), and every algorithm's decisions
//! per second from N tasks; then a hot key with and without leasing (round trips per decision).
//! Prints medians, and ratios taken within each repetition.

#[path = "../tests/integration/server.rs"]
mod server;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kova::{AlgorithmKind, Quota};
use kova_redis::{Leasing, Limit, RedisLimiter};

const CONCURRENCY: [usize; 3] = [1, 16, 64];

struct Args {
    secs: f64,
    reps: usize,
    url: Option<String>,
    in_flight: Option<usize>,
}

fn parse_args() -> Args {
    let mut args = Args { secs: 2.0, reps: 3, url: None, in_flight: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--secs" => args.secs = value.parse().expect("--secs SECONDS"),
            "--reps" => args.reps = value.parse().expect("--reps N"),
            "--url" => args.url = Some(value),
            "--in-flight" => args.in_flight = Some(value.parse().expect("--in-flight CALLS")),
            other => panic!("unknown flag {other} (expected --secs, --reps, --url, --in-flight)"),
        }
    }
    args
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// `redis-benchmark -t incr -c clients` requests per second (no pipelining: one request in
/// flight per connection, as one task of the limiter has).
fn redis_benchmark_incr(host: &str, port: u16, clients: usize, secs: f64) -> f64 {
    let n = ((secs * 10_000.0 * clients.min(8) as f64) as u64).max(5_000).to_string();
    let out = Command::new("redis-benchmark")
        .args(["-h", host, "-p", &port.to_string(), "-t", "incr", "-c", &clients.to_string(), "-n", &n, "-q"])
        .output()
        .expect("run redis-benchmark (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // "INCR: 123456.79 requests per second, p50=0.207 msec" (carriage returns before it).
    let line = text.rsplit('\r').next().unwrap_or(&text).to_owned();
    let line =
        line.lines().find(|l| l.contains("INCR:")).unwrap_or_else(|| panic!("no INCR line in {text:?}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse {line:?}"))
}

/// Runs `tasks` copies of `op` for `secs`; returns operations per second.
async fn run_for<F, Fut>(tasks: usize, secs: f64, op: F) -> f64
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (stop, count, op) = (stop.clone(), count.clone(), op.clone());
        handles.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                op(task, i).await;
                i += 1;
            }
            count.fetch_add(i, Ordering::Relaxed);
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.expect("bench task");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn limit_for(kind: AlgorithmKind) -> Limit {
    // Generous limits, so the scripts take their writing (admitting) path.
    let quota = match kind {
        AlgorithmKind::SlidingWindowLog => Quota::per_second(kova_redis::MAX_LOG_LIMIT),
        _ => Quota::per_second(1_000_000),
    };
    Limit::new(kind, quota.expect("quota")).expect("limit")
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let _server;
    let (url, host, port) = match &args.url {
        Some(url) => {
            let info = redis::Client::open(url.as_str()).expect("url").get_connection_info().addr.clone();
            let (host, port) = match info {
                redis::ConnectionAddr::Tcp(h, p) => (h, p),
                other => panic!("only tcp urls: {other:?}"),
            };
            (url.clone(), host, port)
        }
        None => {
            let Some(s) = server::RedisServer::start() else {
                eprintln!("redis-server is not installed: apt-get install redis-server");
                return;
            };
            let out = (s.url(), "127.0.0.1".to_owned(), s.port);
            _server = s;
            out
        }
    };
    let mut builder = RedisLimiter::builder().timeout(Duration::from_secs(2));
    if let Some(calls) = args.in_flight {
        builder = builder.max_in_flight(calls);
    }
    let limiter = builder.connect(&url).await.expect("connect");
    let incr_client = redis::Client::open(url.as_str()).expect("url");
    let incr_conn = incr_client.get_multiplexed_async_connection().await.expect("connect");

    // Warm up: load every script once, so no measurement pays for SCRIPT LOAD.
    for kind in AlgorithmKind::ALL {
        limiter.check("bench:warmup", &limit_for(kind)).await.expect("warm-up check");
    }

    // Per repetition and concurrency, every measurement runs back to back on the same server, and
    // ratios are taken within the repetition (a shared machine's load drifts between them).
    let n = CONCURRENCY.len();
    let mut bench_incr: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut rs_incr: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut algo: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    let mut ratio_bench: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    let mut ratio_rs: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    // Per algorithm and concurrency: the mean batch (checks per script call, lone ones included)
    // and the mean time a check waited in the queue for its batch.
    let mut batch_size: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    let mut batch_wait_us: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    let mut lease_rate = Vec::new();
    let mut lease_trips = Vec::new();
    let mut hot_rate = Vec::new();
    for rep in 0..args.reps {
        eprintln!("repetition {}/{}", rep + 1, args.reps);
        for (c, &tasks) in CONCURRENCY.iter().enumerate() {
            let incr = redis_benchmark_incr(&host, port, tasks, args.secs);
            bench_incr[c].push(incr);
            let conn = incr_conn.clone();
            let rs = run_for(tasks, args.secs, move |task, _| {
                let mut conn = conn.clone();
                async move {
                    let _: i64 = redis::cmd("INCR")
                        .arg(format!("bench:incr:{task}"))
                        .query_async(&mut conn)
                        .await
                        .expect("INCR");
                }
            })
            .await;
            rs_incr[c].push(rs);
            for (a, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
                let (limiter, limit) = (limiter.clone(), limit_for(kind));
                let before = limiter.batch_stats();
                let probe = limiter.clone();
                let rate = run_for(tasks, args.secs, move |task, i| {
                    let limiter = limiter.clone();
                    async move {
                        let d =
                            limiter.check(format!("bench:{task}:{}", i % 1000), &limit).await.expect("check");
                        assert!(d.fallback().is_none(), "fallback in a benchmark: {d:?}");
                    }
                })
                .await;
                let after = probe.batch_stats();
                let calls = (after.single_calls - before.single_calls) + (after.batches - before.batches);
                let checks = (after.single_calls - before.single_calls)
                    + (after.batched_checks - before.batched_checks);
                let queued = after.queued_nanos - before.queued_nanos;
                batch_size[a][c].push(checks as f64 / calls.max(1) as f64);
                batch_wait_us[a][c].push(queued as f64 / checks.max(1) as f64 / 1_000.0);
                algo[a][c].push(rate);
                ratio_bench[a][c].push(rate / incr);
                ratio_rs[a][c].push(rate / rs);
            }
        }
        // A hot key, 16 tasks: without leasing (every decision a round trip), then with.
        let limit = limit_for(AlgorithmKind::Gcra);
        let plain = limiter.clone();
        hot_rate.push(
            run_for(16, args.secs, move |_, _| {
                let plain = plain.clone();
                async move {
                    plain.check("bench:hot", &limit).await.expect("check");
                }
            })
            .await,
        );
        let leased = RedisLimiter::builder()
            .timeout(Duration::from_secs(2))
            .leasing(Leasing::new(100, Duration::from_millis(100)))
            .connect(&url)
            .await
            .expect("connect");
        let l2 = leased.clone();
        lease_rate.push(
            run_for(16, args.secs, move |_, _| {
                let leased = l2.clone();
                async move {
                    leased.check("bench:hot:leased", &limit).await.expect("check");
                }
            })
            .await,
        );
        let s = leased.stats();
        lease_trips.push(s.round_trips as f64 / (s.round_trips + s.local_decisions) as f64);
    }

    let med = |v: &Vec<Vec<f64>>| -> Vec<f64> { v.iter().cloned().map(median).collect() };
    println!("\n## kova-redis throughput (medians of {} repetitions of {} s each)\n", args.reps, args.secs);
    println!("| | 1 task | 16 tasks | 64 tasks |");
    println!("|---|---|---|---|");
    let b = med(&bench_incr);
    println!(
        "| `redis-benchmark -t incr -c N` (N = tasks), requests/s | {:.0} | {:.0} | {:.0} |",
        b[0], b[1], b[2]
    );
    let r = med(&rs_incr);
    println!(
        "| INCR via redis-rs, N tasks on one multiplexed connection | {:.0} | {:.0} | {:.0} |",
        r[0], r[1], r[2]
    );
    for (a, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
        let (m, rb, rr) = (med(&algo[a]), med(&ratio_bench[a]), med(&ratio_rs[a]));
        let (size, wait) = (med(&batch_size[a]), med(&batch_wait_us[a]));
        let cell = |c: usize| {
            format!("{:.0} ({:.2}x; {:.2}x); batch {:.1}, +{:.0} µs", m[c], rb[c], rr[c], size[c], wait[c])
        };
        println!("| {kind}: decisions/s (x redis-benchmark; x redis-rs INCR); mean batch, added wait | {} | {} | {} |", cell(0), cell(1), cell(2));
    }
    let trips = median(lease_trips);
    println!(
        "\nHot key, 16 tasks, GCRA: {:.0} decisions/s without leasing (1 round trip per decision); \
         {:.0} decisions/s with leasing (batch 100, ttl 100 ms): {trips:.4} round trips per decision ({:.0}x fewer)",
        median(hot_rate),
        median(lease_rate),
        1.0 / trips
    );
}
