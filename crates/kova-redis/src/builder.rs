//! [`Builder`]: the options of a [`RedisLimiter`], and how it connects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kova::Clock;
use redis::cluster::ClusterClient;

use crate::batch::BatchingNode;
use crate::clock::LocalClock;
use crate::degrade::Degraded;
use crate::error::{Error, StoreError};
use crate::key::KeyBuilder;
use crate::leasing::Leasing;
use crate::limiter::{Counters, Inner, RedisLimiter};
use crate::local::Local;
use crate::node::SingleNode;
use crate::policy::StoreFailurePolicy;
use crate::store::Store;

/// The most keys [`Builder::local_max_keys`] takes: as many as one kova table holds (each
/// algorithm's degraded table is one).
pub const MAX_LOCAL_KEYS: usize = kova::keyed::KeyedBuilder::<Vec<u8>>::MAX_KEYS;

/// How a limiter is made: from a [`Builder`], or with the defaults.
impl RedisLimiter {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A limiter with the defaults on the Redis node at `url`, connected now.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Builder::new().connect(url).await
    }
}

/// The default of [`Builder::max_in_flight`].
const DEFAULT_MAX_IN_FLIGHT: usize = 2;

/// Configures and connects a [`RedisLimiter`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use kova_redis::{RedisLimiter, StoreFailurePolicy};
/// let limiter = RedisLimiter::builder()
///     .prefix("myapp:rl")
///     .timeout(Duration::from_millis(20))
///     .store_failure(StoreFailurePolicy::FailClosed)
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Builder {
    prefix: String,
    timeout: Duration,
    policy: StoreFailurePolicy,
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
            policy: StoreFailurePolicy::FailOpen,
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
    /// The defaults: prefix `"kova"`, timeout 50 ms, [`StoreFailurePolicy::FailOpen`], Redis `TIME`,
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
    /// Past it the failure policy decides. A check still queued for a batch when its caller gives
    /// up is never sent; one already sent may still run when Redis answers late (Redis cannot be
    /// told to skip it), so its units can count in Redis although its caller had the policy's
    /// decision (marked with its [`Fallback`](kova::Fallback)). `Duration::ZERO`: a call not answered at its first
    /// poll is the failure policy's; a timeout of more than about 30 years (up to
    /// `Duration::MAX`) waits about 30 years.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to do when Redis cannot answer in time (default [`StoreFailurePolicy::FailOpen`]).
    pub fn store_failure(mut self, policy: StoreFailurePolicy) -> Self {
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
    /// [`Fallback::LocalCache`](kova::Fallback::LocalCache)) for costs of at least `c` until `T`, with no round trip.
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

    /// The most keys the local layer (denial cache, leases, the degraded tables of
    /// [`StoreFailurePolicy::Degrade`]) tracks, from 1 to [`MAX_LOCAL_KEYS`] (default 100,000);
    /// [`Error::LocalMaxKeys`] from `open` / `connect` otherwise. Besides these, each thread
    /// that checks one key again and again keeps that key's entry, and may keep it (a few hundred
    /// bytes) for a while after the key leaves the table.
    pub fn local_max_keys(mut self, max: usize) -> Self {
        self.local_max_keys = max;
        self
    }

    /// A limiter on the Redis node at `url` (`redis://host:port/db`), connecting on first use:
    /// it can be built while Redis is down (the failure policy answers meanwhile).
    pub fn open(self, url: &str) -> Result<RedisLimiter, Error> {
        let client = redis::Client::open(url)?;
        let node = BatchingNode::new(
            SingleNode::new(client, self.timeout, self.reconnect_interval),
            self.max_in_flight,
        );
        self.finish(Store::Single(Arc::new(node)))
    }

    /// A limiter on the Redis node at `url`, connected now (an error if Redis is unreachable).
    pub async fn connect(self, url: &str) -> Result<RedisLimiter, Error> {
        let client = redis::Client::open(url)?;
        let node = SingleNode::new(client, self.timeout, self.reconnect_interval);
        let connect = node.connection();
        match tokio::time::timeout(self.timeout.max(Duration::from_secs(1)), connect).await {
            Ok(result) => {
                result?;
            }
            Err(_) => return Err(StoreError::Timeout(self.timeout.max(Duration::from_secs(1))).into()),
        }
        let max_in_flight = self.max_in_flight;
        self.finish(Store::Single(Arc::new(BatchingNode::new(node, max_in_flight))))
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
        if self.local_max_keys == 0 || self.local_max_keys > MAX_LOCAL_KEYS {
            return Err(Error::LocalMaxKeys { max_keys: self.local_max_keys, max: MAX_LOCAL_KEYS });
        }
        let keys = KeyBuilder::new(&self.prefix)?;
        let margin = self.ttl_margin.unwrap_or(if self.clock.is_some() {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        });
        let margin_us =
            u64::try_from(margin.as_micros()).unwrap_or(u64::MAX).min(crate::limit::MAX_SPAN_MICROS);
        let local_clock = LocalClock::new(self.clock.as_ref());
        let local = (self.cache_denials || self.leasing.is_some()).then(|| {
            Arc::new(Local::new(self.local_max_keys, self.cache_denials, self.leasing, local_clock.clone()))
        });
        let degraded = match self.policy {
            StoreFailurePolicy::Degrade { servers } => {
                Some(Degraded::new(servers, local_clock, self.local_max_keys))
            }
            _ => None,
        };
        Ok(RedisLimiter::from_inner(Inner {
            store,
            keys,
            timeout: self.timeout,
            policy: self.policy,
            unavailable_retry_after: self.unavailable_retry_after,
            clock: self.clock,
            margin_us,
            local,
            degraded,
            counters: Counters::default(),
        }))
    }
}
