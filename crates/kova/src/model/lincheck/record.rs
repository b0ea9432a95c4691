//! Recording a history: threads share a [`Recorder`] (the global order of events, the clock and
//! the values it held) and each fills its own [`LaneRecorder`].

// The event counter is `crate::loom`'s atomic: under loom, a model's own atomic, so that a call
// that returned before another was invoked happens before it, as the counter's SeqCst
// read-modify-writes make it on real hardware. A std counter, which loom does not see, records
// the scheduler's order, in which a later call may still read what an earlier one overwrote: a
// violation of real time that no real run of the recorder allows. The mutex stays std's: the
// recorder's own, taken only by the one thread that advances the clock, it never blocks.
use std::sync::Mutex;

use crate::loom::atomic::{AtomicU64, Ordering};

use super::{Call, History, Lane, Response};
use crate::{Clock, ManualClock};

/// What the threads of one history share.
#[derive(Debug)]
pub struct Recorder {
    events: AtomicU64,
    clock: ManualClock,
    clock_values: Mutex<Vec<u64>>,
}

impl Recorder {
    /// A recorder for calls made on an object reading `clock`. Under `--cfg kova_loom`, made
    /// inside the loom model: its event counter is loom's.
    pub fn new(clock: ManualClock) -> Self {
        let now = clock.now_nanos();
        Recorder { events: AtomicU64::new(0), clock, clock_values: Mutex::new(vec![now]) }
    }

    /// The clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    fn event(&self) -> u64 {
        // SeqCst: the events' single order is the real-time order of the calls they bracket, and
        // each event happens after every earlier one (a response before a later invocation).
        self.events.fetch_add(1, Ordering::SeqCst)
    }

    /// Moves the clock forward by `nanos`, noting the value it then holds. Advances are
    /// serialised so that every value the clock passes through is known.
    pub fn advance(&self, nanos: u64) {
        let mut values = self.clock_values.lock().unwrap_or_else(|e| e.into_inner());
        self.clock.advance_nanos(nanos);
        values.push(self.clock.now_nanos());
    }

    /// An empty lane named `name`.
    pub fn lane<O, R>(&self, name: impl Into<String>) -> LaneRecorder<O, R> {
        LaneRecorder { name: name.into(), calls: Vec::new() }
    }

    /// The history of `lanes` (every thread's, once they are done).
    pub fn history<O, R>(&self, lanes: Vec<LaneRecorder<O, R>>) -> History<O, R> {
        let values = self.clock_values.lock().unwrap_or_else(|e| e.into_inner()).clone();
        History::new(lanes.into_iter().map(|l| Lane::new(l.name, l.calls)).collect(), values)
    }
}

/// The calls of one thread, as it makes them.
#[derive(Debug)]
pub struct LaneRecorder<O, R> {
    name: String,
    calls: Vec<Call<O, R>>,
}

impl<O, R: Clone> LaneRecorder<O, R> {
    /// Makes the call `f` as `op`, recording its invocation, response and the clock around it;
    /// returns what it returned.
    pub fn call(&mut self, recorder: &Recorder, op: O, f: impl FnOnce(&O) -> R) -> R {
        let invoked = recorder.event();
        let before = recorder.clock.now_nanos();
        let result = f(&op);
        let after = recorder.clock.now_nanos();
        let returned = recorder.event();
        self.calls.push(Call {
            op,
            invoked,
            before,
            response: Some(Response { returned, after, result: result.clone() }),
        });
        result
    }
}
