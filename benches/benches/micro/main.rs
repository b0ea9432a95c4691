//! Criterion micro-benchmarks of kova beside governor, one module per area:
//! - `direct`: one check on a direct limiter, allow path and deny path, per algorithm; and two
//!   threads on one limiter (`iter_custom`, threads released by a barrier);
//! - `check_n`: a check of cost 5, and a cost above the capacity (the error path);
//! - `keyed`: hits on a table of 1,000 and of 1,000,000 `u64` keys, random access;
//! - `clock`: one read of each clock.
//!
//! `cargo bench -p kova-bench` runs them all (about two minutes); add a filter such as
//! `cargo bench -p kova-bench -- direct/allow` for one group. The report binary
//! (`cargo run --release -p kova-bench`) measures the same subjects in full scenarios.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

mod check_n;
mod clock;
mod direct;
mod keyed;

fn config() -> Criterion {
    // Short runs: the suite is a quick regression check; the report binary does the long runs.
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = config();
    targets = direct::bench, check_n::bench, keyed::bench, clock::bench
}
criterion_main!(benches);
