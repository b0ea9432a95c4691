//! What the linearizability suites share (`#[path]`-included): the seeds they run, and recording
//! one history of threads that follow their plans on one shared object under a `ManualClock`.

use std::sync::Barrier;

use kova::model::lincheck::{History, Recorder};
use kova::ManualClock;

/// Histories per subject in the default run, which `cargo test` runs: a few seconds in all,
/// most of it spent starting threads.
pub const DEFAULT_HISTORIES: usize = 500;

/// `KOVA_LINCHECK_HISTORIES`, or [`DEFAULT_HISTORIES`].
pub fn histories() -> usize {
    std::env::var("KOVA_LINCHECK_HISTORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_HISTORIES)
}

/// The seeds to run: `KOVA_LINCHECK_SEED` alone, or `histories()` seeds derived from `salt`.
pub fn seeds(salt: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("KOVA_LINCHECK_SEED").ok().and_then(|v| v.parse().ok()) {
        return vec![seed];
    }
    (0..histories() as u64).map(|i| salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i).collect()
}

/// One step of a thread's plan.
#[derive(Debug, Clone, Copy)]
pub enum Step<O> {
    /// A call.
    Call(O),
    /// Move the shared clock forward.
    Advance(u64),
}

/// Runs one history: a thread per plan, each with its own `H` (what its calls hand out, say
/// reservations), calling `call`; then `finals` from one more lane once they are done.
pub fn record<O, R, H>(
    clock: &ManualClock,
    plans: &[Vec<Step<O>>],
    finals: &[O],
    call: impl Fn(&O, &mut H) -> R + Sync,
) -> History<O, R>
where
    O: Copy + Send + Sync,
    R: Clone + Send,
    H: Default,
{
    let recorder = Recorder::new(clock.clone());
    let start = Barrier::new(plans.len());
    let call = &call;
    let mut lanes = std::thread::scope(|scope| {
        let threads: Vec<_> = plans
            .iter()
            .enumerate()
            .map(|(i, steps)| {
                let (recorder, start) = (&recorder, &start);
                scope.spawn(move || {
                    let mut lane = recorder.lane(format!("thread {}", i + 1));
                    let mut held = H::default();
                    start.wait();
                    for &step in steps {
                        match step {
                            Step::Advance(nanos) => recorder.advance(nanos),
                            Step::Call(op) => {
                                lane.call(recorder, op, |op| call(op, &mut held));
                            }
                        }
                    }
                    lane
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("a thread of the history panicked")).collect::<Vec<_>>()
    });
    let mut last = recorder.lane("final calls");
    let mut held = H::default();
    for &op in finals {
        last.call(&recorder, op, |op| call(op, &mut held));
    }
    lanes.push(last);
    recorder.history(lanes)
}
