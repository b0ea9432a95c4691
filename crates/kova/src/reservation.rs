//! Units taken now and accounted later: reservations (take units now, learn when they may be
//! used, give back what goes unused: Go's `x/time/rate` `Reserve` / `Cancel`), and the
//! [`Settlement`] of a cost known only afterwards ([`RateLimiter::settle`]).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::cas::update_word;
pub use crate::settle::{Estimate, Settlement};
use crate::{Clock, RateLimiter, WordAlgorithm};

/// Units taken by [`RateLimiter::reserve_n`], usable after [`delay`](ReservationOf::delay); it
/// borrows its limiter, so it cannot outlive it. [`OwnedReservation`] holds the limiter instead.
pub type Reservation<'a, W, C> = ReservationOf<&'a RateLimiter<W, C>>;

/// A reservation that holds an [`Arc`] of its limiter ([`RateLimiter::reserve_n_owned`]): it can
/// be stored in a struct or moved into a task or thread, and outlive the caller's borrow.
///
/// ```
/// use std::sync::Arc;
/// use kova::reservation::OwnedReservation;
/// use kova::{Gcra, ManualClock, Quota, RateLimiter};
/// let limiter = Arc::new(RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?);
/// let _now = limiter.reserve_n(10)?;
/// let later: OwnedReservation<Gcra, ManualClock> = limiter.reserve_n_owned(5)?;
/// let back = std::thread::spawn(move || later.cancel()).join().unwrap();
/// assert_eq!(back, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type OwnedReservation<W, C> = ReservationOf<Arc<RateLimiter<W, C>>>;

/// Units taken ahead, reached through `L` (a reference to the limiter, or an [`Arc`] of it):
/// [`Reservation`] and [`OwnedReservation`].
///
/// Dropping it keeps the units taken (they count as used); [`cancel`](Self::cancel) gives back
/// what it can.
#[must_use = "a reservation holds units: wait for its delay, or cancel it"]
pub struct ReservationOf<L> {
    pub(crate) limiter: L,
    pub(crate) cost: u64,
    made_at: u64,
    pub(crate) ready_at: u64,
    /// The word the reservation stored: the mark that tells later units from ours.
    pub(crate) reserved_word: u64,
    /// The limiter's [`resets`](RateLimiter::reset) before the reservation was made.
    resets_before: u64,
}

impl<L> fmt::Debug for ReservationOf<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("cost", &self.cost)
            .field("made_at", &self.made_at)
            .field("ready_at", &self.ready_at)
            .finish()
    }
}

/// Why [`RateLimiter::reserve_n`] refused; a refusal never takes any units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveError {
    /// The cost is larger than the limiter ever admits at once.
    CostExceedsCapacity {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter admits at once.
        capacity: u64,
    },
    /// The units would be usable only after more than the maximum delay asked for.
    DelayTooLong {
        /// How long the reservation would have had to wait.
        delay: Duration,
        /// The most the caller would wait.
        max_delay: Duration,
    },
    /// The algorithm cannot take units ahead of time (its state cannot hold them; only
    /// [`Gcra`](crate::Gcra) can) and they are not available now.
    NotAvailableNow {
        /// Which algorithm.
        algorithm: &'static str,
        /// When the same cost would be available, as a check would report it.
        retry_after: Duration,
    },
    /// A keyed table could not hold the key: its shard is full and the table's
    /// [`TableFullPolicy`](crate::keyed::TableFullPolicy) denies new keys (or every key it could evict
    /// is actively limited). Nothing was taken.
    TableFull {
        /// When room may be free, as the denied check reported it (a hint).
        retry_after: Duration,
    },
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReserveError::CostExceedsCapacity { cost, capacity } => {
                write!(f, "cost {cost} exceeds the limiter's capacity of {capacity}: it can never be reserved")
            }
            ReserveError::DelayTooLong { delay, max_delay } => {
                write!(f, "the reservation would wait {delay:?}, more than the {max_delay:?} allowed")
            }
            ReserveError::NotAvailableNow { algorithm, retry_after } => write!(
                f,
                "{algorithm} cannot reserve units ahead of time, and they are available only in {retry_after:?}"
            ),
            ReserveError::TableFull { retry_after } => {
                write!(f, "the keyed table is full and holds no new key (room in about {retry_after:?})")
            }
        }
    }
}

impl std::error::Error for ReserveError {}

impl<W: WordAlgorithm, C: Clock> RateLimiter<W, C> {
    /// Takes `cost` units now and says when they may be used ([`Reservation::delay`]), however
    /// far out that is. [`reserve_n_within`](Self::reserve_n_within) bounds the delay.
    ///
    /// With [`Gcra`](crate::Gcra) the units may lie in the future: later checks and
    /// reservations queue behind them. The other word algorithms cannot hold units ahead of
    /// time; for them a reservation is a check: it succeeds with no delay when the units are
    /// available now, and is refused with [`ReserveError::NotAvailableNow`] otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// let now = limiter.reserve_n(10)?;
    /// assert_eq!(now.delay(), Duration::ZERO);
    /// let later = limiter.reserve_n(5)?;
    /// assert_eq!(later.delay(), Duration::from_millis(500));
    /// assert!(!limiter.check().is_allowed()); // queued behind the reservation
    /// assert_eq!(later.cancel(), 5); // not used: its 5 units come back
    /// assert_eq!(limiter.check().retry_after(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve_n(&self, cost: u64) -> Result<Reservation<'_, W, C>, ReserveError> {
        self.reserve_n_within(cost, Duration::MAX)
    }

    /// [`reserve_n`](Self::reserve_n), refused without taking anything when the units would be
    /// usable only after more than `max_delay` (Go's `Wait` with a deadline).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::reservation::ReserveError;
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?, ManualClock::new())?;
    /// let _all = limiter.reserve_n(10)?;
    /// let refused = limiter.reserve_n_within(2, Duration::from_millis(100));
    /// assert_eq!(
    ///     refused.unwrap_err(),
    ///     ReserveError::DelayTooLong { delay: Duration::from_millis(200), max_delay: Duration::from_millis(100) }
    /// );
    /// assert_eq!(limiter.reserve_n_within(1, Duration::from_millis(100))?.delay(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve_n_within(
        &self,
        cost: u64,
        max_delay: Duration,
    ) -> Result<Reservation<'_, W, C>, ReserveError> {
        let capacity = self.algorithm.capacity();
        if cost > capacity {
            return Err(ReserveError::CostExceedsCapacity { cost, capacity });
        }
        let max_nanos = max_delay_nanos(max_delay);
        // Read before the cell: a reset that has not finished by now counts as after the
        // reservation (its cancel gives back nothing: units lost to the caller, never granted
        // twice), and one that wipes the reservation finishes after this read.
        let resets_before = self.resets_before();
        let made = update_word(
            &*self.cell,
            &self.clock,
            #[inline(always)]
            |word, now| reserve_step(&self.algorithm, word, now, cost, max_nanos, max_delay),
        );
        let (made_at, wait, reserved_word) = made?;
        Ok(ReservationOf {
            limiter: self,
            cost,
            made_at,
            ready_at: made_at.saturating_add(wait),
            reserved_word,
            resets_before,
        })
    }

    /// [`reserve_n`](Self::reserve_n), as an [`OwnedReservation`] that holds the limiter.
    pub fn reserve_n_owned(self: &Arc<Self>, cost: u64) -> Result<OwnedReservation<W, C>, ReserveError> {
        self.reserve_n_within_owned(cost, Duration::MAX)
    }

    /// [`reserve_n_within`](Self::reserve_n_within), as an [`OwnedReservation`].
    pub fn reserve_n_within_owned(
        self: &Arc<Self>,
        cost: u64,
        max_delay: Duration,
    ) -> Result<OwnedReservation<W, C>, ReserveError> {
        let ReservationOf { cost, made_at, ready_at, reserved_word, resets_before, .. } =
            self.reserve_n_within(cost, max_delay)?;
        Ok(ReservationOf { limiter: Arc::clone(self), cost, made_at, ready_at, reserved_word, resets_before })
    }
}

impl<L, W, C> ReservationOf<L>
where
    L: Deref<Target = RateLimiter<W, C>>,
    W: WordAlgorithm,
    C: Clock,
{
    /// How long after it was made the reserved units may be used (zero: at once).
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.ready_at - self.made_at)
    }

    /// How long from now (on the limiter's clock) until the units may be used.
    pub fn delay_from_now(&self) -> Duration {
        Duration::from_nanos(self.ready_at.saturating_sub(self.limiter.clock.now_nanos()))
    }

    /// The units reserved.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// When the units may be used, in the limiter's clock's nanoseconds.
    pub fn ready_at_nanos(&self) -> u64 {
        self.ready_at
    }

    /// Says the reserved units will not be used and gives back what can be (Go's `Cancel`), by
    /// the rule stated once in [`WordAlgorithm::cancel_reservation`]: nothing once their time
    /// has come (`now > ready_at`: they count as used); otherwise the whole cost when nothing
    /// granted after it is still counted, and nothing when something is; nothing either after a
    /// [`reset`](RateLimiter::reset), which gave back everything. Returns the units given back.
    ///
    /// ```
    /// use kova::{Gcra, ManualClock, Quota, RateLimiter};
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(Quota::per_second(10)?.with_burst(1)?, ManualClock::new())?;
    /// let _now = limiter.reserve_n(1)?;
    /// let second = limiter.reserve_n(1)?; // at 100 ms
    /// let third = limiter.reserve_n(1)?; // at 200 ms, a time that assumed the second's unit gone
    /// assert_eq!(second.cancel(), 0);
    /// assert_eq!(third.cancel(), 1); // nothing came after the third
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel(self) -> u64 {
        let limiter = &*self.limiter;
        let (cost, ready_at, mark) = (self.cost, self.ready_at, self.reserved_word);
        if cost == 0 {
            return 0;
        }
        update_word(&*limiter.cell, &limiter.clock, |word, now| {
            // After `word`'s Acquire load: see `RateLimiter::gives_back_after`.
            if !limiter.gives_back_after(self.resets_before) {
                return (0, word);
            }
            cancel_step(&limiter.algorithm, word, now, cost, ready_at, mark)
        })
    }
}

/// `max_delay` in nanoseconds, saturated.
pub(crate) fn max_delay_nanos(max_delay: Duration) -> u64 {
    u64::try_from(max_delay.as_nanos()).unwrap_or(u64::MAX)
}

/// One step of a reservation's CAS loop, for the direct limiter and the keyed table alike:
/// `(Ok((now, wait, new_word)), word_to_store)`, or the refusal and `word` unchanged. The caller
/// has checked `cost <= capacity`.
#[inline(always)]
pub(crate) fn reserve_step<W: WordAlgorithm>(
    algorithm: &W,
    word: u64,
    now: u64,
    cost: u64,
    max_nanos: u64,
    max_delay: Duration,
) -> (Result<(u64, u64, u64), ReserveError>, u64) {
    if cost == 0 {
        return (Ok((now, 0, word)), word);
    }
    let (wait, new) = match algorithm.reserve(word, now, cost) {
        Some(reserved) => reserved,
        None => {
            let (decision, new) = algorithm.decide(word, now, cost);
            if !decision.is_allowed() {
                let retry_after = decision.retry_after();
                return (Err(ReserveError::NotAvailableNow { algorithm: W::NAME, retry_after }), word);
            }
            (0, new)
        }
    };
    if wait > max_nanos {
        let delay = Duration::from_nanos(wait);
        return (Err(ReserveError::DelayTooLong { delay, max_delay }), word);
    }
    (Ok((now, wait, new)), new)
}

/// One step of a cancellation's CAS loop: nothing once the units were due (`now > ready_at`),
/// otherwise the rule of [`WordAlgorithm::cancel_reservation`]. Returns the units given back.
pub(crate) fn cancel_step<W: WordAlgorithm>(
    algorithm: &W,
    word: u64,
    now: u64,
    cost: u64,
    ready_at: u64,
    mark: u64,
) -> (u64, u64) {
    if now > ready_at {
        return (0, word);
    }
    algorithm.cancel_reservation(word, now, cost, mark, ready_at)
}
