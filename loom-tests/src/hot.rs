//! A model of the keyed table's hot keys (`crates/kova/src/keyed/hot.rs`): a check of a striped
//! key, which leases a batch from its slot and spends it on its stripe, races the lock holder's
//! demotion, which closes the slot, folds the stripes back and writes the state into the key's
//! line. Every unit must be counted once: admitted units plus what the key has left afterwards
//! equal its limit (a fixed window on a still clock, so nothing refills), whichever way the lease
//! and the demotion interleave (a lease before the close, its leftover put back after the
//! stripes were folded, is handed in under the lock).

use kova::keyed::HotKeys;
use kova::{FixedWindow, Keyed, ManualClock, Quota};
use loom::sync::Arc;

use crate::harness::model;

/// The key's limit.
const LIMIT: u64 = 6;

/// Key 0, striped (one stripe, batches of 2), checked twice on one thread while the main thread
/// demotes it; then the books must balance.
pub fn check_racing_demotion() {
    model(|| {
        let table = Arc::new(
            Keyed::<u64, FixedWindow>::builder(Quota::per_hour(LIMIT).expect("valid quota"))
                .clock(ManualClock::new())
                .shards(1)
                // The first check inserts the key, so that it can be promoted (`door.rs` models the
                // doorkeeper).
                .doorkeeper(0)
                .hot_keys(HotKeys::new(1).stripes(1).batch(2))
                .expect("valid hot keys")
                .build()
                .expect("valid table"),
        );
        assert!(table.check(&0).is_allowed());
        assert!(table.promote(&0));
        let theirs = Arc::clone(&table);
        let thread =
            loom::thread::spawn(move || (0..2).filter(|_| theirs.check(&0).is_allowed()).count() as u64);
        let demoted = table.demote(&0);
        let admitted = 1 + thread.join().expect("the checks return");
        let remaining = table.peek(&0).remaining();
        assert!(demoted, "the key was striped");
        assert_eq!(table.hot_len(), 0);
        assert!(
            admitted + remaining == LIMIT,
            "hot: not linearizable: admitted {admitted}, {remaining} left of {LIMIT}"
        );
    });
}
