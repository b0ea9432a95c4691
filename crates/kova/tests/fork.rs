//! The default clock in a forked child: `fork` copies only the forking thread, so the child has
//! no upkeep thread of its own; its coarse time must still move, and a limiter there must admit
//! again once its quota refills.

#![cfg(all(unix, not(miri)))]

use std::time::{Duration, Instant};

use kova::{Clock, CoarseClock, Gcra, Quota, RateLimiter};

/// Runs in the child: 0 when the clock moved and the limiter refilled, else what failed.
fn child_checks(limiter: &RateLimiter<Gcra>) -> i32 {
    let clock = CoarseClock::new();
    let start = clock.now_nanos();
    let began = Instant::now();
    while clock.now_nanos() == start {
        if began.elapsed() > Duration::from_secs(2) {
            return 2;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Denied now (the parent used the one unit), admitted once the interval has passed.
    if limiter.check().is_allowed() {
        return 3;
    }
    std::thread::sleep(Duration::from_millis(60));
    if !limiter.check().is_allowed() {
        return 4;
    }
    0
}

#[test]
fn a_forked_child_has_a_moving_coarse_clock() {
    // One unit every 50 ms: the parent takes it, so the child starts denied.
    let limiter = RateLimiter::<Gcra>::new(Quota::per_second(20).unwrap().with_burst(1).unwrap()).unwrap();
    assert!(limiter.check().is_allowed());
    // Let the parent's upkeep thread run, so the child inherits a live coarse time.
    std::thread::sleep(Duration::from_millis(5));
    // SAFETY: the child runs only `child_checks` (atomics, sleeps, a thread spawn by kova's
    // clock) and leaves with `_exit`, running no destructor or atexit handler of the parent's.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child_checks(&limiter);
        // SAFETY: ends the child at once, as above.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked, into a local.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "2: the coarse time stood still; 3: admitted before the refill; 4: denied after it"
    );
}
