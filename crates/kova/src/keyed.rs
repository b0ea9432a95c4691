//! Keyed limiting: one limiter state per client key (IP, user, API key), in a sharded table built
//! for millions of keys and for floods of new ones.
//!
//! # The table
//! - **Shards**: a power-of-two number of [`CachePadded`](crossbeam_utils::CachePadded) shards,
//!   picked by the low bits of the key's hash. The hash is a randomly seeded `ahash`, one seed per
//!   table, computed once per check.
//! - **Lookups take no lock** and write nothing but the key's own state word: the check pins the
//!   thread's crossbeam-epoch participant (a store to this thread's own record, no shared cache
//!   line), probes an open-addressing index of 32-bit entries (7 bits of the hash as a tag, the
//!   slot number) and runs the algorithm's CAS loop on the slot. No reference count, no LRU list,
//!   and for the four single-word algorithms nothing after the CAS.
//! - **Inline state**: a slot is the key and the algorithm's cell side by side in a chunk of slots
//!   that never moves; for the single-word algorithms that is one `AtomicU64` next to the key
//!   (16 bytes for a `u64` key). The sliding log's cell holds its ring behind a pointer.
//! - **New keys** take the shard's lock: look again, find a slot (free list, or the next one in
//!   the chunks), publish its index entry. Growing the index copies 32-bit entries only; slots
//!   never move, so a concurrent check never updates a copy.
//! - **Reclamation**: a removed or evicted key's slot, and an index replaced by a bigger one, are
//!   reused or freed only after a crossbeam-epoch grace period, so a check that found them still
//!   reads valid memory. An eviction or a quota change looks at a key's state before unlinking
//!   it, and no check racing with the look is lost: a single-word cell is frozen first (a marker
//!   swapped in; a check that finds it, or whose CAS fails against it, redoes itself under the
//!   lock), any other cell has its index entry hidden first (and its checks look at the entry
//!   again after writing, behind a `SeqCst` fence). `shard.rs` has the protocol and the
//!   memory-model argument.
//! - **Grace-period reserve**: slots unlinked but not yet reusable come from a reserve of
//!   `max(max_keys / 8, 64)` slots per shard, counted in the memory bound. Only when a flood
//!   of new keys exhausts it while some thread sits preempted in the middle of a check (holding
//!   every grace period back) does a new key wait, unpinned, for up to about 3 ms, and then get
//!   the policy's fallback.
//! - **Bounded**: at most [`max_keys`](KeyedBuilder::max_keys) keys (default
//!   [`DEFAULT_MAX_KEYS`](KeyedBuilder::DEFAULT_MAX_KEYS)), split evenly over the shards, and
//!   [`memory_bound_bytes`](Keyed::memory_bound_bytes) bytes. When a new key finds its shard
//!   full, the insert first reclaims idle keys (state indistinguishable from fresh) among the next
//!   [`reclaim_scan`](KeyedBuilder::reclaim_scan) entries of the shard's sweep cursor; if none,
//!   the [`TableFullPolicy`] decides, and the decision carries the matching
//!   [`Fallback`](crate::Fallback). [`Keyed::sweep_idle`] reclaims idle keys on demand, one
//!   shard at a time. No background thread.
//! - **Per-key quotas**: a quota function of the key ([`KeyedBuilder::quota_fn`]), a quota passed
//!   with the check ([`Keyed::check_n_with_quota`]) or set for a held key ([`Keyed::set_quota`]).
//!   Changing a key's quota carries over what it has consumed (see [`Keyed::set_quota`]).
//!
//! # Checking it
//! - Unit tests (`cargo test -p kova --lib keyed`) also run under Miri:
//!   `MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks"
//!   cargo +nightly miri test -p kova --lib keyed` (about 3 minutes of Miri on one core).
//!   crossbeam-epoch needs the first two (its intrusive list trips Stacked Borrows; it stores
//!   tagged pointers as integers) and the third (the bags of deferred functions left in its
//!   global queue at exit are reported as leaks); the table's own leaks are checked by the
//!   tests (`keys_and_cells_are_dropped_exactly_once`, `tests/keyed_leak.rs`).
//! - The integration tests `tests/keyed_*.rs`: threads against a sequential model, floods,
//!   leaks under a counting allocator.
//! - Loom (`--cfg kova_loom --cfg crossbeam_loom`, `loom-tests/run.sh`): the table's atomics are
//!   `crate::sync`'s, its lock is loom's mutex, and crossbeam-epoch runs on loom as well (its
//!   `loom` feature, enabled by `loom-tests`), so pins, deferred grace-period tokens (loom's
//!   `Arc`), flushes, `Retired::collect` and the reuse of freed slots are all model-checked. A
//!   slot's key and cell sit in loom's `UnsafeCell` there: a slot emptied or refilled while a
//!   check can still read it is a causality violation (without that tracking loom would not even
//!   explore such an interleaving: it only reorders accesses it sees conflict). Freeing a
//!   replaced index is tracked too: under loom its `Drop` writes every entry, so a probe of an
//!   index freed too early is a causality violation as well. The models of evictions run with
//!   word cells frozen and, through `kova::loom_racy::hiding_entries`, with their entries hidden
//!   (the sliding log's protocol). A small table for a model:
//!   `KeyedBuilder::shards(1).max_keys(2)`; the grace-period reserve needs no shrinking, since a
//!   freed slot is taken before a fresh one.

mod builder;
mod error;
mod index;
mod lock;
mod pin;
mod policy;
mod quotas;
mod reclaim;
mod shard;
mod slot;
mod table;
mod word;

pub use builder::KeyedBuilder;
pub use error::KeyedError;
pub use policy::TableFullPolicy;
pub use table::Keyed;
