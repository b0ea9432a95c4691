//! # kova: lock-free rate limiting
//!
//! kova (Turkish for "bucket") limits how often each client may do something, in nanoseconds
//! per check and without locks: every algorithm's state lives in atomic words updated by
//! compare-and-swap.
//!
//! | need | type | method |
//! |---|---|---|
//! | one limit for the whole process (an outgoing API, a job queue) | [`RateLimiter`] | [`check`](RateLimiter::check), [`check_n`](RateLimiter::check_n) |
//! | a limit per client (IP, user, API key) | [`Keyed`] | [`check`](Keyed::check), [`check_n`](Keyed::check_n) |
//! | wait until allowed, async | either | [`until_n_ready`](RateLimiter::until_n_ready), `_within` for a deadline |
//! | wait until allowed, blocking | either | [`wait_n`](RateLimiter::wait_n) |
//! | units now, used later, or given back (Go's `Reserve`) | [`reservation::Reservation`], [`keyed::KeyedReservation`] | [`reserve_n`](RateLimiter::reserve_n), [`reservation::Reservation::cancel`] |
//! | a cost known only afterwards | either | [`settle`](RateLimiter::settle), [`estimate`](RateLimiter::estimate) then [`settle_estimate`](RateLimiter::settle_estimate) when the answer may come late, [`charge`](RateLimiter::charge) |
//! | several limits, all or nothing | [`limits::Limits`], [`limits::KeyedLimits`] | [`check_n`](limits::Limits::check_n) |
//! | one limit shared by many threads | [`striped::StripedLimiter`] | [`check`](striped::StripedLimiter::check) |
//! | per-client limits, a few keys hot | [`Keyed`] | [`keyed::KeyedBuilder::hot_keys`] |
//! | more clients than memory | [`sketch::Sketch`] | [`keyed::TableFullPolicy::Sketch`] behind a [`Keyed`] |
//! | a limit changed at run time | either | [`set_quota`](RateLimiter::set_quota) |
//! | tests on simulated time | [`ManualClock`], [`wait::ManualTimer`] | [`ManualClock::advance`] |
//!
//! "Either" means both limiters, with the same method: a keyed limiter's method has the direct
//! one's name and takes the key first ([the grid](#the-same-verbs-on-every-limiter)).
//!
//! ```
//! use std::time::Duration;
//! use kova::{Gcra, Keyed, ManualClock, Quota, RateLimiter};
//!
//! // 10 requests per second with bursts of up to 5, on a clock the example controls.
//! let clock = ManualClock::new();
//! let quota = Quota::per_second(10)?.with_burst(5)?;
//! let limiter = RateLimiter::<Gcra, _>::with_clock(quota, clock.clone())?;
//! for _ in 0..5 {
//!     assert!(limiter.check().is_allowed());
//! }
//! let denied = limiter.check();
//! assert!(!denied.is_allowed());
//! assert_eq!(denied.retry_after(), Duration::from_millis(100));
//! clock.advance(Duration::from_millis(100));
//! assert!(limiter.check().is_allowed());
//!
//! // Per client: each key has its own state. Expensive calls cost more.
//! let per_client = Keyed::<String, Gcra>::new(Quota::per_minute(60)?)?;
//! let decision = per_client.check_n(&"203.0.113.7".to_string(), 5)?;
//! assert_eq!(decision.remaining(), 55);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The same verbs on every limiter
//!
//! A verb means the same on every limiter, and a keyed form differs from the direct one only by
//! the key, its first argument (`limiter.check_n(5)`, `table.check_n(&key, 5)`). A `refund`
//! returns whether units were given back (`false`, changing nothing, for the sliding log, which
//! keeps no count to give back to, and for a key the table does not hold).
//!
//! | verb | [`RateLimiter`] | [`Keyed`] | [`limits::Limits`] | [`limits::KeyedLimits`] | [`striped::StripedLimiter`] |
//! |---|---|---|---|---|---|
//! | check one unit | [`check()`](RateLimiter::check) | [`check(&key)`](Keyed::check) | [`check()`](limits::Limits::check) | [`check(&key)`](limits::KeyedLimits::check) | [`check()`](striped::StripedLimiter::check) |
//! | check `n` units | [`check_n(n)`](RateLimiter::check_n) | [`check_n(&key, n)`](Keyed::check_n) | [`check_n(n)`](limits::Limits::check_n) | [`check_n(&key, n)`](limits::KeyedLimits::check_n) | [`check_n(n)`](striped::StripedLimiter::check_n) |
//! | look, changing nothing | [`peek()`](RateLimiter::peek) | [`peek(&key)`](Keyed::peek) | [`peek()`](limits::Limits::peek) | [`peek(&key)`](limits::KeyedLimits::peek) | [`peek()`](striped::StripedLimiter::peek) |
//! | give units back | [`refund(n)`](RateLimiter::refund) | [`refund(&key, n)`](Keyed::refund) | [`refund(n)`](limits::Limits::refund) | [`refund(&key, n)`](limits::KeyedLimits::refund) | |
//! | settle a cost known afterwards | [`settle(est, n)`](RateLimiter::settle) | [`settle(&key, est, n)`](Keyed::settle) | [`settle(est, n)`](limits::Limits::settle) | [`settle(&key, est, n)`](limits::KeyedLimits::settle) | |
//! | charge, never denied | [`charge(n)`](RateLimiter::charge) | [`charge(&key, n)`](Keyed::charge) | | | |
//! | back to full | [`reset()`](RateLimiter::reset) | [`reset(&key)`](Keyed::reset) | | | |
//! | reserve | [`reserve_n(n)`](RateLimiter::reserve_n), [`reserve_n_within`](RateLimiter::reserve_n_within) | [`reserve_n(&key, n)`](Keyed::reserve_n), [`reserve_n_within`](Keyed::reserve_n_within) | | | |
//! | wait, async | [`until_ready()`](RateLimiter::until_ready), [`until_n_ready(n)`](RateLimiter::until_n_ready), [`until_n_ready_within`](RateLimiter::until_n_ready_within) | [`until_ready(&key)`](Keyed::until_ready), [`until_n_ready(&key, n)`](Keyed::until_n_ready), [`until_n_ready_within`](Keyed::until_n_ready_within) | | | |
//! | wait, blocking | [`wait_n(n)`](RateLimiter::wait_n), [`wait_n_within`](RateLimiter::wait_n_within) | [`wait_n(&key, n)`](Keyed::wait_n), [`wait_n_within`](Keyed::wait_n_within) | | | |
//! | change the quota | [`set_quota(q)`](RateLimiter::set_quota) (`&mut`) | [`set_quota(&key, q)`](Keyed::set_quota) | | | |
//!
//! A blank is a verb that type does not offer. Beyond the grid: a direct reservation that owns
//! its limiter ([`reserve_n_owned`](RateLimiter::reserve_n_owned)); the keyed table's own
//! verbs ([`remove`](Keyed::remove), [`sweep_idle`](Keyed::sweep_idle),
//! [`check_n_with_quota`](Keyed::check_n_with_quota)); the striped limiter's
//! [`flush`](striped::StripedLimiter::flush). A [`wait::Pacer`] takes the limiter as an
//! argument, so its keyed forms carry `_key` in their names
//! ([`until_key_n_ready`](wait::Pacer::until_key_n_ready)).
//!
//! One number still has three names: a quota's [`burst`](Quota::burst), an algorithm's
//! [`capacity`](Algorithm::capacity) and a decision's [`limit`](Decision::limit) are each the
//! most units one check can take (for the window algorithms, the limit per window), and a cost
//! above it is [`CheckError::CostExceedsCapacity`].
//!
//! ## Building a limiter
//!
//! Every limiter is built the same way: `new(quota)` with the defaults (the coarse clock),
//! `with_clock(quota, clock)` on another clock (a [`ManualClock`] for simulated time), and,
//! where there are options, `builder(quota)`: set them (the clock with `.clock(clock)`), then
//! `.build()`. The composites take a list of quotas where the others take one. An algorithm
//! built beforehand (an [`AnyAlgorithm`] of a configured kind) takes the quota's place:
//! [`RateLimiter::from_algorithm`] and [`Keyed::builder_from_algorithm`].
//!
//! | limiter | defaults | a clock | options |
//! |---|---|---|---|
//! | [`RateLimiter`] | [`new`](RateLimiter::new) | [`with_clock`](RateLimiter::with_clock) | none ([`from_algorithm`](RateLimiter::from_algorithm)) |
//! | [`Keyed`] | [`new`](Keyed::new) | [`with_clock`](Keyed::with_clock) | [`builder`](Keyed::builder) ([`builder_from_algorithm`](Keyed::builder_from_algorithm)) |
//! | [`limits::Limits`] | [`new`](limits::Limits::new) | [`with_clock`](limits::Limits::with_clock) | none |
//! | [`limits::KeyedLimits`] | [`new`](limits::KeyedLimits::new) | [`with_clock`](limits::KeyedLimits::with_clock) | [`builder`](limits::KeyedLimits::builder) |
//! | [`striped::StripedLimiter`] | [`new`](striped::StripedLimiter::new) | [`with_clock`](striped::StripedLimiter::with_clock) | [`builder`](striped::StripedLimiter::builder) |
//! | [`sketch::Sketch`] | [`new`](sketch::Sketch::new) | [`with_clock`](sketch::Sketch::with_clock) | [`builder`](sketch::Sketch::builder) |
//!
//! ## Algorithms
//!
//! | algorithm | for | memory per key | exact? |
//! |---|---|---|---|
//! | [`Gcra`] | the default: rate + burst | 8 B | exact (interval rounded up to 1 ns) |
//! | [`TokenBucket`] | rate + burst, classic form | 8 B | exact for common quotas; see its rounding |
//! | [`FixedWindow`] | cheapest; calendar-like quotas | 8 B | per window; up to 2x across an edge |
//! | [`SlidingWindowCounter`] | near-sliding at window cost | 8 B | approximate (< 2x worst case) |
//! | [`SlidingWindowLog`] | strict sliding limit | 16 B x limit | exact |
//!
//! ## Beyond a check
//! - **Waiting**: [`RateLimiter::until_ready`] / [`until_n_ready`](RateLimiter::until_n_ready)
//!   futures (any executor), [`RateLimiter::wait_n`] (blocking), per key
//!   [`Keyed::until_ready`] / [`until_n_ready`](Keyed::until_n_ready); a [`wait::Pacer`]
//!   for fair order, jitter and other [`wait::Timer`]s.
//! - **Reservations** (Go's `Reserve`): [`RateLimiter::reserve_n`] and [`reservation::Reservation::cancel`];
//!   per key [`Keyed::reserve_n`] and [`keyed::KeyedReservation::cancel`].
//! - **Settling** a cost known only afterwards: [`RateLimiter::settle`], [`Keyed::settle`], into
//!   a bounded debt ([`Quota::with_overdraft`]); however late, from an estimate
//!   ([`RateLimiter::estimate`], [`RateLimiter::settle_estimate`], [`Keyed::settle_estimate`],
//!   [`limits::Limits::settle_estimate`], [`limits::KeyedLimits::settle_estimate`]).
//! - **Several limits** all or nothing: [`limits::Limits`], per key [`limits::KeyedLimits`].
//! - **Quota changes**: [`RateLimiter::set_quota`], [`Keyed::set_quota`].
//! - **Hot limits** shared by many threads: [`striped::StripedLimiter`], per-thread stripes leasing
//!   batches from the central word, within a stated bound; in a keyed table, opt-in
//!   [`keyed::KeyedBuilder::hot_keys`] stripes a key the table finds contended, and puts it back when
//!   it cools.
//! - **Keys too many to store**: [`sketch::Sketch`], per-key GCRA in fixed memory (64 KiB by
//!   default), keys hashed to shared cells: a collision can over-charge a key, never over-grant;
//!   or behind a keyed table, for the new keys that find it full ([`keyed::TableFullPolicy::Sketch`]).
//!
//! ## Guarantees
//! - A denial never changes state; a peek (cost 0) never changes state.
//! - No update is lost under any interleaving of threads (CAS loops; loom-checked).
//! - A clock reading older than the stored state never grants.
//! - On the default clock, any quota admits its full rate: a denial within the coarse time's
//!   lag of its retry time is decided again on the precise time ([`CoarseClock`]); every reading
//!   is monotonic for every thread, on any CPU.
//! - Bad input gets a typed error ([`QuotaError`], [`CheckError`]), never a panic.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// Bad input gets a typed error, never a panic (invariant 4): a new panic site in the library is a
// decision, taken with `#[expect(..., reason = "why it cannot fire")]`. Not in its unit tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

mod algorithm;
mod cas;
pub mod cell;
mod clock;
mod decision;
mod error;
pub mod keyed;
mod limiter;
pub mod limits;
mod loom;
#[cfg(feature = "model")]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::indexing_slicing,
    reason = "test support behind the `model` feature, not the limiters: a reference model or a checker may panic on a broken history"
)]
pub mod model;
mod quota;
mod quota_change;
pub mod reservation;
mod settle;
pub mod sketch;
pub mod striped;
pub mod wait;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

pub use algorithm::{
    Algorithm, AlgorithmKind, AnyAlgorithm, FixedWindow, Gcra, GiveBack, ParseAlgorithmKindError,
    SlidingWindowCounter, SlidingWindowLog, TokenBucket, WordAlgorithm,
};
pub use clock::{Clock, CoarseClock, ManualClock, PreciseClock};
pub use decision::{Decision, Fallback};
pub use error::CheckError;
pub use keyed::Keyed;
pub use limiter::RateLimiter;
pub use quota::{Quota, QuotaError};

/// Not part of the API: pins the thread as every keyed check does (the keyed table's own epoch),
/// until the returned guard drops. For the benchmarks' pinned floors (`kova-bench`'s
/// `floor_pin_cas`, `layout_floor`), which measure what that synchronisation costs alone.
#[doc(hidden)]
#[inline(always)]
pub fn __bench_pin() -> impl Drop {
    keyed::pin()
}

/// Deliberately broken variants of the core's CAS loops, compiled only for the loom models, which
/// must catch them (proof that the models can fail).
#[cfg(kova_loom)]
#[doc(hidden)]
pub mod loom_racy;
