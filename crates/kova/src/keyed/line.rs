//! The sharded table's probed array of lines: a shard's keys sit beside their words in the
//! array itself, so a check of a held key reads one line. A map of the files; each one's own
//! docs give its part of the protocol.
//!
//! - `line/shard.rs`: a shard ([`LineShard`]): the protocol between checks, which take no lock,
//!   and the lock holder, and the checks' side of it ([`LineHit`]).
//! - `line/locked.rs`: the lock holder's side ([`LineLocked`]): inserts, removals, looks before
//!   an unlink, rehashes, and the reclamation of what it retired.
//! - `line/array.rs`: the probed array: lines, each a key beside its word, in one allocation
//!   aligned for the cache and, when large, for huge pages.
//! - `line/cell.rs`: how a line's word holds its key's cell, inline or boxed, and how a boxed
//!   cell's line is hidden from checks while the lock holder looks at it.
//! - `line/sizing.rs`: how big an array is: the loads it keeps, how it grows and shrinks.
//! - `line/prefetch.rs`: hints to the CPU: loading a check's line early, and in exclusive state
//!   while the thread's checks meet other threads' writes.
//!
//! The rest of `keyed/` reaches them through the re-exports below, so that what was visible to
//! the table stays visible to it and to no one else.

mod array;
mod cell;
mod locked;
mod prefetch;
mod shard;
mod sizing;

pub(super) use cell::held_bytes;
pub(super) use locked::{LineLocked, NewKey};
pub(super) use prefetch::{note_contention, prefetch_line};
pub(super) use shard::{LineHit, LineShard, MAX_KEYS};
#[cfg(any(kova_loom, test))]
pub(super) use sizing::keys_in_first_array;
#[cfg(test)]
pub(super) use sizing::{FRESH_DEN, FRESH_NUM, SPARSE_LINES};
