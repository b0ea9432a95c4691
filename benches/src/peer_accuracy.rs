//! The peers that can replay a trace on simulated time, on the accuracy section's tests:
//! pingora's `Rate` (through [`SimulatedRate`]) and governor (on its `FakeRelativeClock`). The
//! Mutex bucket, `ratelimit`'s and `leaky-bucket`'s rows are not replayed: the first two read
//! their own clocks, and `leaky-bucket` reads tokio's. governor's tuned configuration has no row
//! of its own ([`GOVERNOR_TUNED_ACCURACY`]).

use std::time::Duration;

use governor::clock::FakeRelativeClock;
use kova::model::max_in_sliding_window;
use kova::Quota;
use rayon::prelude::*;

use crate::peers::governor_quota;
use crate::pingora::{replay_shared, SimulatedRate, PINGORA_BYTES};
use crate::replay::{admitted_times, compare, replay_reference, Comparison};
use crate::report::{AccuracyRecord, PINGORA};
use crate::trace::{boundary_trace, client_times, flood_trace, TraceConfig};

/// Why `governor_tuned` has no accuracy row, for the report: a replay would give governor's row.
pub const GOVERNOR_TUNED_ACCURACY: &str = "`governor_tuned` has no accuracy row of its own: it differs \
     from `governor` in its clock and its hasher, a replay runs either on the simulated clock, and a \
     hasher decides nothing, so its decisions on these tests are `governor`'s (its own clock's effect \
     shows in the per-key rate rows, which it runs on its upkeep clock).";

/// pingora's `Rate` ([`crate::pingora`]) on the same tests: the bursts on one key, and the
/// realistic trace with every client in one shared sketch, in time order (a sketch's error comes
/// from the keys that share its counters, so clients cannot be replayed apart as above).
pub fn pingora_accuracy(trace: &TraceConfig, burst_quota: Quota) -> AccuracyRecord {
    let period = burst_quota.period_nanos();
    let burst = |times: Vec<u64>| {
        let mut rate = SimulatedRate::new(burst_quota);
        let decisions: Vec<bool> = times.iter().map(|&t| rate.check(0, t)).collect();
        max_in_sliding_window(&admitted_times(&times, &decisions), period) as u64
    };
    let quota = trace.quota();
    let clients: Vec<Vec<u64>> = (0..trace.clients).into_par_iter().map(|c| client_times(trace, c)).collect();
    let decisions = replay_shared(quota, &clients);
    let cmp = clients
        .par_iter()
        .zip(&decisions)
        .map(|(times, d)| compare(times, d, &replay_reference(quota, times), quota.period_nanos()))
        .reduce(Comparison::default, Comparison::merge);
    let bursts = (burst(boundary_trace(60, period)), burst(flood_trace(60, period)));
    cmp.into_record(PINGORA, burst_quota.limit(), bursts, 0, Some(PINGORA_BYTES))
}

/// Replays `times` through a governor direct limiter for `quota` on a fake clock.
pub fn replay_governor(quota: Quota, times: &[u64]) -> Vec<bool> {
    let clock = FakeRelativeClock::default();
    let limiter = governor::RateLimiter::direct_with_clock(
        governor_quota(quota).expect("trace quotas fit governor's"),
        clock.clone(),
    );
    let mut now = 0;
    times
        .iter()
        .map(|&t| {
            clock.advance(Duration::from_nanos(t - now));
            now = t;
            limiter.check().is_ok()
        })
        .collect()
}

/// governor on the same tests, one limiter per client as kova's rows are replayed.
pub fn governor_accuracy(trace: &TraceConfig, burst_quota: Quota) -> AccuracyRecord {
    let period = burst_quota.period_nanos();
    let burst = |times: Vec<u64>| {
        let decisions = replay_governor(burst_quota, &times);
        max_in_sliding_window(&admitted_times(&times, &decisions), period) as u64
    };
    let quota = trace.quota();
    let cmp = (0..trace.clients)
        .into_par_iter()
        .map(|c| {
            let times = client_times(trace, c);
            compare(
                &times,
                &replay_governor(quota, &times),
                &replay_reference(quota, &times),
                quota.period_nanos(),
            )
        })
        .reduce(Comparison::default, Comparison::merge);
    let bursts = (burst(boundary_trace(60, period)), burst(flood_trace(60, period)));
    // Its state per key: one `AtomicU64` (the theoretical arrival time).
    cmp.into_record("governor", burst_quota.limit(), bursts, 8, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::Gcra;

    fn config() -> TraceConfig {
        TraceConfig {
            clients: 50,
            duration_ns: 300_000_000_000,
            limit: 100,
            period_ns: 60_000_000_000,
            seed: 9,
        }
    }

    #[test]
    fn pingora_rows_come_from_the_shared_sketch() {
        let record = pingora_accuracy(&config(), Quota::per_minute(60).unwrap());
        // A fixed window: both halves of the boundary burst get through.
        assert_eq!(record.boundary_max, 120);
        assert_eq!(record.fixed_bytes, Some(PINGORA_BYTES));
        let requests: usize = (0..50).map(|c| client_times(&config(), c).len()).sum();
        assert_eq!(record.requests, requests as u64);
        // It counts denied requests too, so an abusive client stays denied where the exact log
        // admits again: some requests are wrongly denied.
        assert!(record.wrongly_denied_pct > 0.0, "{record:?}");
    }

    #[test]
    fn governor_replays_as_kovas_gcra_does() {
        // Both are GCRA with the same emission interval and burst: the same decisions.
        let quota = config().quota();
        for client in [0, 1, 7] {
            let times = client_times(&config(), client);
            assert_eq!(
                replay_governor(quota, &times),
                crate::replay::replay::<Gcra>(quota, &times),
                "{client}"
            );
        }
        let record = governor_accuracy(&config(), Quota::per_minute(60).unwrap());
        assert!(record.wrongly_allowed_pct > 0.0 && record.boundary_max > 60, "{record:?}");
    }
}
