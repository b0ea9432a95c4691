//! [`Leasing`]: how many units a hot key leases from Redis at a time, and for how long.

use std::time::Duration;

/// Token leasing for hot keys: take a batch of units from Redis in the same script run that
/// admits a request, and spend them locally with no round trip.
///
/// A key is *hot* when it is checked again within `ttl` of its previous check on this limiter.
/// When a hot key has fewer leased units left than a check costs, one check (the others wait
/// for it, up to their timeout) asks Redis for `cost + batch`: the script admits `cost` and
/// grants up to `batch` more, as many as the limit has room for right now. Leased units are
/// spent by later checks of the same key and limit until they run out or `ttl` passes (for a
/// fixed window, also when its window ends); unspent units expire unused (the limit is then
/// *under*-used, never over). A new lease replaces what was left of the old one; a refill that
/// brings none (Redis denied it, had room for the check alone, or did not answer) leaves those
/// units to spend until their own lease ends. A lease is dropped unspent when its key is reset,
/// or checked under another limit of the same algorithm (both start the key's local state over).
///
/// # Overshoot bound
/// Redis counts a leased unit when it is leased, and the unit may be spent up to `ttl` later.
/// So over any interval, the units admitted across `N` servers are at most what the algorithm
/// admits over that interval **plus `N * batch`** (each server holds at most `batch` unspent
/// units at the interval's start). With a fixed window the lease ends with its window, so the
/// per-window limit holds exactly. The test `leasing_overshoot_is_bounded` measures it.
///
/// ```
/// use std::time::Duration;
/// let leasing = kova_redis::Leasing::new(100, Duration::from_millis(200));
/// assert_eq!(leasing.batch(), 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leasing {
    batch: u64,
    ttl: Duration,
}

impl Leasing {
    /// Lease up to `batch` units at a time, each lease spent within `ttl`.
    pub fn new(batch: u64, ttl: Duration) -> Self {
        Leasing { batch, ttl }
    }

    /// Units leased at a time (at most).
    pub fn batch(&self) -> u64 {
        self.batch
    }

    /// How long a lease lasts, and how close two checks must be for a key to be hot.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// [`ttl`](Self::ttl) in nanoseconds.
    pub(crate) fn ttl_nanos(&self) -> u64 {
        u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX)
    }
}
