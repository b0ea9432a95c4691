//! The peers kova is measured against, in the same run and the same scenarios:
//! - governor's direct and keyed (DashMap) limiters, on governor's default clock (its fast
//!   configuration, measured beside: [`crate::governor_tuned`]);
//! - a plain `Mutex` token bucket, a line-by-line port of the seeds' Go `TokenBucket` (floating
//!   point tokens, `time.Now()` on every call), and its keyed form, one `Mutex<HashMap>` for all
//!   keys as in the seeds' Go `FixedWindow`;
//! - iopsystems' `ratelimit` (a token bucket in atomics; on kova's clock and on its own) and the
//!   `leaky-bucket` crate's async token bucket through its non-waiting `try_acquire`, in the
//!   direct scenarios;
//! - Cloudflare's `pingora-limits` `Rate` in the keyed ones ([`crate::pingora`]).
//!
//! Each gets the kova quota's limit per period as its refill and its burst as its capacity, and
//! starts full, as kova's limiters do.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter};
use kova::Clock as _;

use crate::subject::Subject;

/// The governor quota closest to a kova quota: one cell per `period / limit` (rounded up, as
/// kova does), burst `burst`. `None` when the burst exceeds `u32`.
pub fn governor_quota(quota: kova::Quota) -> Option<governor::Quota> {
    let interval = Duration::from_nanos(quota.emission_interval_nanos());
    let burst = NonZeroU32::new(u32::try_from(quota.burst()).ok()?)?;
    Some(governor::Quota::with_period(interval)?.allow_burst(burst))
}

/// governor's direct limiter (GCRA on one `AtomicU64`, quanta clock).
#[derive(Debug)]
pub struct GovernorDirect(pub DefaultDirectRateLimiter);

impl GovernorDirect {
    /// A direct governor limiter for the kova quota.
    pub fn new(quota: kova::Quota) -> Self {
        GovernorDirect(governor::RateLimiter::direct(governor_quota(quota).expect("burst fits in u32")))
    }
}

impl Subject for GovernorDirect {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.check().is_ok()
    }
}

/// governor's keyed limiter: its default store, a `DashMap<u64, InMemoryState>` with std's
/// SipHash, on the quanta clock.
pub struct GovernorKeyed(pub DefaultKeyedRateLimiter<u64>);

impl std::fmt::Debug for GovernorKeyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GovernorKeyed").field("keys", &self.0.len()).finish()
    }
}

impl GovernorKeyed {
    /// A keyed governor limiter for the kova quota.
    pub fn new(quota: kova::Quota) -> Self {
        GovernorKeyed(governor::RateLimiter::keyed(governor_quota(quota).expect("burst fits in u32")))
    }
}

impl Subject for GovernorKeyed {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check_key(&key).is_ok()
    }

    fn keys(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// kova's default clock for `ratelimit`, which takes any clock: so that its row measures its
/// token bucket, not a clock read kova's rows do not pay (its default, `std::time::Instant`,
/// costs a `clock_gettime` per check).
#[derive(Debug, Clone, Copy, Default)]
pub struct KovaCoarseClock(kova::CoarseClock);

impl ratelimit::Clock for KovaCoarseClock {
    #[inline(always)]
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.0.now_nanos())
    }
}

/// iopsystems' `ratelimit::Ratelimiter`: tokens scaled by a million in one `AtomicU64`, a CAS to
/// claim each refill. Measured twice: on kova's coarse clock ([`KovaCoarseClock`], row
/// `ratelimit`), so that the row measures its bucket as kova's rows measure theirs, and on its
/// default `StdClock` (row `ratelimit_std`), as a user who takes the default gets it: the gap
/// between the two rows is what its clock read costs.
#[derive(Debug)]
pub struct IopsRatelimit<C: ratelimit::Clock = KovaCoarseClock>(pub ratelimit::Ratelimiter<C>);

impl IopsRatelimit {
    /// `limit` tokens per `period`, capacity `burst`, starting full, on kova's coarse clock.
    pub fn new(quota: kova::Quota) -> Self {
        Self::with_clock(quota, KovaCoarseClock::default())
    }
}

impl IopsRatelimit<ratelimit::StdClock> {
    /// The same on ratelimit's default clock (`std::time::Instant`).
    pub fn with_std_clock(quota: kova::Quota) -> Self {
        Self::with_clock(quota, ratelimit::StdClock::new())
    }
}

impl<C: ratelimit::Clock> IopsRatelimit<C> {
    /// `limit` tokens per `period`, capacity `burst`, starting full, on `clock`.
    pub fn with_clock(quota: kova::Quota, clock: C) -> Self {
        let limiter = ratelimit::Builder::with_clock(quota.limit(), clock)
            .period(quota.period())
            .max_tokens(quota.burst())
            .initial_available(quota.burst())
            .build()
            .expect("a valid ratelimit configuration");
        IopsRatelimit(limiter)
    }
}

impl<C: ratelimit::Clock + Sync> Subject for IopsRatelimit<C> {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.try_wait().is_ok()
    }
}

/// The `leaky-bucket` crate's `RateLimiter` through `try_acquire(1)`, its call that never waits.
/// `fair(false)`: fairness orders waiting acquirers, of which a non-waiting caller has none, and
/// the fair default sends every `try_acquire` through its lock instead of its atomic fast path.
/// Refill `limit` every `period` (its interval is whole milliseconds, as every direct scenario's
/// period is), capacity `burst`, starting full; its clock is tokio's `Instant` (std's), read only
/// when the fast path finds the balance empty.
pub struct LeakyBucket(pub leaky_bucket::RateLimiter);

impl std::fmt::Debug for LeakyBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeakyBucket").field("max", &self.0.max()).finish()
    }
}

impl LeakyBucket {
    /// A bucket for the kova quota.
    pub fn new(quota: kova::Quota) -> Self {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let limiter = leaky_bucket::RateLimiter::builder()
            .refill(size(quota.limit()))
            .interval(quota.period().max(Duration::from_millis(1)))
            .max(size(quota.burst()))
            .initial(size(quota.burst()))
            .fair(false)
            .build();
        LeakyBucket(limiter)
    }
}

impl Subject for LeakyBucket {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.0.try_acquire(1)
    }
}

/// The seeds' Go token bucket: `tokens` as a float, refilled from the elapsed wall time.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last_refill: Instant,
}

impl Bucket {
    fn allow(&mut self, max: f64, refill_per_sec: f64) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last_refill).as_secs_f64();
        self.tokens = (self.tokens + elapsed * refill_per_sec).min(max);
        self.last_refill = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// A token bucket behind a `Mutex` (the seeds' first Go example).
#[derive(Debug)]
pub struct MutexBucket {
    max: f64,
    refill_per_sec: f64,
    state: Mutex<Bucket>,
}

impl MutexBucket {
    /// A full bucket of `quota.burst()` refilled at `limit / period`.
    pub fn new(quota: kova::Quota) -> Self {
        let max = quota.burst() as f64;
        let refill_per_sec = quota.limit() as f64 / quota.period().as_secs_f64();
        MutexBucket {
            max,
            refill_per_sec,
            state: Mutex::new(Bucket { tokens: max, last_refill: Instant::now() }),
        }
    }

    /// The Go `Allow()`.
    pub fn allow(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).allow(self.max, self.refill_per_sec)
    }
}

impl Subject for MutexBucket {
    #[inline(always)]
    fn hit(&self, _key: u64) -> bool {
        self.allow()
    }
}

/// One `Mutex<HashMap<u64, bucket>>` for every key.
#[derive(Debug)]
pub struct MutexKeyed {
    max: f64,
    refill_per_sec: f64,
    map: Mutex<HashMap<u64, Bucket>>,
}

impl MutexKeyed {
    /// An empty map; a key's bucket starts full.
    pub fn new(quota: kova::Quota) -> Self {
        let max = quota.burst() as f64;
        let refill_per_sec = quota.limit() as f64 / quota.period().as_secs_f64();
        MutexKeyed { max, refill_per_sec, map: Mutex::new(HashMap::new()) }
    }
}

impl Subject for MutexKeyed {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let max = self.max;
        map.entry(key)
            .or_insert_with(|| Bucket { tokens: max, last_refill: Instant::now() })
            .allow(max, self.refill_per_sec)
    }

    fn keys(&self) -> Option<usize> {
        Some(self.map.lock().unwrap_or_else(|e| e.into_inner()).len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_limit() {
        let quota = kova::Quota::per_hour(3).unwrap();
        let bucket = MutexBucket::new(quota);
        assert_eq!((0..5).filter(|_| bucket.allow()).count(), 3);
        let keyed = MutexKeyed::new(quota);
        assert_eq!((0..5).filter(|_| keyed.hit(1)).count(), 3);
        assert!(keyed.hit(2));
        assert_eq!(keyed.keys(), Some(2));
        let gov = GovernorDirect::new(quota);
        assert_eq!((0..5).filter(|_| gov.hit(0)).count(), 3);
        let gov_keyed = GovernorKeyed::new(quota);
        assert_eq!((0..5).filter(|_| gov_keyed.hit(9)).count(), 3);
        let iops = IopsRatelimit::new(quota);
        assert_eq!((0..5).filter(|_| iops.hit(0)).count(), 3);
        let leaky = LeakyBucket::new(quota);
        assert_eq!((0..5).filter(|_| leaky.hit(0)).count(), 3);
    }

    #[test]
    fn the_atomic_buckets_refill_at_the_quota() {
        // 10 per 20 ms, burst 10: drained, then about 10 more after 40 ms (20 at most).
        let quota = kova::Quota::from_nanos(10, 20_000_000).unwrap();
        // Each built just before it is drained, so that none refills while another is tested.
        let makers: [fn(kova::Quota) -> Box<dyn Subject>; 3] = [
            |q| Box::new(IopsRatelimit::new(q)),
            |q| Box::new(IopsRatelimit::with_std_clock(q)),
            |q| Box::new(LeakyBucket::new(q)),
        ];
        for make in makers {
            let s = make(quota);
            assert_eq!((0..50).filter(|_| s.hit(0)).count(), 10);
            std::thread::sleep(Duration::from_millis(40));
            let refilled = (0..50).filter(|_| s.hit(0)).count();
            assert!((5..=10).contains(&refilled), "{refilled}");
        }
    }

    #[test]
    fn governor_quota_matches_kova() {
        let quota = kova::Quota::per_second(3).unwrap().with_burst(7).unwrap();
        let gov = governor_quota(quota).unwrap();
        assert_eq!(gov.burst_size().get(), 7);
        assert_eq!(gov.replenish_interval(), Duration::from_nanos(333_333_334));
    }
}
