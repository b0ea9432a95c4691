//! What a keyed lookup costs at 1,000,000 live `u64` keys for two table layouts, with no limiter
//! logic, beside kova's table and governor's in the same run (one thread, uniform random keys):
//! - `two_level`: kova's slot layout (the sliding log's; the word algorithms' until lines). An
//!   index of 32-bit entries (a 7-bit hash tag and a slot
//!   number; 2^21 positions, load 0.48) names a 16-byte slot (key, state word) in an array
//!   filled in insertion order: two dependent cache misses per lookup.
//! - `single_line`: the key and its state word side by side in the probed array itself (2^21
//!   positions of 16 bytes): one miss. kova's line layout, which its word algorithms use.
//!
//! Both do what the table's hit path must: hash the key (ahash), pin (`kova::__bench_pin`, the
//! table's own epoch), probe
//! linearly, and compare-and-swap the key's state word (Acquire load, AcqRel CAS). Neither grows,
//! removes or keeps a reserve, so each is a floor for its layout, not a table. The point is the
//! ratio to governor: a keyed check cannot beat its layout's floor, so a target above the floor's
//! ratio needs the other layout.
//!
//! `two_level_gcra` and `single_line_gcra` are the same lookups followed by the limiter's own
//! work instead of a bare CAS: GCRA's CAS loop on the coarse clock, building the `Decision`
//! (`WordAlgorithm::decide_cell`, what a keyed check runs on its slot). The first is close to
//! what kova's slot layout costs; the second is the floor of its line layout (the `kova` row).
//! Run: `cargo bench -p kova --bench layout_floor`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use kova::{Algorithm, CoarseClock, Gcra, Quota};

mod support;
use support::{cpu_timed, governor_table, kova_table, Rng, RATE};

const LIVE_KEYS: u64 = 1_000_000;
/// Positions of both layouts: the index size kova's table reaches at 1,000,000 keys.
const POSITION_BITS: u32 = 21;
const POSITIONS: usize = 1 << POSITION_BITS;
/// The slot number's bits in a two-level entry (`slot + 1`), and the tag's above them.
const SLOT_BITS: u32 = 24;
const TAG_MASK: u32 = 0x7F;

/// A key and its state word: kova's slot for a `u64` key and a single-word algorithm.
struct Slot {
    key: AtomicU64,
    state: AtomicU64,
}

/// Admits the check by one CAS on `state`, as the table's word algorithms do on every admission.
#[inline]
fn admit(state: &AtomicU64) -> bool {
    let old = state.load(Ordering::Acquire);
    state.compare_exchange(old, old.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// kova's layout: an index of tagged slot numbers, and the slots.
struct TwoLevel {
    hasher: ahash::RandomState,
    index: Box<[AtomicU32]>,
    slots: Box<[Slot]>,
}

impl TwoLevel {
    fn new(keys: u64) -> Self {
        let hasher = ahash::RandomState::new();
        let index: Box<[AtomicU32]> = (0..POSITIONS).map(|_| AtomicU32::new(0)).collect();
        let slots: Box<[Slot]> =
            (0..keys).map(|key| Slot { key: AtomicU64::new(key), state: AtomicU64::new(0) }).collect();
        for key in 0..keys {
            let hash = hasher.hash_one(key);
            let mut pos = home(hash);
            while index[pos].load(Ordering::Relaxed) != 0 {
                pos = (pos + 1) & (POSITIONS - 1);
            }
            let entry = (tag(hash) << SLOT_BITS) | (key as u32 + 1);
            index[pos].store(entry, Ordering::Relaxed);
        }
        TwoLevel { hasher, index, slots }
    }

    /// Finds `key`'s state word and runs `decide` on it (pinned meanwhile).
    #[inline]
    fn check<R>(&self, key: u64, decide: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        let hash = self.hasher.hash_one(key);
        let _guard = kova::__bench_pin();
        let mut pos = home(hash);
        loop {
            let entry = self.index[pos].load(Ordering::Acquire);
            if entry == 0 {
                return None;
            }
            if entry >> SLOT_BITS == tag(hash) {
                let slot = &self.slots[(entry & ((1 << SLOT_BITS) - 1)) as usize - 1];
                if slot.key.load(Ordering::Relaxed) == key {
                    return Some(decide(&slot.state));
                }
            }
            pos = (pos + 1) & (POSITIONS - 1);
        }
    }
}

/// Where a probe for `hash` starts: its top bits, as in kova's index.
fn home(hash: u64) -> usize {
    (hash >> (64 - POSITION_BITS)) as usize
}

/// The 7-bit tag an index entry keeps (kova's: bits above the shard bits).
fn tag(hash: u64) -> u32 {
    (hash >> 16) as u32 & TAG_MASK
}

/// The single-line layout: keys and state words in the probed array.
struct SingleLine {
    hasher: ahash::RandomState,
    positions: Box<[Slot]>,
}

impl SingleLine {
    /// The key of an empty position (the benched keys are below it).
    const EMPTY: u64 = u64::MAX;

    fn new(keys: u64) -> Self {
        let hasher = ahash::RandomState::new();
        let positions: Box<[Slot]> = (0..POSITIONS)
            .map(|_| Slot { key: AtomicU64::new(Self::EMPTY), state: AtomicU64::new(0) })
            .collect();
        for key in 0..keys {
            let mut pos = home(hasher.hash_one(key));
            while positions[pos].key.load(Ordering::Relaxed) != Self::EMPTY {
                pos = (pos + 1) & (POSITIONS - 1);
            }
            positions[pos].key.store(key, Ordering::Relaxed);
        }
        SingleLine { hasher, positions }
    }

    /// Finds `key`'s state word and runs `decide` on it (pinned meanwhile).
    #[inline]
    fn check<R>(&self, key: u64, decide: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        let _guard = kova::__bench_pin();
        let mut pos = home(self.hasher.hash_one(key));
        loop {
            let position = &self.positions[pos];
            let held = position.key.load(Ordering::Acquire);
            if held == key {
                return Some(decide(&position.state));
            }
            if held == Self::EMPTY {
                return None;
            }
            pos = (pos + 1) & (POSITIONS - 1);
        }
    }
}

fn layout_floor_1m(c: &mut Criterion) {
    let mut group = c.benchmark_group("layout_floor_1m");
    group.throughput(Throughput::Elements(1));
    let two_level = TwoLevel::new(LIVE_KEYS);
    let single_line = SingleLine::new(LIVE_KEYS);
    let kova = kova_table(2 * LIVE_KEYS as usize);
    let governor = governor_table();
    let gcra = <Gcra as Algorithm>::from_quota(Quota::per_second(u64::from(RATE)).unwrap()).unwrap();
    let clock = CoarseClock::new();
    let limit = |state: &AtomicU64| gcra.decide_cell(state, &clock, 1).is_allowed();
    for key in 0..LIVE_KEYS {
        assert_eq!((two_level.check(key, admit), single_line.check(key, admit)), (Some(true), Some(true)));
        kova.check(&key);
        let _ = governor.check_key(&key);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut bench = |name: &str, check: &dyn Fn(u64) -> bool| {
        group.bench_function(BenchmarkId::new(name, LIVE_KEYS), |b| {
            b.iter_custom(|iters| {
                cpu_timed(iters, || {
                    black_box(check(rng.below(LIVE_KEYS)));
                })
            })
        });
    };
    bench("two_level", &|key| two_level.check(key, admit) == Some(true));
    bench("single_line", &|key| single_line.check(key, admit) == Some(true));
    bench("two_level_gcra", &|key| two_level.check(key, limit) == Some(true));
    bench("single_line_gcra", &|key| single_line.check(key, limit) == Some(true));
    bench("kova", &|key| kova.check(&key).is_allowed());
    bench("governor", &|key| governor.check_key(&key).is_ok());
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = layout_floor_1m
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
