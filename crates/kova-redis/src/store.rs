//! The connection to Redis: one node (a multiplexed connection that reconnects by itself) or a
//! cluster (redis-rs's async cluster connection, which follows MOVED/ASK and reconnects).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, FromRedisValue, RedisError, RedisResult, ScriptInvocation};

use crate::batch::{self, BatchStats, Batcher, Call};

/// Where the scripts run.
pub(crate) enum Store {
    Single(Arc<SingleNode>),
    Cluster(ClusterConnection),
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Store::Single(node) => {
                f.debug_tuple("Single").field(&node.client.get_connection_info().addr).finish()
            }
            Store::Cluster(_) => f.write_str("Cluster"),
        }
    }
}

impl Store {
    /// Runs `call`'s script: one `EVALSHA` round trip, plus `SCRIPT LOAD` and a second
    /// `EVALSHA` when Redis answers `NOSCRIPT` (after a restart, failover or `SCRIPT FLUSH`);
    /// redis-rs's `Script` does that. On one node, checks arriving while another call is in
    /// flight go together as one batch script call (`batch.rs`).
    pub(crate) async fn eval(&self, call: Call) -> RedisResult<Vec<i64>> {
        match self {
            Store::Single(node) => batch::eval(node, call).await,
            Store::Cluster(conn) => call.invocation().invoke_async(&mut conn.clone()).await,
        }
    }

    /// Runs a script of its own (settling, reservations, composites): one call, never batched.
    /// Every key of one invocation carries the same hash tag, so a cluster runs it on one node.
    pub(crate) async fn invoke(&self, invocation: ScriptInvocation<'_>) -> RedisResult<Vec<i64>> {
        match self {
            Store::Single(node) => node.run(invocation).await,
            Store::Cluster(conn) => invocation.invoke_async(&mut conn.clone()).await,
        }
    }

    /// What batching did (all zero on a cluster).
    pub(crate) fn batch_stats(&self) -> BatchStats {
        match self {
            Store::Single(node) => node.batcher.stats(),
            Store::Cluster(_) => BatchStats::default(),
        }
    }

    /// Deletes `key`.
    pub(crate) async fn del(&self, key: &[u8]) -> RedisResult<()> {
        let cmd = redis::cmd("DEL").arg(key).clone();
        match self {
            Store::Single(node) => {
                let (id, mut conn) = node.connection().await?;
                let result = cmd.query_async::<()>(&mut conn).await;
                node.after(id, &result);
                result
            }
            Store::Cluster(conn) => cmd.query_async(&mut conn.clone()).await,
        }
    }

    /// A call timed out: if the connection has answered nothing for that long, it is presumed
    /// dead (a peer that vanished without a reset) and replaced on the next call.
    pub(crate) fn timed_out(&self, timeout: Duration) {
        if let Store::Single(node) = self {
            node.timed_out(timeout);
        }
    }
}

/// One Redis node behind one multiplexed connection (requests from all tasks pipelined on it),
/// replaced when it breaks.
///
/// While Redis is unreachable, at most one connection attempt runs at a time and at most one
/// starts per `reconnect_interval`; calls in between fail at once (and get the failure policy),
/// so a dead server costs neither a connection storm nor waiting. After Redis comes back, the
/// first call after the interval reconnects: service resumes within `reconnect_interval` plus
/// one connect.
pub(crate) struct SingleNode {
    client: redis::Client,
    config: AsyncConnectionConfig,
    reconnect_interval: Duration,
    state: Mutex<NodeState>,
    connecting: tokio::sync::Mutex<()>,
    /// When the node last answered, in milliseconds since `epoch`.
    last_answer_ms: AtomicU64,
    epoch: Instant,
    pub(crate) batcher: Batcher,
}

struct NodeState {
    current: Option<(u64, MultiplexedConnection)>,
    next_id: u64,
    last_attempt: Option<Instant>,
}

impl SingleNode {
    pub(crate) fn new(
        client: redis::Client,
        connect_timeout: Duration,
        reconnect_interval: Duration,
        max_in_flight: usize,
    ) -> Self {
        SingleNode {
            client,
            config: AsyncConnectionConfig::new().set_connection_timeout(connect_timeout),
            reconnect_interval,
            state: Mutex::new(NodeState { current: None, next_id: 0, last_attempt: None }),
            connecting: tokio::sync::Mutex::new(()),
            last_answer_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            batcher: Batcher::new(max_in_flight),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NodeState> {
        // The state is a few plain fields, each write complete: a panic elsewhere cannot leave
        // it half-updated, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn current(&self) -> Option<(u64, MultiplexedConnection)> {
        self.lock().current.clone()
    }

    /// The live connection, or a new one.
    pub(crate) async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(conn) = self.current() {
            return Ok(conn);
        }
        {
            let mut state = self.lock();
            if let Some(last) = state.last_attempt {
                let since = last.elapsed();
                if since < self.reconnect_interval {
                    let wait = self.reconnect_interval - since;
                    return Err(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        format!("not connected to redis; next attempt in {wait:?}"),
                    )));
                }
            }
            state.last_attempt = Some(Instant::now());
        }
        let conn = self.client.get_multiplexed_async_connection_with_config(&self.config).await?;
        self.answered();
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.current = Some((id, conn.clone()));
        state.last_attempt = None;
        Ok((id, conn))
    }

    /// Runs a script on the connection (a new one if needed), noting the outcome.
    pub(crate) async fn run<T: FromRedisValue>(&self, invocation: ScriptInvocation<'_>) -> RedisResult<T> {
        let (id, mut conn) = self.connection().await?;
        let result = invocation.invoke_async(&mut conn).await;
        self.after(id, &result);
        result
    }

    /// Runs a command on the connection (a new one if needed), noting the outcome.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> RedisResult<T> {
        let (id, mut conn) = self.connection().await?;
        let result = cmd.query_async(&mut conn).await;
        self.after(id, &result);
        result
    }

    fn answered(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        // Relaxed: a hint for `timed_out`, ordered with nothing else.
        self.last_answer_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Notes the outcome of a command on connection `id`; drops the connection if it is broken.
    fn after<T>(&self, id: u64, result: &RedisResult<T>) {
        match result {
            Ok(_) => self.answered(),
            Err(e) if e.is_unrecoverable_error() || e.is_connection_dropped() || e.is_io_error() => {
                self.drop_connection(Some(id))
            }
            // A script or server error (for example OOM) came back over a working connection.
            Err(_) => self.answered(),
        }
    }

    fn drop_connection(&self, id: Option<u64>) {
        let mut state = self.lock();
        if id.is_none() || state.current.as_ref().map(|(current, _)| *current) == id {
            state.current = None;
        }
    }

    fn timed_out(&self, timeout: Duration) {
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let silent_ms = now_ms.saturating_sub(self.last_answer_ms.load(Ordering::Relaxed));
        if silent_ms >= timeout.as_millis() as u64 {
            self.drop_connection(None);
        }
    }
}
