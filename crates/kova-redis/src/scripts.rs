//! The Lua scripts, one per algorithm, each with the shared prelude in front.

use std::sync::LazyLock;

use kova::AlgorithmKind;
use redis::Script;

macro_rules! script_source {
    ($file:literal) => {
        concat!(include_str!("../scripts/prelude.lua"), include_str!(concat!("../scripts/", $file)))
    };
}

const TOKEN_BUCKET: &str = script_source!("token_bucket.lua");
const GCRA: &str = script_source!("gcra.lua");
const FIXED_WINDOW: &str = script_source!("fixed_window.lua");
const SLIDING_WINDOW_COUNTER: &str = script_source!("sliding_window_counter.lua");
const SLIDING_WINDOW_LOG: &str = script_source!("sliding_window_log.lua");

/// The full Lua source run for `kind` (prelude included), e.g. to load it by hand or review it.
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

static SCRIPTS: LazyLock<[Script; 5]> =
    LazyLock::new(|| AlgorithmKind::ALL.map(|kind| Script::new(script_source(kind))));

/// The script for `kind` (its SHA-1 computed once).
pub(crate) fn script(kind: AlgorithmKind) -> &'static Script {
    // The order of AlgorithmKind::ALL, which SCRIPTS is built from.
    let index = match kind {
        AlgorithmKind::TokenBucket => 0,
        AlgorithmKind::Gcra => 1,
        AlgorithmKind::FixedWindow => 2,
        AlgorithmKind::SlidingWindowCounter => 3,
        AlgorithmKind::SlidingWindowLog => 4,
    };
    &SCRIPTS[index]
}
