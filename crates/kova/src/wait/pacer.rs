//! The waiting loop, and the waits of the direct limiter and the keyed table.

use std::future::Future;
use std::hash::Hash;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use super::block_on::block_on;
use super::check_first::{unless_denied, CheckFirst};
use super::fair::FairQueue;
use super::timer::{ThreadTimer, Timer};
use crate::{Algorithm, CheckError, Clock, Decision, Keyed, RateLimiter};

/// How callers wait: on which [`Timer`], in which order, with how much jitter. Share one pacer
/// (by reference) among the waiters of one limiter for [`fair`](Self::fair) order.
///
/// ```
/// use std::time::Duration;
/// use kova::wait::Pacer;
/// use kova::{Gcra, Quota, RateLimiter};
/// let limiter = RateLimiter::<Gcra>::new(Quota::per_second(1_000)?)?;
/// let pacer = Pacer::new().fair().jitter(Duration::from_millis(1));
/// let decision = pacer.wait_n(&limiter, 10)?;
/// assert!(decision.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Pacer<T: Timer = ThreadTimer> {
    timer: T,
    jitter: Duration,
    /// The waiters' lines, and the seeded hasher that gives a key its line (its hash, see
    /// [`until_key_n_ready`](Self::until_key_n_ready)): only in fair mode, so that a wait that
    /// never waits does not pay for seeding a hasher (a shared counter) it would not use.
    queue: Option<(FairQueue, ahash::RandomState)>,
}

impl Pacer<ThreadTimer> {
    /// Each waiter on its own, no jitter, on the default [`ThreadTimer`].
    pub fn new() -> Self {
        Self::with_timer(ThreadTimer::new())
    }
}

impl Default for Pacer<ThreadTimer> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Timer> Pacer<T> {
    /// A pacer sleeping on `timer`.
    ///
    /// ```
    /// use kova::wait::{Pacer, ThreadTimer};
    /// let pacer = Pacer::with_timer(ThreadTimer::new());
    /// assert!(!pacer.is_fair());
    /// ```
    pub fn with_timer(timer: T) -> Self {
        Pacer { timer, jitter: Duration::ZERO, queue: None }
    }

    /// First come, first served across costs: waiters of this pacer on one limiter (or one key)
    /// check in the order they started waiting, so a request for 50 units is not overtaken by
    /// a stream of requests for 1. Only the first waiter checks; the others wait for their
    /// turn. A waiter dropped while in line gives its place to the next. Checks made outside
    /// this pacer are not in its line.
    pub fn fair(mut self) -> Self {
        self.queue = Some((FairQueue::default(), ahash::RandomState::new()));
        self
    }

    /// Adds a random extra sleep of up to `max` to every wait after a denial (as governor's
    /// `Jitter`), so that many waiters denied together do not all check again at one instant.
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// Whether waiters take turns ([`fair`](Self::fair)).
    pub fn is_fair(&self) -> bool {
        self.queue.is_some()
    }

    /// The timer.
    pub fn timer(&self) -> &T {
        &self.timer
    }

    /// Waiters now in the line of a direct limiter (0 unless [`fair`](Self::fair)).
    pub fn waiting(&self) -> usize {
        self.queue.as_ref().map_or(0, |(q, _)| q.len(DIRECT_LINE))
    }

    /// Completes with the decision that admitted `cost` units of `limiter`, checking again each
    /// time a denial's `retry_after` (plus jitter) has passed. An error at once when `cost`
    /// exceeds the capacity. Dropping the future consumes nothing.
    pub async fn until_n_ready<A: Algorithm, C: Clock>(
        &self,
        limiter: &RateLimiter<A, C>,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        self.wait(DIRECT_LINE, || limiter.check_n(cost), |d| self.timer.sleep(d)).await
    }

    /// [`until_n_ready`](Self::until_n_ready) for `key` of a keyed table. With
    /// [`fair`](Self::fair), each key has its own line (keyed by the key's seeded 64-bit hash:
    /// two keys whose hashes collide share a line, which only delays them).
    pub async fn until_key_n_ready<K, A, C>(
        &self,
        table: &Keyed<K, A, C>,
        key: &K,
        cost: u64,
    ) -> Result<Decision, CheckError>
    where
        K: Hash + Eq + Clone,
        A: Algorithm,
        C: Clock,
    {
        let line = self.line_of(key);
        self.wait(line, || table.check_n(key, cost), |d| self.timer.sleep(d)).await
    }

    /// Blocks the thread until `cost` units of `limiter` are admitted (the blocking
    /// [`until_n_ready`](Self::until_n_ready)): sleeps with [`Timer::sleep_blocking`].
    pub fn wait_n<A: Algorithm, C: Clock>(
        &self,
        limiter: &RateLimiter<A, C>,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        block_on(self.wait(DIRECT_LINE, || limiter.check_n(cost), |d| self.sleep_now(d)))
    }

    /// Blocks the thread until `cost` units of `key` are admitted.
    pub fn wait_key_n<K, A, C>(
        &self,
        table: &Keyed<K, A, C>,
        key: &K,
        cost: u64,
    ) -> Result<Decision, CheckError>
    where
        K: Hash + Eq + Clone,
        A: Algorithm,
        C: Clock,
    {
        let line = self.line_of(key);
        block_on(self.wait(line, || table.check_n(key, cost), |d| self.sleep_now(d)))
    }

    /// The line `key` waits in (only fair mode has lines).
    pub(super) fn line_of<K: Hash>(&self, key: &K) -> u64 {
        self.queue.as_ref().map_or(DIRECT_LINE, |(_, hasher)| hasher.hash_one(key))
    }

    pub(super) fn sleep_now(&self, duration: Duration) -> std::future::Ready<()> {
        self.timer.sleep_blocking(duration);
        std::future::ready(())
    }

    /// The loop: take a place in line (fair), wait to be first, then check until admitted.
    async fn wait<S: Future<Output = ()>, E>(
        &self,
        line: u64,
        check: impl FnMut() -> Result<Decision, E>,
        sleep: impl Fn(Duration) -> S,
    ) -> Result<Decision, E> {
        self.wait_paced(line, check, |wait| Ok(self.jittered(wait)), sleep, || Ok(None)).await
    }

    /// [`wait`](Self::wait), where `pace` turns each denial's wait into how long to sleep, or
    /// the error that ends the wait at once (a deadline the wait would pass), and `left` says
    /// how long the wait may still last: the error once a deadline has passed (judged before
    /// the first check, so a turn that comes past it checks nothing), `Some` to wait for the
    /// turn in line at most that long, `None` to wait for it without a bound.
    pub(super) async fn wait_paced<S: Future<Output = ()>, E>(
        &self,
        line: u64,
        mut check: impl FnMut() -> Result<Decision, E>,
        mut pace: impl FnMut(Duration) -> Result<Duration, E>,
        sleep: impl Fn(Duration) -> S,
        mut left: impl FnMut() -> Result<Option<Duration>, E>,
    ) -> Result<Decision, E> {
        let place = self.queue.as_ref().map(|(queue, _)| queue.join(line));
        if let Some(place) = &place {
            loop {
                match left()? {
                    None => place.first().await,
                    // At the deadline without the turn: any wait at all passes it, and `pace`
                    // says so (its error). A sleep of nothing would only come round again.
                    Some(left) if left.is_zero() => {
                        pace(Duration::from_nanos(1))?;
                    }
                    // The timer may run ahead of the limiter's clock: judged again on it.
                    Some(left) if !turn_within(place.first(), sleep(left)).await => continue,
                    Some(_) => {}
                }
                break;
            }
        }
        // Judged once, before the first check (a turn in line that came after the deadline
        // checks nothing). After a sleep the check runs even when the timer woke late: `pace`
        // ended the sleep by the deadline only when the admission was due by then, and a late
        // wake-up must not turn that admission into a failure. A denial after it is judged by
        // `pace`, which fails once the deadline has passed.
        left()?;
        loop {
            // Leaving (an error or an admission) drops the place: the next in line goes.
            let decision = check()?;
            if decision.is_allowed() {
                return Ok(decision);
            }
            sleep(pace(decision.retry_after())?).await;
        }
    }

    pub(super) fn jittered(&self, wait: Duration) -> Duration {
        if self.jitter.is_zero() {
            return wait;
        }
        let max = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        wait.saturating_add(Duration::from_nanos(fastrand::u64(0..=max)))
    }
}

/// Waits for `turn` or for `sleep` to end, whichever comes first: true when the turn came.
/// Dropping the place in line afterwards (an error) lets the next waiter go.
async fn turn_within(turn: impl Future<Output = ()>, sleep: impl Future<Output = ()>) -> bool {
    let (mut turn, mut sleep) = (pin!(turn), pin!(sleep));
    std::future::poll_fn(|cx| {
        if turn.as_mut().poll(cx).is_ready() {
            Poll::Ready(true)
        } else if sleep.as_mut().poll(cx).is_ready() {
            Poll::Ready(false)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// The line of a direct limiter (it has one).
pub(super) const DIRECT_LINE: u64 = 0;

impl<A: Algorithm, C: Clock> RateLimiter<A, C> {
    /// Completes once one unit is admitted (governor's `until_ready`), on the default
    /// [`ThreadTimer`]. [`Pacer`] adds fair order, jitter and other timers.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::{Gcra, PreciseClock, Quota, RateLimiter};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // On the precise clock, so that the wall clock below times the limiter's own spacing
    /// // (the default coarse clock may trail it by a millisecond or more).
    /// let quota = Quota::per_second(100)?.with_burst(1)?;
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(quota, PreciseClock::new())?;
    /// let start = std::time::Instant::now();
    /// assert!(limiter.until_ready().await.is_allowed()); // at once
    /// assert!(limiter.until_ready().await.is_allowed()); // 10 ms later
    /// assert!(start.elapsed() >= Duration::from_millis(9));
    /// # Ok(()) }
    /// ```
    pub fn until_ready(&self) -> impl Future<Output = Decision> + '_ {
        // Admitted at once (the common case): nothing to set up. A denial writes nothing, so
        // the wait below checking again changes nothing.
        CheckFirst::new(
            // Always inlined: a caller's loop or task otherwise calls the first check out of line,
            // and its decision crosses the call through memory.
            #[inline(always)]
            move || Some(self.check()).filter(Decision::is_allowed),
            move || async move {
                let pacer = Pacer::new();
                let check = || Ok::<_, std::convert::Infallible>(self.check());
                match pacer.wait(DIRECT_LINE, check, |d| pacer.timer.sleep(d)).await {
                    Ok(decision) => decision,
                    Err(never) => match never {},
                }
            },
        )
    }

    /// Completes once `cost` units are admitted; an error at once when `cost` exceeds the
    /// capacity. Dropping the future consumes nothing.
    pub fn until_n_ready(&self, cost: u64) -> impl Future<Output = Result<Decision, CheckError>> + '_ {
        // As `until_ready`: the admission at once (or the error) sets nothing up.
        CheckFirst::new(
            // Inlined as in `until_ready`.
            #[inline(always)]
            move || unless_denied(self.check_n(cost)),
            move || async move { Pacer::new().until_n_ready(self, cost).await },
        )
    }

    /// Blocks the thread until `cost` units are admitted (std only: [`std::thread::sleep`]).
    ///
    /// ```
    /// use kova::{Gcra, PreciseClock, Quota, RateLimiter};
    /// // On the precise clock, as in `until_ready`'s example.
    /// let quota = Quota::per_second(1_000)?.with_burst(1)?;
    /// let limiter = RateLimiter::<Gcra, _>::with_clock(quota, PreciseClock::new())?;
    /// let start = std::time::Instant::now();
    /// limiter.wait_n(1)?; // at once
    /// limiter.wait_n(1)?; // 1 ms later
    /// assert!(start.elapsed() >= std::time::Duration::from_micros(900));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_n(&self, cost: u64) -> Result<Decision, CheckError> {
        Pacer::new().wait_n(self, cost)
    }
}

impl<K, A, C> Keyed<K, A, C>
where
    K: Hash + Eq + Clone,
    A: Algorithm,
    C: Clock,
{
    /// Completes once one unit of `key` is admitted (the keyed
    /// [`RateLimiter::until_ready`]), on the default [`ThreadTimer`]. Dropping it consumes
    /// nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kova::{Gcra, Keyed, PreciseClock, Quota};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // On the precise clock, as in `RateLimiter::until_ready`'s example.
    /// let quota = Quota::per_second(100)?.with_burst(1)?;
    /// let table = Keyed::<&str, Gcra, _>::with_clock(quota, PreciseClock::new())?;
    /// let start = std::time::Instant::now();
    /// assert!(table.until_ready(&"a").await.is_allowed()); // at once
    /// assert!(table.until_ready(&"b").await.is_allowed()); // another key: at once
    /// assert!(table.until_ready(&"a").await.is_allowed()); // 10 ms after the first
    /// assert!(start.elapsed() >= Duration::from_millis(9));
    /// # Ok(()) }
    /// ```
    pub fn until_ready<'a>(&'a self, key: &'a K) -> impl Future<Output = Decision> + 'a {
        CheckFirst::new(
            // Inlined as in `RateLimiter::until_ready`.
            #[inline(always)]
            move || Some(self.check(key)).filter(Decision::is_allowed),
            move || async move {
                let pacer = Pacer::new();
                let check = || Ok::<_, std::convert::Infallible>(self.check(key));
                match pacer.wait(pacer.line_of(key), check, |d| pacer.timer.sleep(d)).await {
                    Ok(decision) => decision,
                    Err(never) => match never {},
                }
            },
        )
    }

    /// Completes once `cost` units of `key` are admitted, on the default [`ThreadTimer`]; an
    /// error at once when `cost` exceeds the key's capacity. Dropping it consumes nothing.
    pub fn until_n_ready<'a>(
        &'a self,
        key: &'a K,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, CheckError>> + 'a {
        // As `RateLimiter::until_ready`: the admission at once sets nothing up.
        CheckFirst::new(
            // Inlined as in `until_ready`.
            #[inline(always)]
            move || unless_denied(self.check_n(key, cost)),
            move || async move { Pacer::new().until_key_n_ready(self, key, cost).await },
        )
    }

    /// Blocks the thread until `cost` units of `key` are admitted.
    ///
    /// ```
    /// use kova::{Gcra, Keyed, Quota};
    /// let table = Keyed::<u64, Gcra>::new(Quota::per_second(1_000)?)?;
    /// assert!(table.wait_n(&7, 3)?.is_allowed());
    /// assert!(table.wait_n(&7, 1_001).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_n(&self, key: &K, cost: u64) -> Result<Decision, CheckError> {
        Pacer::new().wait_key_n(self, key, cost)
    }
}
