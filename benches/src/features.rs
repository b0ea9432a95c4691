//! What kova's features beyond a check cost, each beside the check it builds on, interleaved in
//! the same rounds: several limits decided all or nothing (`limits`), and the waiting and
//! reserving calls on a limiter that always admits, so that they never wait (`waiting`).
//!
//! Every quota here admits every check (one unit a nanosecond or slower is never reached by any
//! thread), so each row measures the call's own path, as the `direct` scenario does. Direct
//! limiters are shared by the threads (one hot limiter); keyed ones get one key per thread.
//!
//! No peer in the harness decides several bandwidths in one check (governor, ratelimit,
//! leaky-bucket and pingora's `Rate` each hold one; bucket4j, which has them, is Java), so the
//! composites are measured against kova's own single limit. governor's `until_ready` is measured
//! beside its own `check`, as kova's is.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use std::collections::hash_map::DefaultHasher as SipHasher;
use std::hash::BuildHasherDefault;

use governor::clock::DefaultClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::DefaultDirectRateLimiter;
use kova::limits::{KeyedLimits, Limits};
use kova::{CoarseClock, Gcra, Keyed, Quota, RateLimiter};

use std::sync::atomic::AtomicU64;

use portable_atomic::AtomicU128;

use crate::feature_floors::{Cas128Floor, TwoLinkFloor};
use crate::peers::{governor_quota, GovernorDirect};
use crate::report::FeatureRecord;
use crate::rounds::{keep, Kept};
use crate::scenarios::ThroughputConfig;
use crate::subject::{KovaKeyed, Subject};
use crate::throughput::{measure, FixedKey, RunPlan, RunResult};

/// The section of the composites (a `--filter` name).
pub const LIMITS: &str = "limits";
/// The section of the waiting and reserving calls (a `--filter` name).
pub const WAITING: &str = "waiting";
/// The floor of `limits_2`: a bare 128-bit CAS loop.
pub const FLOOR_CAS128: &str = "floor_cas128";
/// The floor of `limits_3`: a bare 128-bit CAS loop, then a bare 64-bit one.
pub const FLOOR_CAS128_CAS64: &str = "floor_cas128_cas64";
/// The floor of `limits_4`: two bare 128-bit CAS loops, one after the other.
pub const FLOOR_CAS128_X2: &str = "floor_cas128_x2";
/// The sections, in report order.
pub const SECTIONS: [&str; 2] = [LIMITS, WAITING];
/// The cost of the `_n` rows of [`WAITING`].
pub const COST: u64 = 4;
/// The most threads a feature is measured on: the rows compare paths, not scaling.
pub const MAX_THREADS: usize = 2;
/// Each row runs this many times the scenarios' rounds, each this many times shorter (the same
/// time in all): a row's kept round and its baseline's are then likelier to be ones that the
/// rest of a shared machine left alone, which is what their ratio needs.
pub const ROUND_SPLIT: u32 = 3;

/// The quotas of the composites: one unit a nanosecond at most over a millisecond, a second,
/// 100 seconds and 10,000 seconds (the first `n` of them), none of which a check loop reaches.
fn admitting_quotas(n: usize) -> Vec<Quota> {
    let quotas: Vec<Quota> = [1_000_000, 1_000_000_000, 100_000_000_000, 10_000_000_000_000]
        .into_iter()
        .map(|nanos| Quota::from_nanos(nanos, nanos).expect("representable"))
        .collect();
    assert!(n <= quotas.len(), "{n} limits asked for, {} quotas here", quotas.len());
    quotas.into_iter().take(n).collect()
}

/// The single limit every row of a section is set against (the composites' first quota).
fn admitting_quota() -> Quota {
    admitting_quotas(1)[0]
}

/// Polls `future` with a waker that does nothing until it is ready: on a limiter that admits at
/// once, one poll (the future's construction and its first check).
#[inline(always)]
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::hint::spin_loop();
    }
}

/// `Limits::check` (direct, all or nothing over its limits).
struct Composite(Limits<Gcra>);

impl Subject for Composite {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.check().is_allowed()
    }
}

/// `Limits::check`, its answer read as a server's single `RateLimit` header reads it: the
/// deciding limit's remaining units and retry time.
struct CompositeRead(Limits<Gcra>);

impl Subject for CompositeRead {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        let answer = self.0.check();
        let decision = answer.decision();
        std::hint::black_box((decision.remaining(), decision.retry_after()));
        answer.is_allowed()
    }
}

/// `KeyedLimits::check` (one table, a key's limits in one cell).
struct KeyedComposite(KeyedLimits<u64, Gcra, CoarseClock>);

impl Subject for KeyedComposite {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check(&key).is_allowed()
    }
}

/// The [`WAITING`] rows' calls on kova's direct limiter, one type each, so that each row's loop
/// is compiled for its own call alone, as a caller's code is (one type with a runtime switch
/// would put every call's code, and the switch, in every row's loop).
macro_rules! waiting_subject {
    ($($(#[$doc:meta])* $name:ident => |$limiter:ident| $call:expr;)*) => {$(
        $(#[$doc])*
        struct $name(RateLimiter<Gcra>);

        impl Subject for $name {
            #[inline(always)]
            fn hit(&self, _key: u64) -> bool {
                let $limiter = &self.0;
                $call
            }
        }
    )*};
}

waiting_subject! {
    /// `check()`, read as every row here reads its answer (`is_allowed` alone).
    Check => |limiter| limiter.check().is_allowed();
    /// `check_n(COST)`.
    CheckN => |limiter| limiter.check_n(COST).is_ok_and(|d| d.is_allowed());
    /// `until_ready().await` on a limiter that admits at once.
    UntilReady => |limiter| ready(limiter.until_ready()).is_allowed();
    /// `until_n_ready(COST).await` on a limiter that admits at once.
    UntilNReady => |limiter| ready(limiter.until_n_ready(COST)).is_ok_and(|d| d.is_allowed());
    /// `reserve_n(COST)`, dropped at once: the units count as used, as a check's do.
    ReserveN => |limiter| limiter.reserve_n(COST).is_ok();
}

/// The keyed [`WAITING`] rows' calls on kova's table, one type each (as above), each thread on
/// its own key.
macro_rules! keyed_waiting_subject {
    ($($(#[$doc:meta])* $name:ident => |$table:ident, $key:ident| $call:expr;)*) => {$(
        $(#[$doc])*
        struct $name(Keyed<u64, Gcra>);

        impl Subject for $name {
            #[inline(always)]
            fn hit(&self, key: u64) -> bool {
                let ($table, $key) = (&self.0, &key);
                $call
            }
        }
    )*};
}

keyed_waiting_subject! {
    /// `check_n(key, COST)`.
    KeyedCheckN => |table, key| table.check_n(key, COST).is_ok_and(|d| d.is_allowed());
    /// `until_n_ready(key, COST).await` on a table that admits at once.
    UntilKeyNReady => |table, key| ready(table.until_n_ready(key, COST)).is_ok_and(|d| d.is_allowed());
}

/// governor's keyed limiter as [`GovernorKeyed`](crate::peers::GovernorKeyed) (its `DashMap` store, SipHash, its default
/// clock), but with SipHash's keys fixed rather than drawn per instance: the keyed check and
/// the keyed wait are two instances, and with a random seed each the threads' keys may share a
/// `DashMap` shard (one lock) in one instance and not in the other, so that the two-thread
/// difference measured the seeds, not the wait. With one fixed hasher both instances place the
/// keys alike.
type GovernorFixedKeyed = governor::RateLimiter<
    u64,
    DashMapStateStore<u64, BuildHasherDefault<SipHasher>>,
    DefaultClock,
    NoOpMiddleware<<DefaultClock as governor::clock::Clock>::Instant>,
>;

fn governor_fixed_keyed(quota: Quota) -> GovernorFixedKeyed {
    governor::RateLimiter::dashmap_with_clock_and_hasher(
        governor_quota(quota).expect("burst fits in u32"),
        DefaultClock::default(),
        BuildHasherDefault::default(),
    )
}

/// governor's keyed `check_key` on [`GovernorFixedKeyed`].
struct GovernorFixedKeyCheck(GovernorFixedKeyed);

impl Subject for GovernorFixedKeyCheck {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check_key(&key).is_ok()
    }
}

/// governor's keyed `until_key_ready` on [`GovernorFixedKeyed`], admitting at once.
struct GovernorUntilKeyReady(GovernorFixedKeyed);

impl Subject for GovernorUntilKeyReady {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        ready(self.0.until_key_ready(&key));
        true
    }
}

/// governor's `until_ready` on a limiter that admits at once.
struct GovernorUntilReady(DefaultDirectRateLimiter);

impl Subject for GovernorUntilReady {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        ready(self.0.until_ready());
        true
    }
}

/// Measures a row's subject on so many threads.
type Measure = Box<dyn Fn(usize, &RunPlan) -> RunResult>;

/// One row to measure.
struct Row {
    subject: &'static str,
    baseline: &'static str,
    kova: bool,
    run: Measure,
}

fn row<S: Subject + 'static>(subject: &'static str, baseline: &'static str, kova: bool, s: S) -> Row {
    Row {
        subject,
        baseline,
        kova,
        run: Box::new(move |threads, plan| measure(&s, threads, plan, |t| FixedKey(t as u64))),
    }
}

fn kova_limiter() -> RateLimiter<Gcra> {
    RateLimiter::new(admitting_quota()).expect("representable")
}

fn rows(section: &str) -> Vec<Row> {
    let keyed = || Keyed::<u64, Gcra>::new(admitting_quota()).expect("representable");
    let composite = |n| Composite(Limits::new(admitting_quotas(n)).expect("representable"));
    let keyed_composite = |n| {
        KeyedComposite(
            KeyedLimits::with_clock(admitting_quotas(n), CoarseClock::new()).expect("representable"),
        )
    };
    let governor = || governor_quota(admitting_quota()).expect("burst fits in u32");
    match section {
        LIMITS => vec![
            row("gcra", "gcra", true, Check(kova_limiter())),
            row("limits_2", "gcra", true, composite(2)),
            row(
                "limits_2_read",
                "gcra",
                true,
                CompositeRead(Limits::new(admitting_quotas(2)).expect("representable")),
            ),
            row("limits_3", "gcra", true, composite(3)),
            row("limits_4", "gcra", true, composite(4)),
            // The least the protocols could cost (`feature_floors.rs`).
            row(FLOOR_CAS128, FLOOR_CAS128, true, Cas128Floor::default()),
            row(FLOOR_CAS128_CAS64, FLOOR_CAS128_CAS64, true, TwoLinkFloor::<AtomicU64>::default()),
            row(FLOOR_CAS128_X2, FLOOR_CAS128_X2, true, TwoLinkFloor::<AtomicU128>::default()),
            row("keyed_gcra", "keyed_gcra", true, KovaKeyed(keyed())),
            row("keyed_limits_2", "keyed_gcra", true, keyed_composite(2)),
            row("keyed_limits_3", "keyed_gcra", true, keyed_composite(3)),
        ],
        WAITING => vec![
            row("check", "check", true, Check(kova_limiter())),
            row("until_ready", "check", true, UntilReady(kova_limiter())),
            row("check_n", "check_n", true, CheckN(kova_limiter())),
            row("until_n_ready", "check_n", true, UntilNReady(kova_limiter())),
            row("reserve_n", "check_n", true, ReserveN(kova_limiter())),
            row("governor_check", "governor_check", false, GovernorDirect::new(admitting_quota())),
            row(
                "governor_until_ready",
                "governor_check",
                false,
                GovernorUntilReady(governor::RateLimiter::direct(governor())),
            ),
            row("keyed_check_n", "keyed_check_n", true, KeyedCheckN(keyed())),
            row("until_key_n_ready", "keyed_check_n", true, UntilKeyNReady(keyed())),
            row(
                "governor_keyed_check",
                "governor_keyed_check",
                false,
                GovernorFixedKeyCheck(governor_fixed_keyed(admitting_quota())),
            ),
            row(
                "governor_until_key_ready",
                "governor_keyed_check",
                false,
                GovernorUntilKeyReady(governor_fixed_keyed(admitting_quota())),
            ),
        ],
        _ => Vec::new(),
    }
}

/// The thread counts a feature is measured on: the configured ones up to [`MAX_THREADS`].
fn thread_counts(config: &ThroughputConfig) -> Vec<usize> {
    config.threads.iter().copied().filter(|&t| t <= MAX_THREADS).collect()
}

/// How many measurements the selected `sections` take (for the progress bar).
pub fn measurement_count(sections: &[&str], config: &ThroughputConfig) -> u64 {
    let rows: usize = sections.iter().map(|s| rows(s).len()).sum();
    (rows * thread_counts(config).len() * rounds_of(config)) as u64
}

fn rounds_of(config: &ThroughputConfig) -> usize {
    config.rounds * ROUND_SPLIT as usize
}

/// Measures the selected `sections`, rows interleaved round by round as the scenarios are,
/// calling `tick` after each measurement.
pub fn run_features(
    sections: &[&str],
    config: &ThroughputConfig,
    mut tick: impl FnMut(&str),
) -> Vec<FeatureRecord> {
    let threads = thread_counts(config);
    let plan = RunPlan { duration: config.plan.duration / ROUND_SPLIT, ..config.plan };
    let mut out = Vec::new();
    for &section in sections {
        let rows = rows(section);
        let mut rounds = vec![vec![Vec::with_capacity(rounds_of(config)); threads.len()]; rows.len()];
        for _ in 0..rounds_of(config) {
            for (ti, &t) in threads.iter().enumerate() {
                for (ri, row) in rows.iter().enumerate() {
                    rounds[ri][ti].push((row.run)(t, &plan));
                    tick(&format!("{section} {} x{t}", row.subject));
                }
            }
        }
        for (row, per_thread) in rows.iter().zip(rounds) {
            for (&t, results) in threads.iter().zip(per_thread) {
                let Some(Kept { round: r, round_ops_per_sec }) = keep(results, t) else {
                    continue;
                };
                out.push(FeatureRecord {
                    section: section.to_owned(),
                    subject: row.subject.to_owned(),
                    baseline: row.baseline.to_owned(),
                    kova: row.kova,
                    threads: t,
                    ops_per_sec: r.ops_per_sec,
                    ns_p50: r.ns_p50.is_finite().then_some(r.ns_p50),
                    median_ops_per_sec: None,
                    round_ops_per_sec,
                });
            }
        }
    }
    out
}

/// The quotas in words, for the report.
pub fn quota_text() -> String {
    admitting_quotas(3).into_iter().map(crate::catalog::quota_words).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_row_admits_and_is_counted() {
        let config = ThroughputConfig {
            threads: vec![1, 2, 4],
            rounds: 2,
            plan: RunPlan {
                duration: Duration::from_millis(1),
                max_ops: Some(2_000),
                timer_overhead_ns: 0,
                work_rounds: 0,
            },
            churn_ops: 0,
        };
        let mut ticks = 0;
        let records = run_features(&SECTIONS, &config, |_| ticks += 1);
        assert_eq!(ticks, measurement_count(&SECTIONS, &config));
        // 8 composite rows, 3 floors, 7 direct and 4 keyed waiting rows, at 1 and 2 threads (4 is
        // above the cap).
        assert_eq!(records.len(), (8 + 3 + 7 + 4) * 2);
        assert!(records.iter().all(|r| r.ops_per_sec > 0.0 && r.threads <= MAX_THREADS));
        // Every round's rate is kept, and the median round is the row's rate.
        for r in &records {
            assert_eq!(r.round_ops_per_sec.len(), rounds_of(&config), "{}", r.subject);
            assert_eq!(Some(r.ops_per_sec), crate::rounds::median(&r.round_ops_per_sec), "{}", r.subject);
            assert_eq!(r.median_ops_per_sec, None, "{}", r.subject);
        }
        for r in &records {
            assert!(records.iter().any(|b| b.subject == r.baseline && b.is_baseline()), "{}", r.subject);
        }
    }

    #[test]
    fn every_row_admits_every_call() {
        for section in SECTIONS {
            for row in rows(section) {
                let plan = RunPlan {
                    duration: Duration::from_millis(1),
                    max_ops: Some(1_000),
                    timer_overhead_ns: 0,
                    work_rounds: 0,
                };
                let r = (row.run)(1, &plan);
                assert_eq!(r.allowed_share, 1.0, "{section} {}", row.subject);
            }
        }
    }
}
