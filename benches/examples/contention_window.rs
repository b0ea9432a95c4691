//! What the composites' 2-thread rows set against their floors: a bare 128-bit CAS loop on one
//! shared word (`floor_cas128`), the same loop with chains of dependent additions between its
//! load and its compare-and-swap (and with a read of kova's default clock there too, as every
//! check makes after its load), and kova's `Limits` of two (the harness's `limits_2`), at 1
//! thread and at 2 threads sharing the word.
//!
//! Two cores writing one word take its cache line from each other, and a compare-and-swap fails
//! when the other core wrote the word between this core's load and its compare-and-swap. The
//! longer that span, the more attempts fail, so any work there costs far more at 2 threads than
//! at 1. A composite must read the clock and decide its limits in that span (on the words it
//! loaded, at a time no older than theirs); the padded loops show what the span alone costs a
//! loop that does nothing else, so that `limits_2`'s ratio to the bare floor can be read against
//! the floor's own at a decision's length.
//!
//! `cargo run --release -p kova-bench --example contention_window` (an optional argument sets
//! the rounds; the padding is inline assembly for x86-64, left out elsewhere). Run it with
//! nothing else on the machine, and on cores that are separate (see the harness's README).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use kova::limits::Limits;
use kova::{Clock, CoarseClock, Gcra, Quota};
use portable_atomic::AtomicU128;

/// Interleaved rounds by default (the first argument overrides it); the median of each
/// subject's is printed.
const ROUNDS: usize = 5;
/// How long each subject runs at 2 threads per round.
const SPAN: Duration = Duration::from_millis(300);
/// Calls per subject at 1 thread per round.
const CALLS: u64 = 5_000_000;

/// One CAS loop on `word`: load, a read of `clock` if given (its lowest bit added in, so that
/// the read is used), `PAD` dependent additions on the loaded value (the new low half),
/// compare-and-swap, and on failure the same again on the value found.
#[inline(always)]
fn raise<const PAD: usize>(word: &AtomicU128, clock: Option<&CoarseClock>) {
    // The orderings of kova's CAS loop, as the harness's floor.
    let mut old = word.load(Ordering::Acquire);
    loop {
        let mut low = old as u64;
        if let Some(clock) = clock {
            low = low.wrapping_add(clock.now_nanos() & 1);
        }
        #[cfg(target_arch = "x86_64")]
        if PAD > 0 {
            // SAFETY: arithmetic on one register only: no memory and no stack is touched.
            unsafe {
                std::arch::asm!(".rept {pad}", "inc {x}", ".endr", pad = const PAD, x = inout(reg) low, options(nomem, nostack))
            };
        }
        let new = u128::from(low) | ((old >> 64).wrapping_add(1) << 64);
        match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(actual) => old = actual,
        }
    }
}

/// Something one call of which the example times.
type Call<'a> = Box<dyn Fn() + Sync + 'a>;

/// Nanoseconds per call at 1 thread.
fn one_thread(call: &Call<'_>) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        call();
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

/// Calls per second at 2 threads sharing the subject, and the slower thread's calls over the
/// faster's.
fn two_threads(call: &Call<'_>) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(3);
    let counts: Vec<u64> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            call();
                        }
                        calls += 64;
                    }
                    calls
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(SPAN);
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().map(|thread| thread.join().expect("a measuring thread")).collect()
    });
    let (slow, fast) = (counts.iter().min().copied().unwrap_or(0), counts.iter().max().copied().unwrap_or(1));
    (counts.iter().sum::<u64>() as f64 / SPAN.as_secs_f64(), slow as f64 / fast.max(1) as f64)
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(ROUNDS, |n| n.parse().expect("ROUNDS: a count"));
    let word = CachePadded::new(AtomicU128::new(0));
    let clock = CoarseClock::new();
    // The harness's `limits_2`: two quotas that every call stays within.
    let quotas = [1_000_000, 1_000_000_000].map(|nanos| Quota::from_nanos(nanos, nanos).expect("quota"));
    let limits = Limits::<Gcra>::new(quotas).expect("limits");
    let subjects: Vec<(&str, Call)> = vec![
        ("floor_cas128", Box::new(|| raise::<0>(&word, None))),
        ("floor_cas128 + 8 dependent additions", Box::new(|| raise::<8>(&word, None))),
        ("floor_cas128 + 16 dependent additions", Box::new(|| raise::<16>(&word, None))),
        ("floor_cas128 + 32 dependent additions", Box::new(|| raise::<32>(&word, None))),
        ("floor_cas128 + 64 dependent additions", Box::new(|| raise::<64>(&word, None))),
        ("floor_cas128 + a clock read + 32 additions", Box::new(|| raise::<32>(&word, Some(&clock)))),
        ("limits_2 (kova `Limits` of two)", Box::new(|| assert!(black_box(&limits).check().is_allowed()))),
    ];
    let mut runs = vec![(Vec::new(), Vec::new(), Vec::new()); subjects.len()];
    for round in 0..rounds {
        eprint!("\rround {}/{rounds}", round + 1);
        for ((_, call), (one, two, share)) in subjects.iter().zip(&mut runs) {
            one.push(one_thread(call));
            let (rate, fairness) = two_threads(call);
            two.push(rate);
            share.push(fairness);
        }
    }
    eprintln!();
    let floor_one = median(runs[0].0.clone());
    let floor_two = median(runs[0].1.clone());
    println!("| subject | 1 thread, ns per call | vs the floor | 2 threads, M calls/s | floor's time vs this | slower thread's share |");
    println!("|---|---:|---:|---:|---:|---:|");
    for ((name, _), (one, two, share)) in subjects.iter().zip(runs) {
        let (one, two, share) = (median(one), median(two), median(share));
        println!(
            "| {name} | {one:.2} | {:.2}x | {:.2} | {:.2}x | {share:.2} |",
            one / floor_one,
            two / 1e6,
            floor_two / two,
        );
    }
    println!("(medians of {rounds} interleaved rounds; at 2 threads both threads share one word)");
}
