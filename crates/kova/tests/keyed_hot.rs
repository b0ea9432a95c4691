//! Hot keys under real threads and the real clock: checks of one key race its promotions and
//! demotions (and the stripes' own leases and give-backs), and no unit is lost or made up.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kova::keyed::HotKeys;
use kova::{FixedWindow, Gcra, Keyed, Quota};

/// A fixed window of an hour counts every admitted unit for the whole test (its window does not
/// end while the test runs), so admitted units plus what remains equal the limit exactly when
/// nothing is lost or made up, whatever the timing.
#[test]
fn checks_racing_promotions_and_demotions_conserve_units() {
    const LIMIT: u64 = 40_000;
    let table: Keyed<u64, FixedWindow> = Keyed::builder(Quota::per_hour(LIMIT).unwrap())
        .shards(1)
        .hot_keys(HotKeys::new(2).stripes(4).batch(16).lease(Duration::from_micros(200)))
        .unwrap()
        .build()
        .unwrap();
    table.check(&1);
    let admitted = AtomicU64::new(1);
    let (stop, promotions) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        for thread in 0..3u64 {
            let (table, admitted, stop) = (&table, &admitted, &stop);
            s.spawn(move || {
                let mut mine = 0;
                let mut i = thread;
                while !stop.load(Ordering::Relaxed) {
                    let cost = 1 + i % 3;
                    if table.check_n(&1, cost).unwrap().is_allowed() {
                        mine += cost;
                    }
                    // Now and then a lock holder's read of the key, which demotes it first.
                    if i % 1024 == 0 {
                        table.peek(&1);
                    }
                    i += 1;
                }
                admitted.fetch_add(mine, Ordering::Relaxed);
            });
        }
        // Stops the checkers also when this thread panics, so a failure is not a hang.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(400) {
            if table.promote(&1) {
                promotions.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_micros(300));
            table.demote(&1);
        }
    });
    assert!(promotions.load(Ordering::Relaxed) > 10, "the key was hardly ever striped");
    table.demote(&1);
    let admitted = admitted.load(Ordering::Relaxed);
    let remaining = table.peek(&1).remaining();
    assert!(admitted <= LIMIT, "admitted {admitted} of {LIMIT}");
    assert_eq!(
        admitted + remaining,
        LIMIT,
        "admitted {admitted}, remaining {remaining}: units lost or made up"
    );
}

/// A key striped for the whole run: threads spend its stripes' leases and its exact remainder.
#[test]
fn a_striped_key_under_threads_admits_its_limit_and_no_more() {
    const LIMIT: u64 = 20_000;
    let table: Keyed<u64, FixedWindow> = Keyed::builder(Quota::per_hour(LIMIT).unwrap())
        .hot_keys(HotKeys::new(1).stripes(2).batch(32))
        .unwrap()
        .build()
        .unwrap();
    // Twice: past the doorkeeper, into the table, where it can be promoted.
    table.check(&9);
    table.check(&9);
    assert!(table.promote(&9));
    let admitted = AtomicU64::new(2);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let mut mine = 0;
                // Until denied twice in a row after the central word ran dry.
                let mut denials = 0;
                while denials < 2 {
                    if table.check(&9).is_allowed() {
                        mine += 1;
                        denials = 0;
                    } else {
                        denials += 1;
                    }
                }
                admitted.fetch_add(mine, Ordering::Relaxed);
            });
        }
    });
    let admitted = admitted.load(Ordering::Relaxed);
    assert!(admitted <= LIMIT);
    assert!(table.demote(&9));
    assert_eq!(admitted + table.peek(&9).remaining(), LIMIT);
}

/// Threads contending for one key get it striped by the table itself: their failed
/// compare-exchanges are counted and the key promoted. One thread alone never fails one.
#[test]
fn a_contended_key_is_promoted_by_itself_and_a_lone_one_is_not() {
    let table: Keyed<u64, FixedWindow> = Keyed::builder(Quota::per_hour(u64::from(u32::MAX)).unwrap())
        .hot_keys(HotKeys::new(1).stripes(2).batch(64).promote_after(8))
        .unwrap()
        .build()
        .unwrap();
    table.check(&1);
    for _ in 0..200_000 {
        table.check(&1);
    }
    assert_eq!(table.hot_len(), 0, "a key checked by one thread was striped");
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while table.hot_len() == 0 && started.elapsed() < Duration::from_secs(10) {
                    for _ in 0..1000 {
                        table.check(&1);
                    }
                }
            });
        }
    });
    assert_eq!(table.hot_len(), 1, "two threads contending for 10 s never got the key striped");
    assert_eq!(table.check(&1).fallback(), Some(kova::Fallback::StripeLease));
}

/// A hot key with its own quota, smaller than the stripes' batch, is checked exactly: its
/// algorithm is never asked for a lease above its capacity (which overflowed its arithmetic:
/// a panic in debug builds, a lease of a batch of units in release ones).
#[test]
fn a_hot_key_whose_own_quota_is_below_the_batch_is_checked_exactly() {
    for quota in
        [Quota::per_day(1).unwrap(), Quota::from_nanos(1, 1 << 54).unwrap(), Quota::per_hour(3).unwrap()]
    {
        let table: Keyed<u64, Gcra> = Keyed::builder(Quota::per_second(1_000_000).unwrap())
            .shards(1)
            .hot_keys(HotKeys::new(1).stripes(2).batch(1024))
            .unwrap()
            .build()
            .unwrap();
        assert!(table.check_n_with_quota(&7, quota, 1).unwrap().is_allowed());
        assert!(table.promote(&7));
        let admitted = (0..2_000).filter(|_| table.check(&7).is_allowed()).count() as u64;
        assert!(admitted < quota.burst(), "{quota:?}: {admitted} more admitted");
    }
}
