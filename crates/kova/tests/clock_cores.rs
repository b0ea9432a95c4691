//! kova's clocks never go back to any reader, on any CPU: threads pinned to each CPU in turn
//! (core_affinity) read the time and hand their readings to each other. quanta reads the CPU's
//! time-stamp counter, which on some machines differs between cores; kova's readings go through
//! a shared high mark (`clock.rs`), so they are monotonic whatever the counters say. A limiter
//! whose state has room then never denies, whichever CPU its checks run on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use kova::{Clock, CoarseClock, Gcra, PreciseClock, Quota, RateLimiter};

fn cpus() -> Vec<core_affinity::CoreId> {
    core_affinity::get_core_ids().unwrap_or_default()
}

/// Runs `work(round)` on one thread per CPU (at least two threads), each moving to the next CPU
/// every round.
fn on_every_cpu(rounds: usize, work: impl Fn(usize) + Send + Sync + 'static) {
    let cpus = cpus();
    let threads = cpus.len().max(2);
    let work = Arc::new(work);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (cpus, work, barrier) = (cpus.clone(), work.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..rounds {
                    if !cpus.is_empty() {
                        core_affinity::set_for_current(cpus[(t + round) % cpus.len()]);
                    }
                    work(round);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
}

fn assert_never_goes_back(clock: impl Clock + 'static) {
    // The latest reading any thread has published; a reading taken after seeing it is no older.
    let published = Arc::new(AtomicU64::new(0));
    on_every_cpu(200, move |_| {
        let mut last = 0;
        for _ in 0..500 {
            // Acquire pairs with the Release below: the published reading was taken before ours.
            let seen = published.load(Ordering::Acquire);
            let now = clock.now_nanos_precise();
            let coarse = clock.now_nanos();
            assert!(now >= seen && now >= last, "precise {now} after {last} (published {seen})");
            assert!(coarse <= clock.now_nanos_precise(), "coarse {coarse} ahead of precise");
            last = now;
            published.fetch_max(now, Ordering::Release);
        }
    });
}

#[test]
fn the_coarse_clocks_precise_reading_never_goes_back_on_any_cpu() {
    assert_never_goes_back(CoarseClock::new());
}

#[test]
fn the_precise_clock_never_goes_back_on_any_cpu() {
    assert_never_goes_back(PreciseClock::new());
}

#[test]
fn a_limiter_with_room_never_denies_on_any_cpu() {
    let rounds = 100;
    let per_round = 50;
    let checks = (cpus().len().max(2) * rounds * per_round) as u64;
    // Room for every check the run makes, with no refill needed.
    let quota = Quota::per_hour(checks).unwrap();
    for precise in [false, true] {
        let coarse = Arc::new(RateLimiter::<Gcra>::new(quota).unwrap());
        let exact = Arc::new(RateLimiter::<Gcra, _>::with_clock(quota, PreciseClock::new()).unwrap());
        let denied = Arc::new(AtomicU64::new(0));
        let counted = denied.clone();
        on_every_cpu(rounds, move |_| {
            for _ in 0..per_round {
                let allowed = if precise { exact.check().is_allowed() } else { coarse.check().is_allowed() };
                if !allowed {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        assert_eq!(
            denied.load(Ordering::Relaxed),
            0,
            "checks denied with room left (precise clock: {precise})"
        );
    }
}
