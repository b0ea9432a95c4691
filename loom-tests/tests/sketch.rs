//! Loom models of the sketch (`kova::sketch::Sketch`, `crates/kova/src/sketch.rs`): concurrent
//! checks of one key, and of two keys that share a cell, on a one-line sketch (every key in the
//! same 8 cells) with a quota that does not refill while a model runs (per hour).
//!
//! Asserted in every interleaving: after the threads are joined, the units a key was admitted by
//! the threads plus those a peek says it can still get never exceed its burst (no over-grant: no
//! unit granted twice, no raise lost), and checks then get what the peek said.
//!
//! The should-fail twins run the same models on the deliberately broken variants of
//! `kova::loom_racy`, which loom must catch with this file's "over-granted" message:
//! - `sketch_raise_after_commit`: the key's other cells raised after the commit, not before; a
//!   second check of the key decides on a cell not yet raised (the one-key model);
//! - `sketch_raise_by_store`: raised by plain stores, not `fetch_max`; one key's raise of the
//!   shared cell overwrites the other key's later TAT (the two-key model).
#![cfg(kova_loom)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use kova::loom_racy::{sketch_raise_after_commit, sketch_raise_by_store};
use kova::sketch::Sketch;
use kova::{ManualClock, Quota};
use kova_loom_tests::harness::model;
use loom::sync::Arc;

/// The burst of every key; nothing refills while a model runs.
const BURST: u64 = 2;

fn sketch() -> Sketch<ManualClock> {
    Sketch::builder(Quota::per_hour(BURST).unwrap())
        .memory_bytes(64)
        .cells_per_key(2)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// Two keys whose cells share only their later one: each key decides on its own earlier cell
/// while both are fresh, and raises the shared one (where a raise by store can go wrong).
fn keys_sharing_their_later_cell(sketch: &Sketch<ManualClock>) -> (u32, u32) {
    let cells: Vec<Vec<usize>> = (0..200u32).map(|key| sketch.cells_of(&key)).collect();
    for a in 0..cells.len() {
        for b in a + 1..cells.len() {
            if cells[a][1] == cells[b][1] && cells[a][0] != cells[b][0] {
                return (a as u32, b as u32);
            }
        }
    }
    panic!("no two of 200 keys share their later cell");
}

/// Runs the threads' checks `(key, cost)`, one thread each, then peeks at every key on the main
/// thread; panics with "over-granted" if a key got more than its burst.
fn run(threads: Vec<(u32, u64)>) {
    let sketch = Arc::new(sketch());
    let workers: Vec<_> = threads
        .iter()
        .map(|&(key, cost)| {
            let sketch = Arc::clone(&sketch);
            loom::thread::spawn(move || {
                let allowed = sketch.check_n(&key, cost).unwrap().is_allowed();
                (key, if allowed { cost } else { 0 })
            })
        })
        .collect();
    let granted: Vec<(u32, u64)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    // What each key could still get, read by peeks before any key is checked again (a check of
    // one key could raise the shared cell back and hide the other key's lost raise).
    let mut keys: Vec<u32> = threads.iter().map(|&(key, _)| key).collect();
    keys.dedup();
    let left: Vec<(u32, u64)> = keys.iter().map(|&key| (key, sketch.peek(&key).remaining())).collect();
    for &(key, remaining) in &left {
        let units: u64 = granted.iter().filter(|&&(k, _)| k == key).map(|&(_, n)| n).sum::<u64>() + remaining;
        assert!(units <= BURST, "key {key} over-granted: {units} units of a burst of {BURST}");
        // A peek's remaining is what checks get: the next `remaining` units are admitted.
        for _ in 0..remaining {
            assert!(sketch.check(&key).is_allowed(), "key {key}: a peek promised more than a check gives");
        }
    }
}

fn one_key() {
    run(vec![(7, 1), (7, 1)]);
}

fn two_keys(first_cost: u64, second_cost: u64) {
    let (a, b) = keys_sharing_their_later_cell(&sketch());
    run(vec![(a, first_cost), (b, second_cost)]);
}

#[test]
fn one_key_two_checks() {
    model(one_key);
}

#[test]
fn one_key_check_racing_a_whole_burst() {
    model(|| run(vec![(7, 1), (7, BURST)]));
}

#[test]
fn two_keys_sharing_a_cell() {
    model(|| two_keys(1, 2));
    model(|| two_keys(2, 1));
}

#[test]
fn one_key_twice_beside_a_key_sharing_a_cell() {
    model(|| {
        let (a, b) = keys_sharing_their_later_cell(&sketch());
        run(vec![(a, 1), (a, 1), (b, 1)]);
    });
}

/// Runs `f` under loom and returns its failure message; panics if loom found nothing or failed
/// for another reason than an over-grant.
fn loom_finds(f: impl Fn() + Sync + Send + 'static) -> String {
    let payload = catch_unwind(AssertUnwindSafe(|| model(f)))
        .expect_err("loom explored every interleaving and found no over-grant");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("over-granted"), "loom failed for another reason: {message}");
    eprintln!("loom found, as it must: {message}");
    message
}

#[test]
fn raising_after_the_commit_is_caught() {
    loom_finds(|| sketch_raise_after_commit(one_key));
}

#[test]
fn raising_by_plain_stores_is_caught() {
    loom_finds(|| sketch_raise_by_store(|| two_keys(1, 2)));
}
