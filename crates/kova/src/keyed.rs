//! Keyed limiting: one limiter state per client key (IP, user, API key), in a sharded, bounded
//! table whose lookups take no lock ([`Keyed`]). A map of the files; each one's own docs give
//! its protocol and why it holds.
//!
//! - `table.rs`: [`Keyed`], its shards (a power of two, picked by the low bits of the key's
//!   seeded `ahash`) and the one hit path every lock-free operation shares; `table/slow.rs`, a
//!   check under the shard's lock (a new key's insert); `table/evict.rs`, room for new keys (idle
//!   keys reclaimed, [`TableFullPolicy`]); `table/set_quota.rs`, moving a key to another quota.
//! - Two layouts, chosen by the algorithm's cell type ([`Algorithm::inline_cell`](crate::Algorithm::inline_cell)),
//!   behind `store.rs`'s traits:
//!   - `line_shard.rs`: a cell that is one word sits beside its key in the probed array (one
//!     cache line per hit), every [`WordAlgorithm`](crate::WordAlgorithm)'s;
//!   - `shard.rs` with `index.rs` and `slot.rs`: an index of tagged numbers naming slots that
//!     never move, for any other cell (the sliding log's, [`AnyAlgorithm`](crate::AnyAlgorithm)'s).
//! - `word.rs`: the CAS loop on a word cell, which stops at a word the lock holder froze, and
//!   the freeze itself: how an eviction or a quota change looks at a cell without losing a
//!   racing check.
//! - `epoch.rs` (the table's own epoch: crossbeam-epoch's protocol without collection on pins)
//!   and `reclaim.rs` (what a shard retired, freed after its grace period): a removed key's
//!   place, and a replaced array or index, are reused only once no check can still read them.
//! - `door.rs`: the opt-in doorkeeper ([`KeyedBuilder::doorkeeper`]): a key's first check
//!   admitted in one word of a fixed array, the key inserted on its second, charged the first
//!   one's unit at its time.
//! - `quotas.rs`: per-key quotas, one built algorithm per distinct quota, and the carry-over of
//!   what a key consumed when its quota changes.
//! - `lock.rs` (a shard's insert lock and the figures it publishes), `builder.rs`, `policy.rs`,
//!   `error.rs`.
//!
//! Checked by the unit tests (also under Miri with its default flags: `cargo +nightly miri test
//! -p kova --lib keyed`), the integration tests `tests/keyed_*.rs` (threads against a model,
//! floods, leaks), the loom models (`loom-tests/`, through `crate::loom`, whose should-fail
//! switches are `loom/faults.rs`) and the `keyed_table` fuzz target.

mod builder;
mod door;
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
pub(crate) use quotas::carry_over;
pub use table::Keyed;
