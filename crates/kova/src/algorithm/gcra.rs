//! GCRA, the generic cell rate algorithm: a token bucket in one word.

use strength_reduce::StrengthReducedU64;

use super::{GiveBack, WordAlgorithm};
use crate::{Decision, Quota, QuotaError};

/// GCRA (generic cell rate algorithm): token-bucket semantics stored as one number, the
/// *theoretical arrival time* (TAT) — the instant at which the bucket would be full again.
///
/// - **For**: the default choice. Smooth rate with bursts ("10/s, burst 50"), exact, one word.
/// - **Memory per key**: 8 bytes (one `AtomicU64`).
/// - **Exactness**: exact for its interval `T = period / limit` rounded up to whole nanoseconds
///   (so the rate is never exceeded; for 3/s the rate is 2e-9 below the quota). Over any interval
///   of length `L` it admits at most `burst + L / T` units.
///
/// # Layout
/// The whole word is the TAT in nanoseconds on the clock's timeline. A fresh key has TAT 0 (full
/// for any `now`). TAT saturates at `u64::MAX` (584 years): never a wrap. The timeline ends
/// there too: once `now` is within `burst * interval` of `u64::MAX` (only a
/// [`ManualClock`](crate::ManualClock) set or advanced there reads such a time), the saturated
/// TAT stays within the burst of `now`, and every check of at most the burst admits.
/// A clock reading older than the TAT sees a larger deficit, so it never grants.
///
/// ```
/// use kova::{Gcra, ManualClock, Quota, RateLimiter};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?.with_burst(2)?, clock.clone())?;
/// assert!(limiter.check().is_allowed());
/// assert!(limiter.check().is_allowed());
/// let denied = limiter.check();
/// assert!(!denied.is_allowed());
/// assert_eq!(denied.retry_after().as_millis(), 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Gcra {
    quota: Quota,
    /// Nanoseconds per unit.
    interval: u64,
    /// `interval` as a multiply-and-shift divisor: `remaining` divides by it on every check.
    interval_divisor: StrengthReducedU64,
    /// `burst * interval`: the largest deficit a check may leave.
    capacity_nanos: u64,
    /// `(burst + overdraft) * interval`: the largest deficit a settled charge may leave.
    debt_limit_nanos: u64,
}

/// The largest `burst * interval` accepted: half the timeline, so `now + deficit` stays
/// meaningful for 292 years.
const MAX_CAPACITY_NANOS: u64 = u64::MAX / 2;

/// Two GCRAs are equal when built from the same quota (everything else derives from it).
impl PartialEq for Gcra {
    fn eq(&self, other: &Self) -> bool {
        self.quota == other.quota
    }
}

impl Eq for Gcra {}

impl Gcra {
    /// Nanoseconds per unit at the sustained rate.
    pub fn interval_nanos(&self) -> u64 {
        self.interval
    }

    fn remaining(&self, deficit: u64) -> u64 {
        self.capacity_nanos.saturating_sub(deficit) / self.interval_divisor
    }
}

impl WordAlgorithm for Gcra {
    const NAME: &'static str = "gcra";
    // The decision's remaining units cost a division (a multiply-and-shift) the word does not need.
    const DECIDE_AFTER_WRITE: bool = true;

    fn from_quota(quota: Quota) -> Result<Self, QuotaError> {
        let interval = quota.emission_interval_nanos();
        let capacity_nanos = quota.burst().checked_mul(interval).filter(|&c| c <= MAX_CAPACITY_NANOS).ok_or(
            QuotaError::Unrepresentable {
                algorithm: Self::NAME,
                field: "burst",
                value: quota.burst(),
                max: MAX_CAPACITY_NANOS / interval,
            },
        )?;
        let debt_limit_nanos = quota
            .burst()
            .checked_add(quota.overdraft())
            .and_then(|units| units.checked_mul(interval))
            .filter(|&d| d <= MAX_CAPACITY_NANOS)
            .ok_or(QuotaError::Unrepresentable {
                algorithm: Self::NAME,
                field: "overdraft",
                value: quota.overdraft(),
                max: (MAX_CAPACITY_NANOS / interval).saturating_sub(quota.burst()),
            })?;
        Ok(Gcra {
            quota,
            interval,
            interval_divisor: StrengthReducedU64::new(interval),
            capacity_nanos,
            debt_limit_nanos,
        })
    }

    fn quota(&self) -> Quota {
        self.quota
    }

    fn capacity(&self) -> u64 {
        self.quota.burst()
    }

    fn fresh_word(&self) -> u64 {
        0
    }

    #[inline]
    fn decide(&self, tat: u64, now: u64, cost: u64) -> (Decision, u64) {
        let limit = self.quota.burst();
        // How far the bucket is from full, as time. Zero when the TAT has passed.
        let deficit = tat.saturating_sub(now);
        if cost == 0 {
            return (Decision::allowed(limit, self.remaining(deficit), deficit), tat);
        }
        // cost <= burst was checked by the caller, so this product fits.
        let new_deficit = deficit.saturating_add(cost * self.interval);
        if new_deficit <= self.capacity_nanos {
            let new_tat = now.saturating_add(new_deficit);
            (Decision::allowed(limit, self.remaining(new_deficit), new_deficit), new_tat)
        } else {
            let retry = new_deficit - self.capacity_nanos;
            (Decision::denied(limit, self.remaining(deficit), retry, deficit), tat)
        }
    }

    /// The admission's units lie at the end of the TAT it wrote, `reset_after` after it was
    /// decided; the part of them still after now counts, one unit per interval (a unit partly
    /// after now: not for a settlement, whole for an undo).
    fn still_counted(
        &self,
        cost: u64,
        elapsed_nanos: u64,
        reset_after_nanos: u64,
        give_back: GiveBack,
    ) -> u64 {
        cost.min(give_back.units(reset_after_nanos.saturating_sub(elapsed_nanos), self.interval))
    }

    fn refund(&self, tat: u64, now: u64, cost: u64) -> u64 {
        let back = cost.saturating_mul(self.interval);
        // A TAT at or before `now` already means full: never refund past that.
        tat.saturating_sub(back).max(now.min(tat))
    }

    /// Takes off the TAT what the check's units still hold of it: the part of their `cost`
    /// intervals that lies after `now`, which is `written` less `now` at most. The part before
    /// `now` has elapsed: the state without the check would have refilled it too, or wasted it
    /// on a full bucket. Exact while nothing charged before the check is given back first (that
    /// moves the check's units earlier than `written` says; see `Limits` for the bound).
    fn undo(&self, tat: u64, now: u64, cost: u64, written: u64) -> u64 {
        let back = cost.saturating_mul(self.interval).min(written.saturating_sub(now));
        tat.saturating_sub(back).max(now.min(tat))
    }

    fn is_idle_word(&self, tat: u64, now: u64) -> bool {
        tat <= now
    }

    /// The TAT moves out by `cost` intervals whatever it is; the units may be used once the
    /// deficit is back within the burst. `None` only when the new TAT would pass `u64::MAX`.
    fn reserve(&self, tat: u64, now: u64, cost: u64) -> Option<(u64, u64)> {
        let new_deficit = tat.saturating_sub(now).checked_add(cost.checked_mul(self.interval)?)?;
        let new_tat = now.checked_add(new_deficit)?;
        Some((new_deficit.saturating_sub(self.capacity_nanos), new_tat))
    }

    /// The rule of [`WordAlgorithm::cancel_reservation`]. A TAT short of the mark was moved
    /// back by a refund since (the caller's or a composite's): the units it gave back count as
    /// part of this reservation's, so only the rest comes back.
    fn cancel_reservation(
        &self,
        tat: u64,
        now: u64,
        cost: u64,
        reserved_tat: u64,
        _ready_at: u64,
    ) -> (u64, u64) {
        if tat > reserved_tat {
            return (0, tat);
        }
        let refunded = (reserved_tat - tat).div_ceil(self.interval);
        let back = cost.saturating_sub(refunded);
        (back, self.refund(tat, now, back))
    }

    /// The deficit in whole units: past the burst, the debt charges ran into.
    fn consumed(&self, tat: u64, now: u64) -> u64 {
        tat.saturating_sub(now).div_ceil(self.interval)
    }

    /// Takes up to `cost` units while the deficit stays within `(burst + overdraft)` intervals.
    fn charge(&self, tat: u64, now: u64, cost: u64) -> (u64, u64) {
        let deficit = tat.saturating_sub(now);
        let room = self.debt_limit_nanos.saturating_sub(deficit) / self.interval_divisor;
        let take = cost.min(room);
        if take == 0 {
            return (0, tat);
        }
        // take * interval <= debt_limit_nanos - deficit, so neither sum overflows past the limit.
        (take, now.saturating_add(deficit + take * self.interval))
    }
}
