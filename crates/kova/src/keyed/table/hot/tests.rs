//! Unit tests of hot keys on a manual clock: promotion, checks on the stripes, demotion, and
//! the lock holder's operations on a striped key.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::super::super::hot::{slot_of, HotKeys};
use super::super::super::{epoch, word};
use super::*;
use crate::cell::CellStorage;
use crate::loom::atomic::Ordering;
use crate::striped::StripedError;
use crate::{Fallback, FixedWindow, Gcra, ManualClock, Quota};

fn hot_table<A: crate::WordAlgorithm>(
    quota: Quota,
    hot: HotKeys,
) -> (Keyed<u64, A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    // No doorkeeper: a key's first check inserts it, so that it can be promoted.
    let keyed = Keyed::builder(quota)
        .clock(clock.clone())
        .shards(1)
        .doorkeeper(0)
        .hot_keys(hot)
        .unwrap()
        .build()
        .unwrap();
    (keyed, clock)
}

/// The word of `key`'s line, as a check loads it.
fn line_word<A: Algorithm>(keyed: &Keyed<u64, A, ManualClock>, key: u64) -> u64 {
    let hash = keyed.hash(&key);
    let guard = epoch::pin();
    let hit = keyed.shards[0].find(hash, &key, &guard).expect("held");
    A::Storage::inline_word(hit.cell()).expect("inline").load(Ordering::Relaxed)
}

/// Runs `f` on `threads` threads one after another (each has its own stripe), summing what
/// they return.
fn on_threads(threads: usize, f: impl Fn() -> u64 + Sync) -> u64 {
    (0..threads).map(|_| std::thread::scope(|s| s.spawn(&f).join().unwrap())).sum()
}

/// Promotes `key`, retrying while its slot waits for a grace period another test's pinned
/// thread holds back.
fn promote_eventually<A: Algorithm>(keyed: &Keyed<u64, A, ManualClock>, key: u64) {
    let started = std::time::Instant::now();
    while !keyed.promote(&key) {
        assert!(started.elapsed() < Duration::from_secs(2), "no slot left its grace period");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_promoted_key_is_spent_from_stripes_and_its_demotion_loses_nothing() {
    let (keyed, _clock) =
        hot_table::<Gcra>(Quota::per_hour(100).unwrap(), HotKeys::new(2).stripes(4).batch(8));
    assert!(keyed.check(&7).is_allowed());
    assert!(keyed.promote(&7));
    assert_eq!(keyed.hot_len(), 1);
    let marker = line_word(&keyed, 7);
    assert!(slot_of(marker).is_some(), "the line holds a hot marker");
    // Each thread spends from its stripe (threads of other tests take stripe indices too, so two
    // of ours may share one).
    let mut admitted = on_threads(4, || {
        let first = keyed.check(&7);
        assert_eq!((first.is_allowed(), first.fallback()), (true, Some(Fallback::StripeLease)));
        for _ in 0..19 {
            assert!(keyed.check(&7).is_allowed());
        }
        20
    });
    // What the stripes hold counts as remaining.
    assert_eq!(keyed.peek(&7).remaining(), 99 - 80);
    admitted += on_threads(1, || {
        let mut admitted = 0;
        loop {
            let decision = keyed.check(&7);
            if !decision.is_allowed() {
                assert_eq!(
                    decision.fallback(),
                    Some(Fallback::StripeLease),
                    "a striped key's denial is marked"
                );
                return admitted;
            }
            admitted += 1;
        }
    });
    assert_eq!(line_word(&keyed, 7), marker, "checks of a striped key never write its line");
    assert!(admitted <= 99, "admitted {admitted} of 99");
    // The peek counts the units the stripes hold as remaining.
    let peek = keyed.peek(&7).remaining();
    assert!(keyed.demote(&7));
    assert_eq!(keyed.hot_len(), 0);
    assert_ne!(line_word(&keyed, 7), marker);
    let remaining = keyed.peek(&7).remaining();
    assert_eq!(remaining, 99 - admitted, "units lost or made up by the demotion");
    assert_eq!(peek, remaining);
    assert!(!keyed.demote(&7), "demoted once");
}

#[test]
fn a_striped_key_admits_at_most_its_amount_plus_stripes_times_batch() {
    let (stripes, batch, limit) = (4u64, 3u64, 10u64);
    let (keyed, clock) = hot_table::<Gcra>(
        Quota::per_second(limit).unwrap(),
        HotKeys::new(1).stripes(stripes as usize).batch(batch).lease(Duration::from_millis(50)),
    );
    keyed.check(&1);
    assert!(keyed.promote(&1));
    let mut admitted = 1;
    let steps = 40;
    for _ in 0..steps {
        clock.advance(Duration::from_millis(25));
        admitted +=
            on_threads(stripes as usize, || (0..5).filter(|_| keyed.check(&1).is_allowed()).count() as u64);
    }
    // One second of refill over the run, the burst, and what the stripes can hold.
    let elapsed_s = steps * 25 / 1000;
    let bound = limit + limit * elapsed_s + stripes * batch;
    assert!(admitted <= bound, "admitted {admitted} over the bound {bound}");
    // Demand exceeded supply all along: the stripes did not starve the key either.
    assert!(admitted >= limit * elapsed_s, "admitted only {admitted}");
}

#[test]
fn the_lock_holder_sees_a_striped_keys_real_state() {
    let (keyed, _clock) =
        hot_table::<FixedWindow>(Quota::per_hour(50).unwrap(), HotKeys::new(1).stripes(2).batch(5));
    keyed.check(&3);
    assert!(keyed.promote(&3));
    for _ in 0..3 {
        keyed.check(&3);
    }
    // The stripe leased 5 and spent 3: the window counts 1 + 5.
    assert!(keyed.refund(&3, 2), "a refund demotes and gives back");
    assert_eq!(keyed.hot_len(), 0);
    assert_eq!(keyed.peek(&3).remaining(), 50 - 4 + 2);
    promote_eventually(&keyed, 3);
    keyed.check(&3);
    keyed.reset(&3);
    assert_eq!(keyed.hot_len(), 0, "a reset demotes first");
    assert_eq!(keyed.peek(&3).remaining(), 50);
    promote_eventually(&keyed, 3);
    keyed.check_n(&3, 2).unwrap();
    assert!(keyed.set_quota(&3, Quota::per_hour(100).unwrap()).unwrap());
    assert_eq!(keyed.hot_len(), 0, "a quota change demotes first");
    assert_eq!(keyed.peek(&3).remaining(), 98, "the consumption moves with the key");
    promote_eventually(&keyed, 3);
    assert!(keyed.remove(&3));
    assert_eq!(keyed.hot_len(), 0);
    assert!(!keyed.promote(&3), "not held");
}

#[test]
fn reservations_and_settled_costs_of_a_striped_key_use_its_real_state() {
    let (keyed, _clock) =
        hot_table::<FixedWindow>(Quota::per_hour(40).unwrap(), HotKeys::new(1).stripes(1).batch(4));
    keyed.check(&6);
    assert!(keyed.promote(&6));
    keyed.check(&6);
    // The stripe holds 3 of the 4 it leased: a reservation sees them given back first.
    let reservation = keyed.reserve_n(&6, 10).unwrap();
    assert_eq!(keyed.hot_len(), 0);
    assert_eq!(keyed.peek(&6).remaining(), 40 - 2 - 10);
    assert!(reservation.cancel() > 0);
    assert_eq!(keyed.peek(&6).remaining(), 38);
    promote_eventually(&keyed, 6);
    keyed.check(&6);
    // A settled cost charges the extra units to the real state.
    keyed.settle(&6, 1, 5);
    assert_eq!(keyed.hot_len(), 0);
    assert_eq!(keyed.peek(&6).remaining(), 40 - 3 - 4);
}

#[test]
fn a_striped_key_is_neither_reclaimed_nor_evicted() {
    let (keyed, clock) =
        hot_table::<Gcra>(Quota::per_second(10).unwrap(), HotKeys::new(1).stripes(1).batch(2));
    keyed.check(&5);
    assert!(keyed.promote(&5));
    clock.advance(Duration::from_secs(60));
    // Idle in its slot, whatever its line's marker would read as: the first sweep only notes
    // its slot's word.
    assert_eq!(keyed.sweep_idle(), 0);
    assert_eq!((keyed.len(), keyed.hot_len()), (1, 1));
    // A lease between two sweeps keeps it striped.
    assert_eq!(keyed.check(&5).fallback(), Some(Fallback::StripeLease));
    assert_eq!(keyed.sweep_idle(), 0);
    assert_eq!(keyed.hot_len(), 1);
    // Nothing leased since: cooled, demoted (its stripe's unit given back), then reclaimed
    // once idle.
    assert_eq!(keyed.sweep_idle(), 0);
    assert_eq!((keyed.len(), keyed.hot_len()), (1, 0));
    assert_eq!(keyed.peek(&5).remaining(), 9);
    clock.advance(Duration::from_secs(60));
    assert_eq!(keyed.sweep_idle(), 1);
}

#[test]
fn a_key_is_promoted_once_its_failed_compare_exchanges_pass_the_threshold_within_a_window() {
    let (keyed, clock) = hot_table::<Gcra>(Quota::per_second(100).unwrap(), HotKeys::new(1).promote_after(3));
    keyed.check(&4);
    let hot = keyed.hot.as_ref().unwrap();
    let hash = keyed.hash(&4);
    let contend = |now| {
        let guard = epoch::pin();
        keyed.contended(hot, hash, &4, now, &guard);
    };
    let window = crate::keyed::CONTENTION_WINDOW.as_nanos() as u64;
    // Two failures in one window, the third in the next: not enough.
    contend(clock.now_nanos());
    contend(clock.now_nanos());
    clock.advance_nanos(window);
    contend(clock.now_nanos());
    assert_eq!(keyed.hot_len(), 0);
    contend(clock.now_nanos());
    assert_eq!(keyed.hot_len(), 0);
    contend(clock.now_nanos());
    assert_eq!(keyed.hot_len(), 1, "three failures in one window");
    assert_eq!(keyed.check(&4).fallback(), Some(Fallback::StripeLease));
    // Through the hit path's own counting: the CAS loop reports a failed compare-exchange.
    assert!(keyed.demote(&4));
    let guard = epoch::pin();
    let hit = keyed.shards[0].find(hash, &4, &guard).unwrap();
    let algorithm = keyed.algorithm();
    let mut failures = 0;
    let word = <crate::cell::InlineWord as CellStorage<Gcra>>::inline_word(hit.cell()).unwrap();
    // A check that loaded the word, then lost it to another write: the callback runs once.
    let decision = word::decide_noting(
        algorithm,
        hit.cell(),
        &ChangingClock { word, clock: &clock, first: AtomicBool::new(true) },
        1,
        |_| failures += 1,
    );
    assert!(decision.is_some_and(|d| d.is_allowed()));
    assert_eq!(failures, 1);
}

/// A clock whose first reading also writes `word` (as a racing check would, between a check's
/// load and its compare-exchange).
struct ChangingClock<'a> {
    word: &'a crate::loom::atomic::AtomicU64,
    clock: &'a ManualClock,
    first: AtomicBool,
}

impl crate::Clock for ChangingClock<'_> {
    fn now_nanos(&self) -> u64 {
        let now = self.clock.now_nanos();
        if self.first.swap(false, Ordering::Relaxed) {
            // Another state: one nanosecond later.
            self.word.fetch_add(1, Ordering::Relaxed);
        }
        now
    }
}

#[test]
fn a_full_set_of_slots_refuses_promotion_and_a_slot_is_reused_after_its_grace_period() {
    let (keyed, _clock) =
        hot_table::<Gcra>(Quota::per_second(10).unwrap(), HotKeys::new(1).stripes(1).batch(2));
    keyed.check(&1);
    keyed.check(&2);
    assert!(keyed.promote(&1));
    assert!(!keyed.promote(&2), "one slot");
    assert!(keyed.promote(&1), "already striped");
    assert!(keyed.demote(&1));
    promote_eventually(&keyed, 2);
    assert_eq!(keyed.check(&2).fallback(), Some(Fallback::StripeLease));
    assert_eq!(keyed.check(&1).fallback(), None, "key 1 is back in its line");
}

#[test]
fn hot_keys_reject_shapes_out_of_range() {
    let builder = || Keyed::<u64, Gcra>::builder(Quota::per_second(10).unwrap()).clock(ManualClock::new());
    assert_eq!(
        builder().hot_keys(HotKeys::new(2).stripes(3)).err(),
        Some(StripedError::Stripes { stripes: 3 })
    );
    assert_eq!(
        builder().hot_keys(HotKeys::new(2).batch(11)).err(),
        Some(StripedError::Batch { batch: 11, max: 10 })
    );
    assert_eq!(
        builder().hot_keys(HotKeys::new(0)).err(),
        Some(StripedError::HotSlots { max_hot: 0, max: MAX_HOT_KEYS })
    );
    let over = MAX_HOT_KEYS + 1;
    assert_eq!(
        builder().hot_keys(HotKeys::new(over)).err(),
        Some(StripedError::HotSlots { max_hot: over, max: MAX_HOT_KEYS })
    );
    assert!(matches!(
        builder().hot_keys(HotKeys::new(2).lease(Duration::ZERO)),
        Err(StripedError::Lease { .. })
    ));
}

#[test]
fn memory_counts_the_hot_slots() {
    let quota = Quota::per_second(10).unwrap();
    let plain =
        Keyed::<u64, Gcra>::builder(quota).clock(ManualClock::new()).shards(1).doorkeeper(0).build().unwrap();
    let (hot, _) = hot_table::<Gcra>(quota, HotKeys::new(16).stripes(4).batch(2));
    let slots = 16 * (128 + 4 * 128);
    assert!(hot.memory_bytes() >= plain.memory_bytes() + slots);
    assert!(hot.memory_bound_bytes() >= plain.memory_bound_bytes() + slots);
    assert!(hot.memory_bytes() <= hot.memory_bound_bytes());
}

use crate::keyed::MAX_HOT_KEYS;

/// Units stranded by a check on a slot that closed go back only to the life of the key that
/// check was decided on: a key removed and inserted again meanwhile starts fresh, and units
/// handed to it would be units beyond its quota.
#[test]
fn stranded_units_of_a_removed_key_do_not_go_to_its_next_life() {
    let (keyed, _clock) = hot_table::<Gcra>(Quota::per_second(10).unwrap(), HotKeys::new(1));
    let key = 7;
    assert!(keyed.check(&key).is_allowed());
    promote_eventually(&keyed, key);
    // What a check on the slot reads first, before the slot closes under it.
    let seen = keyed.forgets_seen();
    // The key is removed (its slot closed) and comes back with 4 units spent.
    assert!(keyed.remove(&key));
    assert!(keyed.check_n(&key, 4).unwrap().is_allowed());
    let before = keyed.peek(&key).remaining();
    let hash = keyed.hash(&key);
    keyed.hand_in(hash, &key, 3, seen, &epoch::pin());
    assert_eq!(keyed.peek(&key).remaining(), before, "units of the old life went to the new one");
}

/// Units stranded by a check on a slot that closed while the key stayed go back to it.
#[test]
fn stranded_units_of_a_key_that_stays_go_back_to_it() {
    let (keyed, _clock) = hot_table::<Gcra>(Quota::per_second(10).unwrap(), HotKeys::new(1));
    let key = 7;
    assert!(keyed.check_n(&key, 5).unwrap().is_allowed());
    let seen = keyed.forgets_seen();
    let before = keyed.peek(&key).remaining();
    let hash = keyed.hash(&key);
    keyed.hand_in(hash, &key, 3, seen, &epoch::pin());
    assert_eq!(keyed.peek(&key).remaining(), before + 3);
}

/// A demoted key whose own state later equals its old slot's marker (a clock near the end of
/// its range) is not read as striped again: its slot is closed, so the state is decided as a
/// state, the slot is not demoted a second time, and one slot holds one key.
#[test]
fn a_state_equal_to_a_closed_slots_marker_is_not_that_slot() {
    let (keyed, clock) = hot_table::<Gcra>(Quota::per_second(1000).unwrap(), HotKeys::new(1));
    assert!(keyed.check(&7).is_allowed());
    // Two keys to promote later, their states far below the markers.
    assert!(keyed.check(&8).is_allowed() && keyed.check(&9).is_allowed());
    assert!(keyed.promote(&7));
    assert!(keyed.demote(&7));
    // One unit of 1 ms from here ends at slot 0's marker.
    clock.set(word::HOT_BASE - 1_000_000);
    keyed.check(&7);
    keyed.check(&7);
    assert_eq!(keyed.hot_len(), 0);
    // Slot 0 comes back once, after its grace period: one key takes it, the next finds none.
    promote_eventually(&keyed, 8);
    assert!(!keyed.promote(&9), "one slot, two keys");
    assert_eq!(keyed.hot_len(), 1);
}
