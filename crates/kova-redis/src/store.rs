//! The connection to Redis: one node (a multiplexed connection that reconnects by itself) or a
//! cluster (redis-rs's async cluster connection, which follows MOVED/ASK and reconnects).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::{RedisResult, ScriptInvocation};

use crate::batch::{self, BatchStats, BatchingNode};
use crate::call::Call;

/// Where the scripts run.
pub(crate) enum Store {
    Single(Arc<BatchingNode>),
    Cluster(ClusterConnection),
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Store::Single(node) => f.debug_tuple("Single").field(&node.node.address()).finish(),
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
            Store::Single(node) => node.node.run(invocation).await,
            Store::Cluster(conn) => invocation.invoke_async(&mut conn.clone()).await,
        }
    }

    /// What batching did (all zero on a cluster).
    pub(crate) fn batch_stats(&self) -> BatchStats {
        match self {
            Store::Single(node) => node.stats(),
            Store::Cluster(_) => BatchStats::default(),
        }
    }

    /// Deletes `key`.
    pub(crate) async fn del(&self, key: &[u8]) -> RedisResult<()> {
        let cmd = redis::cmd("DEL").arg(key).clone();
        match self {
            Store::Single(node) => node.node.query(&cmd).await,
            Store::Cluster(conn) => cmd.query_async(&mut conn.clone()).await,
        }
    }

    /// A call timed out: if the connection has answered nothing for that long, it is presumed
    /// dead (a peer that vanished without a reset) and replaced on the next call.
    pub(crate) fn timed_out(&self, timeout: Duration) {
        if let Store::Single(node) = self {
            node.node.timed_out(timeout);
        }
    }
}
