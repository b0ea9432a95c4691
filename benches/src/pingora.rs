//! Cloudflare's `pingora-limits` as a keyed peer: its [`Rate`] estimator, two count-min sketches
//! (4 hashes x 1,024 counters each, its defaults, 64 KiB in all) that count every key's events in
//! the current and the previous interval in a fixed memory, whatever the number of keys.
//!
//! It is used as Pingora's own rate-limiting example uses it: `observe(&key, 1)` counts the
//! request and returns the key's count in the current interval, and the request is denied when
//! that count exceeds the limit. So it is a fixed window (whose edges move to the first request
//! after each interval) over an estimate that never under-counts: keys that share counters are
//! denied early, and a denied request counts too. Configured from a kova quota: the interval is
//! the quota's period (`Rate` works in whole milliseconds, which every scenario's period is), the
//! limit its limit; there is no burst apart from the window. Its clock is `std::time::Instant`,
//! read on every call (`Rate` takes no other).
//!
//! For the accuracy trace, which runs on simulated time, [`SimulatedRate`] is `Rate`'s window
//! logic line for line over pingora's own [`Estimator`], with the time passed in: `Rate` reads
//! `Instant::now()` itself and cannot replay a trace.

use std::time::Duration;

use pingora_limits::estimator::Estimator;
use pingora_limits::rate::Rate;

use crate::subject::Subject;

/// Hashes per sketch in `Rate::new` (pingora's `HASHES`).
pub const PINGORA_HASHES: usize = 4;
/// Counters per hash in `Rate::new` (pingora's `SLOTS`).
pub const PINGORA_SLOTS: usize = 1024;
/// What a `Rate` holds whatever the number of keys: two sketches of `isize` counters.
pub const PINGORA_BYTES: usize = 2 * PINGORA_HASHES * PINGORA_SLOTS * std::mem::size_of::<isize>();

/// How old a `Rate` must be before two threads may race its reset ([`PingoraRate::new`]).
const PINGORA_RESET_AGE: Duration = Duration::from_millis(1_001);

/// `pingora_limits::rate::Rate` with its defaults, denying past `limit` per interval.
pub struct PingoraRate {
    rate: Rate,
    limit: isize,
}

impl std::fmt::Debug for PingoraRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PingoraRate").field("limit", &self.limit).finish()
    }
}

impl PingoraRate {
    /// A `Rate` over the quota's period, denying past its limit.
    ///
    /// For a period under a second, the `Rate` is a second old before it is returned:
    /// pingora-limits' `maybe_reset` asserts `new >= now - 1000` when another thread won the
    /// reset, with `now` in milliseconds since the `Rate` was made, so two threads racing a
    /// reset in its first second wrap that subtraction and panic. A period of a second or more
    /// cannot reset in the first second.
    pub fn new(quota: kova::Quota) -> Self {
        let interval = interval_of(quota);
        let rate = Rate::new(interval);
        if interval < PINGORA_RESET_AGE {
            std::thread::sleep(PINGORA_RESET_AGE);
        }
        PingoraRate { rate, limit: limit_of(quota) }
    }
}

fn interval_of(quota: kova::Quota) -> Duration {
    // Rate counts whole milliseconds; a shorter period would never reset.
    quota.period().max(Duration::from_millis(1))
}

fn limit_of(quota: kova::Quota) -> isize {
    isize::try_from(quota.limit()).unwrap_or(isize::MAX)
}

impl Subject for PingoraRate {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.rate.observe(&key, 1) <= self.limit
    }

    fn table_bytes(&self) -> Option<usize> {
        Some(PINGORA_BYTES)
    }
}

/// `Rate`'s two-slot window logic (`observe` and `maybe_reset`, pingora-limits 0.9) over
/// pingora's [`Estimator`], on a time the caller passes in (milliseconds since the start), for
/// replaying a trace. One instance is shared by every key, as one `Rate` is.
pub struct SimulatedRate {
    slots: [Estimator; 2],
    current: usize,
    interval_ms: u64,
    last_reset_ms: u64,
    limit: isize,
}

impl std::fmt::Debug for SimulatedRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedRate").field("interval_ms", &self.interval_ms).finish()
    }
}

impl SimulatedRate {
    /// `Rate::new(period)`'s sketches, denying past the quota's limit.
    pub fn new(quota: kova::Quota) -> Self {
        Self::with_sketch(quota, PINGORA_HASHES, PINGORA_SLOTS)
    }

    /// The same with sketches of `hashes x slots` counters (`Rate::new_with_estimator_config`).
    pub fn with_sketch(quota: kova::Quota, hashes: usize, slots: usize) -> Self {
        SimulatedRate {
            slots: [Estimator::new(hashes, slots), Estimator::new(hashes, slots)],
            current: 0,
            interval_ms: interval_of(quota).as_millis() as u64,
            last_reset_ms: 0,
            limit: limit_of(quota),
        }
    }

    fn maybe_reset(&mut self, now_ms: u64) {
        let past = now_ms.saturating_sub(self.last_reset_ms);
        if past < self.interval_ms {
            return;
        }
        // Clear the previous slot and make it the current one; two intervals on, the old current
        // slot is stale too.
        self.slots[1 - self.current].reset();
        self.current = 1 - self.current;
        if past >= 2 * self.interval_ms {
            self.slots[1 - self.current].reset();
        }
        self.last_reset_ms = now_ms;
    }

    /// `observe(&key, 1)` at `now_ns`; returns the key's estimated count in the current interval.
    pub fn observe(&mut self, key: u64, now_ns: u64) -> isize {
        self.maybe_reset(now_ns / 1_000_000);
        self.slots[self.current].incr(key, 1)
    }

    /// The decision Pingora's example makes: admitted while the count is within the limit.
    pub fn check(&mut self, key: u64, now_ns: u64) -> bool {
        self.observe(key, now_ns) <= self.limit
    }
}

/// Replays every client's requests through one shared sketch in time order (ties by client),
/// returning each client's decisions in its own order. `clients[i]` is client `i`'s sorted
/// request times; the key is the client's index.
pub fn replay_shared(quota: kova::Quota, clients: &[Vec<u64>]) -> Vec<Vec<bool>> {
    let mut rate = SimulatedRate::new(quota);
    crate::trace::replay_in_time_order(clients, |c, t| rate.check(u64::from(c), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_simulated_window_resets_as_rate_does() {
        let quota = kova::Quota::from_nanos(2, 10 * MS).unwrap();
        let mut rate = SimulatedRate::new(quota);
        // One interval: counts 1, 2, 3 (the third denied), denials count too.
        assert_eq!(rate.observe(7, 0), 1);
        assert_eq!(rate.observe(7, 5 * MS), 2);
        assert!(!rate.check(7, 9 * MS));
        // At 10 ms the window moves: a fresh count, whatever came before.
        assert!(rate.check(7, 10 * MS));
        assert_eq!(rate.observe(7, 12 * MS), 2);
        // The window edge moved to 10 ms, not to 20 ms of an aligned grid: 19 ms is inside it.
        assert!(!rate.check(7, 19 * MS));
        // Two intervals on, both slots are stale and cleared.
        assert_eq!(rate.observe(7, 45 * MS), 1);
        // Another key has its own count.
        assert_eq!(rate.observe(8, 45 * MS), 1);
    }

    #[test]
    fn shared_counters_over_count_and_deny_early() {
        // One counter per hash: every key shares it, so a key never seen is denied once the
        // others have used the limit (the sketch never under-counts).
        let quota = kova::Quota::from_nanos(3, 10 * MS).unwrap();
        let mut rate = SimulatedRate::with_sketch(quota, 1, 1);
        for key in 0..3 {
            assert!(rate.check(key, MS));
        }
        assert!(!rate.check(99, MS));
        // Sized generously, keys do not disturb one another.
        let mut roomy = SimulatedRate::with_sketch(quota, 4, 1 << 16);
        for key in 0..100 {
            assert!(roomy.check(key, MS));
        }
    }

    #[test]
    fn replay_keeps_each_clients_order() {
        let quota = kova::Quota::from_nanos(1, 10 * MS).unwrap();
        let clients = vec![vec![0, MS, 11 * MS], vec![2 * MS]];
        let out = replay_shared(quota, &clients);
        assert_eq!(out[0], [true, false, true]);
        // Almost surely its own counters among 1,024 per hash.
        assert_eq!(out[1], [true]);
    }

    #[test]
    fn the_real_rate_denies_past_its_limit() {
        let quota = kova::Quota::per_hour(3).unwrap();
        let rate = PingoraRate::new(quota);
        assert_eq!((0..5).filter(|_| rate.hit(1)).count(), 3);
        assert!(rate.hit(2));
        assert_eq!(rate.table_bytes(), Some(65_536));
    }
}
