//! [`RedisLimiter`]: check, check_n, peek and reset against Redis, with a timeout and a failure
//! policy.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kova::{CheckError, Clock, Decision, Fallback};

use crate::batch::BatchStats;
use crate::call::Call;
use crate::counter::PerThreadCounter;
use crate::degrade::Degraded;
use crate::error::{Error, StoreError};
use crate::key::KeyBuilder;
use crate::limit::{RedisLimit, MAX_TIME_MICROS, MICROS};
use crate::local::{Before, Local};
use crate::policy::StoreFailurePolicy;
use crate::store::Store;

/// The deadline of a call whose timeout overflows the clock's instants: about 30 years, as
/// tokio's own `sleep` does for such durations.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Counters of what a limiter did (all since it was built).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Calls that went to Redis (scripts and resets), answered or not.
    pub round_trips: u64,
    /// Decisions answered locally (leases, cached denials).
    pub local_decisions: u64,
    /// Decisions made by the failure policy.
    pub fallback_decisions: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    round_trips: AtomicU64,
    /// Per thread: local answers come from every core at once, and must not meet on one line.
    local_decisions: PerThreadCounter,
    fallback_decisions: AtomicU64,
}

/// A rate limiter whose state lives in Redis: every server using the same Redis (or Redis
/// Cluster) and prefix shares each key's limit.
///
/// Each decision is one round trip: `EVALSHA` of the limit's algorithm script, which reads the
/// key, decides exactly as kova's in-memory algorithm would (same decision, in microseconds) and
/// writes the new state only when it admits something. Cheap to clone (an `Arc`).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use kova::Quota;
/// use kova_redis::{RedisLimit, RedisLimiter};
///
/// let limiter = RedisLimiter::connect("redis://127.0.0.1:6379").await?;
/// let per_user = RedisLimit::gcra(Quota::per_second(10)?.with_burst(50)?)?;
/// let decision = limiter.check("user:42", &per_user).await?;
/// if !decision.is_allowed() {
///     println!("429, Retry-After: {}s", decision.retry_after().as_secs_f64().ceil());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisLimiter {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) keys: KeyBuilder,
    pub(crate) timeout: Duration,
    pub(crate) policy: StoreFailurePolicy,
    pub(crate) unavailable_retry_after: Duration,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) margin_us: u64,
    pub(crate) local: Option<Arc<Local>>,
    pub(crate) degraded: Option<Degraded>,
    pub(crate) counters: Counters,
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("RedisLimiter")
            .field("store", &inner.store)
            .field("prefix", &inner.keys.prefix())
            .field("timeout", &inner.timeout)
            .field("policy", &inner.policy)
            .field("client_clock", &inner.clock.is_some())
            .field("local", &inner.local)
            .finish()
    }
}

/// The client clock's time in microseconds, or the error of a time the scripts cannot hold.
fn client_micros(clock: &dyn Clock) -> Result<u64, Error> {
    let micros = clock.now_nanos() / MICROS;
    if micros >= MAX_TIME_MICROS {
        return Err(Error::TimeOutOfRange { micros, max: MAX_TIME_MICROS - 1 });
    }
    Ok(micros)
}

/// A script's answer.
struct Reply {
    decision: Decision,
    granted: u64,
}

impl RedisLimiter {
    pub(crate) fn from_inner(inner: Inner) -> Self {
        RedisLimiter { inner: Arc::new(inner) }
    }

    /// Checks one unit for `key` against `limit`.
    // `check_n`'s future itself, not one wrapped around it: a local answer polls one state
    // machine, not two.
    pub fn check<'a, K: AsRef<[u8]> + 'a>(
        &'a self,
        key: K,
        limit: &'a RedisLimit,
    ) -> impl Future<Output = Result<Decision, Error>> + 'a {
        self.check_n(key, limit, 1)
    }

    /// Checks `cost` units for `key` against `limit`. A cost above
    /// [`limit.capacity()`](RedisLimit::capacity) is [`Error::Cost`]; a cost of 0 is a peek.
    ///
    /// `key`'s state lives in one Redis key per algorithm ([`redis_key`](Self::redis_key)), not
    /// per quota, so that a key whose quota changes (a plan upgrade) keeps its state. The new
    /// quota reads the old one's state as kova's in-memory algorithm reads a word stored under
    /// another quota: a count above its limit as a full window, another period's window index
    /// as a fresh window (a clock running backwards is a few windows at most). Two limits of one
    /// algorithm enforced together on the same thing are two states: give each its own `key`
    /// (kova-tower's `Limit::redis` puts the limit's name in it). Checked alternately under two
    /// quotas, one key is not two limits: each reads the other's state as its own.
    pub async fn check_n(
        &self,
        key: impl AsRef<[u8]>,
        limit: &RedisLimit,
        cost: u64,
    ) -> Result<Decision, Error> {
        let key = key.as_ref();
        let capacity = limit.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        // No call when there is no client clock: a local answer reads no time for Redis.
        let now = match &self.inner.clock {
            None => None,
            Some(clock) => Some(client_micros(&**clock)?),
        };
        if let (Some(local), true) = (&self.inner.local, cost > 0) {
            // The local answer first, on this poll: no Redis key built, nothing allocated.
            if let Some(decision) = local.answer(key, limit, cost) {
                self.inner.counters.local_decisions.add(1);
                return Ok(decision);
            }
        }
        // Boxed: a check answered locally carries no room for the round trip's state.
        Box::pin(self.check_remote(key, limit, cost, now)).await
    }

    /// A check the local layer did not answer at once: a refill of a lease (or a wait for
    /// one), then Redis.
    async fn check_remote(
        &self,
        user_key: &[u8],
        limit: &RedisLimit,
        cost: u64,
        now: Option<u64>,
    ) -> Result<Decision, Error> {
        // Read from the clock only when the check waits or goes to Redis.
        let mut deadline = None;
        let key = self.inner.keys.key(user_key, limit.kind());
        let mut extra = 0;
        let mut _guard = None;
        if let (Some(local), true) = (&self.inner.local, cost > 0) {
            let mut waited = false;
            loop {
                match local.before(user_key, limit, cost) {
                    Before::Local(decision) => {
                        self.inner.counters.local_decisions.add(1);
                        return Ok(decision);
                    }
                    Before::Refill { extra: wanted, guard } => {
                        extra = wanted;
                        _guard = Some(guard);
                    }
                    Before::Wait(notified) if !waited => {
                        waited = true;
                        let at = *deadline.get_or_insert_with(|| self.deadline());
                        if tokio::time::timeout_at(at, notified).await.is_ok() {
                            continue;
                        }
                        return self.unavailable(&key, limit, cost, StoreError::Timeout(self.inner.timeout));
                    }
                    Before::Wait(_) | Before::Plain => {}
                }
                break;
            }
        }
        let deadline = deadline.unwrap_or_else(|| self.deadline());
        if let Err(e) = self.pay_back(&key, limit, now, deadline).await {
            return self.unavailable(&key, limit, cost, e);
        }
        // The local time the script decides at or after: its own `now` with a client clock (on
        // the same clock as the local layer's), else a reading taken before the call, which
        // Redis's TIME then follows. A lease or a cached denial timed from it ends no later
        // than Redis's own boundary, however long the round trip.
        let decided_from = match (&self.inner.local, now) {
            (Some(_), Some(micros)) => micros.saturating_mul(MICROS),
            (Some(local), None) => local.now_precise(),
            (None, _) => 0,
        };
        match self.eval(&key, limit, cost, extra, now, deadline).await {
            Ok(reply) => {
                if let Some(local) = &self.inner.local {
                    let refill = _guard.as_ref();
                    local.after(user_key, limit, cost, &reply.decision, reply.granted, refill, decided_from);
                }
                Ok(reply.decision)
            }
            Err(e) => self.unavailable(&key, limit, cost, e),
        }
    }

    /// How `key` stands against `limit` now, changing nothing (a check of cost 0). Always
    /// asks Redis (leased units held locally are not counted in `remaining`).
    pub async fn peek(&self, key: impl AsRef<[u8]>, limit: &RedisLimit) -> Result<Decision, Error> {
        self.check_n(key, limit, 0).await
    }

    /// Puts `key` back to fresh for `limit`'s algorithm (deletes its Redis key) and drops what
    /// this limiter holds locally for it. A store failure is returned as [`Error::Store`]
    /// whatever the policy: a reset cannot be faked.
    pub async fn reset(&self, key: impl AsRef<[u8]>, limit: &RedisLimit) -> Result<(), Error> {
        let redis_key = self.inner.keys.key(key.as_ref(), limit.kind());
        if let Some(degraded) = &self.inner.degraded {
            // What this server admitted while Redis was down is owed to the state the reset
            // ends: paying it into the fresh key would deny what the reset frees.
            degraded.forget(&redis_key, limit);
        }
        if let Some(local) = &self.inner.local {
            local.forget(key.as_ref(), limit.kind());
        }
        let deleted = self.delete_key(&redis_key).await;
        if let Some(local) = &self.inner.local {
            // Again once the key is deleted: an entry a check made meanwhile may hold a lease
            // Redis counted before the delete (a refill that began before the reset stores
            // its lease only in the entry it began on, which the first forget removed).
            local.forget(key.as_ref(), limit.kind());
        }
        deleted
    }

    /// The Redis key holding `key`'s state for `limit` (for inspection and tests).
    pub fn redis_key(&self, key: impl AsRef<[u8]>, limit: &RedisLimit) -> Vec<u8> {
        self.inner.keys.key(key.as_ref(), limit.kind())
    }

    /// What this limiter has done so far.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        // Relaxed: independent counters, read for reporting.
        Stats {
            round_trips: c.round_trips.load(Ordering::Relaxed),
            local_decisions: c.local_decisions.sum(),
            fallback_decisions: c.fallback_decisions.load(Ordering::Relaxed),
        }
    }

    /// Gives back `cost` units that a check of `key` decided on this server's local share took
    /// (a decision marked [`Fallback::StoreUnavailableLocal`], under
    /// [`StoreFailurePolicy::Degrade`]): for a request another limit then denied, so that the denial
    /// takes nothing from the share either. Returns whether the key held local state to give
    /// back to (false under the other policies, for the sliding window log, and once the key's
    /// local state was charged to Redis and forgotten: those units are Redis's now, and
    /// [`refund`](Self::refund) gives them back there).
    ///
    /// Redis is not asked: the units were never counted there.
    pub fn refund_local(&self, key: impl AsRef<[u8]>, limit: &RedisLimit, cost: u64) -> bool {
        let Some(degraded) = &self.inner.degraded else { return false };
        if cost == 0 {
            return false;
        }
        degraded.refund(&self.redis_key(key, limit), limit, cost)
    }

    /// Keys holding local state from [`StoreFailurePolicy::Degrade`] decisions not yet charged back
    /// to Redis (0 under the other policies).
    pub fn degraded_keys(&self) -> usize {
        self.inner.degraded.as_ref().map_or(0, Degraded::len)
    }

    /// What batching did so far: checks sent alone, batch script calls, their sizes and the
    /// time checks waited for them (single node; all zero on a cluster).
    pub fn batch_stats(&self) -> BatchStats {
        self.inner.store.batch_stats()
    }

    /// Keys the local layer currently tracks (0 when local acceleration is off).
    pub fn local_keys(&self) -> usize {
        self.inner.local.as_ref().map_or(0, |l| l.len())
    }

    fn client_micros(&self) -> Result<Option<u64>, Error> {
        self.inner.clock.as_deref().map(client_micros).transpose()
    }

    async fn eval(
        &self,
        key: &[u8],
        limit: &RedisLimit,
        cost: u64,
        extra: u64,
        now: Option<u64>,
        deadline: tokio::time::Instant,
    ) -> Result<Reply, StoreError> {
        let inner = &*self.inner;
        let [p1, p2] = limit.script_args();
        // A lease never exceeds the capacity: a larger batch would only pass the scripts a
        // number they cannot hold exactly.
        let args = [cost, extra.min(limit.capacity()), inner.margin_us, p1, p2];
        inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let call = inner.store.eval(Call { kind: limit.kind(), key: key.to_vec(), now, args });
        let raw = match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => result.map_err(StoreError::Redis)?,
            Err(_) => {
                inner.store.timed_out(inner.timeout);
                return Err(StoreError::Timeout(inner.timeout));
            }
        };
        let [allowed, remaining, retry, reset, granted] =
            <[i64; 5]>::try_from(raw.as_slice()).map_err(|_| StoreError::Reply(format!("{raw:?}")))?;
        let as_u64 = |v: i64| u64::try_from(v).map_err(|_| StoreError::Reply(format!("{raw:?}")));
        let (remaining, granted) = (as_u64(remaining)?, as_u64(granted)?);
        let nanos = |micros: i64| {
            as_u64(micros)?.checked_mul(MICROS).ok_or_else(|| StoreError::Reply(format!("{raw:?}")))
        };
        let (retry_ns, reset_ns) = (nanos(retry)?, nanos(reset)?);
        let capacity = limit.capacity();
        let decision = match allowed {
            // Leased units are this server's to spend: they count as remaining.
            1 => Decision::allowed(capacity, remaining + granted, reset_ns),
            0 => Decision::denied(capacity, remaining, retry_ns, reset_ns),
            _ => return Err(StoreError::Reply(format!("{raw:?}"))),
        };
        Ok(Reply { decision, granted })
    }

    fn unavailable(
        &self,
        key: &[u8],
        limit: &RedisLimit,
        cost: u64,
        error: StoreError,
    ) -> Result<Decision, Error> {
        let capacity = limit.capacity();
        let retry = u64::try_from(self.inner.unavailable_retry_after.as_nanos()).unwrap_or(u64::MAX);
        let decision = match self.inner.policy {
            StoreFailurePolicy::FailOpen => {
                Decision::allowed(capacity, 0, 0).with_fallback(Fallback::StoreUnavailableAllowed)
            }
            StoreFailurePolicy::FailClosed => {
                Decision::denied(capacity, 0, retry, retry).with_fallback(Fallback::StoreUnavailableDenied)
            }
            StoreFailurePolicy::ReturnError => return Err(Error::Store(error)),
            StoreFailurePolicy::Degrade { .. } => match &self.inner.degraded {
                Some(degraded) => degraded.decide(key, limit, cost, retry),
                None => return Err(Error::Store(error)),
            },
        };
        self.inner.counters.fallback_decisions.fetch_add(1, Ordering::Relaxed);
        Ok(decision)
    }
}

/// What the operations defined in their own files (settle.rs, reserve.rs, composite.rs) share
/// with checks: key names, time, one script call under the timeout, and the failure policy.
impl RedisLimiter {
    pub(crate) fn keys(&self) -> &KeyBuilder {
        &self.inner.keys
    }

    /// The client clock's time in microseconds, or `None` for Redis `TIME`.
    pub(crate) fn now_micros(&self) -> Result<Option<u64>, Error> {
        self.client_micros()
    }

    pub(crate) fn margin_micros(&self) -> u64 {
        self.inner.margin_us
    }

    pub(crate) fn policy(&self) -> StoreFailurePolicy {
        self.inner.policy
    }

    pub(crate) fn unavailable_retry_nanos(&self) -> u64 {
        u64::try_from(self.inner.unavailable_retry_after.as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn degraded(&self) -> Option<&Degraded> {
        self.inner.degraded.as_ref()
    }

    /// Counts a decision the failure policy made.
    pub(crate) fn note_fallback(&self) {
        self.inner.counters.fallback_decisions.fetch_add(1, Ordering::Relaxed);
    }

    /// The deadline of a call starting now: a timeout past the instant's range (up to
    /// `Duration::MAX`, which the builder takes) waits as long as [`FAR_FUTURE`].
    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        now.checked_add(self.inner.timeout).unwrap_or(now + FAR_FUTURE)
    }

    /// Runs one script call (never batched) by `deadline`.
    pub(crate) async fn invoke(
        &self,
        invocation: redis::ScriptInvocation<'_>,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<i64>, StoreError> {
        let inner = &*self.inner;
        inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout_at(deadline, inner.store.invoke(invocation)).await {
            Ok(result) => result.map_err(StoreError::Redis),
            Err(_) => {
                inner.store.timed_out(inner.timeout);
                Err(StoreError::Timeout(inner.timeout))
            }
        }
    }

    /// Deletes one Redis key, as [`reset`](Self::reset) does (composites' keys hold no local
    /// state).
    pub(crate) async fn delete_key(&self, key: &[u8]) -> Result<(), Error> {
        self.inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.inner.timeout, self.inner.store.del(key)).await {
            Ok(result) => Ok(result?),
            Err(_) => {
                self.inner.store.timed_out(self.inner.timeout);
                Err(StoreError::Timeout(self.inner.timeout).into())
            }
        }
    }

    /// The way back from an outage under [`StoreFailurePolicy::Degrade`], as a check takes it: when
    /// `key` holds local state for `limit`, Redis first counts what this server admitted
    /// locally (admitted as far as the limit has room, as a lease is), then the local state
    /// forgets those units, and only those: a local decision between the two (a call that
    /// timed out meanwhile) stays owed.
    pub(crate) async fn pay_back(
        &self,
        key: &[u8],
        limit: &RedisLimit,
        now: Option<u64>,
        deadline: tokio::time::Instant,
    ) -> Result<(), StoreError> {
        let Some(degraded) = &self.inner.degraded else { return Ok(()) };
        let Some(owed) = degraded.owed(key, limit) else { return Ok(()) };
        if owed.units() > 0 {
            self.eval(key, limit, 1, owed.units() - 1, now, deadline).await?;
        }
        degraded.forget_paid(key, limit, owed);
        Ok(())
    }
}
