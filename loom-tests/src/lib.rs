//! Loom model tests of kova's lock-free code.
//!
//! The core takes every atomic from its `loom` module, which is loom's under `--cfg kova_loom`, so
//! these models check the very code that ships: the single-word CAS loops (`check_cell` and
//! `refund_cell`, `algorithm/word.rs`), the sliding log's ring (`algorithm/sliding_window_log.rs`),
//! the keyed table, and the `ManualClock` they read.
//!
//! | test file | models | what a failure means |
//! |---|---|---|
//! | `word_cas.rs` | each word algorithm: contention, 3 threads, clock advanced between / during | a lost update, over-admission, or a decision no sequential order gives |
//! | `refund.rs` | refund racing checks, each word algorithm | the refund loop loses a check's update or its own |
//! | `sliding_log.rs` | ring wrap-around with 2 threads, clock still or moving | the ring over-admits or misreads a reused slot |
//! | `keyed.rs` | same new key from 2 threads; check vs remove, idle sweep, eviction | duplicate entries, lost admissions, wrong `len()` |
//! | `keyed.rs` (reclamation) | a check racing its key's removal and the reuse of its slot by a new key; a check probing an index being replaced and freed | a slot emptied or refilled under a check (loom: causality violation on the slot's key or cell), a check landing in another key's state |
//! | `hot.rs` | a check of a striped key (a lease from its slot, spent on its stripe) racing its demotion | a unit counted twice or never: admitted plus left differs from the limit |
//! | `racy.rs`, `refund.rs` | the same models on `kova::loom_racy`'s broken variants (including the real table without grace periods, and with pins that skip their fence) | (must fail: proves the models can) |
//!
//! Run them with `loom-tests/run.sh` (release build with debug assertions and a stated preemption
//! bound; `--cfg kova_loom`, which also puts the keyed table's epoch on loom's atomics). Without
//! the cfg this crate and its test files
//! compile to nothing, so a plain `cargo test --workspace` neither builds loom nor switches the
//! core to it.
//!
//! What the library part offers the tests in `tests/`:
//! - `linearize`: records of each call (cost, the clock just before and after, the result) and a
//!   search for a sequential order of them, consistent with each thread's program order, that a
//!   sequential specification reproduces exactly — the linearizability check;
//! - `specs`: those specifications: the algorithm's own pure `decide` (which tolerates a stale
//!   clock reading, as the CAS loop can produce) and kova's reference models (`kova::model`);
//! - `harness`: a `model(|| ...)` helper with the suite's default bound, and one scenario runner
//!   shared by every algorithm: a sequential prelude, 2-3 concurrent threads, an optional thread
//!   advancing the clock meanwhile, a final peek, then the checks (admission bound, final state,
//!   linearizability), run either on the real CAS loop or on a deliberately racy variant;
//! - `keyed`: the same for the keyed table: a sequential specification of a small table
//!   (including its table-full policy) and a scenario runner generic over the table, so the
//!   models run on `kova::Keyed` and on a deliberately racy table.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[cfg(kova_loom)]
pub mod door;
#[cfg(kova_loom)]
pub mod harness;
#[cfg(kova_loom)]
pub mod hot;
#[cfg(kova_loom)]
pub mod keyed;
#[cfg(kova_loom)]
pub mod keyed_limits;
#[cfg(kova_loom)]
pub mod linearize;
#[cfg(kova_loom)]
pub mod specs;
