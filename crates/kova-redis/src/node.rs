//! [`SingleNode`]: one Redis node behind one multiplexed connection, reconnected by itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue, RedisError, RedisResult, ScriptInvocation};

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
    ) -> Self {
        SingleNode {
            client,
            config: AsyncConnectionConfig::new().set_connection_timeout(connect_timeout),
            reconnect_interval,
            state: Mutex::new(NodeState { current: None, next_id: 0, last_attempt: None }),
            connecting: tokio::sync::Mutex::new(()),
            last_answer_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The node's address, for debug output.
    pub(crate) fn address(&self) -> &redis::ConnectionAddr {
        &self.client.get_connection_info().addr
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

    pub(crate) fn timed_out(&self, timeout: Duration) {
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let silent_ms = now_ms.saturating_sub(self.last_answer_ms.load(Ordering::Relaxed));
        if silent_ms >= timeout.as_millis() as u64 {
            self.drop_connection(None);
        }
    }
}
