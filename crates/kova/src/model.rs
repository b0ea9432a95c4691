//! Reference models: plain sequential Rust, no atomics, no packing, exact integer arithmetic.
//!
//! Each model is written in a different form from the algorithm it checks (the bucket as a
//! credit level rather than a TAT or a token count; the counter and log by search over time), so
//! that agreeing with it means something. Tests, fuzz targets and the benchmark harness share
//! them. They assume time never runs backwards; the real algorithms' handling of a backwards
//! clock is tested separately. Behind the `model` feature: not part of the default API.

pub mod differential;
pub mod lincheck;
mod window;

pub use window::max_in_sliding_window;

use std::collections::{BTreeMap, VecDeque};

use crate::Decision;

/// An exact token bucket: a credit level in nanoseconds of refill, `0..=burst * interval`,
/// optionally sampled at a time quantum (the token bucket's stamp unit).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BucketModel {
    interval: u128,
    burst: u64,
    quantum: u64,
    credit: u128,
    last: u64,
}

impl BucketModel {
    /// A full bucket of `burst` units refilled one per `interval` nanoseconds.
    pub fn new(interval: u64, burst: u64) -> Self {
        Self::with_quantum(interval, burst, 1)
    }

    /// The same, reading time rounded down to a multiple of `quantum` nanoseconds.
    pub fn with_quantum(interval: u64, burst: u64, quantum: u64) -> Self {
        let interval = interval as u128;
        BucketModel { interval, burst, quantum, credit: burst as u128 * interval, last: 0 }
    }

    /// Refills the bucket (a reset).
    pub fn reset(&mut self) {
        self.credit = self.burst as u128 * self.interval;
    }

    /// Decides `cost` units at `now` (non-decreasing across calls).
    pub fn decide(&mut self, now: u64, cost: u64) -> Decision {
        let sampled = now - now % self.quantum;
        let offset = (now - sampled) as u128;
        let full = self.burst as u128 * self.interval;
        if sampled > self.last {
            self.credit = (self.credit + (sampled - self.last) as u128).min(full);
            self.last = sampled;
        }
        let need = cost as u128 * self.interval;
        let nanos = |x: u128| x.saturating_sub(offset).min(u64::MAX as u128) as u64;
        if need <= self.credit {
            self.credit -= need;
            let remaining = (self.credit / self.interval) as u64;
            Decision::allowed(self.burst, remaining, nanos(full - self.credit))
        } else {
            let remaining = (self.credit / self.interval) as u64;
            Decision::denied(self.burst, remaining, nanos(need - self.credit), nanos(full - self.credit))
        }
    }
}

/// Fixed windows: one count for the current aligned window.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FixedWindowModel {
    limit: u64,
    period: u64,
    window: u64,
    count: u64,
}

impl FixedWindowModel {
    /// `limit` per aligned window of `period` nanoseconds.
    pub fn new(limit: u64, period: u64) -> Self {
        FixedWindowModel { limit, period, window: 0, count: 0 }
    }

    /// Forgets the count (a reset).
    pub fn reset(&mut self) {
        self.count = 0;
    }

    /// Decides `cost` units at `now` (non-decreasing).
    pub fn decide(&mut self, now: u64, cost: u64) -> Decision {
        let window = now / self.period;
        if window != self.window {
            self.window = window;
            self.count = 0;
        }
        let end = ((window as u128 + 1) * self.period as u128 - now as u128).min(u64::MAX as u128) as u64;
        if self.count + cost <= self.limit {
            self.count += cost;
            let reset = if self.count > 0 { end } else { 0 };
            Decision::allowed(self.limit, self.limit - self.count, reset)
        } else {
            Decision::denied(self.limit, self.limit - self.count, end, end)
        }
    }
}

/// The sliding window counter's estimate over a full history of window counts; retry and reset
/// found by searching time rather than by formula.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SlidingCounterModel {
    limit: u64,
    period: u64,
    counts: BTreeMap<u64, u64>,
}

impl SlidingCounterModel {
    /// `limit` per sliding `period` nanoseconds.
    pub fn new(limit: u64, period: u64) -> Self {
        SlidingCounterModel { limit, period, counts: BTreeMap::new() }
    }

    /// Forgets all counts (a reset).
    pub fn reset(&mut self) {
        self.counts.clear();
    }

    fn count(&self, window: u64) -> u64 {
        self.counts.get(&window).copied().unwrap_or(0)
    }

    /// The estimate at `t` with `extra` more in the current window: the previous window's
    /// count weighted by the share of it still in the sliding window, rounded down, plus the
    /// current window's.
    fn estimate(&self, t: u64, extra: u64) -> u128 {
        let window = t / self.period;
        let elapsed = (t % self.period) as u128;
        let prev = if window == 0 { 0 } else { self.count(window - 1) } as u128;
        let p = self.period as u128;
        prev * (p - elapsed) / p + (self.count(window) + extra) as u128
    }

    fn fits(&self, t: u64, cost: u64) -> bool {
        self.estimate(t, cost) <= self.limit as u128
    }

    /// The first `t >= now` at which `pred` holds (it holds by `now + 2 * period`).
    fn first_time(&self, now: u64, pred: impl Fn(u64) -> bool) -> u64 {
        let (mut lo, mut hi) = (now, now.saturating_add(self.period.saturating_mul(2)));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo - now
    }

    /// Decides `cost` units at `now` (non-decreasing).
    pub fn decide(&mut self, now: u64, cost: u64) -> Decision {
        let window = now / self.period;
        let remaining = |m: &Self| (m.limit as u128).saturating_sub(m.estimate(now, 0)) as u64;
        let reset = |m: &Self| m.first_time(now, |t| m.estimate(t, 0) == 0);
        if self.fits(now, cost) {
            *self.counts.entry(window).or_insert(0) += cost;
            Decision::allowed(self.limit, remaining(self), reset(self))
        } else {
            let retry = self.first_time(now, |t| self.fits(t, cost));
            Decision::denied(self.limit, remaining(self), retry, reset(self))
        }
    }
}

/// The exact log: every admitted unit's time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SlidingLogModel {
    limit: u64,
    period: u64,
    times: VecDeque<u64>,
}

impl SlidingLogModel {
    /// `limit` per sliding `period` nanoseconds.
    pub fn new(limit: u64, period: u64) -> Self {
        SlidingLogModel { limit, period, times: VecDeque::new() }
    }

    /// Forgets everything (a reset).
    pub fn reset(&mut self) {
        self.times.clear();
    }

    /// Decides `cost` units at `now` (non-decreasing).
    pub fn decide(&mut self, now: u64, cost: u64) -> Decision {
        while self.times.front().is_some_and(|&t| now - t >= self.period) {
            self.times.pop_front();
        }
        let in_window = self.times.len() as u64;
        let reset = |m: &Self| m.times.back().map_or(0, |&t| m.period - (now - t));
        if in_window + cost <= self.limit {
            self.times.extend(std::iter::repeat_n(now, cost as usize));
            Decision::allowed(self.limit, self.limit - in_window - cost, reset(self))
        } else {
            // The oldest `in_window + cost - limit` units must leave first.
            let must_leave = (in_window + cost - self.limit) as usize;
            let retry = self.period - (now - self.times[must_leave - 1]);
            Decision::denied(self.limit, self.limit - in_window, retry, reset(self))
        }
    }
}
