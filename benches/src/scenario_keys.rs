//! Where a scenario's keys come from: one fixed key, one per thread, pre-drawn sequences
//! (uniform or Zipf) over a pre-filled table, or fresh keys.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rayon::prelude::*;

use crate::catalog::{Scenario, LARGE_KEYS, SMALL_KEYS, ZIPF_EXPONENT};
use crate::subject::Subject;
use crate::throughput::{measure, CycleKeys, FixedKey, FreshKeys, RunPlan, RunResult};

/// Where a scenario's keys come from.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    Fixed,
    PerThread,
    Cycle(Arc<Vec<Arc<[u32]>>>),
    Fresh,
}

/// Measures `subject` on `threads` threads, each drawing its keys as `keys` says.
pub(crate) fn measure_with_keys<S: Subject + ?Sized>(
    subject: &S,
    keys: &Keys,
    threads: usize,
    plan: &RunPlan,
) -> RunResult {
    match keys {
        Keys::Fixed => measure(subject, threads, plan, |_| FixedKey(0)),
        Keys::PerThread => measure(subject, threads, plan, |t| FixedKey(t as u64)),
        Keys::Cycle(seqs) => {
            measure(subject, threads, plan, |t| CycleKeys::new(Arc::clone(&seqs[t % seqs.len()]), t * 7919))
        }
        Keys::Fresh => measure(subject, threads, plan, |t| FreshKeys::new(t as u64, threads as u64)),
    }
}

/// Pre-computed key sequences, one per thread, drawn in parallel.
fn sequences(
    threads: usize,
    len: usize,
    draw: impl Fn(&mut SmallRng) -> u32 + Sync,
    seed: u64,
) -> Arc<Vec<Arc<[u32]>>> {
    let seqs = (0..threads.max(1))
        .into_par_iter()
        .map(|t| {
            let mut rng = SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            (0..len).map(|_| draw(&mut rng)).collect::<Arc<[u32]>>()
        })
        .collect();
    Arc::new(seqs)
}

/// How `scenario`'s keys are drawn for up to `threads` threads.
pub(crate) fn keys_for(scenario: Scenario, threads: usize) -> Keys {
    match scenario {
        Scenario::Direct
        | Scenario::DirectWork
        | Scenario::DirectDeny
        | Scenario::KeyedHot
        | Scenario::KeyedHotWork => Keys::Fixed,
        Scenario::KeyedPerThread => Keys::PerThread,
        Scenario::Keyed1k => {
            Keys::Cycle(sequences(threads, 1 << 16, |r| r.random_range(0..SMALL_KEYS as u32), 11))
        }
        Scenario::Keyed1kOwn => {
            // Thread t draws from its own keys, t * 1,000 and up (thread 0's are the prefilled ones).
            let drawn = sequences(threads, 1 << 16, |r| r.random_range(0..SMALL_KEYS as u32), 14);
            let own = drawn.iter().enumerate().map(|(t, keys)| {
                let first = u32::try_from(t * SMALL_KEYS).expect("threads * 1,000 keys fit in u32");
                keys.iter().map(|&k| first + k).collect::<Arc<[u32]>>()
            });
            Keys::Cycle(Arc::new(own.collect()))
        }
        Scenario::Keyed1mUniform => {
            Keys::Cycle(sequences(threads, 1 << 20, |r| r.random_range(0..LARGE_KEYS as u32), 12))
        }
        Scenario::Keyed1mZipf => {
            let zipf = zipf_keys(LARGE_KEYS, ZIPF_EXPONENT);
            Keys::Cycle(sequences(threads, 1 << 20, zipf, 13))
        }
        Scenario::KeyedChurn
        | Scenario::KeyedFlood
        | Scenario::KeyedChurnMinute
        | Scenario::KeyedFloodMinute => Keys::Fresh,
    }
}

/// Draws key indices `0..n` with Zipf(`n`, `s`) probabilities, 0 the most frequent
/// (`rand_distr::Zipf` draws ranks `1..=n` by rejection-inversion, exactly).
pub fn zipf_keys(n: usize, s: f64) -> impl Fn(&mut SmallRng) -> u32 + Sync {
    let zipf = Zipf::new(n as f64, s).expect("n >= 1 and s >= 0");
    move |rng| zipf.sample(rng) as u32 - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_keys_start_at_zero_and_follow_the_power_law() {
        let draw = zipf_keys(1_000, 1.0);
        let mut rng = SmallRng::seed_from_u64(7);
        let draws = 200_000;
        let mut counts = vec![0u32; 1_000];
        for _ in 0..draws {
            counts[draw(&mut rng) as usize] += 1;
        }
        // p(rank k) = 1 / (k H(1000)), H(1000) = 7.4855: key 0 is rank 1, key 9 rank 10.
        let expected = |k: f64| draws as f64 / (k * 7.485_471);
        for (key, rank) in [(0, 1.0), (1, 2.0), (9, 10.0)] {
            let got = f64::from(counts[key]);
            assert!((got - expected(rank)).abs() / expected(rank) < 0.05, "key {key}: {got}");
        }
        // Every key can be drawn, the last included, and none beyond.
        assert!(counts[999] > 0);
    }
}
