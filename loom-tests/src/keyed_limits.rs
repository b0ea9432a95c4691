//! The `KeyedLimits` scenario its loom models share (`tests/limits.rs`, and the should-fail twin
//! in `tests/racy.rs`): a check of a key whose limits live in one boxed cell
//! (`kova/src/keyed/table/visit.rs`), racing a sweep of idle keys.

use std::time::Duration;

use kova::limits::KeyedLimits;
use kova::{Gcra, ManualClock, Quota};
use loom::sync::Arc;

/// A key checked once, then left idle; a model thread checks it again while the main thread
/// sweeps idle keys. Asserted in every interleaving: the check is admitted and its unit counted
/// in both limits at the end, whether the sweep kept the key, reclaimed it before the check (which
/// then inserts it again), or unlinked it under the check's write (which is then redone under the
/// lock). A unit admitted and not counted is a history no order of the two calls explains.
pub fn check_racing_a_sweep() {
    let clock = ManualClock::new();
    let quotas = [3, 2].map(|burst| Quota::per_hour(1).unwrap().with_burst(burst).unwrap());
    let limits =
        KeyedLimits::<u8, Gcra>::builder(quotas).clock(clock.clone()).max_keys(4).shards(1).build().unwrap();
    assert!(limits.check(&7).is_allowed());
    // The unit comes back in an hour: the key is idle after it.
    clock.advance(Duration::from_secs(3_600));
    let limits = Arc::new(limits);
    let check = {
        let limits = Arc::clone(&limits);
        loom::thread::spawn(move || limits.check(&7))
    };
    limits.sweep_idle();
    let check = check.join().unwrap();
    assert!(check.is_allowed(), "the check: {check:?}");
    let left: Vec<u64> = limits.peek(&7).limit_decisions().iter().map(|d| d.remaining()).collect();
    assert_eq!(left, [2, 1], "not linearizable: the check's admitted unit was lost");
}
