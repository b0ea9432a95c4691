//! Redis Cluster: a 3-master cluster on loopback, the conformance suite and hostile keys through
//! the cluster client.

use std::time::Duration;

use kova::ManualClock;

use crate::server::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_through_a_three_master_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    let clock = ManualClock::new();
    let limiter = crate::deterministic(&clock).connect_cluster(&nodes).await.unwrap();
    let compared = crate::conformance::run_suite(&limiter, &clock, "cluster", 150).await;
    assert!(compared > 4_000, "only {compared} decisions compared");
    // Settling, reservations and composites (several keys in one script: one slot per user key).
    let operations = crate::settle_reserve::run_suite(&limiter, &clock, "cluster", 1, 60).await
        + crate::composite::run_suite(&limiter, &clock, "cluster", 1, 60).await;
    eprintln!("settle, reservations, composites (3-master cluster): {operations} identical");
    // The limits' keys really are spread over the masters (hash tags, not one node for all).
    let populated =
        cluster.nodes.iter().filter(|n| n.cli(&["DBSIZE"]).trim().parse::<u64>().unwrap() > 0).count();
    assert!(populated >= 2, "all keys landed on one node");
    eprintln!("conformance (3-master cluster): {compared} decisions identical, keys on {populated} nodes");

    // Hostile keys through the cluster client: no CROSSSLOT, no MOVED loops, isolated state.
    let plain = kova_redis::RedisLimiter::builder()
        .timeout(Duration::from_secs(5))
        .connect_cluster(&nodes)
        .await
        .unwrap();
    crate::bad_input::hostile_keys_are_isolated(&plain).await;
    // A composite of hostile keys: its keys share the key's slot (no CROSSSLOT), and its state
    // is the key's own.
    let per_hour = |kind| kova_redis::RedisLimit::new(kind, kova::Quota::per_hour(1).unwrap()).unwrap();
    let limits = kova_redis::Limits::new([
        per_hour(kova::AlgorithmKind::Gcra),
        per_hour(kova::AlgorithmKind::FixedWindow),
    ])
    .unwrap();
    let mut keys = crate::bad_input::hostile_keys();
    keys.sort();
    keys.dedup();
    for key in &keys {
        let d = plain.check_limits(key, &limits).await.unwrap();
        assert!(d.is_allowed() && d.decision().fallback().is_none(), "{:?}", &key[..key.len().min(40)]);
    }
    for key in &keys {
        assert!(!plain.check_limits(key, &limits).await.unwrap().is_allowed());
    }
    // SCRIPT FLUSH on every node: scripts are reloaded (on the node that answers NOSCRIPT).
    for node in &cluster.nodes {
        node.cli(&["SCRIPT", "FLUSH"]);
    }
    let limit = kova_redis::RedisLimit::gcra(kova::Quota::per_second(5).unwrap()).unwrap();
    let d = plain.check("after-flush", &limit).await.unwrap();
    assert_eq!((d.fallback(), d.remaining()), (None, 4));
}
