//! Waits with a deadline (Go's `Limiter.Wait` with a context deadline): a wait that would pass
//! its deadline fails at once and takes nothing.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use super::block_on::block_on;
use super::check_first::{unless_denied, CheckFirst};
use super::pacer::DIRECT_LINE;
use super::timer::Timer;
use super::Pacer;
use crate::{Algorithm, CheckError, Clock, Decision, Keyed, RateLimiter};

/// Why a wait with a deadline ended without an admission; it took nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The cost can never be admitted (as [`RateLimiter::check_n`] says).
    Check(CheckError),
    /// Admission would come only after the deadline: `wait` from the wait's start (the time
    /// waited so far plus the last denial's `retry_after`), more than `max_wait`.
    DeadlinePassed {
        /// How long, from its start, the wait would have lasted at the least.
        wait: Duration,
        /// The most the caller would wait.
        max_wait: Duration,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Check(error) => error.fmt(f),
            WaitError::DeadlinePassed { wait, max_wait } => {
                write!(f, "admission would take at least {wait:?}, more than the {max_wait:?} allowed")
            }
        }
    }
}

impl std::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WaitError::Check(error) => Some(error),
            WaitError::DeadlinePassed { .. } => None,
        }
    }
}

impl From<CheckError> for WaitError {
    fn from(error: CheckError) -> Self {
        WaitError::Check(error)
    }
}

/// Turns each denial's wait into a sleep that ends by the deadline, or the error when admission
/// would come after it. Time is read on the limiter's clock.
struct Deadline<'c, C: ?Sized> {
    clock: &'c C,
    start: u64,
    max_wait: Duration,
}

impl<'c, C: Clock + ?Sized> Deadline<'c, C> {
    fn new(clock: &'c C, max_wait: Duration) -> Self {
        Deadline { clock, start: clock.now_nanos(), max_wait }
    }

    /// What is left of `max_wait`, or the error once more than that has passed (read on the
    /// limiter's clock).
    fn left(&self) -> Result<Duration, WaitError> {
        let waited = Duration::from_nanos(self.clock.now_nanos().saturating_sub(self.start));
        if waited > self.max_wait {
            return Err(WaitError::DeadlinePassed { wait: waited, max_wait: self.max_wait });
        }
        Ok(self.max_wait - waited)
    }

    /// How long to sleep before checking again, after a denial that says `retry_after`:
    /// its jittered wait cut to what is left of `max_wait`.
    fn pace<T: Timer>(&self, pacer: &Pacer<T>, retry_after: Duration) -> Result<Duration, WaitError> {
        let waited = Duration::from_nanos(self.clock.now_nanos().saturating_sub(self.start));
        let wait = waited.saturating_add(retry_after);
        if wait > self.max_wait {
            return Err(WaitError::DeadlinePassed { wait, max_wait: self.max_wait });
        }
        Ok(pacer.jittered(retry_after).min(self.max_wait - waited))
    }
}

/// A blocking wait's bound: judged before its first check, but its turn in line is waited for
/// without one (a blocking sleep cannot run beside the turn it would race).
fn blocking_left<'d, C: Clock + ?Sized>(
    deadline: &'d Deadline<'_, C>,
) -> impl FnMut() -> Result<Option<Duration>, WaitError> + 'd {
    move || deadline.left().map(|_| None)
}

impl<T: Timer> Pacer<T> {
    /// [`until_n_ready`](Self::until_n_ready) that gives up at once, taking nothing, as soon as
    /// a denial shows the admission would come more than `max_wait` after the wait began (read
    /// on the limiter's clock). In [`fair`](Self::fair) mode the time spent waiting for its
    /// turn counts: the wait gives up its place in line once the deadline passes, and a turn
    /// that comes after it fails without checking. (The blocking forms wait for their turn,
    /// then fail without checking when the deadline passed meanwhile.)
    pub async fn until_n_ready_within<A: Algorithm, C: Clock>(
        &self,
        limiter: &RateLimiter<A, C>,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, WaitError> {
        let deadline = Deadline::new(limiter.clock(), max_wait);
        let check = || limiter.check_n(cost).map_err(WaitError::from);
        self.wait_paced(
            DIRECT_LINE,
            check,
            |d| deadline.pace(self, d),
            |d| self.timer().sleep(d),
            || deadline.left().map(Some),
        )
        .await
    }

    /// [`until_n_ready_within`](Self::until_n_ready_within) for `key` of a keyed table.
    pub async fn until_key_n_ready_within<K, A, C>(
        &self,
        table: &Keyed<K, A, C>,
        key: &K,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, WaitError>
    where
        K: Hash + Eq + Clone,
        A: Algorithm,
        C: Clock,
    {
        let deadline = Deadline::new(table.clock(), max_wait);
        let check = || table.check_n(key, cost).map_err(WaitError::from);
        let line = self.line_of(key);
        self.wait_paced(
            line,
            check,
            |d| deadline.pace(self, d),
            |d| self.timer().sleep(d),
            || deadline.left().map(Some),
        )
        .await
    }

    /// The blocking [`until_n_ready_within`](Self::until_n_ready_within).
    pub fn wait_n_within<A: Algorithm, C: Clock>(
        &self,
        limiter: &RateLimiter<A, C>,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, WaitError> {
        let deadline = Deadline::new(limiter.clock(), max_wait);
        let check = || limiter.check_n(cost).map_err(WaitError::from);
        block_on(self.wait_paced(
            DIRECT_LINE,
            check,
            |d| deadline.pace(self, d),
            |d| self.sleep_now(d),
            blocking_left(&deadline),
        ))
    }

    /// The blocking [`until_key_n_ready_within`](Self::until_key_n_ready_within).
    pub fn wait_key_n_within<K, A, C>(
        &self,
        table: &Keyed<K, A, C>,
        key: &K,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, WaitError>
    where
        K: Hash + Eq + Clone,
        A: Algorithm,
        C: Clock,
    {
        let deadline = Deadline::new(table.clock(), max_wait);
        let check = || table.check_n(key, cost).map_err(WaitError::from);
        let line = self.line_of(key);
        block_on(self.wait_paced(
            line,
            check,
            |d| deadline.pace(self, d),
            |d| self.sleep_now(d),
            blocking_left(&deadline),
        ))
    }
}

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// Completes once `cost` units are admitted, or fails at once, taking nothing, when a denial
    /// shows the admission would come more than `max_wait` after the call (Go's `Wait` with a
    /// deadline), on the default [`ThreadTimer`](crate::wait::ThreadTimer).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::wait::WaitError;
    /// use kova::{Gcra, Quota, RateLimiter};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RateLimiter::<Gcra>::new(Quota::per_second(1)?)?;
    /// assert!(limiter.until_n_ready_within(1, Duration::from_millis(10)).await?.is_allowed());
    /// let late = limiter.until_n_ready_within(1, Duration::from_millis(10)).await;
    /// assert!(matches!(late, Err(WaitError::DeadlinePassed { .. }))); // due in about 1 s
    /// # Ok(()) }
    /// ```
    pub fn until_n_ready_within(
        &self,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Decision, WaitError>> + '_ {
        // As `until_ready`: the admission at once sets nothing up.
        CheckFirst::new(
            // Inlined as in `RateLimiter::until_ready`.
            #[inline(always)]
            move || unless_denied(self.check_n(cost).map_err(WaitError::from)),
            move || async move { Pacer::new().until_n_ready_within(self, cost, max_wait).await },
        )
    }

    /// The blocking [`until_n_ready_within`](Self::until_n_ready_within) (std only:
    /// [`std::thread::sleep`]).
    pub fn wait_n_within(&self, cost: u64, max_wait: Duration) -> Result<Decision, WaitError> {
        Pacer::new().wait_n_within(self, cost, max_wait)
    }
}

impl<K, A, C> Keyed<K, A, C>
where
    K: Hash + Eq + Clone,
    A: Algorithm,
    C: Clock,
{
    /// [`RateLimiter::until_n_ready_within`] for `key`.
    pub fn until_n_ready_within<'a>(
        &'a self,
        key: &'a K,
        cost: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Decision, WaitError>> + 'a {
        CheckFirst::new(
            // Inlined as in `RateLimiter::until_ready`.
            #[inline(always)]
            move || unless_denied(self.check_n(key, cost).map_err(WaitError::from)),
            move || async move { Pacer::new().until_key_n_ready_within(self, key, cost, max_wait).await },
        )
    }

    /// [`RateLimiter::wait_n_within`] for `key`.
    pub fn wait_n_within(&self, key: &K, cost: u64, max_wait: Duration) -> Result<Decision, WaitError> {
        Pacer::new().wait_key_n_within(self, key, cost, max_wait)
    }
}
