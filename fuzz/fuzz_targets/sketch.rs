//! Target 6, sketch: arbitrary sequences of checks, peeks and clock advances on
//! `kova::sketch::Sketch` (one to four lines, one to eight cells per key, so keys collide),
//! compared after every step with exact per-key GCRA fed only the checks the sketch admitted: a
//! `HashMap` of key -> TAT driven by GCRA's own pure `decide`.
//!
//! Catches an over-grant (a check admitted that the key's own GCRA state denies), a decision
//! with more remaining than the key's own state gives, a peek that changes state, a decision
//! without its `Fallback::Sketch` mark.
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use kova::sketch::Sketch;
use kova::{Clock, Fallback, Gcra, ManualClock, Quota, WordAlgorithm};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Op {
    /// Key, cost.
    Check(u8, u8),
    Peek(u8),
    /// `period * n / 64`.
    Advance(u8),
}

#[derive(Debug, Arbitrary)]
struct Input {
    limit: u8,
    burst: u8,
    period: u16,
    /// 0-3: 64 << lines bytes.
    lines: u8,
    cells: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let limit = u64::from(input.limit.max(1));
    let period = u64::from(input.period.max(1)) * 1_000;
    let burst = u64::from(input.burst % 16).max(1);
    let Ok(quota) = Quota::from_nanos(limit, period).and_then(|q| q.with_burst(burst)) else { return };
    let clock = ManualClock::new();
    let sketch = Sketch::builder(quota)
        .memory_bytes(64 << (input.lines % 4))
        .cells_per_key(u32::from(input.cells % 8) + 1)
        .clock(clock.clone())
        .build()
        .expect("a valid size");
    let gcra = <Gcra as WordAlgorithm>::from_quota(quota).expect("the sketch took this quota");
    let mut exact: HashMap<u8, u64> = HashMap::new();
    for op in input.ops.iter().take(2_000) {
        match *op {
            Op::Check(key, cost) => {
                let cost = u64::from(cost) % (burst + 1);
                let decision = sketch.check_n(&key, cost).expect("cost within the burst");
                assert_eq!(decision.fallback(), Some(Fallback::Sketch));
                let tat = exact.entry(key).or_insert(gcra.fresh_word());
                let (model, new_tat) = gcra.decide(*tat, clock.now_nanos(), cost);
                if decision.is_allowed() {
                    assert!(model.is_allowed(), "key {key} over-granted: {decision:?}, exact {model:?}");
                    assert!(
                        decision.remaining() <= model.remaining(),
                        "key {key}: {decision:?} vs {model:?}"
                    );
                    *tat = new_tat;
                } else {
                    // A denial reports what is left before the check.
                    let left = gcra.decide(*tat, clock.now_nanos(), 0).0.remaining();
                    assert!(decision.remaining() <= left, "key {key}: {decision:?}, exact has {left} left");
                }
            }
            Op::Peek(key) => {
                let before = sketch.peek(&key);
                assert_eq!(sketch.peek(&key), before, "a peek changed state");
                let tat = *exact.entry(key).or_insert(gcra.fresh_word());
                assert!(before.remaining() <= gcra.decide(tat, clock.now_nanos(), 0).0.remaining());
            }
            Op::Advance(n) => clock.advance_nanos(period * u64::from(n) / 64),
        }
    }
});
