//! The keyed table's behaviour through its public API, on a manual clock: keys tracked
//! separately, growth and removal, room for new keys, per-key quotas, drops, memory, threads.
//! Small enough for Miri (`cargo +nightly miri test -p kova --test keyed_table`); the tests of
//! the table's protocols, which reach into its shards, are its unit tests.
//!
//! Its tables have no doorkeeper (`doorkeeper(0)`; `keyed_door.rs` tests the door with these
//! tables' defaults): a key's first check inserts it, as these tests of growth, room and
//! memory need.

use std::sync::Arc;
use std::time::Duration;

use kova::keyed::{KeyedBuilder, KeyedError, TableFullPolicy};
use kova::reservation::ReserveError;
use kova::{
    Algorithm, AlgorithmKind, AnyAlgorithm, CheckError, Clock, Fallback, Gcra, Keyed, ManualClock, Quota,
    QuotaError, TokenBucket, WordAlgorithm,
};

/// A table of `u64` keys on a manual clock.
fn table<A: Algorithm>(
    quota: Quota,
    shards: usize,
    max_keys: usize,
    policy: TableFullPolicy,
) -> (Keyed<u64, A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let keyed = Keyed::builder(quota)
        .clock(clock.clone())
        .shards(shards)
        .max_keys(max_keys)
        .table_full(policy)
        .doorkeeper(0)
        .build()
        .unwrap();
    (keyed, clock)
}

fn per_second(n: u64) -> Quota {
    Quota::per_second(n).unwrap()
}

/// Fewer iterations under Miri.
fn scaled(normal: usize, miri: usize) -> usize {
    if cfg!(miri) {
        miri
    } else {
        normal
    }
}

#[test]
fn checks_track_each_key_separately() {
    let (keyed, clock) = table::<Gcra>(per_second(3), 4, 100, TableFullPolicy::default());
    for left in [2, 1, 0] {
        assert_eq!(keyed.check(&1).remaining(), left);
    }
    assert!(!keyed.check(&1).is_allowed());
    assert!(keyed.check(&2).is_allowed());
    assert_eq!(keyed.len(), 2);
    // A peek changes nothing and inserts nothing.
    assert_eq!(keyed.peek(&1).remaining(), 0);
    assert_eq!(keyed.peek(&3).remaining(), 3);
    assert_eq!(keyed.len(), 2);
    keyed.reset(&1);
    assert_eq!(keyed.check(&1).remaining(), 2);
    assert!(keyed.remove(&2));
    assert!(!keyed.remove(&2));
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed.check(&2).remaining(), 2);
    clock.advance(Duration::from_secs(1));
    assert_eq!(keyed.peek(&1).remaining(), 3);
    assert_eq!(keyed.check_n(&1, 4), Err(CheckError::CostExceedsCapacity { cost: 4, capacity: 3 }));
}

#[test]
fn the_index_grows_without_losing_a_key_or_its_state() {
    let keys = scaled(2_000, 150) as u64;
    let (keyed, _) = table::<Gcra>(per_second(3), 1, 10_000, TableFullPolicy::DenyNew);
    for key in 0..keys {
        assert!(keyed.check_n(&key, key % 3 + 1).unwrap().is_allowed());
    }
    assert_eq!(keyed.len(), keys as usize);
    for key in 0..keys {
        assert_eq!(keyed.peek(&key).remaining(), 3 - (key % 3 + 1), "key {key}");
    }
    assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
}

#[test]
fn removals_keep_every_other_key_reachable() {
    let keys = scaled(1_000, 120) as u64;
    let (keyed, _) = table::<TokenBucket>(per_second(3), 1, 10_000, TableFullPolicy::DenyNew);
    for key in 0..keys {
        keyed.check_n(&key, key % 3 + 1).unwrap();
    }
    for key in (0..keys).filter(|k| k % 4 == 0) {
        assert!(keyed.remove(&key));
    }
    assert_eq!(keyed.len(), (keys - keys.div_ceil(4)) as usize);
    for key in 0..keys {
        let expected = if key % 4 == 0 { 3 } else { 3 - (key % 3 + 1) };
        assert_eq!(keyed.peek(&key).remaining(), expected, "key {key}");
    }
}

#[test]
fn idle_keys_make_room_for_new_ones() {
    let (keyed, clock) = table::<Gcra>(per_second(2), 1, 8, TableFullPolicy::DenyNew);
    for key in 0..8 {
        assert!(keyed.check(&key).is_allowed());
    }
    // Full of active keys: fail closed.
    let denied = keyed.check(&100);
    assert_eq!(denied.fallback(), Some(Fallback::TableFullDenied));
    assert!(denied.retry_after_nanos() > 0);
    assert_eq!(keyed.len(), 8);
    // Half a second later every bucket is full again (idle): new keys reclaim them.
    clock.advance(Duration::from_millis(500));
    for key in 100..108 {
        let decision = keyed.check(&key);
        assert!(decision.is_allowed());
        assert_eq!(decision.fallback(), None);
    }
    assert_eq!(keyed.len(), 8);
    assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
}

/// A clock whose cached reading (`now_nanos`) runs late, as the coarse clock's does when its
/// upkeep thread waits for a CPU: the two readings move separately.
#[derive(Clone, Default)]
struct LateClock {
    cached: ManualClock,
    precise: ManualClock,
}

impl Clock for LateClock {
    fn now_nanos(&self) -> u64 {
        self.cached.now_nanos()
    }

    fn now_nanos_precise(&self) -> u64 {
        self.precise.now_nanos()
    }
}

#[test]
fn keys_idle_by_the_precise_time_make_room_while_the_cached_one_runs_late() {
    let clock = LateClock::default();
    let keyed = Keyed::<u64, Gcra>::builder(per_second(2))
        .clock(clock.clone())
        .shards(1)
        .max_keys(8)
        .table_full(TableFullPolicy::DenyNew)
        .doorkeeper(0)
        .build()
        .unwrap();
    for key in 0..8 {
        assert!(keyed.check(&key).is_allowed());
    }
    // Half a second on, by the precise time only: every key is idle, and new keys take their
    // room (with the cached reading, the table would still look full of active keys).
    clock.precise.advance(Duration::from_millis(500));
    for key in 100..108 {
        let decision = keyed.check(&key);
        assert!(decision.is_allowed());
        assert_eq!(decision.fallback(), None, "key {key}");
    }
    assert_eq!(keyed.len(), 8);
    // A sweep, too, goes by the precise time.
    clock.precise.advance(Duration::from_millis(500));
    assert_eq!(keyed.sweep_idle(), 8);
    assert_eq!(keyed.len(), 0);
}

#[test]
fn allow_untracked_fails_open_and_tracks_nothing() {
    let (keyed, _) = table::<Gcra>(per_second(1), 1, 2, TableFullPolicy::AllowUntracked);
    keyed.check(&1);
    keyed.check(&2);
    for _ in 0..3 {
        let decision = keyed.check(&3);
        assert!(decision.is_allowed());
        assert_eq!(decision.fallback(), Some(Fallback::TableFullUntracked));
    }
    assert_eq!(keyed.len(), 2);
    assert_eq!(keyed.quota_of(&3), None);
}

/// A shard of 256 keys evicts the four sampled keys closest to idle for one insert, so that
/// the next three inserts find room without sampling; a shard of fewer than 128 evicts one
/// (above).
#[test]
fn a_large_full_shard_evicts_four_keys_at_once() {
    let (keyed, _) = table::<Gcra>(per_second(4), 1, 256, TableFullPolicy::EvictClosestToIdle);
    for key in 0..256 {
        assert!(keyed.check(&key).is_allowed());
    }
    assert_eq!(keyed.len(), 256);
    assert!(keyed.check(&1_000).is_allowed());
    assert_eq!(keyed.len(), 253, "four evicted, one inserted");
    for key in 1_001..1_004 {
        assert!(keyed.check(&key).is_allowed());
    }
    assert_eq!(keyed.len(), 256, "three more inserted without an eviction");
}

#[test]
fn eviction_takes_the_closest_to_idle_and_spares_limited_keys() {
    let (keyed, clock) = table::<Gcra>(per_second(4), 1, 3, TableFullPolicy::EvictClosestToIdle);
    keyed.check_n(&1, 4).unwrap(); // actively limited
    keyed.check_n(&2, 1).unwrap(); // 250 ms from idle
    keyed.check_n(&3, 2).unwrap(); // 500 ms from idle
    let decision = keyed.check(&4);
    assert!(decision.is_allowed());
    assert_eq!(decision.fallback(), None);
    assert_eq!(keyed.quota_of(&2), None, "the key closest to idle is evicted");
    assert!(keyed.quota_of(&1).is_some() && keyed.quota_of(&3).is_some());
    // Drain everyone: then a new key is denied, and no limited key is ever reset.
    keyed.check_n(&3, 2).unwrap();
    keyed.check_n(&4, 3).unwrap();
    for key in 10..20 {
        let decision = keyed.check(&key);
        assert!(!decision.is_allowed());
        assert_eq!(decision.fallback(), Some(Fallback::TableFullDenied));
    }
    let still_limited = keyed.check(&1);
    assert!(!still_limited.is_allowed());
    assert_eq!(still_limited.retry_after(), Duration::from_millis(250));
    clock.advance(Duration::from_millis(250));
    assert_eq!(keyed.check(&1).fallback(), None);
}

#[test]
fn quota_fn_gives_keys_their_own_quota() {
    let clock = ManualClock::new();
    let keyed = Keyed::<u64, Gcra>::builder(per_second(2))
        .clock(clock)
        .shards(2)
        .quota_fn(|key: &u64| (key % 2 == 0).then(|| per_second(10)))
        .doorkeeper(0)
        .build()
        .unwrap();
    assert_eq!(keyed.check(&2).remaining(), 9);
    assert_eq!(keyed.check(&3).remaining(), 1);
    assert_eq!(keyed.quota_of(&2), Some(per_second(10)));
    assert_eq!(keyed.quota_of(&3), Some(per_second(2)));
    assert!(keyed.check_n(&2, 9).unwrap().is_allowed());
    assert_eq!(keyed.check_n(&4, 11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
    assert_eq!(keyed.rejected_quotas(), 0);
}

/// A quota the table cannot use is never silently replaced: the key is answered by the
/// table-full policy, marked, not inserted, and counted at each check; a quota given with the
/// check is the caller's error.
#[test]
fn an_unusable_quota_from_the_function_is_answered_by_the_table_full_policy() {
    let unusable = || Quota::per_second(3).unwrap().with_burst(9).unwrap();
    let algorithm = AnyAlgorithm::new(AlgorithmKind::FixedWindow, per_second(3)).unwrap();
    let keyed = Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(algorithm)
        .clock(ManualClock::new())
        .quota_fn(move |_| Some(unusable()))
        .doorkeeper(0)
        .build()
        .unwrap();
    for checks in 1..=3 {
        let refused = keyed.check(&1);
        assert_eq!((refused.is_allowed(), refused.fallback()), (false, Some(Fallback::TableFullDenied)));
        assert_eq!(keyed.rejected_quotas(), checks);
    }
    assert_eq!(keyed.peek(&1).fallback(), Some(Fallback::TableFullDenied));
    assert_eq!(keyed.len(), 0, "not inserted");
    assert_eq!(
        keyed.check_n_with_quota(&1, unusable(), 1),
        Err(KeyedError::Quota(QuotaError::BurstUnsupported { algorithm: "fixed_window" }))
    );
}

/// Past the table's most distinct quotas, a key whose quota would be one more is answered by
/// the policy: untracked under `AllowUntracked`, marked, its reservations too; a key of a quota
/// the table holds is not affected.
#[test]
fn a_quota_past_the_most_distinct_is_answered_untracked_under_allow_untracked() {
    let keyed = Keyed::<u64, Gcra, _>::builder(per_second(10))
        .clock(ManualClock::new())
        .doorkeeper(0)
        .max_quotas(2)
        .table_full(TableFullPolicy::AllowUntracked)
        .quota_fn(|&key| Some(per_second(100 + key)))
        .build()
        .unwrap();
    assert_eq!(keyed.check(&1).fallback(), None, "the second distinct quota fits");
    assert_eq!(keyed.quota_of(&1), Some(per_second(101)));
    let untracked = keyed.check_n(&2, 5).unwrap();
    assert_eq!((untracked.is_allowed(), untracked.fallback()), (true, Some(Fallback::TableFullUntracked)));
    assert_eq!(untracked.limit(), 10, "under the default quota");
    assert_eq!(keyed.quota_of(&2), None);
    assert_eq!(keyed.reserve_n(&2, 3).unwrap().fallback(), Some(Fallback::TableFullUntracked));
    assert!(matches!(
        keyed.reserve_n(&2, 11),
        Err(ReserveError::CostExceedsCapacity { cost: 11, capacity: 10 })
    ));
    assert_eq!(keyed.rejected_quotas(), 3);
}

#[test]
fn changing_a_quota_keeps_what_was_consumed_for_every_algorithm() {
    for kind in AlgorithmKind::ALL {
        let algorithm = AnyAlgorithm::new(kind, per_second(10)).unwrap();
        let keyed = Keyed::<u64, AnyAlgorithm>::builder_from_algorithm(algorithm)
            .clock(ManualClock::starting_at(5))
            .shards(1)
            .doorkeeper(0)
            .build()
            .unwrap();
        keyed.check_n(&1, 4).unwrap();
        assert!(keyed.set_quota(&1, per_second(20)).unwrap(), "{kind}");
        assert_eq!(keyed.peek(&1).remaining(), 16, "{kind}: 4 used of 20");
        assert_eq!(keyed.quota_of(&1), Some(per_second(20)), "{kind}");
        // Down to 3: the 4 used exceed it, the key is limited.
        let down = keyed.check_n_with_quota(&1, per_second(3), 1).unwrap();
        assert!(!down.is_allowed(), "{kind}");
        assert_eq!(down.limit(), 3, "{kind}");
        // Back to the default quota: still 3 used (capped by the smaller quota).
        assert_eq!(keyed.check_n_with_quota(&1, per_second(10), 1).unwrap().remaining(), 6, "{kind}");
        assert_eq!(keyed.len(), 1, "{kind}");
        assert!(!keyed.set_quota(&2, per_second(20)).unwrap(), "{kind}: not held");
    }
}

/// Keys with their own quotas keep them, and their state, across rehashes (the ids move with the
/// lines), removals and quota changes (a changed key moves to another line).
#[test]
fn own_quotas_survive_rehashes_and_changes() {
    let (keyed, _) = table::<TokenBucket>(per_second(4), 1, 10_000, TableFullPolicy::DenyNew);
    let keys = scaled(600, 60) as u64;
    let own = |key: u64| per_second(4 + key % 3);
    for key in 0..keys {
        if key % 2 == 0 {
            keyed.check_n_with_quota(&key, own(key), 1).unwrap();
        } else {
            keyed.check(&key);
        }
        if key % 7 == 0 {
            assert!(keyed.remove(&(key / 2)));
            keyed.check(&(key / 2));
        }
    }
    for key in (0..keys).step_by(5) {
        assert!(keyed.set_quota(&key, per_second(9)).unwrap());
    }
    for key in 0..keys {
        let quota = if key % 5 == 0 {
            per_second(9)
        } else if key % 2 == 0 && !(0..keys).any(|k| k % 7 == 0 && k / 2 == key) {
            own(key)
        } else {
            per_second(4)
        };
        assert_eq!(keyed.quota_of(&key), Some(quota), "key {key}");
        // One unit used, carried over by a quota change.
        assert_eq!(keyed.peek(&key).remaining(), quota_capacity(quota) - 1, "key {key}");
    }
    assert_eq!(keyed.len(), keys as usize);
}

fn quota_capacity(quota: Quota) -> u64 {
    Algorithm::capacity(&<TokenBucket as Algorithm>::from_quota(quota).unwrap())
}

#[test]
fn sweep_reclaims_only_idle_keys() {
    let (keyed, clock) = table::<Gcra>(per_second(10), 2, 1_000, TableFullPolicy::default());
    for key in 0..50 {
        keyed.check(&key);
    }
    keyed.check_n(&7, 9).unwrap();
    clock.advance(Duration::from_millis(100));
    assert_eq!(keyed.sweep_idle(), 49);
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed.peek(&7).remaining(), 1, "the active key keeps its state");
}

#[test]
fn threads_on_their_own_keys_match_a_sequential_model() {
    let threads = scaled(4, 2) as u64;
    let rounds = scaled(200, 12) as u64;
    let (keyed, _) = table::<Gcra>(per_second(5), 1, 64, TableFullPolicy::DenyNew);
    let keyed = &keyed;
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let gcra = <Gcra as Algorithm>::from_quota(per_second(5)).unwrap();
                // Each thread owns keys t, t + threads, ...: at most 8 each, so never full.
                // Per key: (state word, held).
                let mut model = std::collections::HashMap::new();
                for round in 0..rounds {
                    let key = t + threads * (round * 7 % 8);
                    let (word, held) = model.entry(key).or_insert((0u64, false));
                    match round % 5 {
                        0..=2 => {
                            let cost = round % 3;
                            let (expected, next) = WordAlgorithm::decide(&gcra, *word, 0, cost);
                            assert_eq!(keyed.check_n(&key, cost).unwrap(), expected);
                            *word = next;
                            *held |= cost > 0;
                        }
                        3 => {
                            assert_eq!(keyed.remove(&key), *held);
                            (*word, *held) = (0, false);
                        }
                        _ => {
                            keyed.reset(&key);
                            *word = 0;
                        }
                    }
                }
            });
        }
    });
    assert!(keyed.len() <= 64);
}

/// A check from a thread-local's destructor, when the table's own epoch handle for the thread
/// may already be gone: it pins another way and decides as usual.
#[test]
fn checks_work_while_thread_locals_are_destroyed() {
    struct CheckOnDrop(Arc<Keyed<u64, Gcra, ManualClock>>);
    impl Drop for CheckOnDrop {
        fn drop(&mut self) {
            assert!(self.0.check(&7).is_allowed());
            assert!(self.0.check(&8).is_allowed());
        }
    }
    std::thread_local! {
        static LATE: std::cell::RefCell<Option<CheckOnDrop>> = const { std::cell::RefCell::new(None) };
    }
    let (keyed, _) = table::<Gcra>(per_second(5), 1, 100, TableFullPolicy::default());
    let keyed = Arc::new(keyed);
    let shared = Arc::clone(&keyed);
    std::thread::spawn(move || {
        // Before and after the table's handle exists: thread-locals are destroyed in some order.
        LATE.with(|late| *late.borrow_mut() = Some(CheckOnDrop(Arc::clone(&shared))));
        assert!(shared.check(&7).is_allowed());
    })
    .join()
    .unwrap();
    assert_eq!(keyed.peek(&7).remaining(), 3);
    assert_eq!(keyed.peek(&8).remaining(), 4);
}

/// A removed key comes back fresh (its line is a tombstone, skipped by lookups), and is
/// inserted again.
#[test]
fn a_removed_key_comes_back_fresh() {
    let (keyed, _) = table::<Gcra>(per_second(3), 1, 4, TableFullPolicy::default());
    assert_eq!(keyed.check_n(&7, 2).unwrap().remaining(), 1);
    assert_eq!(keyed.check(&7).remaining(), 0);
    assert!(keyed.remove(&7));
    assert_eq!(keyed.len(), 0);
    assert_eq!(keyed.check_n(&7, 0).unwrap().remaining(), 3);
    assert_eq!(keyed.check(&7).remaining(), 2);
    assert_eq!(keyed.len(), 1);
}

/// The table's memory bound holds with every quota it may keep built: the pages of built
/// algorithms and the map of quotas count, whatever their number.
#[test]
fn the_memory_bound_counts_every_quota_the_table_may_keep() {
    for max in [2, KeyedBuilder::<u64, Gcra>::DEFAULT_MAX_QUOTAS, KeyedBuilder::<u64, Gcra>::MAX_QUOTAS] {
        let table = Keyed::<u64, Gcra>::builder(Quota::per_hour(1).unwrap())
            .clock(ManualClock::new())
            .max_keys(1)
            .shards(1)
            .doorkeeper(0)
            .max_quotas(max)
            .build()
            .unwrap();
        for n in 2..=max as u64 {
            assert!(
                table.check_n_with_quota(&0, Quota::per_hour(n).unwrap(), 1).is_ok(),
                "quota {n} of {max}"
            );
        }
        assert!(
            table.memory_bytes() <= table.memory_bound_bytes(),
            "{max} quotas: {} bytes, bound {}",
            table.memory_bytes(),
            table.memory_bound_bytes()
        );
    }
}
