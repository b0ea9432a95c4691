//! Keyed limiting: one limiter state per client key (IP, user, API key), in a sharded table built
//! for millions of keys and for floods of new ones.
//!
//! # The table
//! - **Shards**: a power-of-two number of [`CachePadded`](crossbeam_utils::CachePadded) shards,
//!   picked by the low bits of the key's hash. The hash is a randomly seeded `ahash`, one seed per
//!   table, computed once per check.
//! - **Lookups take no lock** and write nothing but the key's own state word: the check pins the
//!   thread (`epoch.rs`: an exchange on this thread's own record, no shared cache line written),
//!   probes the shard's open-addressing array and runs the algorithm's CAS loop on the
//!   key's state. No reference count, no LRU list, and for the four single-word algorithms
//!   nothing after the CAS.
//! - **Two layouts**, chosen by the algorithm when the table is built (`store.rs`):
//!   - **Lines** (`line_shard.rs`), for [`Gcra`](crate::Gcra), [`TokenBucket`](crate::TokenBucket),
//!     [`FixedWindow`](crate::FixedWindow) and [`SlidingWindowCounter`](crate::SlidingWindowCounter):
//!     the key and its state word side by side in the probed array itself, 16 bytes for a `u64`
//!     key, so a hit touches one cache line of the table (at a million keys, one cache miss
//!     instead of two). In a large array the check starts loading that line before it pins the thread. Markers in
//!     the word say a line is vacant, removed or frozen; the lock holder keeps the authoritative
//!     state of each line aside. The array is kept 11/20 to 3/4 full (any length: the home is a
//!     multiply, not a mask), about 22–31 bytes per `u64` key with the marks. Growing it, or
//!     shedding removed lines, is a rehash that freezes each word it moves into a new array.
//!   - **Slots** (`shard.rs`), for the sliding log and [`AnyAlgorithm`](crate::AnyAlgorithm): an
//!     index of 32-bit entries (7 bits of the hash as a tag, a slot number) naming slots, each a
//!     key and its cell, in chunks that never move (the sliding log's cell holds its ring behind a
//!     pointer and cannot be moved while checks use it). Growing the index copies 32-bit entries
//!     only.
//! - **New keys** take the shard's lock: look again, find room (an open line, or a slot from the
//!   free list or the chunks), publish the key.
//! - **Reclamation**: a removed or evicted key's line or slot, and an array or index replaced by
//!   another, are reused or freed only after an epoch grace period (`epoch.rs`, crossbeam-epoch's
//!   protocol without its collection on pins), so a check that found them still reads valid
//!   memory. The lock holder stamps what it unlinked with the epoch at the end of its section;
//!   later sections advance the epoch while something waits, and free what is two epochs old.
//!   A thread that goes quiet after an insert (an idle worker) holds nothing back. An eviction
//!   or a quota change looks at a key's state before unlinking it, and no check racing with the
//!   look is lost: a single-word cell is frozen first (a marker swapped in; a check that finds
//!   it, or whose CAS fails against it, redoes itself under the lock), any other cell has its
//!   index entry hidden first (and its checks look at the entry again after writing, behind a
//!   `SeqCst` fence). `shard.rs` and `line_shard.rs` have the protocols and the memory-model
//!   arguments.
//! - **Grace-period room**: slots unlinked but not yet reusable come from a reserve of
//!   `max(max_keys / 8, 64)` slots per shard; removed lines are shed by rehashes, and the arrays
//!   they replace may hold up to four times the current array (or one array of the shard's
//!   largest size) while they wait. Both are counted in the memory bound. Only when a flood of new
//!   keys exhausts that while some thread sits preempted in the middle of a check (holding every
//!   grace period back) does a new key wait, unpinned, for up to about 3 ms, and then get the
//!   policy's fallback.
//! - **Bounded**: at most [`max_keys`](KeyedBuilder::max_keys) keys (default
//!   [`DEFAULT_MAX_KEYS`](KeyedBuilder::DEFAULT_MAX_KEYS)), split evenly over the shards, and
//!   [`memory_bound_bytes`](Keyed::memory_bound_bytes) bytes. When a new key finds its shard
//!   full, the insert first reclaims idle keys (state indistinguishable from fresh at the
//!   clock's [precise reading](crate::Clock::now_nanos_precise); up to 16, so that the next
//!   inserts find room at once) among the next
//!   [`reclaim_scan`](KeyedBuilder::reclaim_scan) entries of the shard's sweep cursor; if none,
//!   the [`TableFullPolicy`] decides, and the decision carries the matching
//!   [`Fallback`](crate::Fallback). [`Keyed::sweep_idle`] reclaims idle keys on demand, one
//!   shard at a time. No background thread.
//! - **Per-key quotas**: a quota function of the key ([`KeyedBuilder::quota_fn`]), a quota passed
//!   with the check ([`Keyed::check_n_with_quota`]) or set for a held key ([`Keyed::set_quota`]).
//!   Changing a key's quota carries over what it has consumed (see [`Keyed::set_quota`]).
//!
//! # Checking it
//! - Unit tests (`cargo test -p kova --lib keyed`, the epoch's included) also run under Miri,
//!   with its default flags (Stacked Borrows, leak check on): `cargo +nightly miri test -p kova
//!   --lib keyed` (about 6 minutes on one core, build included). The epoch's records are
//!   reachable from its static list, so they are no leak; the table's own leaks are checked by
//!   the tests too (`keys_and_cells_are_dropped_exactly_once`, `tests/keyed_leak.rs`).
//! - The integration tests `tests/keyed_*.rs`: threads against a sequential model, floods,
//!   leaks under a counting allocator.
//! - Loom (`--cfg kova_loom`, `loom-tests/run.sh`): the table's atomics, the epoch's included,
//!   are `crate::loom`'s, and its lock is loom's mutex, so pins, stamps, epoch advances,
//!   `Retired::collect` and the reuse of freed slots are all model-checked; a should-fail model
//!   takes the pin's fence away (`kova::loom_racy::pinning_without_fence`) and loom catches a
//!   line refilled under a check. A
//!   slot's or line's key sits in loom's `UnsafeCell` there (and a slot's cell): a key dropped,
//!   moved or refilled while a check can still read it is a causality violation (without that
//!   tracking loom would not even explore such an interleaving: it only reorders accesses it sees
//!   conflict). Freeing a replaced index or line array is tracked too: under loom its `Drop`
//!   writes every entry or line, so a probe of one freed too early is a causality violation as
//!   well. The word algorithms' models run on lines, and again on slots through
//!   `kova::loom_racy::on_slots`; the models of evictions also run with their entries hidden
//!   (`kova::loom_racy::hiding_entries`, the sliding log's protocol). A small table for a model:
//!   `KeyedBuilder::shards(1).max_keys(2)`.

mod builder;
mod epoch;
mod error;
mod index;
mod line_shard;
mod lock;
mod policy;
mod quotas;
mod reclaim;
mod shard;
mod slot;
mod store;
mod table;
mod word;

/// Pins the thread as a check does (`kova::__bench_pin`).
#[inline(always)]
pub(crate) fn pin() -> impl Drop {
    epoch::pin()
}

/// Pins the thread and tries once to advance the epoch (`kova::loom_racy::advance_epoch`).
#[cfg(kova_loom)]
pub(crate) fn advance_epoch() {
    epoch::pin().advance();
}

/// How many keys one shard of `max_keys` keys holds before it first grows its array (lines) or
/// its index (`slots`): for the loom models that race the growth itself.
#[cfg(kova_loom)]
pub(crate) fn keys_before_first_growth(max_keys: usize, slots: bool) -> usize {
    if slots {
        index::Index::keys_in_smallest()
    } else {
        line_shard::keys_in_first_array(max_keys)
    }
}

pub use builder::KeyedBuilder;
pub use error::KeyedError;
pub use policy::TableFullPolicy;
pub use table::Keyed;
