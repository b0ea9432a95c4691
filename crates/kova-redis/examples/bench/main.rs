//! Throughput of the Redis backend against a local redis-server, beside plain `INCR`.
//!
//! ```text
//! cargo run --release -p kova-redis --example bench [-- --secs 2 --reps 3 --url redis://host:port/ --in-flight 2 --no-pin --local-only]
//! ```
//!
//! Starts its own redis-server on a free loopback port (unless `--url` is given), then for each
//! repetition and each concurrency N in 1, 16, 64: `redis-benchmark -t incr -c N` (N connections,
//! no pipelining) on the same server, plain `INCR` through redis-rs from N tasks on one
//! multiplexed connection (the limiter's own connection setup), and every algorithm's decisions
//! per second from N tasks; then a hot key with and without leasing (round trips per decision);
//! then the local layer alone (leased decisions answered with no round trip) from 1 and 2 OS
//! threads, on one hot key and on many keys, beside kova's in-memory keyed table.
//! Prints medians, and ratios taken within each repetition. Redis's own CPU time per operation
//! (`INFO cpu`, over the INCR and the decision runs) is printed too: it does not depend on how
//! much CPU the client gets, which on a small shared machine moves the throughput ratios. At 64
//! tasks two floors follow, what one state write costs Redis with no decision at all: a plain
//! `SET ... PX` per write, and a script of one `MGET` and one `SET ... PX` per key. Its own
//! redis-server runs alone on one CPU and the client on the others, unless `--no-pin` (`cpus.rs`).

mod cpus;
#[path = "../../tests/integration/server.rs"]
mod server;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kova::{AlgorithmKind, Fallback, Gcra, Keyed, Quota};
use kova_redis::{Leasing, RedisLimit, RedisLimiter};

const CONCURRENCY: [usize; 3] = [1, 16, 64];

struct Args {
    secs: f64,
    reps: usize,
    url: Option<String>,
    in_flight: Option<usize>,
    /// Redis on a CPU of its own (see `cpus.rs`).
    pin: bool,
    /// Only the local layer's rows (they need Redis for the leases' refills alone).
    local_only: bool,
}

fn parse_args() -> Args {
    let mut args = Args { secs: 2.0, reps: 3, url: None, in_flight: None, pin: true, local_only: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-pin" {
            args.pin = false;
            continue;
        }
        if flag == "--local-only" {
            args.local_only = true;
            continue;
        }
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--secs" => args.secs = value.parse().expect("--secs SECONDS"),
            "--reps" => args.reps = value.parse().expect("--reps N"),
            "--url" => args.url = Some(value),
            "--in-flight" => args.in_flight = Some(value.parse().expect("--in-flight CALLS")),
            other => panic!(
                "unknown flag {other} (expected --secs, --reps, --url, --in-flight, --no-pin, --local-only)"
            ),
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

/// Redis's CPU time so far (user + system), in microseconds, from `INFO cpu`.
async fn redis_cpu_micros(conn: &redis::aio::MultiplexedConnection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(&mut conn.clone()).await.expect("INFO cpu");
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in INFO cpu: {info:?}"))
    };
    (field("used_cpu_user") + field("used_cpu_sys")) * 1e6
}

fn limit_for(kind: AlgorithmKind) -> RedisLimit {
    // Generous limits, so the scripts take their writing (admitting) path.
    let quota = match kind {
        AlgorithmKind::SlidingWindowLog => Quota::per_second(kova_redis::MAX_LOG_LIMIT),
        _ => Quota::per_second(1_000_000),
    };
    RedisLimit::new(kind, quota.expect("quota")).expect("limit")
}

/// The floors `write_floors` measures, in its order.
const FLOORS: [&str; 2] = [
    "`SET key value PX ttl`, one command per write",
    "a script with no decision: one `MGET` of 21 keys, then one `SET ... PX` per key",
];
/// The concurrency the floors are measured at.
const FLOOR_TASKS: usize = 64;
/// Keys per call of the floor script: about the decisions' mean batch at 64 tasks.
const FLOOR_BATCH: usize = 21;

/// Per [`FLOORS`] row: writes per second and Redis CPU microseconds per write. Every write has
/// a 16-digit value (a GCRA state's size) and a TTL of about a second, so the keys stay between
/// visits (the decisions' keys expire a millisecond after each admission).
async fn write_floors(conn: &redis::aio::MultiplexedConnection, secs: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let writes = |rate: f64, elapsed: Duration| (rate * elapsed.as_secs_f64()).max(1.0);
    let c = conn.clone();
    let cpu_before = redis_cpu_micros(conn).await;
    let started = Instant::now();
    let rate = run_for(FLOOR_TASKS, secs, move |task, i| {
        let mut conn = c.clone();
        async move {
            let () = redis::cmd("SET")
                .arg(format!("bench:floor:{task}:{}", i % 1000))
                .arg("1764633600000000")
                .arg("PX")
                .arg(1001)
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
    })
    .await;
    let elapsed = started.elapsed();
    out.push((rate, (redis_cpu_micros(conn).await - cpu_before) / writes(rate, elapsed)));

    let script = redis::Script::new(
        "redis.call('MGET', unpack(KEYS)) \
         for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return #KEYS",
    );
    // As many calls in flight as the decisions' batches have (the limiter's default).
    let callers = 2;
    let c = conn.clone();
    let cpu_before = redis_cpu_micros(conn).await;
    let started = Instant::now();
    let calls = run_for(callers, secs, move |task, i| {
        let (mut conn, script) = (c.clone(), script.clone());
        async move {
            let mut invocation = script.prepare_invoke();
            for k in 0..FLOOR_BATCH as u64 {
                let key = (i * FLOOR_BATCH as u64 + k) % (FLOOR_TASKS as u64 * 1000 / callers as u64);
                invocation.key(format!("bench:sfloor:{task}:{key}"));
            }
            let _: i64 =
                invocation.arg("1764633600000000").arg(1001).invoke_async(&mut conn).await.expect("script");
        }
    })
    .await;
    let elapsed = started.elapsed();
    let rate = calls * FLOOR_BATCH as f64;
    out.push((rate, (redis_cpu_micros(conn).await - cpu_before) / writes(rate, elapsed)));
    out
}

/// The local-layer rows: (subject, keys, threads), in `local_layer`'s order.
const LOCAL_ROWS: usize = 8;
/// Keys per thread in the many-keys runs.
const LOCAL_KEYS: usize = 1024;

/// Checks per call of a [`run_threads`] block: a few checks per look at the stop flag.
const BLOCK: usize = 64;

/// Decisions per second from `threads` OS threads for `secs`, each thread calling
/// `block(thread, i)` for checks `i..i + BLOCK`.
fn run_threads(threads: usize, secs: f64, block: impl Fn(usize, usize) + Sync) -> f64 {
    let stop = AtomicBool::new(false);
    let count = AtomicU64::new(0);
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|scope| {
        for t in 0..threads {
            let (stop, count, barrier, block) = (&stop, &count, &barrier, &block);
            scope.spawn(move || {
                // These rows never wait on Redis: every CPU serves them.
                cpus::run_anywhere();
                barrier.wait();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    block(t, i);
                    i += BLOCK;
                }
                count.fetch_add(i as u64, Ordering::Relaxed);
            });
        }
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        start
    });
    count.load(Ordering::Relaxed) as f64 / elapsed.elapsed().as_secs_f64()
}

/// `check`'s output, polled as a task that is already running polls what it awaits: once, in
/// place (a local answer is ready then), and on `runtime` only when it is not (a round trip).
/// A server enters its runtime when a task wakes, not for each check the task awaits, so that
/// entry is left out of a local answer's time. Inlined, as an awaited future's poll is into its
/// task's: left to a call, a check measured far slower here than in a task (commit message).
#[inline(always)]
fn poll_in_task<F: std::future::Future>(runtime: &tokio::runtime::Runtime, check: F) -> F::Output {
    let mut check = std::pin::pin!(check);
    match check.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => runtime.block_on(check),
    }
}

/// The local layer alone: checks answered from leases (no round trip; a refill now and then),
/// from 1 and 2 OS threads, on one hot key and on [`LOCAL_KEYS`] keys per thread; then the same
/// runs through kova's in-memory keyed table. Each thread polls its checks as a task on its own
/// current-thread runtime does ([`poll_in_task`]: a local answer completes on the first poll);
/// the table's checks run in the same blocks of [`BLOCK`]. Returns decisions per second in
/// [`LOCAL_ROWS`] order and the share of local answers among the leased checks.
fn local_layer(leased: &RedisLimiter, secs: f64) -> ([f64; LOCAL_ROWS], f64) {
    // Far more units than the runs spend, so that every lease is granted in full.
    let quota = Quota::per_second(1_000_000).and_then(|q| q.with_burst(1 << 32)).expect("quota");
    let limit = RedisLimit::gcra(quota).expect("limit");
    let keys = |shape: usize, threads: usize| -> Vec<Vec<Vec<u8>>> {
        (0..threads)
            .map(|t| match shape {
                0 => vec![b"bench:local:hot".to_vec()],
                _ => (0..LOCAL_KEYS).map(|k| format!("bench:local:{t}:{k}").into_bytes()).collect(),
            })
            .collect()
    };
    let mut out = [0.0; LOCAL_ROWS];
    let (mut local, mut trips) = (0, 0);
    for shape in 0..2 {
        for threads in [1, 2] {
            let keys = keys(shape, threads);
            let runtimes: Vec<tokio::runtime::Runtime> = (0..threads)
                .map(|_| {
                    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime")
                })
                .collect();
            let checks = |t: usize, first: usize| {
                // In the runtime's context, as a task is: a round trip's timers and I/O need it.
                let _context = runtimes[t].enter();
                for i in first..first + BLOCK {
                    let key = &keys[t][i % keys[t].len()];
                    let d = poll_in_task(&runtimes[t], leased.check(key, &limit)).expect("check");
                    assert!(
                        d.is_allowed() && matches!(d.fallback(), None | Some(Fallback::LocalCache)),
                        "{d:?}"
                    );
                }
            };
            // Warm up: every key hot and holding a lease.
            for (t, own) in keys.iter().enumerate() {
                for first in (0..own.len() * 3).step_by(BLOCK) {
                    checks(t, first);
                }
            }
            let before = leased.stats();
            out[shape * 2 + threads - 1] = run_threads(threads, secs, checks);
            let after = leased.stats();
            local += after.local_decisions - before.local_decisions;
            trips += after.round_trips - before.round_trips;
        }
    }
    let share = local as f64 / (local + trips).max(1) as f64;
    for shape in 0..2 {
        for threads in [1, 2] {
            let keys = keys(shape, threads);
            let table = Keyed::<Vec<u8>, Gcra>::new(quota).expect("keyed");
            out[4 + shape * 2 + threads - 1] = run_threads(threads, secs, |t, first| {
                for i in first..first + BLOCK {
                    assert!(table.check(&keys[t][i % keys[t].len()]).is_allowed());
                }
            });
        }
    }
    (out, share)
}

fn main() {
    let args = parse_args();
    let mut own_server = None;
    let (url, host, port, placement) = match &args.url {
        Some(url) => {
            let info = redis::Client::open(url.as_str()).expect("url").get_connection_info().addr.clone();
            let (host, port) = match info {
                redis::ConnectionAddr::Tcp(h, p) => (h, p),
                other => panic!("only tcp urls: {other:?}"),
            };
            (url.clone(), host, port, cpus::Placement::Shared("Redis at --url"))
        }
        None => {
            let (started, placement) = cpus::start_apart(args.pin, server::RedisServer::start);
            let Some(s) = started else {
                eprintln!("redis-server is not installed: apt-get install redis-server");
                return;
            };
            let out = (s.url(), "127.0.0.1".to_owned(), s.port, placement);
            own_server = Some(s);
            out
        }
    };
    // Built after the placement, so that its threads run on the client's CPUs.
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(measure(args, url, host, port, placement));
    drop(own_server);
}

/// Every measurement against the server at `url`, and the report.
async fn measure(args: Args, url: String, host: String, port: u16, placement: cpus::Placement) {
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
    // Redis CPU microseconds per INCR / per decision, and their ratio within the repetition.
    let mut rs_incr_cpu: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut algo_cpu: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    let mut ratio_cpu: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n]; AlgorithmKind::ALL.len()];
    // At 64 tasks: what one state write costs Redis without a decision (see `write_floors`).
    let mut floor_rate: Vec<Vec<f64>> = vec![Vec::new(); FLOORS.len()];
    let mut floor_cpu: Vec<Vec<f64>> = vec![Vec::new(); FLOORS.len()];
    let mut local_rows: Vec<Vec<f64>> = vec![Vec::new(); LOCAL_ROWS];
    let mut local_share = Vec::new();
    let mut lease_rate = Vec::new();
    let mut lease_trips = Vec::new();
    let mut hot_rate = Vec::new();
    if args.local_only {
        for rep in 0..args.reps {
            eprintln!("repetition {}/{}", rep + 1, args.reps);
            let (rows, share) = local_repetition(&url, args.secs / 2.0).await;
            for (r, rate) in rows.into_iter().enumerate() {
                local_rows[r].push(rate);
            }
            local_share.push(share);
        }
        print_local(&local_rows, local_share);
        return;
    }
    for rep in 0..args.reps {
        eprintln!("repetition {}/{}", rep + 1, args.reps);
        for (c, &tasks) in CONCURRENCY.iter().enumerate() {
            let incr = redis_benchmark_incr(&host, port, tasks, args.secs);
            bench_incr[c].push(incr);
            let conn = incr_conn.clone();
            let cpu_before = redis_cpu_micros(&incr_conn).await;
            let started = Instant::now();
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
            let incr_cpu_us = (redis_cpu_micros(&incr_conn).await - cpu_before)
                / (rs * started.elapsed().as_secs_f64()).max(1.0);
            rs_incr[c].push(rs);
            rs_incr_cpu[c].push(incr_cpu_us);
            for (a, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
                let (limiter, limit) = (limiter.clone(), limit_for(kind));
                let before = limiter.batch_stats();
                let probe = limiter.clone();
                let cpu_before = redis_cpu_micros(&incr_conn).await;
                let rate = run_for(tasks, args.secs, move |task, i| {
                    let limiter = limiter.clone();
                    async move {
                        let d =
                            limiter.check(format!("bench:{task}:{}", i % 1000), &limit).await.expect("check");
                        assert!(d.fallback().is_none(), "fallback in a benchmark: {d:?}");
                    }
                })
                .await;
                let cpu_us = redis_cpu_micros(&incr_conn).await - cpu_before;
                let after = probe.batch_stats();
                let calls = (after.single_calls - before.single_calls) + (after.batches - before.batches);
                let checks = (after.single_calls - before.single_calls)
                    + (after.batched_checks - before.batched_checks);
                let queued = after.queued_nanos - before.queued_nanos;
                batch_size[a][c].push(checks as f64 / calls.max(1) as f64);
                batch_wait_us[a][c].push(queued as f64 / checks.max(1) as f64 / 1_000.0);
                algo[a][c].push(rate);
                let cpu_per_decision = cpu_us / checks.max(1) as f64;
                algo_cpu[a][c].push(cpu_per_decision);
                ratio_cpu[a][c].push(incr_cpu_us / cpu_per_decision);
                ratio_bench[a][c].push(rate / incr);
                ratio_rs[a][c].push(rate / rs);
            }
            if tasks == FLOOR_TASKS {
                for (f, (rate, cpu)) in write_floors(&incr_conn, args.secs).await.into_iter().enumerate() {
                    floor_rate[f].push(rate);
                    floor_cpu[f].push(cpu);
                }
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
        let (rows, share) = local_repetition(&url, args.secs / 2.0).await;
        for (r, rate) in rows.into_iter().enumerate() {
            local_rows[r].push(rate);
        }
        local_share.push(share);
    }

    let med = |v: &Vec<Vec<f64>>| -> Vec<f64> { v.iter().cloned().map(median).collect() };
    println!("\n## kova-redis throughput (medians of {} repetitions of {} s each)\n", args.reps, args.secs);
    println!("{}.\n", placement.describe());
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
    let rc = med(&rs_incr_cpu);
    println!("| Redis CPU per INCR via redis-rs, µs | {:.2} | {:.2} | {:.2} |", rc[0], rc[1], rc[2]);
    for (a, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
        let (m, rb, rr) = (med(&algo[a]), med(&ratio_bench[a]), med(&ratio_rs[a]));
        let (size, wait) = (med(&batch_size[a]), med(&batch_wait_us[a]));
        let cell = |c: usize| {
            format!("{:.0} ({:.2}x; {:.2}x); batch {:.1}, +{:.0} µs", m[c], rb[c], rr[c], size[c], wait[c])
        };
        println!("| {kind}: decisions/s (x redis-benchmark; x redis-rs INCR); mean batch, added wait | {} | {} | {} |", cell(0), cell(1), cell(2));
    }
    println!("\nRedis CPU per decision, µs (x Redis CPU per redis-rs INCR: the throughput ratio Redis alone allows)\n");
    println!("| | 1 task | 16 tasks | 64 tasks |");
    println!("|---|---|---|---|");
    for (a, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
        let (cpu, ratio) = (med(&algo_cpu[a]), med(&ratio_cpu[a]));
        let cell = |c: usize| format!("{:.2} ({:.2}x)", cpu[c], ratio[c]);
        println!("| {kind} | {} | {} | {} |", cell(0), cell(1), cell(2));
    }
    println!(
        "\nWhat a state write costs Redis without a decision, from {FLOOR_TASKS} tasks on the same \
         connection, on the bench's key space ({FLOOR_TASKS} x 1,000 keys, each written with a TTL of \
         about a second; the decisions' keys, at a million per second, expire within a millisecond \
         and are written anew): Redis CPU per write, µs (x Redis CPU per redis-rs INCR at \
         {FLOOR_TASKS} tasks)\n"
    );
    println!("| | writes/s | Redis CPU per write, µs |");
    println!("|---|---|---|");
    let incr_cpu = median(rs_incr_cpu[CONCURRENCY.len() - 1].clone());
    for (f, name) in FLOORS.iter().enumerate() {
        let cpu = median(floor_cpu[f].clone());
        println!("| {name} | {:.0} | {cpu:.2} ({:.2}x) |", median(floor_rate[f].clone()), incr_cpu / cpu);
    }
    let trips = median(lease_trips);
    println!(
        "\nHot key, 16 tasks, GCRA: {:.0} decisions/s without leasing (1 round trip per decision); \
         {:.0} decisions/s with leasing (batch 100, ttl 100 ms): {trips:.4} round trips per decision ({:.0}x fewer)",
        median(hot_rate),
        median(lease_rate),
        1.0 / trips
    );
    print_local(&local_rows, local_share);
}

/// One repetition of the local layer's rows, on a limiter of its own (a long lease ttl: every
/// key stays hot; a large batch: the hot key's checks seldom wait for a refill's round trip).
async fn local_repetition(url: &str, secs: f64) -> ([f64; LOCAL_ROWS], f64) {
    let local = RedisLimiter::builder()
        .timeout(Duration::from_secs(2))
        .leasing(Leasing::new(10_000_000, Duration::from_secs(10)))
        .cache_denials(true)
        .connect(url)
        .await
        .expect("connect");
    tokio::task::spawn_blocking(move || local_layer(&local, secs)).await.expect("local layer")
}

/// The local layer's table, from every repetition's rows.
fn print_local(local_rows: &[Vec<f64>], local_share: Vec<f64>) {
    let med = |v: &[Vec<f64>]| -> Vec<f64> { v.iter().cloned().map(median).collect() };
    let l = med(local_rows);
    println!(
        "\n## Local layer (leased GCRA decisions, no round trip; {:.4} of them answered locally) beside kova in memory\n",
        median(local_share)
    );
    println!("| decisions/s | 1 thread | 2 threads | 2 threads / 1 |");
    println!("|---|---|---|---|");
    let names = [
        "kova-redis local layer, one hot key",
        &format!("kova-redis local layer, {LOCAL_KEYS} keys per thread"),
        "kova Keyed<Vec<u8>, Gcra>, one hot key",
        &format!("kova Keyed<Vec<u8>, Gcra>, {LOCAL_KEYS} keys per thread"),
    ];
    for (row, name) in names.iter().enumerate() {
        let (one, two) = (l[row * 2], l[row * 2 + 1]);
        println!("| {name} | {one:.0} | {two:.0} | {:.2}x |", two / one);
    }
}
