//! Unit tests of the table, small enough for Miri (`cargo +nightly miri test -p kova --lib keyed`).

use std::sync::Arc;
use std::time::Duration;

use super::evict::RECLAIM_BATCH;
use super::*;
use crate::keyed::epoch;
use crate::keyed::word;
use crate::keyed::word::WordFreezer;
use crate::loom::atomic::{AtomicU64, Ordering};
use crate::{AnyAlgorithm, ManualClock, QuotaError, SlidingWindowLog};
use crate::{Decision, Fallback};

/// A table of `u64` keys on a manual clock, with no doorkeeper: these tests are of the table
/// itself, where a key's first check inserts it.
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

/// Checks `key`, again while the table-full policy answers for want of a place out of its grace
/// period: another test's thread, pinned when the scheduler took its core away, holds every grace
/// period back (for milliseconds on a busy 2-core machine), and a new key then gets the policy,
/// visibly, after about 3 ms. Panics when that lasts over a second: something holds grace
/// periods back for good.
fn check_tracked<A: Algorithm>(keyed: &Keyed<u64, A, ManualClock>, key: u64) -> Decision {
    let started = std::time::Instant::now();
    loop {
        let decision = keyed.check(&key);
        if decision.fallback() != Some(Fallback::TableFullDenied) {
            return decision;
        }
        assert!(started.elapsed() < Duration::from_secs(1), "key {key}: {decision:?} for a second");
        std::thread::sleep(Duration::from_millis(1));
    }
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
fn two_tables_hash_the_same_key_differently() {
    let (a, _) = table::<Gcra>(per_second(1), 8, 100, TableFullPolicy::default());
    let (b, _) = table::<Gcra>(per_second(1), 8, 100, TableFullPolicy::default());
    let differ = (0..64u64).filter(|k| a.hash(k) != b.hash(k)).count();
    assert_eq!(differ, 64, "a shared seed would hash every key alike");
    // And so they place keys differently: shard (low bits) or index home (high bits).
    let moved = (0..64u64).filter(|k| (a.hash(k) ^ b.hash(k)) & (0xFF | 0xFF << 56) != 0).count();
    assert!(moved >= 60, "{moved}");
    // The same table hashes the same key the same way.
    assert!((0..64u64).all(|k| a.hash(&k) == a.hash(&k)));
}

/// The sliding log's cells cannot be frozen: an unlink hides the line, and a check that wrote
/// the cell looks at the line again afterwards.
#[test]
fn a_write_to_a_hidden_line_is_detected_and_redone() {
    let (keyed, _) = table::<SlidingWindowLog>(per_second(5), 1, 1_000, TableFullPolicy::DenyNew);
    // Room for every key below: an eviction (the logs' resets are equal) could pick key 7.
    keyed.check(&7);
    let hash = keyed.hash(&7);
    let shard = keyed.shard(hash);
    let guard = epoch::pin();
    let freezer = WordFreezer(keyed.algorithm());

    // Nothing happened meanwhile: the write stands.
    let hit = shard.find(hash, &7, &guard).unwrap();
    assert!(shard.still_linked(&hit));

    // An eviction unlinks the line between the lookup and the re-read.
    let hit = shard.find(hash, &7, &guard).unwrap();
    let decision = word::decide(keyed.algorithm(), hit.cell(), keyed.clock(), 1).expect("never frozen");
    assert_eq!(decision.remaining(), 3);
    {
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &7).unwrap();
        assert!(locked.unlink_if(pos, 0, |_| false, &freezer));
    }
    assert!(!shard.still_linked(&hit));
    // The slow path finds the key gone and redoes the check on a fresh cell.
    let redone = keyed.check_slow(hash, &7, 1, None, Some((hit.place(), decision)), epoch::pin());
    assert_eq!(redone.unwrap().remaining(), 4);
    assert_eq!(keyed.len(), 1);

    // A prior decision on the cell the key still has is kept.
    let hit = shard.find(hash, &7, &guard).unwrap();
    let decision = keyed.algorithm().decide_cell(hit.cell(), keyed.clock(), 1);
    let kept = keyed.check_slow(hash, &7, 1, None, Some((hit.place(), decision)), epoch::pin());
    assert_eq!(kept, Ok(decision));
    assert_eq!(keyed.peek(&7).remaining(), 3);

    // Growing the array also sends the check to the slow path, which keeps its decision: the
    // boxed cell did not move.
    let hit = shard.find(hash, &7, &guard).unwrap();
    let decision = keyed.algorithm().decide_cell(hit.cell(), keyed.clock(), 1);
    for key in 100..200 {
        keyed.check(&key);
    }
    assert!(!shard.still_linked(&hit));
    let kept = keyed.check_slow(hash, &7, 1, None, Some((hit.place(), decision)), epoch::pin());
    assert_eq!(kept, Ok(decision));
    assert_eq!(keyed.peek(&7).remaining(), 2);
}

/// A word cell is frozen while the lock holder looks at it: checks decide nothing on it (they
/// take the lock, where the look is over); kept, it gets its state back; unlinked or replaced,
/// the old line stays frozen, so a check still holding it redoes itself on the key's new state.
#[test]
fn checks_decide_nothing_on_a_frozen_word() {
    let (keyed, _) = table::<Gcra>(per_second(5), 1, 100, TableFullPolicy::default());
    let (algorithm, clock) = (keyed.algorithm(), keyed.clock());
    let freezer = WordFreezer(algorithm);
    keyed.check(&7);
    let hash = keyed.hash(&7);
    let shard = keyed.shard(hash);
    let guard = epoch::pin();
    let hit = shard.find(hash, &7, &guard).unwrap();

    // Kept: during the look the cell is frozen and the look sees its state; afterwards the
    // state is back and checks decide on it again.
    {
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &7).unwrap();
        let keep = |copy: &AtomicU64| {
            assert_eq!(word::decide(algorithm, hit.cell(), clock, 1), None);
            assert_eq!(algorithm.decide_cell(copy, clock, 0).remaining(), 4);
            true
        };
        assert!(!locked.unlink_if(pos, 0, keep, &freezer));
        assert_eq!(locked.find(hash, &7), Some(pos));
    }
    assert_eq!(word::decide(algorithm, hit.cell(), clock, 1).map(|d| d.remaining()), Some(3));

    // Unlinked: the old line stays frozen; `check` takes the slow path and starts the key afresh.
    {
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &7).unwrap();
        assert!(locked.unlink_if(pos, 0, |_| false, &freezer));
    }
    assert_eq!(word::decide(algorithm, hit.cell(), clock, 1), None);
    assert_eq!(keyed.check(&7).remaining(), 4);

    // Replaced (a quota change): the same for the line the key had.
    let hit = shard.find(hash, &7, &guard).unwrap();
    assert!(keyed.set_quota(&7, per_second(10)).unwrap());
    assert_eq!(word::decide(algorithm, hit.cell(), clock, 1), None);
    assert_eq!(keyed.check(&7).remaining(), 8);
}

/// A state that happens to equal the frozen marker is decided under the lock, the same as
/// anywhere else.
#[test]
fn a_state_equal_to_the_marker_is_decided_under_the_lock() {
    // Every marker: frozen, and a line's tombstone and vacant words (a key's own word equal to
    // `VACANT` even ends the lock-free probe before the key).
    for marker in [word::FROZEN, word::TOMB, word::VACANT] {
        let (keyed, _) = table::<Gcra>(per_second(5), 1, 100, TableFullPolicy::default());
        for key in 0..20 {
            keyed.check(&key);
        }
        let hash = keyed.hash(&7);
        let guard = epoch::pin();
        let hit = keyed.shard(hash).find(hash, &7, &guard).unwrap();
        hit.cell().store(marker, Ordering::Relaxed);
        let expected = keyed.algorithm().decide_cell(&AtomicU64::new(marker), keyed.clock(), 1);
        assert!(!expected.is_allowed());
        assert_eq!(keyed.check(&7), expected, "{marker:#x}");
        assert_eq!(
            keyed.peek(&7),
            keyed.algorithm().decide_cell(&AtomicU64::new(marker), keyed.clock(), 0),
            "{marker:#x}"
        );
        // The other keys are unharmed (some probe past key 7's line).
        for key in (0..20).filter(|&k| k != 7) {
            assert_eq!(keyed.peek(&key).remaining(), 4, "{marker:#x}: key {key}");
        }
        assert_eq!(keyed.len(), 20);
    }
}

/// An eviction whose look finds the key in use keeps it in place, for both ways of looking.
#[test]
fn an_eviction_that_sees_a_racing_write_keeps_the_key() {
    fn keeps<A: Algorithm>() {
        let (keyed, _) = table::<A>(per_second(5), 1, 100, TableFullPolicy::default());
        keyed.check(&1);
        let hash = keyed.hash(&1);
        let shard = keyed.shard(hash);
        let guard = epoch::pin();
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &1).unwrap();
        let freezer = WordFreezer(keyed.algorithm());
        assert!(!locked.unlink_if(pos, 0, |_| true, &freezer));
        assert_eq!(locked.find(hash, &1), Some(pos));
        drop(locked);
        assert_eq!(keyed.peek(&1).remaining(), 4);
    }
    keeps::<Gcra>();
    keeps::<SlidingWindowLog>();
    keeps::<AnyAlgorithm>();
}

#[test]
fn keys_and_cells_are_dropped_exactly_once() {
    // The key carries a token: the table must drop every clone it made.
    #[derive(Clone, Debug)]
    struct Key(u64, #[allow(dead_code)] Arc<()>);
    impl PartialEq for Key {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }
    impl Eq for Key {}
    impl Hash for Key {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state)
        }
    }
    // Both kinds of cell: boxed (the sliding log) and inline (GCRA); keys are also moved by
    // rehashes and dropped with replaced arrays.
    fn cycle<A: Algorithm>() {
        let token = Arc::new(());
        let n = scaled(500, 40) as u64;
        {
            let keyed = Keyed::<Key, A>::builder(per_second(3))
                .clock(ManualClock::new())
                .shards(2)
                .max_keys(n as usize / 2)
                .table_full(TableFullPolicy::EvictClosestToIdle)
                .build()
                .unwrap();
            for i in 0..n {
                // Twice: the doorkeeper admits a key's first check without inserting it.
                keyed.check(&Key(i, token.clone()));
                keyed.check(&Key(i, token.clone()));
                if i % 3 == 0 {
                    keyed.remove(&Key(i, token.clone()));
                }
                if i % 5 == 0 {
                    keyed.set_quota(&Key(i, token.clone()), per_second(4)).unwrap();
                }
            }
            assert!(keyed.len() <= n as usize / 2);
            assert!(Arc::strong_count(&token) > 1);
        }
        assert_eq!(Arc::strong_count(&token), 1, "every key the table cloned is dropped");
    }
    cycle::<crate::SlidingWindowLog>();
    cycle::<Gcra>();
}

/// A check holding a line of an array that a rehash replaces finds its word frozen, decides
/// nothing on it, and is redone on the key's line in the new array, state carried over.
#[test]
fn a_rehash_freezes_the_lines_it_moves() {
    let (keyed, _) = table::<Gcra>(per_second(5), 1, 10_000, TableFullPolicy::default());
    keyed.check_n(&7, 2).unwrap();
    let hash = keyed.hash(&7);
    let shard = keyed.shard(hash);
    let guard = epoch::pin();
    let old = shard.find(hash, &7, &guard).unwrap();
    for key in 100..100 + scaled(1_000, 60) as u64 {
        keyed.check(&key);
    }
    assert_eq!(word::decide(keyed.algorithm(), old.cell(), keyed.clock(), 1), None);
    let new = shard.find(hash, &7, &guard).unwrap();
    assert!(!std::ptr::eq(old.cell(), new.cell()), "moved to the new array");
    assert_eq!(keyed.check(&7).remaining(), 2);
    drop(guard);
    assert!(keyed.memory_bytes() <= keyed.memory_bound_bytes());
}

/// A `u64` key of a word algorithm costs at most 32 bytes once every shard's array is dense,
/// after the arrays that growth replaced are past their grace period: lines of 16 bytes, at
/// least 11/20 loaded after every growth, plus one byte of marks per line. Before that, while
/// shards hold too few keys to fill [`SPARSE_LINES`](crate::keyed::line::SPARSE_LINES) lines
/// at that load, the table takes at most that many lines a shard.
#[test]
fn a_word_key_takes_at_most_32_bytes_once_arrays_are_dense() {
    use crate::keyed::line::{FRESH_DEN, FRESH_NUM, SPARSE_LINES};
    let shards = 4;
    let (keyed, _) = table::<Gcra>(per_second(5), shards, 1 << 20, TableFullPolicy::default());
    let empty = keyed.memory_bytes();
    // The keys at which the fullest shard is dense, with room for the shards' imbalance.
    let dense_from = (shards * SPARSE_LINES * FRESH_NUM / FRESH_DEN * 5 / 4) as u64;
    // A sparse shard's lines and marks, and its header.
    let sparse_bytes = shards * (SPARSE_LINES * (std::mem::size_of::<u64>() * 2 + 1) + 64);
    let keys = scaled(200_000, 1_200) as u64;
    let step = scaled(4_099, 600) as u64;
    for key in 0..keys {
        keyed.check(&key);
        if (key + 1) % step == 0 {
            let dense = key + 1 >= dense_from;
            let held = || keyed.memory_bytes() - empty;
            let fits =
                || if dense { held() as f64 / (key + 1) as f64 <= 32.0 } else { held() <= sparse_bytes };
            // Replaced arrays wait for threads pinned elsewhere (other tests): advance the epoch
            // and lock every shard (a sweep) until they are freed.
            let mut tries = 0;
            while !fits() && tries < scaled(1_000, 20) {
                epoch::pin().advance();
                keyed.sweep_idle();
                std::thread::sleep(Duration::from_micros(200));
                tries += 1;
            }
            assert!(fits(), "{} bytes at {} keys (dense: {dense})", held(), key + 1);
        }
    }
}

/// A flood of new keys at the key bound, each new key reclaiming an idle one, keeps probes short
/// for inline and boxed cells: the reclamation scan visits scattered runs of positions
/// (`scan_order.rs`'s `ScanOrder`). Scanning in position order, which follows the hashes,
/// reclaimed keys by hash: keys piled up ahead of the cursor and runs of thousands of positions
/// formed.
///
/// The measure is the mean number of lines in use a probe for a missing key passes, over every
/// starting position: it sums over all runs, so it varies little with the table's hash seed (the
/// longest run alone, at Miri's scale, ranges over a tenth of the table from seed to seed). The
/// bound sits at two to three times the most any seed has given (boxed cells, a third of whose
/// lines hold removed keys, pass more), and one run of a third of the table, or of a fifteenth at
/// the full scale, exceeds it on its own.
#[test]
fn a_flood_at_the_key_bound_keeps_probes_short() {
    fn flood<A: Algorithm>() -> (Vec<usize>, usize) {
        let max_keys = scaled(16_384, 256);
        // One request a millisecond in windows of 8: a GCRA key is idle 1 ms after its check, a
        // log key 8 ms after, so the last 256 or 2,048 keys checked are not. (A log of 8 keeps
        // its rings small enough for Miri.)
        let quota = Quota::new(8, Duration::from_millis(8)).unwrap();
        let (keyed, clock) = table::<A>(quota, 1, max_keys, TableFullPolicy::default());
        for key in 0..(scaled(4, 4) * max_keys) as u64 {
            if key % 256 == 0 {
                clock.advance(Duration::from_millis(1));
            }
            assert!(check_tracked(&keyed, key).is_allowed(), "key {key}");
        }
        // Full, but for what the last insert's reclamation freed beyond its own room.
        assert!((max_keys + 1 - RECLAIM_BATCH..=max_keys).contains(&keyed.len()), "{}", keyed.len());
        {
            let guard = epoch::pin();
            let locked = keyed.shards[0].lock(&guard);
            (locked.run_lengths(), locked.positions())
        }
    }
    let layouts = [("inline", flood::<Gcra>()), ("boxed", flood::<SlidingWindowLog>())];
    for (layout, (runs, positions)) in &layouts {
        // A miss starting at offset i of a run of length L passes L - i lines in use.
        let passed: usize = runs.iter().map(|len| len * (len + 1) / 2).sum();
        let mean = passed as f64 / *positions as f64;
        let in_use: usize = runs.iter().sum();
        let longest = runs.iter().max().unwrap_or(&0);
        eprintln!("{layout}: {in_use} of {positions} positions in use, longest run {longest}, a miss passes {mean:.2} on average");
        let bound = scaled(64, 16) as f64;
        assert!(mean <= bound, "{layout}: a miss passes {mean:.2} lines on average, over {bound}");
    }
}

/// Removed keys' lines, once their grace period ends, become vacant again where no probe needs to
/// pass them (each run of them that ends at a vacant line): with every key removed, no line is in
/// use, for inline and boxed cells alike, so the shard has no removed lines left to shed.
#[test]
fn lines_of_removed_keys_become_vacant_at_the_end_of_their_run() {
    fn in_use_after_removing_all<A: Algorithm>() -> usize {
        let keys = scaled(2_000, 100) as u64;
        let (keyed, _clock) = table::<A>(per_second(10), 1, 4 * keys as usize, TableFullPolicy::default());
        for key in 0..keys {
            keyed.check(&key);
        }
        for key in 0..keys {
            assert!(keyed.remove(&key), "key {key}");
        }
        // Grace periods wait for threads pinned elsewhere (other tests): advance the epoch and
        // lock the shard (which collects) until none is left in use, or give up.
        let in_use = || {
            let guard = epoch::pin();
            let locked = keyed.shards[0].lock(&guard);
            (0..locked.positions()).filter(|&pos| locked.is_in_use(pos)).count()
        };
        let mut tries = 0;
        while in_use() > 0 && tries < scaled(1_000, 20) {
            epoch::pin().advance();
            std::thread::sleep(Duration::from_micros(200));
            tries += 1;
        }
        in_use()
    }
    assert_eq!(in_use_after_removing_all::<Gcra>(), 0, "inline");
    assert_eq!(in_use_after_removing_all::<SlidingWindowLog>(), 0, "boxed");
}

#[test]
fn a_thread_gone_quiet_after_inserting_holds_no_grace_period_back() {
    // A worker fills the table to its bound, then stays alive without checking again (blocked
    // on a channel, as an idle worker of a pool is). Its locked sections retired places; had
    // their grace periods stayed in its thread-local bag, every later insert into a full shard
    // would wait for them, in vain, and then get the table-full policy: for good, where a
    // thread of another test holds them back only for a moment (see `check_tracked`).
    fn flood<A: Algorithm>() {
        let max_keys = scaled(4_096, 64);
        // Idle 2 ms after a check, for both algorithms.
        let quota = Quota::new(2, Duration::from_millis(2)).unwrap();
        let (keyed, clock) = table::<A>(quota, 2, max_keys, TableFullPolicy::DenyNew);
        let (filled_tx, filled_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            // Dropped (releasing the worker) if an assertion below fails.
            let release_tx = release_tx;
            let (keyed, filler_clock) = (&keyed, clock.clone());
            scope.spawn(move || {
                // Twice the bound, 8 keys every 2 ms: idle keys are reclaimed on the way.
                for key in 0..2 * max_keys as u64 {
                    if key % 8 == 0 {
                        filler_clock.advance(Duration::from_millis(2));
                    }
                    assert!(check_tracked(keyed, u64::MAX - key).is_allowed());
                }
                filled_tx.send(()).unwrap();
                let _ = release_rx.recv();
            });
            filled_rx.recv().unwrap();
            clock.advance(Duration::from_secs(1));
            let started = std::time::Instant::now();
            for key in 0..(scaled(4, 2) * max_keys) as u64 {
                if key % 8 == 0 {
                    clock.advance(Duration::from_millis(2));
                }
                let decision = check_tracked(keyed, key);
                assert!(decision.is_allowed() && decision.fallback().is_none(), "key {key}: {decision:?}");
            }
            eprintln!("{}: {:?}", std::any::type_name::<A>(), started.elapsed());
            release_tx.send(()).unwrap();
        });
        assert!(keyed.len() <= max_keys);
    }
    flood::<Gcra>();
    flood::<SlidingWindowLog>();
}

/// A user's own word algorithm: a plain counter of units per period that never refills (enough
/// to tell a key's state apart), not one of kova's.
struct Counter {
    quota: Quota,
}

impl crate::WordAlgorithm for Counter {
    const NAME: &'static str = "counter";

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        Ok(Counter { quota })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    fn fresh_word(&self) -> u64 {
        0
    }

    fn decide(&self, word: u64, _now: u64, cost: u64) -> (Decision, u64) {
        let capacity = self.quota.burst();
        if word + cost > capacity {
            return (Decision::denied(capacity, capacity - word, 1, 0), word);
        }
        (Decision::allowed(capacity, capacity - word - cost, 0), word + cost)
    }

    fn is_idle_word(&self, word: u64, _now: u64) -> bool {
        word == 0
    }

    fn refund(&self, word: u64, _now: u64, cost: u64) -> u64 {
        word.saturating_sub(cost)
    }
}

/// A `WordAlgorithm` kova does not know gets what kova's own get: its keys in lines, and checks
/// through the table's CAS loop (the one that stops at a frozen word).
#[test]
fn a_users_word_algorithm_takes_the_lines_and_the_cas_loop() {
    let (keyed, _) = table::<Counter>(per_second(3), 1, 100, TableFullPolicy::default());
    assert_eq!(keyed.check(&7).remaining(), 2);
    let hash = keyed.hash(&7);
    let shard = keyed.shard(hash);
    let guard = epoch::pin();
    let hit = shard.find(hash, &7, &guard).expect("held in a line");
    assert_eq!(hit.cell().load(Ordering::Relaxed), 1);
    assert!(word::freezes(keyed.algorithm(), hit.cell()));
    // Frozen, the lock-free loop decides nothing (`decide_cell` would have decided).
    {
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &7).unwrap();
        let keep = |_: &AtomicU64| {
            assert_eq!(word::decide(keyed.algorithm(), hit.cell(), keyed.clock(), 1), None);
            true
        };
        let freezer = WordFreezer(keyed.algorithm());
        assert!(!locked.unlink_if(pos, 0, keep, &freezer));
    }
    drop(guard);
    assert_eq!(keyed.check_n(&7, 2).unwrap().remaining(), 0);
    assert!(!keyed.check(&7).is_allowed());
}

/// A check that asks for a quota its key cannot be moved to at once (no line free of its grace
/// period: here this thread holds every grace period back) is decided under the key's current
/// quota, and says so.
#[test]
fn a_check_whose_quota_move_finds_no_room_says_so() {
    let (keyed, _clock) = table::<Gcra>(per_second(100), 1, 8, TableFullPolicy::EvictClosestToIdle);
    for key in 0..8 {
        assert!(keyed.check(&key).is_allowed());
    }
    let held_back = epoch::pin();
    // New keys evict and bury held ones until no line is left free of its grace period.
    let mut key = 100;
    while keyed.check(&key).fallback() != Some(Fallback::TableFullDenied) {
        key += 1;
        assert!(key < 10_000, "room never ran out while grace periods were held back");
    }
    let held = (0..8).chain(100..key).find(|k| keyed.quota_of(k).is_some()).expect("a key is held");
    let decision = keyed.check_n_with_quota(&held, per_second(50), 1).unwrap();
    assert_eq!(decision.fallback(), Some(Fallback::QuotaNotMoved), "{decision:?}");
    assert_eq!(decision.limit(), 100, "decided under the key's current quota");
    assert_eq!(keyed.quota_of(&held), Some(per_second(100)));
    // A cost the asked quota takes and the current one cannot: denied, marked, not an error.
    let over = keyed.check_n_with_quota(&held, per_second(500), 200).unwrap();
    assert_eq!((over.is_allowed(), over.fallback()), (false, Some(Fallback::QuotaNotMoved)), "{over:?}");
    // A cost the asked quota cannot take is its error, and moves nothing.
    assert!(keyed.check_n_with_quota(&held, per_second(50), 60).is_err());
    assert_eq!(keyed.quota_of(&held), Some(per_second(100)));
    drop(held_back);
    // Once grace periods end again (a few locked sections advance the epoch; another test's
    // thread, preempted while pinned, may hold them back for a while), the key moves.
    let started = std::time::Instant::now();
    let moved = loop {
        let decision = keyed.check_n_with_quota(&held, per_second(50), 1).unwrap();
        if decision.fallback() != Some(Fallback::QuotaNotMoved) {
            break decision;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "the key never moved: {decision:?}");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((moved.fallback(), moved.limit()), (None, 50));
    assert_eq!(keyed.quota_of(&held), Some(per_second(50)));
}
