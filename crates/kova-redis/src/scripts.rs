//! The Lua scripts: the shared prelude, one function per algorithm, and an epilogue that makes
//! one decision (one script per algorithm) or a batch of them (one script for all five).

use std::sync::LazyLock;

use kova::AlgorithmKind;
use redis::Script;

macro_rules! single {
    ($file:literal, $function:literal) => {
        concat!(
            include_str!("../scripts/prelude.lua"),
            include_str!(concat!("../scripts/", $file)),
            "local decide = ",
            $function,
            "\n",
            include_str!("../scripts/single.lua")
        )
    };
}

const TOKEN_BUCKET: &str = single!("token_bucket.lua", "decide_token_bucket");
const GCRA: &str = single!("gcra.lua", "decide_gcra");
const FIXED_WINDOW: &str = single!("fixed_window.lua", "decide_fixed_window");
const SLIDING_WINDOW_COUNTER: &str = single!("sliding_window_counter.lua", "decide_sliding_window_counter");
const SLIDING_WINDOW_LOG: &str = single!("sliding_window_log.lua", "decide_sliding_window_log");
const BATCH: &str = concat!(
    include_str!("../scripts/prelude.lua"),
    include_str!("../scripts/token_bucket.lua"),
    include_str!("../scripts/gcra.lua"),
    include_str!("../scripts/fixed_window.lua"),
    include_str!("../scripts/sliding_window_counter.lua"),
    include_str!("../scripts/sliding_window_log.lua"),
    include_str!("../scripts/batch.lua")
);

/// The four word algorithms and their refunds and charges: what settling and reservations run.
macro_rules! with_refunds {
    ($file:literal) => {
        concat!(
            include_str!("../scripts/prelude.lua"),
            include_str!("../scripts/token_bucket.lua"),
            include_str!("../scripts/gcra.lua"),
            include_str!("../scripts/fixed_window.lua"),
            include_str!("../scripts/sliding_window_counter.lua"),
            include_str!("../scripts/refund.lua"),
            include_str!(concat!("../scripts/", $file))
        )
    };
}

const SETTLE: &str = with_refunds!("settle.lua");
const RESERVE: &str = with_refunds!("reserve.lua");
const LIMITS: &str = concat!(
    include_str!("../scripts/prelude.lua"),
    include_str!("../scripts/token_bucket.lua"),
    include_str!("../scripts/gcra.lua"),
    include_str!("../scripts/fixed_window.lua"),
    include_str!("../scripts/sliding_window_counter.lua"),
    include_str!("../scripts/sliding_window_log.lua"),
    include_str!("../scripts/limits.lua")
);

/// The scripts beside the checks: settling a cost, reservations, and several limits at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`RedisLimiter::settle`](crate::RedisLimiter::settle), `charge` and `refund`.
    Settle,
    /// [`RedisLimiter::reserve_n`](crate::RedisLimiter::reserve_n) and
    /// [`Reservation::cancel`](crate::Reservation::cancel).
    Reserve,
    /// [`RedisLimiter::check_limits_n`](crate::RedisLimiter::check_limits_n).
    Limits,
}

/// The full Lua source of `operation`'s script (prelude included).
///
/// ```
/// use kova_redis::{operation_script_source, Operation};
/// assert!(operation_script_source(Operation::Settle).contains("local function charge_gcra"));
/// ```
pub fn operation_script_source(operation: Operation) -> &'static str {
    match operation {
        Operation::Settle => SETTLE,
        Operation::Reserve => RESERVE,
        Operation::Limits => LIMITS,
    }
}

static OPERATION_SCRIPTS: LazyLock<[Script; 3]> = LazyLock::new(|| {
    [Operation::Settle, Operation::Reserve, Operation::Limits]
        .map(|op| Script::new(operation_script_source(op)))
});

/// `operation`'s script (its SHA-1 computed once).
#[expect(clippy::indexing_slicing, reason = "the array holds one script per Operation, in declaration order")]
pub(crate) fn operation_script(operation: Operation) -> &'static Script {
    &OPERATION_SCRIPTS[operation as usize]
}

/// Passes the time as a script's first argument: the client clock's microseconds, or `''` for
/// Redis `TIME`.
pub(crate) fn arg_now(invocation: &mut redis::ScriptInvocation<'_>, now: Option<u64>) {
    match now {
        Some(micros) => invocation.arg(micros),
        None => invocation.arg(""),
    };
}

/// The full Lua source run for one check of `kind` (prelude included), e.g. to load it by hand
/// or review it.
///
/// ```
/// let source = kova_redis::script_source(kova::AlgorithmKind::Gcra);
/// assert!(source.contains("redis.call('TIME')"));
/// ```
pub fn script_source(kind: AlgorithmKind) -> &'static str {
    match kind {
        AlgorithmKind::TokenBucket => TOKEN_BUCKET,
        AlgorithmKind::Gcra => GCRA,
        AlgorithmKind::FixedWindow => FIXED_WINDOW,
        AlgorithmKind::SlidingWindowCounter => SLIDING_WINDOW_COUNTER,
        AlgorithmKind::SlidingWindowLog => SLIDING_WINDOW_LOG,
    }
}

/// The full Lua source of the batch script, which decides several checks (any algorithms) in
/// one run.
///
/// ```
/// assert!(kova_redis::batch_script_source().contains("decide_sliding_window_log"));
/// ```
pub fn batch_script_source() -> &'static str {
    BATCH
}

static SCRIPTS: LazyLock<[Script; 5]> =
    LazyLock::new(|| AlgorithmKind::ALL.map(|kind| Script::new(script_source(kind))));

static BATCH_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(BATCH));

/// `kind`'s position in [`AlgorithmKind::ALL`], which is also its code in the batch script
/// (plus one).
pub(crate) fn index(kind: AlgorithmKind) -> usize {
    match kind {
        AlgorithmKind::TokenBucket => 0,
        AlgorithmKind::Gcra => 1,
        AlgorithmKind::FixedWindow => 2,
        AlgorithmKind::SlidingWindowCounter => 3,
        AlgorithmKind::SlidingWindowLog => 4,
    }
}

/// The script for one check of `kind` (its SHA-1 computed once).
#[expect(
    clippy::indexing_slicing,
    reason = "the array holds one script per AlgorithmKind::ALL, in index's order"
)]
pub(crate) fn script(kind: AlgorithmKind) -> &'static Script {
    &SCRIPTS[index(kind)]
}

/// The batch script.
pub(crate) fn batch_script() -> &'static Script {
    &BATCH_SCRIPT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_algorithm_kind_all() {
        for (i, kind) in AlgorithmKind::ALL.into_iter().enumerate() {
            assert_eq!(index(kind), i);
            assert!(script_source(kind).contains(&format!("local decide = decide_{kind}\n")));
        }
    }
}
