//! Keyed limiting: one limiter state per client key (IP, user, API key), in a sharded, bounded
//! table whose lookups take no lock ([`Keyed`], also at the crate root), and what configures it:
//! [`KeyedBuilder`] (bounds, the [`TableFullPolicy`], a doorkeeper, per-key quotas, opt-in
//! [`HotKeys`]), its errors ([`KeyedError`]) and per-key reservations ([`KeyedReservation`]).
//!
//! A keyed limiter has the direct one's methods, each with the key as its first argument.

// A map of the files; each one's own docs give its protocol and why it holds.
//
// - `table.rs`: [`Keyed`] and its shards (a power of two, picked by the low bits of the key's
//   seeded `ahash`); `table/lookup.rs`, the one hit path every lock-free operation shares and
//   the operations on it (checks, peeks, the doorkeeper's admission without the lock);
//   `table/entry.rs`, the one locked entry into a key's place (the door and hot keys handled
//   there, a new key's insert with its exact charge), and `table/locked.rs` and
//   `table/reserve.rs`, the operations written on it; `table/evict.rs`, room for new keys
//   (idle keys reclaimed, [`TableFullPolicy`]).
// - `line.rs`: the probed array of lines, a map of `line/`: `line/shard.rs`, a shard, whose
//   keys sit beside their words in the probed array (`line/array.rs`, sized by
//   `line/sizing.rs`), one line per hit; `line/locked.rs`, the lock holder's side of its
//   protocol (inserts, removals, looks before an unlink, rehashes); `line/cell.rs`, how a
//   line's word holds the cell: inline for a cell that is one word
//   ([`InlineWord`](crate::cell::InlineWord), the sealed [`CellStorage`](crate::cell::CellStorage) of every
//   [`WordAlgorithm`](crate::WordAlgorithm)), boxed for any other (the sliding log's,
//   [`AnyAlgorithm`](crate::AnyAlgorithm)'s), and how a boxed cell's line is hidden.
// - `scan_order.rs`: the order in which the reclamation scan visits a shard's lines.
// - `word.rs`: the CAS loop on a word cell, which stops at a word the lock holder froze, and
//   the freeze itself: how an eviction or a quota change looks at a cell without losing a
//   racing check.
// - `epoch.rs` (the table's own epoch: crossbeam-epoch's protocol without collection on pins)
//   and `reclaim.rs` (what a shard retired, freed after its grace period): a removed key's
//   line, and a replaced array, are reused only once no check can still read them;
//   `barrier.rs` lets a pin skip its full barrier on Linux (membarrier(2) on the rare side).
// - `door.rs`: the doorkeeper, on by default ([`KeyedBuilder::doorkeeper`]): a key's first check
//   admitted in one word of a fixed array, the key inserted on its second, charged the first
//   one's unit at its time.
// - `hot.rs`: the opt-in hot keys ([`KeyedBuilder::hot_keys`]): a contended key's state moved
//   into a slot whose stripes lease batches from it (`striped/lease.rs`), its line marked;
//   `table/hot.rs`, the hit path's branch there and the lock holder's promotion and demotion.
// - `quotas.rs`: per-key quotas, one built algorithm per distinct quota (the carry-over of
//   what a key consumed when its quota changes is the algorithm's: `algorithm/carry_over.rs`).
// - `policy.rs`: the table-full policies, and the sketch of [`TableFullPolicy::Sketch`] (its
//   cells in `sketch/cells.rs`; decided under the key's shard lock, `table/evict.rs`, and read
//   by the key's insert, `table/entry.rs`, so that no insert misses a check of the sketch).
// - `lock.rs` (a shard's insert lock and the figures it publishes), `builder.rs`, `error.rs`.
//
// Checked by the unit tests and `tests/keyed_table.rs` (also under Miri with its default flags:
// `crates/kova/miri.sh` runs the unit tests of `keyed::`, and with `--full` `keyed_table`),
// the other integration tests `tests/keyed_*.rs` (threads against a model, floods, leaks) and
// `tests/linearizable.rs` (random concurrent histories), the loom models (`loom-tests/`,
// through `crate::loom`, whose should-fail switches are `loom/faults.rs`) and the
// `keyed_table` and `whole_api` fuzz targets.

mod barrier;
mod builder;
mod door;
mod epoch;
mod error;
mod hot;
mod line;
mod lock;
mod policy;
mod quotas;
mod reclaim;
mod scan_order;
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

/// How many keys one shard of `max_keys` keys holds before it first grows its array: for the
/// loom models that race the growth itself.
#[cfg(kova_loom)]
pub(crate) fn keys_before_first_growth(max_keys: usize) -> usize {
    line::keys_in_first_array(max_keys)
}

pub use builder::KeyedBuilder;
pub use error::KeyedError;
pub use hot::{HotKeys, CONTENTION_WINDOW, DEFAULT_PROMOTE_AFTER};
pub use policy::TableFullPolicy;
pub use table::{Keyed, KeyedReservation};
pub use word::MAX_HOT_KEYS;
