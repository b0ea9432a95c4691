//! # kova-redis: kova's rate limiters with their state in Redis
//!
//! When a service runs on several servers, a limiter per process multiplies the real limit by
//! the number of servers. `kova-redis` keeps each key's state in Redis (or Redis Cluster) and
//! decides with one Lua script per algorithm — the same decision as kova's in-memory algorithm,
//! read-modify-write done atomically in one round trip (`EVALSHA`, reloaded by itself on
//! `NOSCRIPT`).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use kova::{Fallback, Quota};
//! use kova_redis::{RedisLimit, RedisLimiter, StoreFailurePolicy};
//!
//! let limiter = RedisLimiter::builder()
//!     .timeout(Duration::from_millis(50))
//!     .store_failure(StoreFailurePolicy::FailOpen)
//!     .connect("redis://127.0.0.1:6379")
//!     .await?;
//! // Per-key quotas are passed per call: anonymous clients by IP, users by id.
//! let per_ip = RedisLimit::sliding_window_counter(Quota::per_minute(60)?)?;
//! let per_user = RedisLimit::gcra(Quota::per_second(10)?.with_burst(50)?)?;
//!
//! let decision = limiter.check("ip:203.0.113.7", &per_ip).await?;
//! let expensive = limiter.check_n("user:42", &per_user, 5).await?;
//! if decision.fallback() == Some(Fallback::StoreUnavailableAllowed) {
//!     // Redis was unreachable: allowed by the policy, not by the limit.
//! }
//! # let _ = expensive;
//! # Ok(()) }
//! ```
//!
//! ## Settling, reservations, several limits at once
//! The same operations as kova's in-memory limiters, each one script run (one round trip),
//! decision by decision equal to kova's (the conformance tests compare them on a manual clock):
//! [`RedisLimiter::settle`] (a refund, or an extra charge into GCRA's bounded
//! [overdraft](kova::Quota::with_overdraft)), [`RedisLimiter::reserve_n_within`] with Go's
//! [`Reservation::cancel`], and [`RedisLimiter::check_limits_n`] over [`Limits`] (up to four,
//! any algorithms, all or nothing: a denial takes nothing from any; every limit's keys share
//! the key's hash tag, so one cluster node decides them atomically).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use kova::Quota;
//! use kova_redis::{Limits, RedisLimit, RedisLimiter};
//! let limiter = RedisLimiter::connect("redis://127.0.0.1:6379").await?;
//!
//! // LLM tokens: check an estimate, settle the real count (debt of up to 5,000 paid off later).
//! let tokens = RedisLimit::gcra(Quota::per_minute(10_000)?.with_overdraft(5_000))?;
//! if limiter.check_n("tenant:7", &tokens, 800).await?.is_allowed() {
//!     let settled = limiter.settle("tenant:7", &tokens, 800, 1_250).await?;
//!     println!("charged {} more, {} did not fit", settled.charged, settled.uncharged);
//! }
//!
//! // Pace calls to a vendor: take 3 units now, wait at most 2 s for them.
//! let vendor = RedisLimit::gcra(Quota::per_second(10)?)?;
//! let reservation = limiter.reserve_n_within("vendor", &vendor, 3, Duration::from_secs(2)).await?;
//! tokio::time::sleep(reservation.delay()).await; // or reservation.cancel().await? if unused
//!
//! // 10 a second with bursts of 50, AND 1,000 an hour, AND 10,000 a day, all or nothing.
//! let limits = Limits::new([
//!     RedisLimit::gcra(Quota::per_second(10)?.with_burst(50)?)?,
//!     RedisLimit::gcra(Quota::per_hour(1_000)?)?,
//!     RedisLimit::sliding_window_counter(Quota::per_day(10_000)?)?,
//! ])?;
//! let d = limiter.check_limits("user:42", &limits).await?;
//! let decided = d.decision(); // the deciding limit's: RateLimit / Retry-After headers
//! println!("limit {} decided: {} left", d.decided_by(), decided.remaining());
//! for each in d.limit_decisions() { let _ = each.remaining(); } // one header per limit
//! # Ok(()) }
//! ```
//!
//! When Redis cannot answer, a composite is decided by the [`StoreFailurePolicy`] (each decision
//! marked); a settle is [`Error::Store`] under every policy (the real cost was not recorded);
//! a reservation is made, marked and empty under [`StoreFailurePolicy::FailOpen`], and
//! [`Error::Store`] under the others.
//!
//! ## Time
//! By default each script reads Redis `TIME`, so all servers share one clock and client clock
//! skew cannot matter. [`Builder::client_clock`] passes the client's time instead (tests do, to
//! be deterministic). Times are whole **microseconds** in Redis (see [`MICROS`]): a Lua number is
//! a double, exact only below 2^53, and microseconds since the Unix epoch fit until 2112 while
//! nanoseconds do not. So a [`RedisLimit`] rounds its step up to a whole microsecond, and its
//! decisions are exactly those of kova's in-memory algorithm for
//! [`RedisLimit::effective_quota`] at the same time truncated to the microsecond — except the
//! sliding window counter's `retry_after`, which is kova's rounded up to a whole microsecond
//! (the first microsecond, rather than nanosecond, at which the request fits).
//!
//! ## Integer safety
//! Every number a script computes is an integer of magnitude at most 2^53, where a double is
//! exact: times are below 2^52 µs ([`MAX_TIME_MICROS`], an [`Error::TimeOutOfRange`] past it),
//! and every span a script forms (`burst * interval`, the window, `limit * period` for the
//! counter) is at most 2^52 µs ([`MAX_SPAN_MICROS`], a [`RedisLimitError::OutOfRange`] past it), so a
//! time plus a span, a deficit plus one cost, or a count plus one cost never passes 2^53. TTLs,
//! which add the margin, are capped below 2^53 µs (285 years); no decision reads them. Integer
//! division rounds one quotient, which below 2^53 never reaches the next integer (the test
//! `integers::the_scripts_integer_division_is_exact_below_2_pow_53` checks it at the edges). The test
//! `integers::scripts_stay_exact_at_the_largest_quotas_and_times` runs every script at its
//! largest accepted quotas and at times up to 2^52 - 1 µs, decision by decision against kova's
//! exact models (`kova::model`).
//!
//! ## Keys
//! `prefix:{tag}:algorithm`, where the tag is the user's key escaped (or hashed when long) so
//! that no key can break the hash tag or address another key ([`KeyBuilder`]). Every key gets
//! a TTL equal to its reset time: idle keys vanish by themselves. A denial writes nothing.
//!
//! ## Failures
//! Every call has a timeout (default 50 ms). Past it, or when Redis fails, the
//! [`StoreFailurePolicy`] decides and says so in [`Decision::fallback`](kova::Decision::fallback).
//! The connection is re-established by itself after Redis restarts.
//! [`StoreFailurePolicy::Degrade`] decides with a local in-memory kova limiter at this server's share
//! of the limit instead of failing open or closed ([`Fallback::StoreUnavailableLocal`](kova::Fallback::StoreUnavailableLocal)),
//! and charges what it admitted to Redis when Redis answers again.
//!
//! ## Batching
//! On one node, up to [`Builder::max_in_flight`] script calls overlap on the connection; checks
//! that arrive while they are in flight wait and go together as one run of a batch script (the
//! five algorithms' Lua functions, at most 128 checks), decided in the order they queued, each
//! exactly as it would be alone (the conformance suite runs batched too). A check that finds a
//! free flight goes alone as its own script. [`RedisLimiter::batch_stats`] counts batches, their
//! sizes and the time checks waited. A cluster connection sends every check as its own call.
//!
//! ## Local acceleration (off by default)
//! [`Builder::cache_denials`] answers a denied key locally until its retry time;
//! [`Builder::leasing`] leases units for hot keys so most of their decisions need no round
//! trip, with the overshoot across servers bounded as documented on [`Leasing`]. Both mark
//! their decisions [`Fallback::LocalCache`](kova::Fallback::LocalCache).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// Nothing a caller or a Redis reply passes makes the library panic: a new panic site is a
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

mod batch;
mod builder;
mod call;
mod clock;
mod composite;
mod counter;
mod degrade;
mod error;
mod key;
mod leasing;
mod limit;
mod limiter;
mod local;
mod node;
mod policy;
mod reserve;
mod scripts;
mod settle;
mod store;

pub use batch::BatchStats;
pub use builder::{Builder, MAX_LOCAL_KEYS};
pub use composite::Limits;
pub use error::{Error, StoreError};
pub use key::{KeyBuilder, PrefixError, MAX_PREFIX, MAX_VERBATIM_KEY};
pub use kova::reservation::Settlement;
pub use leasing::Leasing;
pub use limit::{RedisLimit, RedisLimitError, MAX_LOG_LIMIT, MAX_SPAN_MICROS, MAX_TIME_MICROS, MICROS};
pub use limiter::{RedisLimiter, Stats};
pub use policy::StoreFailurePolicy;
pub use reserve::Reservation;
pub use scripts::{batch_script_source, operation_script_source, script_source, Operation};
