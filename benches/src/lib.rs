//! # kova-bench: what kova costs and how exactly it limits, side by side with its peers
//!
//! The report binary (`cargo run --release -p kova-bench`) measures, in one run:
//! - **throughput** of every kova algorithm, of governor (direct and keyed, on its defaults and
//!   on its fast configuration), of a plain `Mutex`
//!   token bucket, of iopsystems' `ratelimit` and `leaky-bucket` (direct), of pingora's `Rate`
//!   (keyed), and of floors (a bare `AtomicU64` CAS loop, a bare random read over an array
//!   as large as the 1M-key table, a bare load and clock read where every check is denied,
//!   and the CAS loop behind kova's pin), per scenario
//!   and thread count, with sampled latency, every round's rate, and each thread's share;
//! - the **admitted rate** of one key offered 10k, 100k and 1M requests per second;
//! - what the **features** beyond a check cost (several limits, waiting, reserving), each
//!   beside the check it builds on;
//! - **accuracy** against the exact sliding log on generated traces, and **memory** per key.
//!
//! It prints a markdown report and writes `report.json`, `report.md` and `throughput.svg` under
//! `<target-dir>/kova-bench/`. The criterion micro-benchmarks (`cargo bench -p kova-bench`) use the
//! same subjects.
//!
//! The pure parts (trace replay, the peers' replays, the tables and targets, the chart, the
//! README markers) are unit tested here; the measuring parts are exercised by `--quick` in CI.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod accuracy;
pub mod baseline;
pub mod catalog;
pub mod chart;
pub mod check;
pub mod cli;
pub mod comparison;
pub mod cores;
pub mod fairness_targets;
pub mod feature_floors;
pub mod feature_report;
pub mod features;
pub mod governor_tuned;
pub mod kova_tables;
pub mod machine;
pub mod markdown;
pub mod memory;
pub mod peer_accuracy;
pub mod peer_tables;
pub mod peers;
pub mod pingora;
pub mod rate;
pub mod rate_targets;
pub mod readme;
pub mod replay;
pub mod report;
pub mod rounds;
pub mod scenario_keys;
pub mod scenarios;
pub mod sketch_accuracy;
pub mod sketch_subject;
pub mod sketch_targets;
pub mod stats;
pub mod subject;
pub mod summary;
pub mod target_ratio;
pub mod targets;
pub mod throughput;
pub mod trace;
