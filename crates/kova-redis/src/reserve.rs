//! Reservations in Redis: take units now, learn when they may be used, give back what goes
//! unused. Mirrors kova's `RateLimiter::reserve_n_within` and `Reservation::cancel`
//! (crates/kova/src/reservation.rs), Go's `x/time/rate` `Reserve` and `Cancel`.

use std::fmt;
use std::time::Duration;

use kova::reservation::ReserveError;
use kova::{AlgorithmKind, Fallback};

use crate::error::{Error, StoreError};
use crate::limit::{RedisLimit, MAX_SPAN_MICROS, MICROS};
use crate::limiter::RedisLimiter;
use crate::policy::StoreFailurePolicy;
use crate::scripts::{arg_now, index, operation_script, Operation};
use crate::settle::{refund_units, supported};

/// Units taken by [`RedisLimiter::reserve_n`], usable after [`delay`](Self::delay).
///
/// Dropping it keeps the units taken (they count as used); [`cancel`](Self::cancel) gives back
/// what it can. Times are the script's clock (Redis `TIME` or the client clock) in microseconds.
#[must_use = "a reservation holds units: wait for its delay, or cancel it"]
pub struct Reservation {
    limiter: RedisLimiter,
    key: Vec<u8>,
    limit: RedisLimit,
    cost: u64,
    made_at: u64,
    ready_at: u64,
    /// The TAT the reservation stored (GCRA): the mark that tells later units from ours.
    mark: u64,
    fallback: Option<Fallback>,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("cost", &self.cost)
            .field("made_at_micros", &self.made_at)
            .field("ready_at_micros", &self.ready_at)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Reservation {
    /// How long after it was made the reserved units may be used (zero: at once).
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.ready_at - self.made_at)
    }

    /// The units reserved.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// When the units may be used, in microseconds on the script's clock.
    pub fn ready_at_micros(&self) -> u64 {
        self.ready_at
    }

    /// When it was made, in microseconds on the script's clock.
    pub fn made_at_micros(&self) -> u64 {
        self.made_at
    }

    /// `Some` when the failure policy made this reservation because Redis could not answer
    /// ([`Fallback::StoreUnavailableAllowed`] under [`StoreFailurePolicy::FailOpen`]): no units were
    /// taken anywhere.
    pub fn fallback(&self) -> Option<Fallback> {
        self.fallback
    }

    /// Says the reserved units will not be used and gives back what can be, by kova's rule
    /// ([`WordAlgorithm::cancel_reservation`](kova::WordAlgorithm::cancel_reservation), as
    /// [`Reservation::cancel`](kova::reservation::Reservation::cancel)): nothing once their time has come
    /// (they count as used); otherwise the whole cost when nothing granted after it is still
    /// counted in Redis, and nothing when something is. Returns the units given back.
    ///
    /// A reservation made by the failure policy took nothing: `Ok(0)` without a call. When
    /// Redis cannot answer, [`Error::Store`] whatever the policy: nothing was given back.
    pub async fn cancel(self) -> Result<u64, Error> {
        if self.fallback.is_some() {
            return Ok(0);
        }
        let limiter = &self.limiter;
        let now = limiter.now_micros()?;
        let [a, b] = self.limit.script_args();
        let mut invocation = operation_script(Operation::Reserve).key(self.key.as_slice());
        arg_now(&mut invocation, now);
        invocation
            .arg(index(self.limit.kind()) + 1)
            .arg("cancel")
            .arg(self.cost.min(refund_units(&self.limit)))
            .arg(limiter.margin_micros())
            .arg(a)
            .arg(b)
            .arg(self.ready_at)
            .arg(self.mark);
        let reply = limiter.invoke(invocation, limiter.deadline()).await?;
        match reply.as_slice() {
            [back] if *back >= 0 => Ok(*back as u64),
            _ => Err(StoreError::Reply(format!("{reply:?}")).into()),
        }
    }
}

impl RedisLimiter {
    /// Takes `cost` units of `key` now and says when they may be used
    /// ([`Reservation::delay`]), as kova's [`RateLimiter::reserve_n`](kova::RateLimiter::reserve_n)
    /// does. With GCRA the units may lie in the future (later checks and reservations queue
    /// behind them); the other algorithms cannot hold units ahead of time, so a reservation is
    /// a check: no delay when the units are available now, else
    /// [`ReserveError::NotAvailableNow`]. The delay is at most 2^52 µs minus the limit's span
    /// (142 years; past it [`ReserveError::DelayTooLong`]), so the script's numbers stay exact.
    ///
    /// **When Redis cannot answer**: under [`StoreFailurePolicy::FailOpen`] the reservation is made
    /// with no delay and marked [`Fallback::StoreUnavailableAllowed`] (it took nothing; its
    /// cancel does nothing). Under every other policy, [`Degrade`](StoreFailurePolicy::Degrade)
    /// included, it is [`Error::Store`] and nothing was taken: a reservation promises a time
    /// that only the shared state can promise.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use kova::Quota;
    /// use kova_redis::{RedisLimit, RedisLimiter};
    /// let limiter = RedisLimiter::connect("redis://127.0.0.1:6379").await?;
    /// let vendor = RedisLimit::gcra(Quota::per_second(10)?)?;
    /// let reservation = limiter.reserve_n("vendor-api", &vendor, 3).await?;
    /// tokio::time::sleep(reservation.delay()).await;
    /// // ... or, if the call is not made after all:
    /// // reservation.cancel().await?;
    /// # Ok(()) }
    /// ```
    pub async fn reserve_n(
        &self,
        key: impl AsRef<[u8]>,
        limit: &RedisLimit,
        cost: u64,
    ) -> Result<Reservation, Error> {
        self.reserve_n_within(key, limit, cost, Duration::MAX).await
    }

    /// [`reserve_n`](Self::reserve_n), refused with [`ReserveError::DelayTooLong`] without
    /// taking anything when the units would be usable only after more than `max_delay`.
    pub async fn reserve_n_within(
        &self,
        key: impl AsRef<[u8]>,
        limit: &RedisLimit,
        cost: u64,
        max_delay: Duration,
    ) -> Result<Reservation, Error> {
        supported(limit, "reserve")?;
        let capacity = limit.capacity();
        if cost > capacity {
            return Err(ReserveError::CostExceedsCapacity { cost, capacity }.into());
        }
        let now = self.now_micros()?;
        let deadline = self.deadline();
        let key = self.keys().key(key.as_ref(), limit.kind());
        // A delay is never longer than the clamp: the deficit a reservation leaves is then at
        // most 2^52 µs, so every later sum in the scripts stays exact.
        let span = match limit.kind() {
            AlgorithmKind::Gcra => limit.capacity() * (limit.step_nanos() / MICROS),
            _ => 0,
        };
        let max_us = u64::try_from(max_delay.as_micros()).unwrap_or(u64::MAX).min(MAX_SPAN_MICROS - span);
        let reply = match self.pay_back(&key, limit, now, deadline).await {
            Ok(()) => {
                let [a, b] = limit.script_args();
                let mut invocation = operation_script(Operation::Reserve).key(key.as_slice());
                arg_now(&mut invocation, now);
                invocation
                    .arg(index(limit.kind()) + 1)
                    .arg("reserve")
                    .arg(cost)
                    .arg(self.margin_micros())
                    .arg(a)
                    .arg(b)
                    .arg(max_us);
                self.invoke(invocation, deadline).await
            }
            Err(e) => Err(e),
        };
        let raw = match reply {
            Ok(raw) => raw,
            Err(error) => return self.reserve_unavailable(key, limit, cost, now, error),
        };
        let bad = || Error::Store(StoreError::Reply(format!("{raw:?}")));
        let &[code, micros, mark, at] = raw.as_slice() else { return Err(bad()) };
        let (Ok(micros), Ok(mark), Ok(at)) = (u64::try_from(micros), u64::try_from(mark), u64::try_from(at))
        else {
            return Err(bad());
        };
        let reservation = |ready_at| Reservation {
            limiter: self.clone(),
            key: key.clone(),
            limit: *limit,
            cost,
            made_at: at,
            ready_at,
            mark,
            fallback: None,
        };
        match code {
            1 => Ok(reservation(at + micros)),
            0 => {
                let delay = Duration::from_micros(micros);
                Err(ReserveError::DelayTooLong { delay, max_delay }.into())
            }
            2 => {
                let retry_after = Duration::from_micros(micros);
                Err(ReserveError::NotAvailableNow { algorithm: limit.kind().as_str(), retry_after }.into())
            }
            _ => Err(bad()),
        }
    }

    fn reserve_unavailable(
        &self,
        key: Vec<u8>,
        limit: &RedisLimit,
        cost: u64,
        now: Option<u64>,
        error: StoreError,
    ) -> Result<Reservation, Error> {
        if self.policy() != StoreFailurePolicy::FailOpen {
            return Err(Error::Store(error));
        }
        self.note_fallback();
        // Redis TIME cannot be read: the reservation's own times are then 0, its delay none.
        let at = now.unwrap_or(0);
        Ok(Reservation {
            limiter: self.clone(),
            key,
            limit: *limit,
            cost,
            made_at: at,
            ready_at: at,
            mark: 0,
            fallback: Some(Fallback::StoreUnavailableAllowed),
        })
    }
}
