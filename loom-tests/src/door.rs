//! A model of the keyed table's doorkeeper (`crates/kova/src/keyed/door.rs`): two keys in two
//! shards share the door's only word, so their first checks race for it without a common lock.
//! The door must admit at most one of them there, and keep that key's entry, so that the key's
//! second check is charged the first one's unit (a quota of one: denied).
//!
//! The models record their calls (`kova::model::lincheck::Recorder`) and check each key's
//! history for linearizability against the key's sequential specification
//! (`model::lincheck::word_api`) before their own assertions, which say what went wrong.

use kova::model::lincheck::word_api::{Op, Output, WordApi};
use kova::model::lincheck::{assert_linearizable, History, LaneRecorder, Recorder};
use kova::{Gcra, Keyed, ManualClock, Quota, WordAlgorithm};
use loom::sync::Arc;

use crate::harness::model;

type Table = Keyed<u64, Gcra, ManualClock>;

/// A table of `shards` shards and a door of `door` words under `quota`, with the clock still,
/// and a recorder on its clock.
fn table_and_recorder(quota: Quota, shards: usize, door: usize) -> (Arc<Table>, Arc<Recorder>) {
    let clock = ManualClock::new();
    let table = Keyed::<u64, Gcra>::builder(quota)
        .clock(clock.clone())
        .shards(shards)
        .doorkeeper(door)
        .build()
        .expect("valid table");
    (Arc::new(table), Arc::new(Recorder::new(clock)))
}

/// `check_n(&key, cost)` on `table`, recorded in `lane`; whether it was admitted.
fn checked(
    lane: &mut LaneRecorder<(u64, Op), Output>,
    recorder: &Recorder,
    table: &Table,
    key: u64,
    cost: u64,
) -> bool {
    let out = lane.call(recorder, (key, Op::Check(cost)), |_| Output::Decided(table.check_n(&key, cost)));
    matches!(out, Output::Decided(Ok(d)) if d.is_allowed())
}

/// Asserts that the calls of each of `keys` in `history` are linearizable ("not linearizable
/// against" otherwise, the message the should-fail twins expect).
fn assert_keys_linearizable(quota: Quota, history: &History<(u64, Op), Output>, keys: &[u64]) {
    let spec = KeyOnly(WordApi::keyed(Gcra::from_quota(quota).expect("valid quota")));
    for &key in keys {
        let ours = history.project(|&(k, _)| k == key);
        assert_linearizable(
            &format!("door: key {key}'s specification"),
            &spec,
            spec.0.fresh(),
            &ours,
            |_| true,
        );
    }
}

/// One key's specification over the recorded `(key, op)` calls.
struct KeyOnly(WordApi<Gcra>);

impl kova::model::lincheck::Spec for KeyOnly {
    type State = kova::model::lincheck::word_api::WordState;
    type Op = (u64, Op);
    type Output = Output;

    fn call(&self, state: &mut Self::State, now: u64, op: &(u64, Op)) -> Output {
        self.0.call(state, now, &op.1)
    }
}

/// Keys 0 and `other`, checked on two threads (key 0 twice) in a table of two shards and a
/// one-word door, with the clock still: key 0 must be admitted once, `other` once. Run for a
/// few `other`s, so that some pair lands in two shards (the hasher's seeds are fixed under loom).
pub fn first_checks_share_a_door_word(other: u64) {
    model(move || {
        let quota = Quota::per_second(1).expect("valid quota");
        let (table, recorder) = table_and_recorder(quota, 2, 1);
        let (theirs, their_recorder) = (Arc::clone(&table), Arc::clone(&recorder));
        let thread = loom::thread::spawn(move || {
            let mut lane = their_recorder.lane("thread");
            let allowed = checked(&mut lane, &their_recorder, &theirs, other, 1);
            (lane, allowed)
        });
        let mut lane = recorder.lane("main");
        let first = checked(&mut lane, &recorder, &table, 0, 1);
        let second = checked(&mut lane, &recorder, &table, 0, 1);
        let (their_lane, other_allowed) = thread.join().expect("the other check returns");
        assert_keys_linearizable(quota, &recorder.history(vec![lane, their_lane]), &[0, other]);
        assert!(
            first && !second && other_allowed,
            "door: not linearizable: key 0 admitted {first} then {second} (quota 1), key {other} {other_allowed}"
        );
    });
}

/// Key 0's first check (one unit, admitted at the door without the lock) races a check of two
/// units of key 0 on another thread (which inserts it under the lock), in a table of one shard
/// and a quota of three: the three units go to the first two checks, exactly, and a third check
/// afterwards finds none left. The door's admission either is taken by the insert (which
/// charges it, and the admission stands even if it then sees the insert's announcement) or
/// sees the announcement first and goes to the lock.
pub fn door_admission_races_an_insert() {
    model(|| {
        let quota = Quota::per_second(3).expect("valid quota");
        let (table, recorder) = table_and_recorder(quota, 1, 1);
        let (theirs, their_recorder) = (Arc::clone(&table), Arc::clone(&recorder));
        let thread = loom::thread::spawn(move || {
            let mut lane = their_recorder.lane("thread");
            let allowed = checked(&mut lane, &their_recorder, &theirs, 0, 2);
            (lane, allowed)
        });
        let mut lane = recorder.lane("main");
        let one = checked(&mut lane, &recorder, &table, 0, 1);
        let (their_lane, two) = thread.join().expect("the other check returns");
        let mut last = recorder.lane("after");
        let after = checked(&mut last, &recorder, &table, 0, 1);
        assert_keys_linearizable(quota, &recorder.history(vec![lane, their_lane, last]), &[0]);
        let units = u64::from(one) + 2 * u64::from(two) + u64::from(after);
        assert!(two, "door: the check of two units is denied");
        assert!(units <= 3, "door: not linearizable: one unit too many: {units} admitted of 3 (first check {one}, after {after})");
        assert!(units == 3, "door: not linearizable: a unit charged twice: {units} admitted of 3 (first check {one}, after {after})");
    });
}

/// Key 0's first check (admitted at the door without the lock) races another thread's check of
/// two units of key 0 (which inserts it) and then its reset, quota three: a claim that meets the
/// insert's announcement must undo and go to the lock unless the insert took (and charged) its
/// entry; the reset forgetting the entry meanwhile must not make it stand, or its unit is
/// charged nowhere (found by `kova/tests/linearizable.rs`; see `tests/lincheck_findings.rs`).
pub fn door_admission_races_an_insert_and_a_reset() {
    model(|| {
        let quota = Quota::per_second(3).expect("valid quota");
        let (table, recorder) = table_and_recorder(quota, 1, 1);
        let (theirs, their_recorder) = (Arc::clone(&table), Arc::clone(&recorder));
        let thread = loom::thread::spawn(move || {
            let mut lane = their_recorder.lane("thread");
            checked(&mut lane, &their_recorder, &theirs, 0, 2);
            lane.call(&their_recorder, (0, Op::Reset), |_| {
                theirs.reset(&0);
                Output::Done
            });
            lane
        });
        let mut lane = recorder.lane("main");
        checked(&mut lane, &recorder, &table, 0, 1);
        let their_lane = thread.join().expect("the other thread returns");
        let mut last = recorder.lane("after");
        checked(&mut last, &recorder, &table, 0, 3);
        assert_keys_linearizable(quota, &recorder.history(vec![lane, their_lane, last]), &[0]);
    });
}

/// Key 0 checked for two units (inserting it), then, with no door, one more unit on the main
/// thread while another thread resets the key, and three units afterwards. Whichever the order
/// of the reset and the check, the last check finds the key fresh (reset after the check) or
/// the check's unit taken from a fresh state (reset before): it is allowed. With the reset a
/// plain store, loom 0.7 found it denied, every unit used: the check's compare-and-swap read the
/// word before the reset's store, and the last check, which happens after that store, still read
/// the CAS's word, which the memory model forbids (tokio-rs/loom#254,
/// [`store_slips_into_a_racing_cas`]); the reset is a swap since.
pub fn a_reset_on_another_thread_after_a_check() {
    model(|| {
        let quota = Quota::per_second(3).expect("valid quota");
        let (table, recorder) = table_and_recorder(quota, 1, 0);
        let mut before = recorder.lane("before");
        checked(&mut before, &recorder, &table, 0, 2);
        let (theirs, their_recorder) = (Arc::clone(&table), Arc::clone(&recorder));
        let thread = loom::thread::spawn(move || {
            let mut lane = their_recorder.lane("thread");
            lane.call(&their_recorder, (0, Op::Reset), |_| {
                theirs.reset(&0);
                Output::Done
            });
            lane
        });
        let mut lane = recorder.lane("main");
        checked(&mut lane, &recorder, &table, 0, 1);
        let their_lane = thread.join().expect("the other thread returns");
        let mut last = recorder.lane("after");
        checked(&mut last, &recorder, &table, 0, 3);
        assert_keys_linearizable(quota, &recorder.history(vec![before, lane, their_lane, last]), &[0]);
    });
}

/// Key 0's first check (admitted at the door without the lock) races another thread's check of
/// two units of key 0 (which inserts it, taking the door's entry) and then that thread's first
/// check of `other`, which shares the door's only word; quota three. The taken mark must hold
/// the word until the entry would have expired: replaced by `other`'s entry, the first check
/// finds no mark when it undoes its claim and is charged again at the lock (found by
/// `kova/tests/keyed_door.rs`'s racing first checks: a key admitted 2 of its burst of 3).
pub fn door_admission_races_an_insert_then_another_key(other: u64) {
    model(move || {
        let quota = Quota::per_second(3).expect("valid quota");
        let (table, recorder) = table_and_recorder(quota, 1, 1);
        let (theirs, their_recorder) = (Arc::clone(&table), Arc::clone(&recorder));
        let thread = loom::thread::spawn(move || {
            let mut lane = their_recorder.lane("thread");
            let two = checked(&mut lane, &their_recorder, &theirs, 0, 2);
            checked(&mut lane, &their_recorder, &theirs, other, 1);
            (lane, two)
        });
        let mut lane = recorder.lane("main");
        let one = checked(&mut lane, &recorder, &table, 0, 1);
        let (their_lane, two) = thread.join().expect("the other thread returns");
        let mut last = recorder.lane("after");
        let after = checked(&mut last, &recorder, &table, 0, 1);
        assert_keys_linearizable(quota, &recorder.history(vec![lane, their_lane, last]), &[0, other]);
        let units = u64::from(one) + 2 * u64::from(two) + u64::from(after);
        assert!(
            units == 3,
            "door: not linearizable: {units} admitted of 3 (first check {one}, after {after})"
        );
    });
}

/// Whether loom explores an execution the memory model forbids: a store racing a successful
/// compare-and-swap that read the value before it, and a load after both threads joined that
/// still reads the CAS's value (tokio-rs/loom#254). The shape of
/// [`a_reset_on_another_thread_after_a_check`] on one bare atomic.
pub fn store_slips_into_a_racing_cas() -> bool {
    use loom::sync::atomic::{AtomicU64, Ordering};
    // std's flag: set from inside the model, read after it.
    let slipped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::clone(&slipped);
    model(move || {
        let word = Arc::new(AtomicU64::new(0));
        // Orderings as the table's: Release stores, the CAS loop's AcqRel/Acquire, Acquire loads.
        word.store(1, Ordering::Release);
        let theirs = Arc::clone(&word);
        let reset = loom::thread::spawn(move || theirs.store(5, Ordering::Release));
        let swapped = word.compare_exchange(1, 2, Ordering::AcqRel, Ordering::Acquire).is_ok();
        reset.join().expect("the store returns");
        if swapped && word.load(Ordering::Acquire) == 2 {
            // Relaxed: read after the model returned.
            seen.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    // Relaxed: the model has returned.
    slipped.load(std::sync::atomic::Ordering::Relaxed)
}
