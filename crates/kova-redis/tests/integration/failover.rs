//! Failover: 3 masters with a replica each; a master is killed under load, its replica promoted.
//! Decisions go on by the policy during the switch, the scripts are loaded again on the new
//! master (`NOSCRIPT`), and a key's replicated state survives. Redis replication is
//! asynchronous: a write acknowledged by the master but not yet sent to its replica is lost with
//! it (Redis's loss, not the limiter's); the test waits for the replica before killing.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kova::{Fallback, Quota};
use kova_redis::{RedisLimit, RedisLimiter, StoreFailurePolicy};

use crate::server::{RedisCluster, RedisServer};

/// The port of the master serving `slot`, from `CLUSTER NODES` as `node` sees it.
fn master_of(node: &RedisServer, slot: u64) -> u16 {
    for line in node.cli(&["CLUSTER", "NODES"]).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
            continue;
        }
        for range in &fields[8..] {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(lo), Ok(hi)) = (lo.parse::<u64>(), hi.parse::<u64>()) {
                if (lo..=hi).contains(&slot) {
                    let port = fields[1].split(['@', ':']).nth(1).expect("ip:port@bus");
                    return port.parse().expect("port");
                }
            }
        }
    }
    panic!("no master serves slot {slot}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_fails_over_to_its_replica() {
    let setup = Instant::now();
    let Some(mut cluster) = RedisCluster::start_with(1, 1000) else { return };
    eprintln!("failover: 6-node cluster up in {:?}", setup.elapsed());
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    let limiter = RedisLimiter::builder()
        .timeout(Duration::from_millis(100))
        .store_failure(StoreFailurePolicy::Degrade { servers: NonZeroU32::new(1).unwrap() })
        .connect_cluster(&nodes)
        .await
        .unwrap();
    let generous = RedisLimit::gcra(Quota::per_second(1_000_000).unwrap()).unwrap();
    let strict = RedisLimit::gcra(Quota::per_hour(10).unwrap()).unwrap();

    // The master to kill: the one serving key "load:0"; the keys it serves are the ones whose
    // service has a gap.
    let any = &cluster.nodes[0];
    let slot_of = |key: &str, limit: &RedisLimit| -> u64 {
        let name = String::from_utf8(limiter.redis_key(key, limit)).unwrap();
        any.cli(&["CLUSTER", "KEYSLOT", &name]).trim().parse().unwrap()
    };
    let victim_port = master_of(any, slot_of("load:0", &generous));
    let keys: Vec<String> = (0..32).map(|i| format!("load:{i}")).collect();
    let on_victim: Vec<bool> =
        keys.iter().map(|k| master_of(any, slot_of(k, &generous)) == victim_port).collect();
    let kept =
        (0..1000).map(|i| format!("kept:{i}")).find(|k| master_of(any, slot_of(k, &strict)) == victim_port);
    let kept = kept.expect("a key on the victim");

    // State written before the kill, replicated: 4 of 10 used.
    assert_eq!(limiter.check_n(&kept, &strict, 4).await.unwrap().remaining(), 6);
    let victim = cluster.nodes.iter().position(|n| n.port == victim_port).unwrap();
    let kept_name = String::from_utf8(limiter.redis_key(&kept, &strict)).unwrap();
    let replica = cluster
        .nodes
        .iter()
        .position(|n| {
            n.port != victim_port
                && !n.is_master()
                && n.cli(&["INFO", "replication"]).contains(&format!("master_port:{victim_port}"))
        })
        .expect("the victim's replica");
    // Wait until the replica has everything the master wrote (its offset caught up).
    let start = Instant::now();
    loop {
        let info = cluster.nodes[victim].cli(&["INFO", "replication"]);
        let field = |name: &str| -> Option<u64> {
            info.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
        };
        let master_offset = field("master_repl_offset:");
        let replica_offset = info
            .lines()
            .find(|l| l.starts_with("slave0:"))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("offset=")))
            .and_then(|v| v.parse::<u64>().ok());
        if master_offset.is_some() && master_offset == replica_offset {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the replica did not catch up: {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = kept_name;

    let stop = Arc::new(AtomicBool::new(false));
    let fallbacks = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    // Per key on the victim: the times (ms since epoch) of real decisions.
    let real_on_victim: Arc<Mutex<Vec<u64>>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (limiter, stop, fallbacks, real, keys, on_victim) = (
            limiter.clone(),
            stop.clone(),
            fallbacks.clone(),
            real_on_victim.clone(),
            keys.clone(),
            on_victim.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                let k = i % keys.len();
                let d = limiter.check(&keys[k], &generous).await.unwrap();
                match d.fallback() {
                    None if on_victim[k] => real.lock().unwrap().push(epoch.elapsed().as_millis() as u64),
                    None => {}
                    Some(f) => {
                        assert_eq!(f, Fallback::StoreUnavailableLocal);
                        fallbacks.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                i += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.nodes[victim].kill9();
    // After the process is gone (reaped): an answer read before that was sent while alive.
    let killed_at = epoch.elapsed().as_millis() as u64;
    let promoted = loop {
        if cluster.nodes[replica].is_master() {
            break epoch.elapsed().as_millis() as u64;
        }
        assert!(epoch.elapsed() < Duration::from_secs(20), "the replica was not promoted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Served again on the victim's keys.
    loop {
        if real_on_victim.lock().unwrap().iter().any(|&t| t > promoted) {
            break;
        }
        assert!(epoch.elapsed() < Duration::from_secs(30), "no real decision after the promotion");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(10), task).await.expect("a task hung").unwrap();
    }
    let times = real_on_victim.lock().unwrap().clone();
    let last_before =
        times.iter().copied().filter(|&t| t <= killed_at).max().expect("served before the kill");
    let first_after = times.iter().copied().find(|&t| t > killed_at).expect("served after the kill");
    let gap = first_after - last_before;
    eprintln!(
        "failover: master killed at {killed_at} ms, replica promoted at {promoted} ms, its keys served \
         again at {first_after} ms; gap in real decisions on its keys {gap} ms; {} decisions by the \
         degrade policy meanwhile; setup and run {:?}",
        fallbacks.load(Ordering::Relaxed),
        setup.elapsed()
    );
    assert!(fallbacks.load(Ordering::Relaxed) > 0, "no policy decisions during the switch");
    // Redis does not replicate a script cache: the new master answered NOSCRIPT, and the
    // scripts were loaded on it (its SCRIPT LOAD count, since it started as a replica that no
    // client writes to).
    let stats = cluster.nodes[replica].cli(&["INFO", "commandstats"]);
    let loads = stats.lines().find(|l| l.starts_with("cmdstat_script|load:")).unwrap_or("no SCRIPT LOAD");
    eprintln!("failover: on the new master, {loads}");
    assert!(loads.starts_with("cmdstat_script|load:calls="), "the scripts were not loaded again: {loads}");
    // The replicated state survived: 4 of 10 still used on the new master.
    let d = limiter.peek(&kept, &strict).await.unwrap();
    assert_eq!((d.fallback(), d.remaining()), (None, 6), "{d:?}");
}
