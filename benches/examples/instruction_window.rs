//! What the 1M-key row's pinned floor measures: a check of a table that misses the cache, beside
//! the pinned CAS floor (`floor_pin_cas`, a pin and a CAS on a random line of an array as large)
//! and the same floor padded with no-ops after its CAS.
//!
//! A loop whose every step misses the cache runs faster than one miss per step when the CPU
//! starts the next steps' misses while the first is outstanding, and how many steps it can hold
//! at once is set by how many instructions a step has. The floor's step has a few dozen; a keyed
//! check has several times as many. Padded to a check's length, the floor shows how much of the
//! table's ratio to it is the length alone.
//!
//! `cargo run --release -p kova-bench --example instruction_window` (an optional argument sets
//! the rounds; the padding is inline assembly for x86-64 and aarch64, left out elsewhere).
//! Instructions per step, to compare the padding with, by callgrind over one round:
//! `valgrind --tool=callgrind --toggle-collect='instruction_window::table'
//! target/release/examples/instruction_window 1` counts 4,194,304 steps (and
//! `'instruction_window::floor*'` the four floors together).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use kova::{Gcra, Keyed, Quota};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Keys in the table, as the harness's 1M-key scenarios.
const KEYS: usize = 1_000_000;
/// Steps per measurement (cycling over a drawn sequence of keys).
const STEPS: usize = 1 << 22;
/// Interleaved rounds by default (the first argument overrides it); the median of each
/// subject's is printed.
const ROUNDS: usize = 7;

#[inline(never)]
fn table(limiter: &Keyed<u64, Gcra>, keys: &[u64]) -> u64 {
    keys.iter().map(|key| u64::from(limiter.check(&black_box(*key)).is_allowed())).sum()
}

/// The harness's `floor_pin_cas`, then `PAD` no-ops.
#[inline(never)]
fn floor<const PAD: usize>(cells: &[CachePadded<AtomicU64>], keys: &[u64]) -> u64 {
    let mask = cells.len() - 1;
    let mut done = 0;
    for &key in keys {
        let cell = &cells[key as usize & mask];
        {
            let _pin = kova::__bench_pin();
            // The orderings of kova's CAS loop, as the harness's floor.
            let mut old = cell.load(Ordering::Acquire);
            while let Err(actual) =
                cell.compare_exchange_weak(old, old + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                old = actual;
            }
        }
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if PAD > 0 {
            // SAFETY: no-ops only: no memory, no stack, no register or flag is touched.
            unsafe {
                std::arch::asm!(".rept {pad}", "nop", ".endr", pad = const PAD, options(nomem, nostack, preserves_flags))
            };
        }
        done += 1;
    }
    done
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(ROUNDS, |n| n.parse().expect("ROUNDS: a count"));
    // The 1M-key scenario's table: room for twice the keys, each key checked twice so that it
    // passes the doorkeeper into the table.
    let quota = Quota::per_second(1_000).expect("quota");
    let limiter = Keyed::<u64, Gcra>::builder(quota).max_keys(2 * KEYS).build().expect("table");
    for key in 0..KEYS as u64 {
        limiter.check(&key);
        limiter.check(&key);
    }
    // As many bytes as the table, one word a padded line, every page written.
    let lines = (limiter.memory_bytes() / size_of::<CachePadded<AtomicU64>>()).next_power_of_two();
    let cells: Vec<CachePadded<AtomicU64>> =
        (0..lines).map(|_| CachePadded::new(AtomicU64::new(0))).collect();
    let mut rng = SmallRng::seed_from_u64(12);
    let drawn: Vec<u64> = (0..1 << 20).map(|_| rng.random_range(0..KEYS as u64)).collect();
    let keys: Vec<u64> = drawn.iter().cycle().take(STEPS).copied().collect();

    type Run<'a> = Box<dyn Fn() -> u64 + 'a>;
    let subjects: Vec<(&str, Run)> = vec![
        ("kova check, 1M keys", Box::new(|| table(&limiter, &keys))),
        ("floor_pin_cas", Box::new(|| floor::<0>(&cells, &keys))),
        ("floor_pin_cas + 50 no-ops", Box::new(|| floor::<50>(&cells, &keys))),
        ("floor_pin_cas + 100 no-ops", Box::new(|| floor::<100>(&cells, &keys))),
        ("floor_pin_cas + 150 no-ops", Box::new(|| floor::<150>(&cells, &keys))),
    ];
    let mut runs = vec![Vec::new(); subjects.len()];
    for round in 0..rounds {
        eprint!("\rround {}/{rounds}", round + 1);
        for ((_, run), times) in subjects.iter().zip(&mut runs) {
            let start = Instant::now();
            assert_eq!(run(), STEPS as u64, "every check admitted, every CAS landed");
            times.push(start.elapsed().as_nanos() as f64 / STEPS as f64);
        }
    }
    eprintln!();
    let table_ns = median(runs[0].clone());
    println!("| subject | ns per step (median of {rounds}) | vs the check |");
    println!("|---|---:|---:|");
    for ((name, _), times) in subjects.iter().zip(runs) {
        let ns = median(times);
        println!("| {name} | {ns:.1} | {:.2}x |", ns / table_ns);
    }
}
