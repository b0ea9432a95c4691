//! Models of the keyed table: concurrent operations on a small table (one shard, a few keys, a
//! `ManualClock` kept still while the threads run), checked for linearizability against a
//! sequential specification of the table ([`TableSpec`]) that includes its documented
//! table-full behaviour, with the key count the table reports at the end.
//!
//! The model is generic over [`Table`], so the same scenario runs on `kova::Keyed` and on the
//! deliberately racy `kova::loom_racy::RacyTable`, which it must catch.
//!
//! Reclamation is model-checked too: the table's epoch (`keyed/epoch.rs`) runs on loom's atomics,
//! so its pins, the lock holder's stamps and epoch advances, the shard's `Retired::collect` and
//! the reuse of freed lines and arrays all run inside each execution.
//! Loom tracks the lines' key and cell (`crate::loom::UnsafeCell` in the core): a line emptied or
//! refilled while a check can still read it fails the model as a causality violation.
//! [`KeyOp::AdvanceEpoch`] lets a scenario push the epoch on, as other threads' locked sections
//! would in a busy program, so that a grace period can end (and a line be reused) within a model.
//!
//! A failing table model aborts the test process (after loom's message): the panic unwinds out
//! of loom while model threads still hold their epoch participants (thread-locals), whose
//! destructors then touch loom atomics outside the model. `racy.rs` therefore runs its table
//! should-fail models in a child process.

use std::collections::BTreeMap;
use std::fmt;

use kova::keyed::TableFullPolicy;
use kova::loom_racy::{RacyTable, Reclaimed};
use kova::{
    Algorithm, CheckError, Clock, Decision, Fallback, Gcra, Keyed, ManualClock, Quota, WordAlgorithm,
};
use loom::sync::Arc;

use crate::harness::model_with_cap;
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
    /// Cost 1 goes through `check`, whose hit path is written separately from `check_n`'s, so
    /// that the models cover both.
    fn check_n(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        if cost == 1 {
            Ok(Keyed::check(self, &key))
        } else {
            Keyed::check_n(self, &key, cost)
        }
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
    Keyed::builder(quota)
        .clock(clock)
        .shards(1)
        .max_keys(max_keys)
        .table_full(policy)
        // Each key's first check inserts it, as the models' inserts and evictions need
        // (`door.rs` models the doorkeeper).
        .doorkeeper(0)
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
    /// Not a table operation: two `kova::loom_racy::advance_epoch()` on this thread, each a pin
    /// and one try to advance the epoch, enough for a grace period to end when no other thread
    /// holds it back. The table
    /// then hands what it retired back at its next lock.
    AdvanceEpoch,
}

impl fmt::Debug for KeyOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KeyOp::Check(key, cost) => write!(f, "check_n(&{key}, {cost})"),
            KeyOp::Remove(key) => write!(f, "remove(&{key})"),
            KeyOp::Sweep => f.write_str("sweep_idle()"),
            KeyOp::AdvanceEpoch => f.write_str("advance_epoch()"),
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
    /// From [`KeyOp::AdvanceEpoch`].
    Advanced,
}

impl fmt::Debug for KeyOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyOut::Checked(c) => c.fmt(f),
            KeyOut::Removed(b) => write!(f, "{b}"),
            KeyOut::Swept(n) => write!(f, "{n}"),
            KeyOut::Advanced => f.write_str("()"),
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
            KeyOp::AdvanceEpoch => KeyOut::Advanced,
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
        KeyOp::AdvanceEpoch => {
            for _ in 0..2 {
                kova::loom_racy::advance_epoch();
            }
            KeyOut::Advanced
        }
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
/// recorded choices; with a fresh random seed per table the keys land in different array
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

/// Runs `plan` under loom on the table `make` builds, asserting in every execution that some
/// order of the operations (each thread's in program order) run through [`TableSpec`] gives every
/// recorded result, the final peeks, and the number of keys `len()` reports at the end (so a key
/// inserted twice, or an entry lost, shows). Panics "not linearizable" otherwise.
pub fn check_table<T: Table>(plan: TablePlan, make: MakeTable<T>) {
    check_table_capped(plan, make, None);
}

/// [`check_table`] at a preemption bound of at most `cap` (see `harness::model_with_cap`).
pub fn check_table_capped<T: Table>(plan: TablePlan, make: MakeTable<T>, cap: Option<usize>) {
    assert!((2..=3).contains(&plan.threads.len()), "2-3 threads per model");
    pin_hash_seeds();
    model_with_cap(cap, move || run_table_once(&plan, make));
}

/// What a reclamation model must see, and how deep it is explored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reclaim {
    /// Whether some execution must hand a retired line back for reuse.
    pub reuses_a_line: bool,
    /// Whether some execution must free a replaced array.
    pub frees_an_array: bool,
    /// The most preemptions explored, when `LOOM_MAX_PREEMPTIONS` is higher (`None`: no cap).
    pub max_preemptions: Option<usize>,
}

/// Like [`check_table`] (capped at `reclaim.max_preemptions`), and also asserts that the table
/// reclaimed what the scenario retires in at least one execution: a retired line handed back for
/// reuse (if `reclaim.reuses_a_line`) and a replaced array freed (if `reclaim.frees_an_array`). A model meant to check
/// reclamation must not pass because nothing was ever reclaimed. Returns the totals over all
/// executions.
pub fn check_table_with_reuse<T: Table>(plan: TablePlan, make: MakeTable<T>, reclaim: Reclaim) -> Reclaimed {
    let before = kova::loom_racy::reclaimed();
    check_table_capped(plan, make, reclaim.max_preemptions);
    let after = kova::loom_racy::reclaimed();
    let total = Reclaimed { lines: after.lines - before.lines, arrays: after.arrays - before.arrays };
    eprintln!("loom: reclaimed over all executions: {total:?}");
    assert!(
        !reclaim.reuses_a_line || total.lines > 0,
        "no execution reused a retired slot: the model checks no reclamation"
    );
    assert!(!reclaim.frees_an_array || total.arrays > 0, "no execution freed a replaced index");
    total
}

/// One execution of a table model.
fn run_table_once<T: Table>(plan: &TablePlan, make: MakeTable<T>) {
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
    // The last lane runs on the main thread while the others run on spawned ones: the same
    // concurrency with one model thread fewer to schedule (and to register with the epoch).
    let (inline, spawned) = plan.threads.split_last().expect("2-3 threads");
    let workers: Vec<_> = spawned
        .iter()
        .map(|ops| {
            let (ops, table, clock) = (ops.clone(), Arc::clone(&table), clock.clone());
            loom::thread::spawn(move || ops.iter().map(|&op| record(&*table, &clock, op)).collect::<Vec<_>>())
        })
        .collect();
    let inline: Vec<_> = inline.iter().map(|&op| record(&*table, &clock, op)).collect();
    let mut lanes = vec![Lane { name: "prelude".to_string(), phase: 0, calls: prelude }];
    for (i, worker) in workers.into_iter().enumerate() {
        lanes.push(Lane { name: format!("thread {}", i + 1), phase: 1, calls: worker.join().unwrap() });
    }
    lanes.push(Lane { name: format!("thread {} (main)", plan.threads.len()), phase: 1, calls: inline });
    let peeks = plan.final_keys.iter().map(|&key| record(&*table, &clock, KeyOp::Check(key, 0))).collect();
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
}

/// GCRA at 3 units per 3 us (interval 1 us, burst 3): the table models' quota.
pub fn quota() -> Quota {
    Quota::from_nanos(3, 3_000).expect("a valid quota")
}

/// A check of an idle key racing `sweep_idle`, which unlinks idle keys after looking at their
/// state (freezing a word cell, or hiding the entry): either the sweep sees the check's write and
/// keeps the key, or the check redoes itself on a fresh entry. The admission is never lost. Run
/// with each way of looking (`keyed.rs`) and with a look that does neither (`racy.rs`: must
/// fail).
pub fn idle_sweep_plan() -> TablePlan {
    TablePlan {
        quota: quota(),
        max_keys: 4,
        policy: TableFullPolicy::default(),
        prelude: vec![TablePre::Op(KeyOp::Check(7, 1)), TablePre::Advance(3_000)],
        threads: vec![vec![KeyOp::Check(7, 1)], vec![KeyOp::Sweep]],
        final_keys: vec![7],
    }
}

/// Slot reuse under a check: key 7 (2 of 3 used) is checked by one thread while the other removes
/// it, lets its grace period end (`AdvanceEpoch`) and inserts key 8, which takes 7's old line when
/// the grace period ended first. Run on `Keyed` (must pass, with reuse in some executions) and
/// with the grace periods switched off (must fail).
pub fn line_reuse_plan() -> (TablePlan, Reclaim) {
    let plan = TablePlan {
        quota: quota(),
        max_keys: 2,
        policy: TableFullPolicy::DenyNew,
        prelude: vec![TablePre::Op(KeyOp::Check(7, 2))],
        threads: vec![
            vec![KeyOp::Check(7, 1)],
            vec![KeyOp::Remove(7), KeyOp::AdvanceEpoch, KeyOp::Check(8, 1)],
        ],
        final_keys: vec![7, 8],
    };
    (plan, Reclaim { reuses_a_line: true, frees_an_array: false, max_preemptions: None })
}

/// The old array freed under a check, with no line reuse: keys fill the first array (see
/// `full_array_plan`); one thread checks key 1 while the other inserts one key more (the array
/// grows, the old one is retired), lets the grace period
/// end (`AdvanceEpoch`) and removes key 2, whose lock frees the old array when no check holds it.
/// Under loom, freeing an array writes each of its entries (each line's
/// word), so a probe of a freed array is a causality violation. `racy.rs` runs it without grace
/// periods. Build it on the layout it runs on (inside `kova::loom_racy::boxed_cells` for boxed cells).
pub fn array_free_plan() -> (TablePlan, Reclaim) {
    let (filled, plan) = full_array_plan(|grower| {
        (vec![KeyOp::Check(grower, 1), KeyOp::AdvanceEpoch, KeyOp::Remove(2)], vec![1, 2, grower])
    });
    debug_assert!(filled >= 2, "key 2 is in the table");
    (plan, Reclaim { reuses_a_line: false, frees_an_array: true, max_preemptions: None })
}

/// Keys 1 to n (key 1 used twice) fill a one-shard table of 8 keys to the last key its first
/// array holds (5 of 8 lines at the load 13/20), as `kova::loom_racy::keys_before_first_growth`
/// says; one thread checks key 1 while the other runs the writer that `race` makes from the
/// next key, n + 1, whose insert grows it. Returns n and the plan.
fn full_array_plan(race: impl FnOnce(u64) -> (Vec<KeyOp>, Vec<u64>)) -> (u64, TablePlan) {
    let max_keys = 8;
    let filled = kova::loom_racy::keys_before_first_growth(max_keys) as u64;
    assert!((2..max_keys as u64).contains(&filled), "{filled} keys fill the first array");
    let mut prelude: Vec<_> = (1..=filled).map(|key| TablePre::Op(KeyOp::Check(key, 1))).collect();
    prelude.push(TablePre::Op(KeyOp::Check(1, 1)));
    let (writer, final_keys) = race(filled + 1);
    let plan = TablePlan {
        quota: quota(),
        max_keys,
        policy: TableFullPolicy::DenyNew,
        prelude,
        threads: vec![vec![KeyOp::Check(1, 1)], writer],
        final_keys,
    };
    (filled, plan)
}

/// Array growth under a check: keys fill the first array (see `full_array_plan`); one thread
/// checks key 1 while the other inserts one key more (the array grows: words moved, the old one
/// retired), removes key 1, lets the grace period end
/// (`AdvanceEpoch`) and inserts another new key, whose lock frees the old one and hands key 1's
/// place to the new key when no check holds them. The check of key 1 may still be probing the
/// old one: it must reach key 1's state (never the new key's) and its admission lands before the
/// removal or on a fresh key 1. Build it on the layout it runs on.
///
/// The largest table model: about 17,000 executions at a preemption bound of 3, 90,000 at 4.
pub fn array_growth_plan() -> (TablePlan, Reclaim) {
    let (_, plan) = full_array_plan(|grower| {
        let reuser = grower + 1;
        (
            vec![KeyOp::Check(grower, 1), KeyOp::Remove(1), KeyOp::AdvanceEpoch, KeyOp::Check(reuser, 1)],
            vec![1, grower, reuser],
        )
    });
    (plan, Reclaim { reuses_a_line: true, frees_an_array: true, max_preemptions: None })
}

/// `set_quota` racing a check of the same key: key 7 holds 1 of 3 units used (GCRA 3 per 3 us)
/// when one thread checks it (cost 1) while the main thread moves it to 6 per 3 us, on a still
/// clock. Returns every (the check's `remaining`, the final `remaining`) seen over the
/// executions. Counted once, the check gives `(1, 4)` (it came first: 2 used carried over to
/// the new quota) or `(4, 4)` (it came second); counted twice, `(3, 3)`; lost, `(1, 5)`. Counting
/// twice fails the model unless `twice_allowed` (the hidden-entry protocol documents it).
pub fn quota_change_racing_a_check(twice_allowed: bool) -> std::collections::BTreeSet<(u64, u64)> {
    pin_hash_seeds();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let record = std::sync::Arc::clone(&seen);
    model_with_cap(None, move || {
        let table = Arc::new(keyed(quota(), 4, TableFullPolicy::default(), ManualClock::new()));
        assert_eq!(table.check(&7).remaining(), 2);
        let checker = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || table.check(&7).remaining())
        };
        let bigger = Quota::from_nanos(6, 3_000).expect("a valid quota");
        assert!(table.set_quota(&7, bigger).expect("GCRA takes it"));
        let checked = checker.join().unwrap();
        let outcome = (checked, table.peek(&7).remaining());
        record.lock().unwrap().insert(outcome);
        assert!(
            matches!(outcome, (1, 4) | (4, 4)) || twice_allowed && outcome == (3, 3),
            "not linearizable: the check saw {} remaining and the key ended with {} (counted once: (1, 4) or \
             (4, 4))",
            outcome.0,
            outcome.1
        );
    });
    let seen = seen.lock().unwrap().clone();
    eprintln!("loom: (check, final) outcomes: {seen:?}");
    seen
}
