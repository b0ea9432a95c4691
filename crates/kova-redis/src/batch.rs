//! Batching on one connection: while `max_in_flight` script calls are in flight, the checks that
//! arrive wait in a queue, and go together as one run of the batch script when a call returns.
//! A check that finds a free flight goes at once as its own algorithm's script, so batching adds
//! no wait where there is nothing to batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use redis::{RedisError, RedisResult};
use tokio::sync::oneshot;

use crate::call::Call;
use crate::node::SingleNode;
use crate::scripts::{batch_script, batch_script_source, index};

/// The most checks one batch script call decides.
pub(crate) const MAX_BATCH: usize = 128;

/// What batching did, since the limiter was built (single node only; a cluster connection sends
/// every check as its own script call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchStats {
    /// Checks sent alone (nothing else was waiting when they came).
    pub single_calls: u64,
    /// Batch script calls.
    pub batches: u64,
    /// Checks decided in batches.
    pub batched_checks: u64,
    /// The largest batch.
    pub largest_batch: u64,
    /// Total time checks waited in the queue before their batch was sent, in nanoseconds.
    pub queued_nanos: u64,
}

impl BatchStats {
    /// The mean batch size (0 when there was none).
    pub fn mean_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.batched_checks as f64 / self.batches as f64
        }
    }

    /// The mean time a batched check waited before it was sent, in nanoseconds.
    pub fn mean_queued_nanos(&self) -> f64 {
        if self.batched_checks == 0 {
            0.0
        } else {
            self.queued_nanos as f64 / self.batched_checks as f64
        }
    }
}

struct Waiting {
    call: Call,
    since: Instant,
    reply: oneshot::Sender<RedisResult<Vec<i64>>>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    in_flight: usize,
    /// How many may wait before those whose callers stopped waiting are dropped (see
    /// [`Queue::drop_abandoned`]).
    prune_at: usize,
}

impl Queue {
    /// Drops the checks whose callers stopped waiting (timed out or cancelled): they were
    /// answered already (a failure policy's decision, an error), so sending them would charge
    /// Redis for checks their callers never saw admitted, and under `FailClosed` make a denial
    /// consume quota.
    fn drop_abandoned(&mut self) {
        self.waiting.retain(|w| !w.reply.is_closed());
    }
}

#[derive(Default)]
struct Counters {
    single_calls: AtomicU64,
    batches: AtomicU64,
    batched_checks: AtomicU64,
    largest_batch: AtomicU64,
    queued_nanos: AtomicU64,
}

/// The queue of one connection.
pub(crate) struct Batcher {
    queue: Mutex<Queue>,
    max_in_flight: usize,
    counters: Counters,
}

impl Batcher {
    pub(crate) fn new(max_in_flight: usize) -> Self {
        Batcher {
            queue: Mutex::default(),
            max_in_flight: max_in_flight.max(1),
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Every update of the queue is complete before anything that could panic: a poisoned
        // lock still guards a consistent queue.
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `call` behind the call in flight (`Ok`: its reply comes there), or takes the
    /// flight when there is none (`Err`: send it now).
    fn enqueue_or_fly(&self, call: Call) -> Result<oneshot::Receiver<RedisResult<Vec<i64>>>, Call> {
        let mut queue = self.lock();
        if queue.in_flight >= self.max_in_flight {
            if queue.waiting.len() >= queue.prune_at {
                // While Redis stalls, callers time out faster than flights end: dropping theirs
                // here keeps the queue to about the callers still waiting (amortized: the bound
                // doubles past what is left).
                queue.drop_abandoned();
                queue.prune_at = (2 * queue.waiting.len()).max(MAX_BATCH);
            }
            let (reply, receiver) = oneshot::channel();
            queue.waiting.push(Waiting { call, since: Instant::now(), reply });
            Ok(receiver)
        } else {
            queue.in_flight += 1;
            Err(call)
        }
    }

    pub(crate) fn stats(&self) -> BatchStats {
        let c = &self.counters;
        // Relaxed: independent counters, read for reporting.
        BatchStats {
            single_calls: c.single_calls.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            batched_checks: c.batched_checks.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            queued_nanos: c.queued_nanos.load(Ordering::Relaxed),
        }
    }
}

/// One node's connection and the queue of checks waiting for a flight on it.
pub(crate) struct BatchingNode {
    pub(crate) node: SingleNode,
    batcher: Batcher,
}

impl BatchingNode {
    pub(crate) fn new(node: SingleNode, max_in_flight: usize) -> Self {
        BatchingNode { node, batcher: Batcher::new(max_in_flight) }
    }

    /// What batching did so far.
    pub(crate) fn stats(&self) -> BatchStats {
        self.batcher.stats()
    }
}

/// Runs `call` on `node`: alone when nothing is in flight, else in the next batch.
pub(crate) async fn eval(node: &Arc<BatchingNode>, call: Call) -> RedisResult<Vec<i64>> {
    let waiting = node.batcher.enqueue_or_fly(call);
    match waiting {
        Ok(receiver) => receiver.await.unwrap_or_else(|_| Err(dropped())),
        Err(call) => {
            // Ends the flight when this call ends, answered or cancelled.
            let _flight = Flight(Arc::clone(node));
            node.batcher.counters.single_calls.fetch_add(1, Ordering::Relaxed);
            node.node.run(call.invocation()).await
        }
    }
}

/// The batch script's `EVALSHA` (see `scripts/batch.lua` for the layout): the keys, whether
/// they are distinct, each distinct limit once, then runs of consecutive checks that share
/// limit, time, cost and extra (every argument costs Redis more to take in than a decision
/// costs to make).
fn batch_command(batch: &[Waiting]) -> redis::Cmd {
    // (algorithm code, TTL margin, the two parameters): at most MAX_BATCH, searched in order.
    let mut limits: Vec<[u64; 4]> = Vec::new();
    // (limit number, now, cost, extra) and how many checks in a row have them.
    type Shape = (usize, Option<u64>, u64, u64);
    let mut runs: Vec<(Shape, usize)> = Vec::new();
    for w in batch {
        let call = &w.call;
        let [cost, extra, margin, a, b] = call.args;
        let limit = [index(call.kind) as u64 + 1, margin, a, b];
        let number = match limits.iter().position(|l| *l == limit) {
            Some(i) => i + 1,
            None => {
                limits.push(limit);
                limits.len()
            }
        };
        let shape = (number, call.now, cost, extra);
        match runs.last_mut() {
            Some((last, count)) if *last == shape => *count += 1,
            _ => runs.push((shape, 1)),
        }
    }
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(batch_script().get_hash()).arg(batch.len());
    for w in batch {
        cmd.arg(&w.call.key);
    }
    cmd.arg(u8::from(keys_distinct(batch))).arg(limits.len());
    for limit in &limits {
        cmd.arg(&limit[..]);
    }
    for ((number, now, cost, extra), count) in runs {
        cmd.arg(number);
        match now {
            Some(micros) => cmd.arg(micros),
            None => cmd.arg(""),
        };
        cmd.arg(cost).arg(extra).arg(count);
    }
    cmd
}

/// Whether no key appears twice in `batch` (the script then reads each key's value from its
/// `MGET` without a table of what the batch wrote).
fn keys_distinct(batch: &[Waiting]) -> bool {
    let mut keys: Vec<&[u8]> = batch.iter().map(|w| w.call.key.as_slice()).collect();
    keys.sort_unstable();
    keys.windows(2).all(|pair| !matches!(pair, [a, b] if a == b))
}

/// One check's 3 values in a batch reply as a lone check's 5 (allowed, remaining, retry, reset,
/// granted); `None` when its decision failed.
fn decode(reply: &[i64]) -> Option<Vec<i64>> {
    let &[signed, reset, retry_or_granted] = reply else { return None };
    match signed {
        1.. => Some(vec![1, signed - 1, 0, reset, retry_or_granted]),
        ..=-1 => Some(vec![0, -1 - signed, retry_or_granted, reset, 0]),
        0 => None,
    }
}

fn dropped() -> RedisError {
    RedisError::from((redis::ErrorKind::IoError, "kova batch dropped before it was sent"))
}

/// The right to have a script call in flight on the connection; dropping it hands the flight
/// to a task that sends what waits (or ends the flight when nothing does).
struct Flight(Arc<BatchingNode>);

impl Drop for Flight {
    fn drop(&mut self) {
        let node = &self.0;
        let batch = take_batch(&mut node.batcher.lock());
        if batch.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(send_batches(Arc::clone(node), batch));
            }
            Err(_) => {
                // No runtime (it is shutting down): the waiting checks get an error.
                node.batcher.lock().in_flight -= 1;
            }
        }
    }
}

/// Takes up to [`MAX_BATCH`] waiting checks for the flight ending now, which goes on when there
/// are any and ends otherwise.
fn take_batch(queue: &mut Queue) -> Vec<Waiting> {
    queue.drop_abandoned();
    if queue.waiting.is_empty() {
        queue.in_flight -= 1;
        return Vec::new();
    }
    let n = queue.waiting.len().min(MAX_BATCH);
    queue.waiting.drain(..n).collect()
}

/// Sends batches until the queue is empty.
async fn send_batches(node: Arc<BatchingNode>, mut batch: Vec<Waiting>) {
    while !batch.is_empty() {
        send(&node, std::mem::take(&mut batch)).await;
        batch = take_batch(&mut node.batcher.lock());
    }
}

async fn send(batching: &BatchingNode, batch: Vec<Waiting>) {
    let (node, c) = (&batching.node, &batching.batcher.counters);
    let sent = Instant::now();
    let n = batch.len() as u64;
    let queued: u64 = batch.iter().map(|w| sent.duration_since(w.since).as_nanos() as u64).sum();
    // Relaxed: independent counters, read for reporting.
    c.queued_nanos.fetch_add(queued, Ordering::Relaxed);
    if n == 1 {
        // One is sent as itself: same script, same reply as a lone check.
        c.single_calls.fetch_add(1, Ordering::Relaxed);
        let Some(w) = batch.into_iter().next() else { return };
        let result = node.run(w.call.invocation()).await;
        let _ = w.reply.send(result);
        return;
    }
    c.batches.fetch_add(1, Ordering::Relaxed);
    c.batched_checks.fetch_add(n, Ordering::Relaxed);
    c.largest_batch.fetch_max(n, Ordering::Relaxed);
    let cmd = batch_command(&batch);
    let mut result: RedisResult<Vec<i64>> = node.query(&cmd).await;
    if matches!(&result, Err(e) if e.kind() == redis::ErrorKind::NoScriptError) {
        let load = redis::cmd("SCRIPT").arg("LOAD").arg(batch_script_source()).clone();
        result = match node.query::<String>(&load).await {
            Ok(_) => node.query(&cmd).await,
            Err(e) => Err(e),
        };
    }
    match result {
        Ok(values) if values.len() == batch.len() * 3 => {
            for (w, reply) in batch.into_iter().zip(values.chunks_exact(3)) {
                let result = decode(reply).ok_or_else(|| {
                    RedisError::from((
                        redis::ErrorKind::ResponseError,
                        "a kova script failed on this key in a batch (run it alone for the message)",
                    ))
                });
                let _ = w.reply.send(result);
            }
        }
        Ok(values) => {
            let detail = format!("{} values for {} checks", values.len(), batch.len());
            for w in batch {
                let error = (redis::ErrorKind::ResponseError, "unexpected batch reply", detail.clone());
                let _ = w.reply.send(Err(RedisError::from(error)));
            }
        }
        Err(e) => {
            for w in batch {
                let error = (e.kind(), "kova batch failed", e.to_string());
                let _ = w.reply.send(Err(RedisError::from(error)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kova::AlgorithmKind;

    fn waiting(kind: AlgorithmKind, key: &str, now: Option<u64>, args: [u64; 5]) -> Waiting {
        let (reply, _) = oneshot::channel();
        Waiting { call: Call { kind, key: key.into(), now, args }, since: Instant::now(), reply }
    }

    fn args(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                redis::Arg::Cursor => "<cursor>".to_owned(),
            })
            .collect()
    }

    /// A check whose caller stopped waiting (its receiver dropped: a timeout, a cancellation)
    /// is never taken into a batch, and a queue growing while flights stall sheds such checks.
    #[test]
    fn checks_whose_callers_gave_up_are_never_sent() {
        let gcra = [1, 0, 0, 10, 5];
        let call = |key: &str| Call { kind: AlgorithmKind::Gcra, key: key.into(), now: None, args: gcra };
        let batcher = Batcher::new(1);
        assert!(batcher.enqueue_or_fly(call("flying")).is_err());
        let mut kept = Vec::new();
        for i in 0..40 {
            let receiver = batcher.enqueue_or_fly(call(&format!("k{i}"))).expect("queued behind the flight");
            if i % 4 == 0 {
                kept.push(receiver);
            }
        }
        let taken = take_batch(&mut batcher.lock());
        let keys: Vec<String> =
            taken.iter().map(|w| String::from_utf8_lossy(&w.call.key).into_owned()).collect();
        let expected: Vec<String> = (0..40).step_by(4).map(|i| format!("k{i}")).collect();
        assert_eq!(keys, expected);
        // A stall: every caller gives up, the queue stays about as long as those still waiting.
        drop(kept);
        for i in 0..10 * MAX_BATCH {
            drop(batcher.enqueue_or_fly(call(&format!("late{i}"))).expect("queued"));
        }
        assert!(batcher.lock().waiting.len() <= MAX_BATCH, "{}", batcher.lock().waiting.len());
        assert!(take_batch(&mut batcher.lock()).is_empty());
    }

    #[test]
    fn a_batch_sends_each_limit_once_and_runs_of_like_checks_as_one() {
        use AlgorithmKind::{Gcra, SlidingWindowLog};
        let gcra = [1, 0, 0, 10, 5];
        let batch = [
            waiting(Gcra, "a", None, gcra),
            waiting(Gcra, "b", None, gcra),
            waiting(SlidingWindowLog, "c", Some(7), [2, 0, 1000, 3, 100]),
            waiting(Gcra, "a", None, gcra),
            waiting(Gcra, "d", None, [1, 4, 0, 10, 5]),
        ];
        let sent = args(&batch_command(&batch));
        let expected = [
            "EVALSHA",
            batch_script().get_hash(),
            "5",
            "a",
            "b",
            "c",
            "a",
            "d",
            // "a" twice: not distinct.
            "0",
            // Two limits: GCRA (2) and the log (5).
            "2",
            "2",
            "0",
            "10",
            "5",
            "5",
            "1000",
            "3",
            "100",
            // Runs: 2 alike, the log, 1 like the first (not merged: order is kept), 1 with extra.
            "1",
            "",
            "1",
            "0",
            "2",
            "2",
            "7",
            "2",
            "0",
            "1",
            "1",
            "",
            "1",
            "0",
            "1",
            "1",
            "",
            "1",
            "4",
            "1",
        ];
        assert_eq!(sent, expected);
    }

    #[test]
    fn a_batch_says_whether_its_keys_are_distinct() {
        use AlgorithmKind::Gcra;
        let params = [1, 0, 0, 10, 5];
        let distinct: Vec<Waiting> = ["a", "b", "c"].iter().map(|k| waiting(Gcra, k, None, params)).collect();
        assert!(keys_distinct(&distinct));
        assert_eq!(args(&batch_command(&distinct))[6], "1");
        let repeated: Vec<Waiting> = ["b", "a", "b"].iter().map(|k| waiting(Gcra, k, None, params)).collect();
        assert!(!keys_distinct(&repeated));
        assert_eq!(args(&batch_command(&repeated))[6], "0");
    }

    #[test]
    fn batch_replies_decode_to_lone_replies() {
        assert_eq!(decode(&[10, 1000, 3]), Some(vec![1, 9, 0, 1000, 3]));
        assert_eq!(decode(&[1, 0, 0]), Some(vec![1, 0, 0, 0, 0]));
        assert_eq!(decode(&[-1, 500, 200]), Some(vec![0, 0, 200, 500, 0]));
        assert_eq!(decode(&[-4, 500, 200]), Some(vec![0, 3, 200, 500, 0]));
        assert_eq!(decode(&[0, 0, 0]), None);
        assert_eq!(decode(&[i64::MIN, 0, 0]), Some(vec![0, i64::MAX, 0, 0, 0]));
        assert_eq!(decode(&[1, 2]), None);
    }
}
