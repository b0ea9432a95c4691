//! [`RedisLimiter`]: check, check_n, peek and reset against Redis, with a timeout and a failure
//! policy.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kova::{CheckError, Clock, Decision, Fallback};
use redis::cluster::ClusterClient;

use crate::batch::{BatchStats, Call};
use crate::degrade::{Degraded, LocalClock};
use crate::error::{Error, StoreError};
use crate::key::KeyBuilder;
use crate::limit::{Limit, MAX_TIME_MICROS, MICROS};
use crate::local::{Before, Leasing, Local};
use crate::policy::FailurePolicy;
use crate::store::{SingleNode, Store};

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
struct Counters {
    round_trips: AtomicU64,
    local_decisions: AtomicU64,
    fallback_decisions: AtomicU64,
}

/// The default of [`Builder::max_in_flight`].
const DEFAULT_MAX_IN_FLIGHT: usize = 2;

/// Configures and connects a [`RedisLimiter`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use kova_redis::{FailurePolicy, RedisLimiter};
/// let limiter = RedisLimiter::builder()
///     .prefix("myapp:rl")
///     .timeout(Duration::from_millis(20))
///     .failure_policy(FailurePolicy::FailClosed)
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Builder {
    prefix: String,
    timeout: Duration,
    policy: FailurePolicy,
    unavailable_retry_after: Duration,
    clock: Option<Arc<dyn Clock>>,
    ttl_margin: Option<Duration>,
    reconnect_interval: Duration,
    cache_denials: bool,
    leasing: Option<Leasing>,
    local_max_keys: usize,
    max_in_flight: usize,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("unavailable_retry_after", &self.unavailable_retry_after)
            .field("client_clock", &self.clock.is_some())
            .field("ttl_margin", &self.ttl_margin)
            .field("reconnect_interval", &self.reconnect_interval)
            .field("cache_denials", &self.cache_denials)
            .field("leasing", &self.leasing)
            .field("local_max_keys", &self.local_max_keys)
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            prefix: "kova".to_owned(),
            timeout: Duration::from_millis(50),
            policy: FailurePolicy::FailOpen,
            unavailable_retry_after: Duration::from_secs(1),
            clock: None,
            ttl_margin: None,
            reconnect_interval: Duration::from_millis(100),
            cache_denials: false,
            leasing: None,
            local_max_keys: 100_000,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl Builder {
    /// The defaults: prefix `"kova"`, timeout 50 ms, [`FailurePolicy::FailOpen`], Redis `TIME`,
    /// no local acceleration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keys are `prefix:{tag}:algorithm` (see [`KeyBuilder`]). No `{` or `}` allowed.
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// The most one call may take, reconnecting and reloading scripts included (default 50 ms).
    /// Past it the failure policy decides.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to do when Redis cannot answer in time (default [`FailurePolicy::FailOpen`]).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The `retry_after` of a fail-closed decision (default 1 s).
    pub fn unavailable_retry_after(mut self, retry_after: Duration) -> Self {
        self.unavailable_retry_after = retry_after;
        self
    }

    /// Read time from `clock` (its nanoseconds, truncated to whole microseconds) instead of
    /// Redis `TIME`. Every server sharing a limit must then read clocks with the same origin
    /// and rate (for example nanoseconds since the Unix epoch); tests use a
    /// [`ManualClock`](kova::ManualClock) to be deterministic. With a client clock, each key's
    /// TTL gets a margin (default 1 s, see [`ttl_margin`](Self::ttl_margin)), since Redis
    /// expires keys on its own clock.
    pub fn client_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Extra time added to every key's TTL (default: 0 with Redis `TIME`, where the TTL is
    /// exactly the reset time; 1 s with a client clock).
    pub fn ttl_margin(mut self, margin: Duration) -> Self {
        self.ttl_margin = Some(margin);
        self
    }

    /// While Redis is unreachable, start at most one connection attempt per interval (default
    /// 100 ms); service resumes within about this long after Redis is back. Single node only: the
    /// cluster client reconnects by its own schedule.
    pub fn reconnect_interval(mut self, interval: Duration) -> Self {
        self.reconnect_interval = interval;
        self
    }

    /// Remember denials locally: a key denied for cost `c` until `T` is answered locally (with
    /// [`Fallback::LocalCache`]) for costs of at least `c` until `T`, with no round trip.
    /// Off by default. A reset made through another limiter is not seen until `T`.
    pub fn cache_denials(mut self, on: bool) -> Self {
        self.cache_denials = on;
        self
    }

    /// Lease units for hot keys (see [`Leasing`] for the overshoot bound). Off by default.
    pub fn leasing(mut self, leasing: Leasing) -> Self {
        self.leasing = Some(leasing);
        self
    }

    /// The most script calls in flight at once on a single node's connection (default 2).
    /// Checks that arrive while that many are in flight wait, and go together as one run of a
    /// batch script (at most 128 checks) when a call returns; each is decided exactly as it
    /// would be alone, in the order they queued ([`RedisLimiter::batch_stats`] says how it went).
    /// More flights overlap round trips with Redis's work; fewer make larger batches. A cluster
    /// connection sends every check as its own call.
    pub fn max_in_flight(mut self, calls: usize) -> Self {
        self.max_in_flight = calls.max(1);
        self
    }

    /// The most keys the local layer (denial cache, leases) tracks (default 100,000).
    pub fn local_max_keys(mut self, max: usize) -> Self {
        self.local_max_keys = max;
        self
    }

    /// A limiter on the Redis node at `url` (`redis://host:port/db`), connecting on first use:
    /// it can be built while Redis is down (the failure policy answers meanwhile).
    pub fn open(self, url: &str) -> Result<RedisLimiter, Error> {
        let client = redis::Client::open(url)?;
        let node = SingleNode::new(client, self.timeout, self.reconnect_interval, self.max_in_flight);
        self.finish(Store::Single(Arc::new(node)))
    }

    /// A limiter on the Redis node at `url`, connected now (an error if Redis is unreachable).
    pub async fn connect(self, url: &str) -> Result<RedisLimiter, Error> {
        let client = redis::Client::open(url)?;
        let node = SingleNode::new(client, self.timeout, self.reconnect_interval, self.max_in_flight);
        let connect = node.connection();
        match tokio::time::timeout(self.timeout.max(Duration::from_secs(1)), connect).await {
            Ok(result) => {
                result?;
            }
            Err(_) => return Err(StoreError::Timeout(self.timeout.max(Duration::from_secs(1))).into()),
        }
        self.finish(Store::Single(Arc::new(node)))
    }

    /// A limiter on the Redis Cluster reachable through any of `nodes`, connected now. Every
    /// limit's key carries a hash tag, so each script runs on the one node owning its slot.
    pub async fn connect_cluster(self, nodes: &[&str]) -> Result<RedisLimiter, Error> {
        let client = ClusterClient::builder(nodes.iter().copied())
            .connection_timeout(self.timeout)
            .response_timeout(self.timeout)
            .build()?;
        let conn = client.get_async_connection().await?;
        self.finish(Store::Cluster(conn))
    }

    fn finish(self, store: Store) -> Result<RedisLimiter, Error> {
        let keys = KeyBuilder::new(&self.prefix)?;
        let margin = self.ttl_margin.unwrap_or(if self.clock.is_some() {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        });
        let margin_us =
            u64::try_from(margin.as_micros()).unwrap_or(u64::MAX).min(crate::limit::MAX_SPAN_MICROS);
        let local = (self.cache_denials || self.leasing.is_some())
            .then(|| Arc::new(Local::new(self.local_max_keys, self.cache_denials, self.leasing)));
        let degraded = match self.policy {
            FailurePolicy::Degrade { servers } => {
                let clock = match &self.clock {
                    Some(clock) => LocalClock::Client(Arc::clone(clock)),
                    None => LocalClock::Precise(kova::PreciseClock::new()),
                };
                Some(Degraded::new(servers, clock, self.local_max_keys))
            }
            _ => None,
        };
        Ok(RedisLimiter {
            inner: Arc::new(Inner {
                store,
                keys,
                timeout: self.timeout,
                policy: self.policy,
                unavailable_retry_after: self.unavailable_retry_after,
                clock: self.clock,
                margin_us,
                local,
                degraded,
                local_clock: kova::PreciseClock::new(),
                counters: Counters::default(),
            }),
        })
    }
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
/// use kova_redis::{Limit, RedisLimiter};
///
/// let limiter = RedisLimiter::connect("redis://127.0.0.1:6379").await?;
/// let per_user = Limit::gcra(Quota::per_second(10)?.with_burst(50)?)?;
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

struct Inner {
    store: Store,
    keys: KeyBuilder,
    timeout: Duration,
    policy: FailurePolicy,
    unavailable_retry_after: Duration,
    clock: Option<Arc<dyn Clock>>,
    margin_us: u64,
    local: Option<Arc<Local>>,
    degraded: Option<Degraded>,
    local_clock: kova::PreciseClock,
    counters: Counters,
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

/// A script's answer.
struct Reply {
    decision: Decision,
    granted: u64,
}

impl RedisLimiter {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A limiter with the defaults on the Redis node at `url`, connected now.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Builder::new().connect(url).await
    }

    /// Checks one unit for `key` against `limit`.
    pub async fn check(&self, key: impl AsRef<[u8]>, limit: &Limit) -> Result<Decision, Error> {
        self.check_n(key, limit, 1).await
    }

    /// Checks `cost` units for `key` against `limit`. A cost above
    /// [`limit.capacity()`](Limit::capacity) is [`Error::Cost`]; a cost of 0 is a peek.
    pub async fn check_n(&self, key: impl AsRef<[u8]>, limit: &Limit, cost: u64) -> Result<Decision, Error> {
        let capacity = limit.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        let now = self.client_micros()?;
        // Read from the clock only when the check waits or goes to Redis: a local answer needs
        // no deadline.
        let mut deadline = None;
        let key = self.inner.keys.key(key.as_ref(), limit.kind());
        let mut extra = 0;
        let mut _guard = None;
        if let (Some(local), true) = (&self.inner.local, cost > 0) {
            let mut waited = false;
            loop {
                match local.before(&key, limit, cost, self.local_nanos()) {
                    Before::Local(decision) => {
                        self.inner.counters.local_decisions.fetch_add(1, Ordering::Relaxed);
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
        if let Some(degraded) = &self.inner.degraded {
            if let Some(owed) = degraded.owed(&key, limit) {
                if owed > 0 {
                    // The way back from an outage: Redis first counts what this server admitted
                    // locally (admitted as far as the limit has room, as a lease is).
                    if let Err(e) = self.eval(&key, limit, 1, owed - 1, now, deadline).await {
                        return self.unavailable(&key, limit, cost, e);
                    }
                }
                degraded.forget(&key, limit);
            }
        }
        match self.eval(&key, limit, cost, extra, now, deadline).await {
            Ok(reply) => {
                if let Some(local) = &self.inner.local {
                    local.after(&key, limit, cost, &reply.decision, reply.granted, self.local_nanos());
                }
                Ok(reply.decision)
            }
            Err(e) => self.unavailable(&key, limit, cost, e),
        }
    }

    /// How `key` stands against `limit` now, changing nothing (a check of cost 0). Always
    /// asks Redis (leased units held locally are not counted in `remaining`).
    pub async fn peek(&self, key: impl AsRef<[u8]>, limit: &Limit) -> Result<Decision, Error> {
        self.check_n(key, limit, 0).await
    }

    /// Puts `key` back to fresh for `limit`'s algorithm (deletes its Redis key) and drops what
    /// this limiter holds locally for it. A store failure is returned as [`Error::Store`]
    /// whatever the policy: a reset cannot be faked.
    pub async fn reset(&self, key: impl AsRef<[u8]>, limit: &Limit) -> Result<(), Error> {
        let key = self.inner.keys.key(key.as_ref(), limit.kind());
        if let Some(local) = &self.inner.local {
            local.forget(&key);
        }
        self.inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.inner.timeout, self.inner.store.del(&key)).await {
            Ok(result) => Ok(result?),
            Err(_) => {
                self.inner.store.timed_out(self.inner.timeout);
                Err(StoreError::Timeout(self.inner.timeout).into())
            }
        }
    }

    /// The Redis key holding `key`'s state for `limit` (for inspection and tests).
    pub fn redis_key(&self, key: impl AsRef<[u8]>, limit: &Limit) -> Vec<u8> {
        self.inner.keys.key(key.as_ref(), limit.kind())
    }

    /// What this limiter has done so far.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        // Relaxed: independent counters, read for reporting.
        Stats {
            round_trips: c.round_trips.load(Ordering::Relaxed),
            local_decisions: c.local_decisions.load(Ordering::Relaxed),
            fallback_decisions: c.fallback_decisions.load(Ordering::Relaxed),
        }
    }

    /// Keys holding local state from [`FailurePolicy::Degrade`] decisions not yet charged back
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
        let Some(clock) = &self.inner.clock else { return Ok(None) };
        let micros = clock.now_nanos() / MICROS;
        if micros >= MAX_TIME_MICROS {
            return Err(Error::TimeOutOfRange { micros, max: MAX_TIME_MICROS - 1 });
        }
        Ok(Some(micros))
    }

    /// The local layer's time: the client clock when there is one, else a monotonic clock
    /// (quanta's: cheaper to read than the OS clock, which a local answer would otherwise
    /// spend much of its time on).
    fn local_nanos(&self) -> u64 {
        match &self.inner.clock {
            Some(clock) => clock.now_nanos(),
            None => self.inner.local_clock.now_nanos(),
        }
    }

    async fn eval(
        &self,
        key: &[u8],
        limit: &Limit,
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
        let (retry_ns, reset_ns) = (as_u64(retry)? * MICROS, as_u64(reset)? * MICROS);
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
        limit: &Limit,
        cost: u64,
        error: StoreError,
    ) -> Result<Decision, Error> {
        let capacity = limit.capacity();
        let retry = u64::try_from(self.inner.unavailable_retry_after.as_nanos()).unwrap_or(u64::MAX);
        let decision = match self.inner.policy {
            FailurePolicy::FailOpen => {
                Decision::allowed(capacity, 0, 0).with_fallback(Fallback::StoreUnavailableAllowed)
            }
            FailurePolicy::FailClosed => {
                Decision::denied(capacity, 0, retry, retry).with_fallback(Fallback::StoreUnavailableDenied)
            }
            FailurePolicy::ReturnError => return Err(Error::Store(error)),
            FailurePolicy::Degrade { .. } => match &self.inner.degraded {
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

    pub(crate) fn policy(&self) -> FailurePolicy {
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

    /// The deadline of a call starting now.
    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.inner.timeout
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

    /// Deletes one Redis key (and what the local layer holds for it), as [`reset`](Self::reset).
    pub(crate) async fn delete_key(&self, key: &[u8]) -> Result<(), Error> {
        if let Some(local) = &self.inner.local {
            local.forget(key);
        }
        self.inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.inner.timeout, self.inner.store.del(key)).await {
            Ok(result) => Ok(result?),
            Err(_) => {
                self.inner.store.timed_out(self.inner.timeout);
                Err(StoreError::Timeout(self.inner.timeout).into())
            }
        }
    }

    /// The way back from an outage under [`FailurePolicy::Degrade`], as a check takes it: when
    /// `key` holds local state for `limit`, Redis first counts what this server admitted
    /// locally, then the local state is forgotten.
    pub(crate) async fn pay_back(
        &self,
        key: &[u8],
        limit: &Limit,
        now: Option<u64>,
        deadline: tokio::time::Instant,
    ) -> Result<(), StoreError> {
        let Some(degraded) = &self.inner.degraded else { return Ok(()) };
        let Some(owed) = degraded.owed(key, limit) else { return Ok(()) };
        if owed > 0 {
            self.eval(key, limit, 1, owed - 1, now, deadline).await?;
        }
        degraded.forget(key, limit);
        Ok(())
    }
}
