//! The doorkeeper against the table's locked looks: a first check admitted at the door must
//! belong to a key the table does not hold.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::keyed::epoch;
use crate::keyed::word::WordFreezer;
use crate::{ManualClock, SlidingWindowLog};

/// A check of a held key whose boxed line a sweep has hidden (the sweep is looking at whether it
/// is idle) goes to the lock, not to the door. Admitted at the door, its unit would be counted
/// only in the door's entry, which the key, kept by the sweep and never inserted again, is
/// never charged.
#[test]
#[cfg_attr(miri, ignore = "waits for another thread in real time")]
fn a_key_hidden_by_a_sweep_is_not_admitted_at_the_door() {
    let quota = Quota::per_second(3).unwrap();
    let clock = ManualClock::new();
    let keyed = Keyed::<u64, SlidingWindowLog, _>::builder(quota).clock(clock.clone()).shards(1).build();
    let keyed = Arc::new(keyed.unwrap());
    assert!(keyed.check(&7).is_allowed(), "the first check, at the door");
    assert!(keyed.check(&7).is_allowed(), "the second, which inserts the key charged both");
    // Two windows later: the key is idle (a sweep would look at it) and its door entry has expired.
    clock.advance(Duration::from_secs(2));
    let hash = keyed.hash(&7);
    let shard = keyed.shard(hash);
    let guard = epoch::pin();
    let (sent, received) = channel();
    let mut during_the_look = None;
    {
        let mut locked = shard.lock(&guard);
        let pos = locked.find(hash, &7).unwrap();
        let algorithm = keyed.algorithm();
        let keep = |_: &<SlidingWindowLog as Algorithm>::Cell| {
            // While the line is hidden, another thread checks the key. At the door it would
            // answer at once; at the lock it waits for this look to end.
            let (keyed, sent) = (Arc::clone(&keyed), sent.clone());
            std::thread::spawn(move || sent.send(keyed.check(&7).is_allowed()).unwrap());
            during_the_look = match received.recv_timeout(Duration::from_millis(300)) {
                Ok(allowed) => Some(allowed),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => panic!("the checking thread died"),
            };
            true
        };
        assert!(!locked.unlink_if(pos, heap_of(algorithm), keep, &WordFreezer(algorithm)), "kept");
    }
    let mut admitted = u64::from(during_the_look.unwrap_or_else(|| received.recv().unwrap()));
    while keyed.check(&7).is_allowed() {
        admitted += 1;
    }
    assert_eq!(
        admitted,
        3,
        "units admitted in one window of 3 (the check during the look answered then: {})",
        during_the_look.is_some()
    );
}
