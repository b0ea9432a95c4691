//! Models of the keyed table: concurrent operations on a small table (one shard, a few keys, a
//! `ManualClock` kept still while the threads run), checked for linearizability against a
//! sequential specification of the table ([`TableSpec`]) that includes its documented
//! table-full behaviour, with the key count the table reports at the end.
//!
//! The model is generic over [`Table`], so the same scenario runs on `kova::Keyed` and on the
//! deliberately racy `kova::loom_racy::RacyTable`, which it must catch.

use std::collections::BTreeMap;
use std::fmt;

use kova::loom_racy::RacyTable;
use kova::{
    Algorithm, CheckError, Clock, Decision, Fallback, Gcra, Keyed, ManualClock, Quota, TableFullPolicy,
    WordAlgorithm,
};
use loom::sync::Arc;

use crate::harness::model;
use crate::linearize::{assert_linearizable, Call, Checked, Lane, Spec};
use crate::specs::decide_word;

/// What the models need of a keyed table.
pub trait Table: Send + Sync + 'static {
    /// `check_n(&key, cost)`.
    fn check_n(&self, key: u64, cost: u64) -> Result<Decision, CheckError>;
    /// `remove(&key)`.
    fn remove(&self, key: u64) -> bool;
    /// `sweep_idle()`.
    fn sweep_idle(&self) -> usize;
    /// `len()`: the keys held.
    fn key_count(&self) -> usize;
}

impl<A: Algorithm> Table for Keyed<u64, A, ManualClock> {
    fn check_n(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        Keyed::check_n(self, &key, cost)
    }
    fn remove(&self, key: u64) -> bool {
        Keyed::remove(self, &key)
    }
    fn sweep_idle(&self) -> usize {
        Keyed::sweep_idle(self)
    }
    fn key_count(&self) -> usize {
        Keyed::len(self)
    }
}

impl<W: WordAlgorithm> Table for RacyTable<W, ManualClock> {
    fn check_n(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        RacyTable::check_n(self, key, cost)
    }
    fn remove(&self, key: u64) -> bool {
        RacyTable::remove(self, key)
    }
    fn sweep_idle(&self) -> usize {
        RacyTable::sweep_idle(self)
    }
    fn key_count(&self) -> usize {
        RacyTable::len(self)
    }
}

/// Builds the table under test: (quota, max keys, policy, clock).
pub type MakeTable<T> = fn(Quota, usize, TableFullPolicy, ManualClock) -> T;

/// `Keyed<u64, Gcra, ManualClock>` with one shard (the smallest model; every key in one shard).
pub fn keyed(
    quota: Quota,
    max_keys: usize,
    policy: TableFullPolicy,
    clock: ManualClock,
) -> Keyed<u64, Gcra, ManualClock> {
    Keyed::builder_with_clock(quota, clock)
        .shards(1)
        .max_keys(max_keys)
        .table_full(policy)
        .build()
        .expect("the model's quota suits GCRA")
}

/// The racy table with room for `max_keys + 1` entries (so a duplicate entry fits and shows).
pub fn racy(
    quota: Quota,
    max_keys: usize,
    _policy: TableFullPolicy,
    clock: ManualClock,
) -> RacyTable<Gcra, ManualClock> {
    RacyTable::new(<Gcra as WordAlgorithm>::from_quota(quota).expect("GCRA quota"), clock, max_keys + 1)
}

/// A table operation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyOp {
    /// `check_n(&key, cost)` (cost 0: a peek).
    Check(u64, u64),
    /// `remove(&key)`.
    Remove(u64),
    /// `sweep_idle()`.
    Sweep,
}

impl fmt::Debug for KeyOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KeyOp::Check(key, cost) => write!(f, "check_n(&{key}, {cost})"),
            KeyOp::Remove(key) => write!(f, "remove(&{key})"),
            KeyOp::Sweep => f.write_str("sweep_idle()"),
        }
    }
}

/// What a table operation returned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyOut {
    /// From `check_n`.
    Checked(Checked),
    /// From `remove`.
    Removed(bool),
    /// From `sweep_idle`.
    Swept(usize),
}

impl fmt::Debug for KeyOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyOut::Checked(c) => c.fmt(f),
            KeyOut::Removed(b) => write!(f, "{b}"),
            KeyOut::Swept(n) => write!(f, "{n}"),
        }
    }
}

/// The table as a sequential specification: key -> packed GCRA word, at most `max_keys` keys.
///
/// A check of a held key decides on its word; of a new key, inserts a fresh word (a peek inserts
/// nothing). A new key finding the table full first reclaims one idle key (the table's scan covers
/// every entry of these small tables); if none is idle, `policy` decides: `DenyNew` denies with
/// `Fallback::TableFullDenied`, `retry_after` the soonest `reset_after` among the held keys (else
/// the emission interval); `EvictClosestToIdle` evicts the held key with the soonest reset that is
/// not actively limited (remaining > 0), else denies as `DenyNew`; `AllowUntracked` answers as a
/// fresh key would, with `Fallback::TableFullUntracked`, inserting nothing.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    /// The algorithm every key uses.
    pub algorithm: Gcra,
    /// The table's key bound.
    pub max_keys: usize,
    /// Its table-full policy.
    pub policy: TableFullPolicy,
}

impl TableSpec {
    fn fresh(&self, now: u64, cost: u64) -> Decision {
        self.algorithm.decide(self.algorithm.fresh_word(), now, cost).0
    }

    fn peek(&self, word: u64, now: u64) -> Decision {
        self.algorithm.decide(word, now, 0).0
    }

    fn denied_full(&self, table: &BTreeMap<u64, u64>, now: u64) -> Decision {
        let soonest =
            table.values().map(|&w| self.peek(w, now).reset_after_nanos()).min().unwrap_or(u64::MAX);
        let retry = if soonest > 0 && soonest < u64::MAX {
            soonest
        } else {
            WordAlgorithm::quota(&self.algorithm).emission_interval_nanos()
        };
        Decision::denied(WordAlgorithm::capacity(&self.algorithm), 0, retry, 0)
            .with_fallback(Fallback::TableFullDenied)
    }

    fn check(
        &self,
        table: &mut BTreeMap<u64, u64>,
        now: u64,
        key: u64,
        cost: u64,
    ) -> Result<Decision, CheckError> {
        let capacity = WordAlgorithm::capacity(&self.algorithm);
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity });
        }
        if let Some(word) = table.get_mut(&key) {
            return decide_word(&self.algorithm, word, now, cost);
        }
        if cost == 0 {
            return Ok(self.fresh(now, 0));
        }
        if table.len() >= self.max_keys {
            // The insert reclaims one idle key, the first its scan meets (hash order; the models
            // hold at most one candidate, so take the smallest).
            let idle = table.iter().find(|(_, &w)| self.algorithm.is_idle_word(w, now)).map(|(&k, _)| k);
            if let Some(k) = idle {
                table.remove(&k);
            }
        }
        if table.len() >= self.max_keys {
            match self.policy {
                TableFullPolicy::AllowUntracked => {
                    return Ok(self.fresh(now, cost).with_fallback(Fallback::TableFullUntracked));
                }
                TableFullPolicy::EvictClosestToIdle => {
                    let victim = table
                        .iter()
                        .map(|(&k, &w)| (self.peek(w, now), k))
                        .filter(|(d, _)| d.remaining() > 0)
                        .min_by_key(|(d, _)| d.reset_after_nanos())
                        .map(|(_, k)| k);
                    match victim {
                        Some(k) => {
                            table.remove(&k);
                        }
                        None => return Ok(self.denied_full(table, now)),
                    }
                }
                _ => return Ok(self.denied_full(table, now)),
            }
        }
        let word = table.entry(key).or_insert(self.algorithm.fresh_word());
        decide_word(&self.algorithm, word, now, cost)
    }
}

impl Spec for TableSpec {
    type State = BTreeMap<u64, u64>;
    type Op = KeyOp;
    type Output = KeyOut;

    fn needs_monotone_time(&self) -> bool {
        false
    }

    fn call(&self, table: &mut BTreeMap<u64, u64>, now: u64, op: &KeyOp) -> KeyOut {
        match *op {
            KeyOp::Check(key, cost) => KeyOut::Checked(Checked(self.check(table, now, key, cost))),
            KeyOp::Remove(key) => KeyOut::Removed(table.remove(&key).is_some()),
            KeyOp::Sweep => {
                let before = table.len();
                table.retain(|_, &mut w| !self.algorithm.is_idle_word(w, now));
                KeyOut::Swept(before - table.len())
            }
        }
    }
}

/// A step of a table model's sequential prelude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TablePre {
    /// An operation on the main thread.
    Op(KeyOp),
    /// Move the clock forward.
    Advance(u64),
}

/// One table scenario.
#[derive(Debug, Clone)]
pub struct TablePlan {
    /// The quota of every key (GCRA).
    pub quota: Quota,
    /// The table's key bound.
    pub max_keys: usize,
    /// Its table-full policy.
    pub policy: TableFullPolicy,
    /// Sequential steps before the threads start.
    pub prelude: Vec<TablePre>,
    /// Each thread's operations (2-3 threads). The clock is still while they run.
    pub threads: Vec<Vec<KeyOp>>,
    /// Keys peeked at the end (the final state the order must reproduce).
    pub final_keys: Vec<u64>,
}

fn record<T: Table>(table: &T, clock: &ManualClock, op: KeyOp) -> Call<KeyOp, KeyOut> {
    let before = clock.now_nanos();
    let result = match op {
        KeyOp::Check(key, cost) => KeyOut::Checked(Checked(table.check_n(key, cost))),
        KeyOp::Remove(key) => KeyOut::Removed(table.remove(key)),
        KeyOp::Sweep => KeyOut::Swept(table.sweep_idle()),
    };
    let after = clock.now_nanos();
    Call { op, before, after, result }
}

/// A constant hasher seed source for `ahash::RandomState::new()`.
struct FixedSeed;

impl ahash::random_state::RandomSource for FixedSeed {
    fn gen_hasher_seed(&self) -> usize {
        0x6b6f_7661
    }
}

/// Makes every table's hashing the same in every execution. Loom replays an execution by its
/// recorded choices; with a fresh random seed per table the keys land in different index
/// positions each time, the replay diverges, and loom reads garbage ("Is the model fully
/// deterministic?"). ahash's per-process keys stay random; only the per-table part is pinned.
fn pin_hash_seeds() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if ahash::random_state::set_random_source(FixedSeed).is_err() {
            panic!("a RandomState was created before the loom table models pinned the hash seeds");
        }
    });
}

/// Runs `f` (a whole loom model) with this OS thread pinned to crossbeam-epoch's global collector.
///
/// The table defers its grace-period tokens to that collector, which is process-global and made
/// of std atomics loom does not see: whether a token has been released by the time a later lock
/// looks at it depends on everything run before in the process, so executions would diverge
/// under replay. Loom runs every model thread on this OS thread, so they all share its epoch
/// participant; pinned for the whole model, the global epoch can advance at most once, and no
/// token sealed during the model is ever released: retired slots are never reused within a
/// model, deterministically. (Model-checking the reclamation itself needs crossbeam-epoch on loom's
/// atomics: see the report for what that needs in the core.)
fn with_epoch_held<R>(f: impl FnOnce() -> R) -> R {
    let _pinned = crossbeam_epoch::pin();
    f()
}

/// Runs `plan` under loom on the table `make` builds, asserting in every execution that some
/// order of the operations (each thread's in program order) run through [`TableSpec`] gives every
/// recorded result, the final peeks, and the number of keys `len()` reports at the end (so a key
/// inserted twice, or an entry lost, shows). Panics "not linearizable" otherwise.
pub fn check_table<T: Table>(plan: TablePlan, make: MakeTable<T>) {
    assert!((2..=3).contains(&plan.threads.len()), "2-3 threads per model");
    pin_hash_seeds();
    with_epoch_held(|| {
        model(move || {
            let clock = ManualClock::new();
            let table = Arc::new(make(plan.quota, plan.max_keys, plan.policy, clock.clone()));
            let mut clock_values = vec![clock.now_nanos()];
            let mut prelude = Vec::new();
            for step in &plan.prelude {
                match *step {
                    TablePre::Advance(nanos) => {
                        clock.advance_nanos(nanos);
                        clock_values.push(clock.now_nanos());
                    }
                    TablePre::Op(op) => prelude.push(record(&*table, &clock, op)),
                }
            }
            let workers: Vec<_> = plan
                .threads
                .iter()
                .map(|ops| {
                    let (ops, table, clock) = (ops.clone(), Arc::clone(&table), clock.clone());
                    loom::thread::spawn(move || {
                        ops.iter().map(|&op| record(&*table, &clock, op)).collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut lanes = vec![Lane { name: "prelude".to_string(), phase: 0, calls: prelude }];
            for (i, worker) in workers.into_iter().enumerate() {
                lanes.push(Lane {
                    name: format!("thread {}", i + 1),
                    phase: 1,
                    calls: worker.join().unwrap(),
                });
            }
            let peeks =
                plan.final_keys.iter().map(|&key| record(&*table, &clock, KeyOp::Check(key, 0))).collect();
            lanes.push(Lane { name: "final peeks".to_string(), phase: 2, calls: peeks });
            let len = table.key_count();

            let algorithm = <Gcra as WordAlgorithm>::from_quota(plan.quota).expect("GCRA quota");
            let spec = TableSpec { algorithm, max_keys: plan.max_keys, policy: plan.policy };
            assert_linearizable(
                &format!("the table specification (len() = {len} at the end)"),
                &spec,
                BTreeMap::new(),
                &lanes,
                &clock_values,
                |table| table.len() == len,
            );
        })
    });
}
