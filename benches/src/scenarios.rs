//! Running the throughput scenarios ([`crate::catalog`] defines them): which subjects each
//! runs (their keys: [`crate::scenario_keys`]).
//!
//! Every scenario runs kova's five algorithms, the peers and one floor, at every thread count,
//! in rounds that interleave the subjects (so a slow moment of a shared machine hits them all),
//! and keeps each subject's median round at every thread count
//! ([`kept_round`]), with every round's rate beside it ([`crate::rounds`]). The realistic-quota
//! churn and flood scenarios run kova's GCRA with and without its doorkeeper and governor only.

use kova::{
    Algorithm, AlgorithmKind, FixedWindow, Gcra, Quota, RateLimiter, SlidingWindowCounter, SlidingWindowLog,
    TokenBucket,
};

pub use crate::catalog::{quota_words, Scenario, LARGE_KEYS, SMALL_KEYS, ZIPF_EXPONENT};
use crate::kova_tables::{flood_table, hot_table, kova_table, no_door_table};
pub use crate::kova_tables::{FLOOD_BOUND, GCRA_HOT, GCRA_NO_DOOR};

use crate::governor_tuned::{GovernorTunedDirect, GovernorTunedKeyed, GOVERNOR_TUNED};
use crate::memory::measure_heap;
use crate::peers::{GovernorDirect, GovernorKeyed, IopsRatelimit, LeakyBucket, MutexBucket, MutexKeyed};
use crate::pingora::PingoraRate;
use crate::report::{MemoryRecord, Record, SubjectKind, PINGORA, PINNED_FLOOR};
pub use crate::rounds::kept_round;
use crate::rounds::{keep, Kept};
use crate::scenario_keys::{keys_for, measure_with_keys, Keys};
use crate::sketch_subject::{KovaSketch, SKETCH};
use crate::subject::{CasFloor, KovaDirect, KovaStriped, LoadFloor, PinnedCasFloor, ReadFloor, Subject};
use crate::throughput::{RunPlan, RunResult};

/// The many-key scenarios where [`GCRA_HOT`] is measured beside the default GCRA table (as in
/// the churn and flood scenarios): what hot keys cost a table whose keys never get hot.
pub const COLD_WITH_HOT_KEYS: [Scenario; 2] = [Scenario::Keyed1k, Scenario::Keyed1mUniform];

type Runner = Box<dyn Fn(usize, &RunPlan, &Keys) -> RunResult + Send + Sync>;

/// One measured subject of a scenario.
struct Entry {
    subject: String,
    kind: SubjectKind,
    runner: Runner,
}

fn shared<S: Subject + Send + 'static>(subject: S) -> Runner {
    Box::new(move |threads, plan, keys| measure_with_keys(&subject, keys, threads, plan))
}

/// A fresh subject for each measurement (churn: every run starts from an empty table).
fn fresh<S: Subject, F: Fn() -> S + Send + Sync + 'static>(make: F) -> Runner {
    Box::new(move |threads, plan, keys| {
        let subject = make();
        let result = measure_with_keys(&subject, keys, threads, plan);
        // Dropping a table of millions of keys is not part of the measurement.
        drop(subject);
        result
    })
}

/// Calls `visit` with each of kova's five algorithms as a type.
pub trait AlgorithmVisitor {
    /// One algorithm.
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind);
}

/// Visits the five algorithms in `AlgorithmKind::ALL` order.
pub fn each_algorithm(visitor: &mut impl AlgorithmVisitor) {
    visitor.visit::<TokenBucket>(AlgorithmKind::TokenBucket);
    visitor.visit::<Gcra>(AlgorithmKind::Gcra);
    visitor.visit::<FixedWindow>(AlgorithmKind::FixedWindow);
    visitor.visit::<SlidingWindowCounter>(AlgorithmKind::SlidingWindowCounter);
    visitor.visit::<SlidingWindowLog>(AlgorithmKind::SlidingWindowLog);
}

/// A pre-filled table with what filling it cost.
struct Filled {
    entry: Entry,
    memory: MemoryRecord,
}

fn fill<S: Subject + Send + 'static>(
    name: &str,
    kind: SubjectKind,
    keys_n: usize,
    make: impl FnOnce() -> S,
    cell_bytes: Option<usize>,
) -> Filled {
    let (subject, heap) = measure_heap(|| {
        let subject = make();
        // Twice: a kova table holds a key from its second check (its doorkeeper admits the first).
        for k in 0..keys_n as u64 {
            subject.hit(k);
            subject.hit(k);
        }
        subject
    });
    let held = subject.keys().unwrap_or(keys_n);
    let memory = MemoryRecord {
        subject: name.to_owned(),
        keys: held,
        heap_bytes_per_key: (heap > 0).then(|| heap as f64 / held.max(1) as f64),
        table_bytes_per_key: subject.table_bytes().map(|b| b as f64 / held.max(1) as f64),
        cell_bytes,
    };
    Filled { entry: Entry { subject: name.to_owned(), kind, runner: shared(subject) }, memory }
}

/// What running the throughput scenarios needs to know.
#[derive(Debug, Clone)]
pub struct ThroughputConfig {
    /// Thread counts to measure.
    pub threads: Vec<usize>,
    /// Rounds per measurement (the median kept at every thread count).
    pub rounds: usize,
    /// Measuring loop settings.
    pub plan: RunPlan,
    /// Keys inserted per churn measurement at most.
    pub churn_ops: u64,
}

/// The results of the throughput section.
#[derive(Debug, Default)]
pub struct ThroughputOutput {
    /// One record per (scenario, subject, thread count).
    pub records: Vec<Record>,
    /// Memory per key of the 1M-key tables (filled when a 1M scenario ran).
    pub memory: Vec<MemoryRecord>,
    /// Bytes of the read floor's array in the 1M scenarios.
    pub large_table_bytes: Option<usize>,
}

/// How many measurements `scenarios` take (for the progress bar).
pub fn measurement_count(scenarios: &[Scenario], config: &ThroughputConfig) -> u64 {
    let subjects: usize = scenarios.iter().map(|&s| subject_count(s)).sum();
    (subjects * config.threads.len() * config.rounds) as u64
}

/// Subjects measured in `scenario`: five kova algorithms, governor in its two configurations
/// ([`GOVERNOR_TUNED`]), the Mutex bucket, the scenario's own peers (`ratelimit` on two clocks
/// and `leaky_bucket` direct, `pingora_rate` keyed), kova's sketch in every keyed scenario
/// ([`SKETCH`]), one floor, the pinned floor where there is one, and in the admitting direct
/// scenario kova's striped GCRA and token bucket ([`STRIPED`]), in churn and flood kova's GCRA
/// without its doorkeeper ([`GCRA_NO_DOOR`]), in the hot-key, many-key and new-key scenarios
/// kova's GCRA table with hot keys ([`GCRA_HOT`]). The realistic-quota churn and flood: kova's
/// GCRA with and without its doorkeeper, governor's two rows and the floor.
pub fn subject_count(scenario: Scenario) -> usize {
    if scenario.per_minute() {
        return 5;
    }
    let own_peers = if scenario.is_direct() { 3 } else { 1 };
    let sketch = usize::from(!scenario.is_direct());
    let striped = if scenario.base() == Scenario::Direct { STRIPED.len() } else { 0 };
    let door = usize::from(matches!(scenario, Scenario::KeyedChurn | Scenario::KeyedFlood));
    let hot = usize::from(
        scenario.base() == Scenario::KeyedHot || door == 1 || COLD_WITH_HOT_KEYS.contains(&scenario),
    );
    9 + own_peers + sketch + striped + door + hot + usize::from(has_pinned_floor(scenario))
}

/// The striped limiters' subject names (`kova::striped::StripedLimiter` with its defaults).
pub const STRIPED: [&str; 2] = ["gcra_striped", "token_bucket_striped"];

/// kova's striped limiter on `W`, with its default stripes, batch and lease.
fn striped<W: kova::WordAlgorithm>(quota: Quota) -> Runner {
    shared(KovaStriped(kova::striped::StripedLimiter::<W>::new(quota).expect("quota representable")))
}

/// Whether `scenario` also measures the CAS loop behind kova's pin
/// ([`PINNED_FLOOR`]): on one word per thread where keys do not share (how the pin scales), on
/// a random word of an array as large as the table where they miss the cache (what a pin and a
/// CAS on a line from memory cost, the 1M-key target's floor).
fn has_pinned_floor(scenario: Scenario) -> bool {
    matches!(scenario, Scenario::KeyedPerThread | Scenario::Keyed1mUniform | Scenario::Keyed1mZipf)
}

struct DirectBuilder<'a> {
    scenario: Scenario,
    entries: &'a mut Vec<Entry>,
}

impl AlgorithmVisitor for DirectBuilder<'_> {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let quota = self.scenario.quota(kind);
        let limiter = KovaDirect(RateLimiter::<A>::new(quota).expect("quota representable"));
        if self.scenario == Scenario::DirectDeny {
            // Exhaust the quota so that every measured check is a denial.
            while limiter.hit(0) {}
        }
        self.entries.push(Entry {
            subject: kind.as_str().to_owned(),
            kind: SubjectKind::Kova,
            runner: shared(limiter),
        });
    }
}

struct KeyedBuilder<'a> {
    scenario: Scenario,
    prefill: usize,
    entries: &'a mut Vec<Entry>,
    memory: &'a mut Vec<MemoryRecord>,
}

impl AlgorithmVisitor for KeyedBuilder<'_> {
    fn visit<A: Algorithm>(&mut self, kind: AlgorithmKind) {
        let quota = self.scenario.quota(kind);
        let name = kind.as_str();
        // A fresh table for each measurement: empty (churn) or full of idle keys (flood).
        let runner = match self.scenario {
            Scenario::KeyedChurn => Some(fresh(move || kova_table::<A>(quota, 0))),
            Scenario::KeyedFlood => Some(fresh(move || flood_table::<A>(quota))),
            _ => None,
        };
        if let Some(runner) = runner {
            self.entries.push(Entry { subject: name.to_owned(), kind: SubjectKind::Kova, runner });
            return;
        }
        let cell_bytes = A::from_quota(quota).map(|a| a.cell_bytes()).ok();
        let prefill = self.prefill;
        let filled = fill(name, SubjectKind::Kova, prefill, || kova_table::<A>(quota, prefill), cell_bytes);
        self.memory.push(filled.memory);
        self.entries.push(filled.entry);
    }
}

/// The subjects of one scenario, and what filling their tables cost.
struct Built {
    entries: Vec<Entry>,
    memory: Vec<MemoryRecord>,
    floor_bytes: Option<usize>,
}

/// `subject` with its quota used up when `deny` (so that every measured check is a denial).
fn exhausted<S: Subject>(subject: S, deny: bool) -> S {
    if deny {
        while subject.hit(0) {}
    }
    subject
}

/// Builds a scenario's subjects; `large_table_bytes` sizes the churn scenario's read floor when
/// the 1M-key table was measured before.
fn build(scenario: Scenario, large_table_bytes: Option<usize>) -> Built {
    let mut entries: Vec<Entry> = Vec::new();
    let mut memory = Vec::new();
    let mut floor_bytes = None;
    let word_quota = scenario.quota(AlgorithmKind::Gcra);
    if scenario.is_direct() {
        each_algorithm(&mut DirectBuilder { scenario, entries: &mut entries });
        if scenario.base() == Scenario::Direct {
            // Opt-in striped mode beside the exact word: the same quota, every check admitted.
            for (name, runner) in
                STRIPED.into_iter().zip([striped::<Gcra>(word_quota), striped::<TokenBucket>(word_quota)])
            {
                entries.push(Entry { subject: name.into(), kind: SubjectKind::Kova, runner });
            }
        }
        // Each peer as its own type (a boxed `dyn Subject` would put a virtual call in the loop).
        let deny = scenario == Scenario::DirectDeny;
        let mut peer = |name: &str, runner: Runner| {
            entries.push(Entry { subject: name.into(), kind: SubjectKind::Peer, runner });
        };
        peer("governor", shared(exhausted(GovernorDirect::new(word_quota), deny)));
        peer(GOVERNOR_TUNED, shared(exhausted(GovernorTunedDirect::new(word_quota), deny)));
        peer("mutex_bucket", shared(exhausted(MutexBucket::new(word_quota), deny)));
        peer("ratelimit", shared(exhausted(IopsRatelimit::new(word_quota), deny)));
        peer("ratelimit_std", shared(exhausted(IopsRatelimit::with_std_clock(word_quota), deny)));
        peer("leaky_bucket", shared(exhausted(LeakyBucket::new(word_quota), deny)));
        // A denial only reads: the deny scenario's floor is a load, the others' a CAS.
        let floor = if deny { shared(LoadFloor::default()) } else { shared(CasFloor::default()) };
        entries.push(Entry {
            subject: scenario.floor_name().into(),
            kind: SubjectKind::Floor,
            runner: floor,
        });
        return Built { entries, memory, floor_bytes };
    }
    let prefill = prefill_of(scenario);
    if scenario.per_minute() {
        // kova's default GCRA table of the scenario's flow, then the rows every new-key
        // scenario has.
        let kova: Runner = if scenario.flow() == Scenario::KeyedFlood {
            fresh(move || flood_table::<Gcra>(word_quota))
        } else {
            fresh(move || kova_table::<Gcra>(word_quota, 0))
        };
        entries.push(Entry { subject: "gcra".into(), kind: SubjectKind::Kova, runner: kova });
        new_key_entries(scenario, word_quota, &mut entries);
    } else if matches!(scenario, Scenario::KeyedChurn | Scenario::KeyedFlood) {
        each_algorithm(&mut KeyedBuilder { scenario, prefill, entries: &mut entries, memory: &mut memory });
        new_key_entries(scenario, word_quota, &mut entries);
        entries.push(Entry {
            subject: GCRA_HOT.into(),
            kind: SubjectKind::Kova,
            runner: fresh(move || hot_table(scenario, word_quota, 0)),
        });
        entries.push(Entry {
            subject: "mutex_bucket".into(),
            kind: SubjectKind::Peer,
            runner: fresh(move || MutexKeyed::new(word_quota)),
        });
        entries.push(Entry {
            subject: PINGORA.into(),
            kind: SubjectKind::Peer,
            runner: fresh(move || PingoraRate::new(word_quota)),
        });
        entries.push(Entry {
            subject: SKETCH.into(),
            kind: SubjectKind::Kova,
            runner: fresh(move || KovaSketch::new(word_quota)),
        });
    } else {
        each_algorithm(&mut KeyedBuilder { scenario, prefill, entries: &mut entries, memory: &mut memory });
        if scenario.base() == Scenario::KeyedHot {
            entries.push(Entry {
                subject: GCRA_HOT.into(),
                kind: SubjectKind::Kova,
                // A fresh table for each measurement, as a server starts: the key is exact until
                // the table sees it contended (one thread never does), then striped.
                runner: fresh(move || hot_table(scenario, word_quota, 0)),
            });
        } else if COLD_WITH_HOT_KEYS.contains(&scenario) {
            // Filled as the default table is: what hot keys cost a table whose keys stay cold.
            let filled = fill(
                GCRA_HOT,
                SubjectKind::Kova,
                prefill,
                move || hot_table(scenario, word_quota, prefill),
                None,
            );
            memory.push(filled.memory);
            entries.push(filled.entry);
        }
        for filled in [
            fill("governor", SubjectKind::Peer, prefill, || GovernorKeyed::new(word_quota), None),
            fill(GOVERNOR_TUNED, SubjectKind::Peer, prefill, || GovernorTunedKeyed::new(word_quota), None),
            fill("mutex_bucket", SubjectKind::Peer, prefill, || MutexKeyed::new(word_quota), None),
            fill(PINGORA, SubjectKind::Peer, prefill, || PingoraRate::new(word_quota), None),
            fill(SKETCH, SubjectKind::Kova, prefill, || KovaSketch::new(word_quota), None),
        ] {
            memory.push(filled.memory);
            entries.push(filled.entry);
        }
    }
    let floor: Runner = match scenario.flow().base() {
        Scenario::KeyedHot | Scenario::KeyedPerThread => shared(CasFloor::default()),
        Scenario::KeyedFlood => {
            // As large as a full flood table at 32 B a key.
            let floor = ReadFloor::new(FLOOD_BOUND * 32);
            floor_bytes = Some(floor.bytes());
            shared(floor)
        }
        _ => {
            // As large as kova's GCRA table of the same keys (the 1M-key table for churn): what
            // the table reports, else the measured heap, else 32 B per key.
            let keys = if prefill > 0 { prefill } else { LARGE_KEYS };
            let per_key = memory
                .iter()
                .find(|m| m.subject == "gcra" && m.keys > 0)
                .and_then(|m| m.table_bytes_per_key.or(m.heap_bytes_per_key))
                .unwrap_or(32.0);
            let bytes = match large_table_bytes {
                Some(bytes) if prefill == 0 => bytes,
                _ => (per_key * keys as f64) as usize,
            };
            let floor = ReadFloor::new(bytes);
            floor_bytes = Some(floor.bytes());
            shared(floor)
        }
    };
    entries.push(Entry { subject: scenario.floor_name().into(), kind: SubjectKind::Floor, runner: floor });
    if has_pinned_floor(scenario) {
        let pinned = match floor_bytes {
            // Beside the random read, over as many bytes.
            Some(bytes) if prefill_of(scenario) == LARGE_KEYS => PinnedCasFloor::with_bytes(bytes),
            // Beside the bare CAS: what the table's pin costs and how it scales.
            _ => PinnedCasFloor::default(),
        };
        entries.push(Entry {
            subject: PINNED_FLOOR.into(),
            kind: SubjectKind::Floor,
            runner: shared(pinned),
        });
    }
    Built { entries, memory, floor_bytes }
}

/// Runs the throughput scenarios, calling `tick` after each measurement.
pub fn run_scenarios(
    scenarios: &[Scenario],
    config: &ThroughputConfig,
    mut tick: impl FnMut(&str),
) -> ThroughputOutput {
    let mut out = ThroughputOutput::default();
    let max_threads = config.threads.iter().copied().max().unwrap_or(1);
    // The 1M-key tables serve both 1M scenarios: built once, dropped after the last of them.
    let mut large: Option<Built> = None;
    let last_large = scenarios.iter().rposition(|s| prefill_of(*s) == LARGE_KEYS);
    for (index, &scenario) in scenarios.iter().enumerate() {
        let keys = keys_for(scenario, max_threads);
        let mut local = None;
        let built: &Built = if prefill_of(scenario) == LARGE_KEYS {
            large.get_or_insert_with(|| {
                let built = build(scenario, None);
                out.memory.clone_from(&built.memory);
                out.large_table_bytes = built.floor_bytes;
                built
            })
        } else {
            local.insert(build(scenario, out.large_table_bytes))
        };
        let plan = RunPlan {
            max_ops: scenario.new_keys().then_some(config.churn_ops),
            work_rounds: scenario.work_rounds(),
            ..config.plan
        };
        // rounds[entry][thread index]: every round's result, the kept one picked below.
        let mut rounds: Vec<Vec<Vec<RunResult>>> =
            vec![vec![Vec::with_capacity(config.rounds); config.threads.len()]; built.entries.len()];
        for _ in 0..config.rounds {
            for (ti, &threads) in config.threads.iter().enumerate() {
                for (ei, entry) in built.entries.iter().enumerate() {
                    rounds[ei][ti].push((entry.runner)(threads, &plan, &keys));
                    tick(&format!("{} {} x{threads}", scenario.name(), entry.subject));
                }
            }
        }
        for (entry, per_threads) in built.entries.iter().zip(rounds) {
            for (results, &threads) in per_threads.into_iter().zip(&config.threads) {
                let Some(Kept { round: r, round_ops_per_sec }) = keep(results, threads) else {
                    continue;
                };
                out.records.push(Record {
                    subject: entry.subject.clone(),
                    kind: entry.kind,
                    scenario: scenario.name().to_owned(),
                    threads,
                    ops_per_sec: r.ops_per_sec,
                    ns_p50: r.ns_p50.is_finite().then_some(r.ns_p50),
                    ns_p99: r.ns_p99.is_finite().then_some(r.ns_p99),
                    allowed_share: r.allowed_share,
                    vs_governor: None,
                    vs_best_peer: None,
                    vs_floor: None,
                    overlap: r.overlap,
                    thread_share: r.thread_share,
                    slowest_p99: r.slowest_p99,
                    median_ops_per_sec: None,
                    round_ops_per_sec,
                });
            }
        }
        // Tables of this scenario are dropped here (the 1M ones after the last 1M scenario),
        // before the next scenario builds its own.
        drop(local);
        if Some(index) == last_large {
            large = None;
        }
    }
    out
}

/// The subjects every new-key scenario (churn and flood, at either quota) measures beside
/// kova's default tables, each on a fresh table per measurement: kova's GCRA without its
/// doorkeeper, and governor's two rows.
fn new_key_entries(scenario: Scenario, quota: Quota, entries: &mut Vec<Entry>) {
    entries.push(Entry {
        subject: GCRA_NO_DOOR.into(),
        kind: SubjectKind::Kova,
        runner: fresh(move || no_door_table(scenario, quota)),
    });
    entries.push(Entry {
        subject: "governor".into(),
        kind: SubjectKind::Peer,
        runner: fresh(move || GovernorKeyed::new(quota)),
    });
    entries.push(Entry {
        subject: GOVERNOR_TUNED.into(),
        kind: SubjectKind::Peer,
        runner: fresh(move || GovernorTunedKeyed::new(quota)),
    });
}

fn prefill_of(scenario: Scenario) -> usize {
    match scenario {
        // The own-keys scenario prefills thread 0's keys; each other thread's are inserted by its
        // first checks (a thousand inserts in a run of millions of checks).
        Scenario::Keyed1k | Scenario::Keyed1kOwn => SMALL_KEYS,
        Scenario::Keyed1mUniform | Scenario::Keyed1mZipf => LARGE_KEYS,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_progress_total_counts_every_measurement() {
        let config = ThroughputConfig {
            threads: vec![1],
            rounds: 2,
            plan: RunPlan {
                duration: Duration::from_millis(1),
                max_ops: Some(10_000),
                timer_overhead_ns: 0,
                work_rounds: 0,
            },
            churn_ops: 1_000,
        };
        // The per-thread scenario has the pinned floor, the direct one has not.
        let scenarios = [Scenario::Direct, Scenario::KeyedPerThread];
        let mut ticks = 0;
        let out = run_scenarios(&scenarios, &config, |_| ticks += 1);
        assert_eq!(ticks, measurement_count(&scenarios, &config));
        assert_eq!(ticks, 2 * (14 + 12));
        assert!(out.records.iter().any(|r| r.scenario == "keyed_per_thread" && r.subject == PINNED_FLOOR));
    }

    /// The progress bar's count is each scenario's subjects; checked on the scenarios whose
    /// tables are built lazily (the others fill tables of up to a million keys).
    #[test]
    fn subject_counts_match_what_is_built() {
        for scenario in [
            Scenario::Direct,
            Scenario::DirectWork,
            Scenario::DirectDeny,
            Scenario::KeyedChurn,
            Scenario::KeyedFlood,
            Scenario::KeyedChurnMinute,
            Scenario::KeyedFloodMinute,
        ] {
            let built = build(scenario, Some(1 << 16));
            let names: Vec<&str> = built.entries.iter().map(|e| e.subject.as_str()).collect();
            assert_eq!(names.len(), subject_count(scenario), "{}: {names:?}", scenario.name());
            assert!(names.contains(&GOVERNOR_TUNED), "{}", scenario.name());
            assert!(names.contains(&scenario.floor_name()), "{}", scenario.name());
        }
    }
}
