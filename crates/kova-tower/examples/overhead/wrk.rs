//! The overhead example under wrk: each subject's router on its own one-thread server, loaded
//! by wrk in interleaved rounds.

use std::net::SocketAddr;

use super::{report, serve, Round, Subject, ROUNDS, WRK_CONNECTIONS, WRK_SUBJECTS};

/// Serves `subject` on a loopback port from a thread of its own running a one-thread runtime
/// (the server's only worker), for as long as the process runs.
fn spawn_server(subject: Subject) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            serve(listener, subject).await;
        });
    });
    addr
}

/// One wrk run against `addr`: requests per second and the p50 and p99 latency it reports.
fn wrk_round(addr: SocketAddr, secs: u64) -> Round {
    let output = std::process::Command::new("wrk")
        .args(["-t1", &format!("-c{WRK_CONNECTIONS}"), &format!("-d{secs}s"), "--latency"])
        .arg(format!("http://{addr}/"))
        .output()
        .expect("wrk runs (apt-get install wrk)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("Non-2xx"), "every request must be allowed:\n{text}");
    let field = |label: &str| -> f64 {
        let line = text.lines().find(|l| l.trim_start().starts_with(label));
        let value =
            line.and_then(|l| l.split_whitespace().nth(1)).unwrap_or_else(|| panic!("{label}: {text}"));
        parse_wrk_number(value)
    };
    Round { p50_ns: field("50%"), p99_ns: field("99%"), per_sec: field("Requests/sec:") }
}

/// wrk's numbers: a plain rate, or a latency with its unit (`us`, `ms`, `s`), in nanoseconds.
fn parse_wrk_number(value: &str) -> f64 {
    let (number, scale) = if let Some(n) = value.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = value.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1e9)
    } else {
        (value, 1.0)
    };
    number.parse::<f64>().unwrap_or_else(|_| panic!("wrk printed {value:?}")) * scale
}

/// Runs every subject of [`WRK_SUBJECTS`] under wrk (`ROUNDS` and `WRK_SECS` from the
/// environment) and prints the report.
pub(super) fn under_wrk() {
    let env =
        |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (rounds_wanted, secs) = (env("ROUNDS", ROUNDS as u64) as usize, env("WRK_SECS", 5));
    let addrs: Vec<SocketAddr> = WRK_SUBJECTS.iter().map(|&s| spawn_server(s)).collect();
    // Warm up each server (its table, its allocator).
    for &addr in &addrs {
        wrk_round(addr, 1);
    }
    let mut rounds: Vec<Vec<Round>> = WRK_SUBJECTS.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds_wanted {
        // Rotate the order each round, so no subject always runs right after another.
        for k in 0..WRK_SUBJECTS.len() {
            let n = (round + k) % WRK_SUBJECTS.len();
            rounds[n].push(wrk_round(addrs[n], secs));
        }
    }
    report(
        &format!(
            "under wrk -t1 -c{WRK_CONNECTIONS} -d{secs}s on loopback, one server worker thread, one client IP \
             (p50/p99 from wrk --latency)"
        ),
        &WRK_SUBJECTS,
        &rounds,
    );
}
