//! The sequential specification of a word limiter's whole API ([`WordApi`]): a plain `u64` driven
//! by the algorithm's own pure functions (`decide`, `refund`, `reserve`, `cancel_reservation`,
//! `charge`), as one thread calling `RateLimiter` would drive its cell. Matching it proves the
//! concurrent code adds nothing and loses nothing; the pure functions themselves are checked
//! against the reference models elsewhere (`tests/model_equivalence.rs`, the fuzz targets).

use std::fmt;

use crate::reservation::{cancel_step, max_delay_nanos, reserve_step};
use crate::reservation::{ReserveError, Settlement};
use crate::{CheckError, Decision, WordAlgorithm};

use super::Spec;

/// An operation on one limiter (or on one key of a table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `check_n(cost)` (`check()` is `Check(1)`).
    Check(u64),
    /// `peek()`.
    Peek,
    /// `refund(cost)`.
    Refund(u64),
    /// `reset()`, or a table's `remove` (both leave the state fresh).
    Reset,
    /// `reserve_n(cost)`: the reservation is known by `id` to a later `Cancel`.
    Reserve {
        /// A name for the reservation, unique in the history.
        id: u32,
        /// Units reserved.
        cost: u64,
    },
    /// `cancel()` of the reservation `id` (made earlier by the same thread).
    Cancel(u32),
    /// `settle(estimated, actual)`.
    Settle(u64, u64),
    /// `charge(cost)`.
    Charge(u64),
}

/// What an operation returned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A check's or a peek's decision.
    Decided(Result<Decision, CheckError>),
    /// What `refund` returned.
    Bool(bool),
    /// The units `cancel` gave back.
    Units(u64),
    /// Nothing to compare (`reset`; a table's `refund` or `remove`, whose answer says whether
    /// the key was held, which the specification does not know).
    Done,
    /// A reservation: how long after it was made its units may be used, and when.
    Reserved(Result<(u64, u64), ReserveError>),
    /// A settlement.
    Settled(Settlement),
    /// Units `charge` took.
    Charged(u64),
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Decided(Ok(d)) if d.is_allowed() => write!(
                f,
                "allowed(remaining {}, reset {}{})",
                d.remaining(),
                d.reset_after_nanos(),
                d.fallback().map_or(String::new(), |fb| format!(", {fb:?}"))
            ),
            Output::Decided(Ok(d)) => write!(
                f,
                "denied(remaining {}, retry {}, reset {}{})",
                d.remaining(),
                d.retry_after_nanos(),
                d.reset_after_nanos(),
                d.fallback().map_or(String::new(), |fb| format!(", {fb:?}"))
            ),
            Output::Decided(Err(e)) => write!(f, "error({e})"),
            Output::Bool(b) => write!(f, "{b}"),
            Output::Units(n) => write!(f, "{n} back"),
            Output::Done => f.write_str("done"),
            Output::Reserved(Ok((delay, ready_at))) => {
                write!(f, "reserved(delay {delay}, ready at {ready_at})")
            }
            Output::Reserved(Err(e)) => write!(f, "refused({e})"),
            Output::Settled(s) => write!(f, "{s:?}"),
            Output::Charged(n) => write!(f, "charged {n}"),
        }
    }
}

/// The state: the word, and the reservations made and not cancelled (id, cost, when their units
/// are due, the word they stored), in the order made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WordState {
    /// The packed word.
    pub word: u64,
    reservations: Vec<(u32, u64, u64, u64)>,
}

impl WordState {
    /// Forgets the reservations made (a table's reset, removal or quota change of any key:
    /// a cancel then gives nothing back), keeping the word.
    pub fn forget_reservations(&mut self) {
        self.reservations.clear();
    }
}

/// The specification; `keyed` answers [`Op::Refund`] with [`Output::Done`] (a table's refund
/// says whether the key was held) and does not compare a settlement's `refunded` (for the same
/// reason: the test records it as 0).
#[derive(Debug, Clone, Copy)]
pub struct WordApi<W> {
    /// The algorithm.
    pub algorithm: W,
    /// Whether it specifies a key of a table rather than a direct limiter.
    pub keyed: bool,
}

impl<W: WordAlgorithm> WordApi<W> {
    /// A direct limiter's specification.
    pub fn direct(algorithm: W) -> Self {
        WordApi { algorithm, keyed: false }
    }

    /// One key's specification.
    pub fn keyed(algorithm: W) -> Self {
        WordApi { algorithm, keyed: true }
    }

    /// The state of a fresh limiter (or key).
    pub fn fresh(&self) -> WordState {
        WordState { word: self.algorithm.fresh_word(), reservations: Vec::new() }
    }

    /// The state of a key that `Keyed::set_quota` moved at `now` from `from`'s quota, in state
    /// `state`, to this specification's: the units `from` counts as used then, charged to a fresh
    /// state (past the burst into the overdraft: a debt is carried over, never forgiven). Its
    /// reservations are gone: a cancel gives nothing back after a move.
    pub fn carried_over_from(&self, from: &W, state: &WordState, now: u64) -> WordState {
        let mut moved = self.fresh();
        let used = from.consumed(state.word, now);
        self.charge(&mut moved, now, used);
        moved
    }

    fn refund(&self, state: &mut WordState, now: u64, cost: u64) {
        state.word = self.algorithm.refund(state.word, now, cost);
    }

    fn charge(&self, state: &mut WordState, now: u64, cost: u64) -> u64 {
        if cost == 0 {
            return 0;
        }
        let (charged, word) = self.algorithm.charge(state.word, now, cost);
        state.word = word;
        charged
    }
}

impl<W: WordAlgorithm> Spec for WordApi<W> {
    type State = WordState;
    type Op = Op;
    type Output = Output;

    fn call(&self, state: &mut WordState, now: u64, op: &Op) -> Output {
        let algorithm = &self.algorithm;
        match *op {
            Op::Check(cost) => {
                let capacity = algorithm.capacity();
                if cost > capacity {
                    return Output::Decided(Err(CheckError::CostExceedsCapacity { cost, capacity }));
                }
                let (decision, word) = algorithm.decide(state.word, now, cost);
                state.word = word;
                Output::Decided(Ok(decision))
            }
            Op::Peek => Output::Decided(Ok(algorithm.decide(state.word, now, 0).0)),
            Op::Refund(cost) => {
                self.refund(state, now, cost);
                if self.keyed {
                    Output::Done
                } else {
                    Output::Bool(true)
                }
            }
            Op::Reset => {
                // A reset gives everything back, reserved units included: a reservation made
                // before it gives nothing back when cancelled (`RateLimiter::reset`).
                state.word = algorithm.fresh_word();
                state.reservations.clear();
                Output::Done
            }
            Op::Reserve { id, cost } => {
                let capacity = algorithm.capacity();
                if cost > capacity {
                    return Output::Reserved(Err(ReserveError::CostExceedsCapacity { cost, capacity }));
                }
                let max_delay = std::time::Duration::MAX;
                let (made, word) =
                    reserve_step(algorithm, state.word, now, cost, max_delay_nanos(max_delay), max_delay);
                state.word = word;
                Output::Reserved(made.map(|(made_at, wait, mark)| {
                    let ready_at = made_at.saturating_add(wait);
                    state.reservations.push((id, cost, ready_at, mark));
                    (ready_at - made_at, ready_at)
                }))
            }
            Op::Cancel(id) => {
                let Some(at) = state.reservations.iter().position(|r| r.0 == id) else {
                    // Refused: nothing was reserved.
                    return Output::Units(0);
                };
                let (_, cost, ready_at, mark) = state.reservations.remove(at);
                if cost == 0 {
                    return Output::Units(0);
                }
                let (back, word) = cancel_step(algorithm, state.word, now, cost, ready_at, mark);
                state.word = word;
                Output::Units(back)
            }
            Op::Settle(estimated, actual) => {
                let settlement = if actual <= estimated {
                    let back = estimated - actual;
                    if back > 0 {
                        self.refund(state, now, back);
                    }
                    let refunded = if self.keyed { 0 } else { back };
                    Settlement { refunded, ..Settlement::default() }
                } else {
                    let extra = actual - estimated;
                    let charged = self.charge(state, now, extra);
                    Settlement { refunded: 0, charged, uncharged: extra - charged }
                };
                Output::Settled(settlement)
            }
            Op::Charge(cost) => Output::Charged(self.charge(state, now, cost)),
        }
    }
}
