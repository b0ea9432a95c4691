//! Decision: what a limiter answered, with everything an HTTP response needs.

use std::time::Duration;

/// The answer to one check.
///
/// All durations are exact for the algorithm that made the decision (tested at the edges with a
/// [`ManualClock`](crate::ManualClock)): `retry_after` is how long until this same request would be
/// allowed if nothing else happened, and `reset_after` how long until the limiter is back to full.
///
/// Every field is a whole word: a decision is built in one function and copied out of the
/// limiter's hot path, and copies of a struct with byte-sized fields read them back with wider
/// loads than they were stored with, which x86-64 cannot forward from its store buffer (a
/// stall of about a dozen cycles, measured on the keyed table's hit path). Whether a request
/// is allowed is `retry_after_nanos == 0` (a denial always waits at least 1 ns).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    limit: u64,
    remaining: u64,
    retry_after_nanos: u64,
    reset_after_nanos: u64,
    /// [`Fallback::code`], 0 for none.
    fallback: u64,
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decision")
            .field("allowed", &self.is_allowed())
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("retry_after_nanos", &self.retry_after_nanos)
            .field("reset_after_nanos", &self.reset_after_nanos)
            .field("fallback", &self.fallback())
            .finish()
    }
}

/// Why a decision was made by a failure policy instead of the algorithm.
///
/// A decision with a fallback is not a real measurement of the client's usage: the caller can tell a
/// real `allowed` from a fail-open one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// A keyed table was full of active keys; the new key was denied (fail closed).
    TableFullDenied,
    /// A keyed table was full of active keys; the new key was allowed without being tracked
    /// (fail open).
    TableFullUntracked,
    /// A shared store (for example Redis) could not be reached in time; the request was allowed
    /// (fail open).
    StoreUnavailableAllowed,
    /// A shared store could not be reached in time; the request was denied (fail closed).
    StoreUnavailableDenied,
    /// A locally cached answer (a denial remembered until its retry time, or a leased token) was
    /// used instead of asking the shared store.
    LocalCache,
    /// A shared store could not be reached in time; a local in-memory limiter at this server's
    /// share of the limit decided (allowed or denied).
    StoreUnavailableLocal,
    /// A [`StripedLimiter`](crate::striped::StripedLimiter) decided from units a stripe had leased from
    /// the central word: exact only within the striped bound (the algorithm's amount plus the
    /// units stripes hold). `remaining` counts that stripe's units and `reset_after` the time
    /// until its lease expires. Every denial of a striped limiter says so: units held by stripes
    /// might have admitted it.
    StripeLease,
    /// A [`Sketch`](crate::sketch::Sketch) decided on cells other keys may share: never more
    /// admitted than the key's own limit, but a denial may be an over-charge (a collision), and
    /// `remaining` and `retry_after` are bounds (never more remaining, never a shorter wait).
    /// Every sketch decision says so: the sketch cannot tell whether a cell is shared. The same
    /// mark for a standalone sketch and for a keyed table's
    /// [`TableFullPolicy::Sketch`](crate::keyed::TableFullPolicy::Sketch) (a key the full table does not
    /// hold): either way the decision has the same meaning and the same bound, and a table's
    /// caller tells it from the table's own decisions by the mark alone.
    Sketch,
    /// A keyed check asked for a quota its key is not held under
    /// ([`Keyed::check_n_with_quota`](crate::Keyed::check_n_with_quota)), and the key could not be
    /// moved to it at once: a move needs a line free of its grace period, and a thread that
    /// stayed pinned (preempted, or blocked in a user's key or algorithm code) held them back.
    /// The check was decided under the key's current quota, exactly as that quota decides; a
    /// later check moves the key.
    QuotaNotMoved,
}

impl Decision {
    /// An allowed decision.
    pub const fn allowed(limit: u64, remaining: u64, reset_after_nanos: u64) -> Self {
        Decision { limit, remaining, retry_after_nanos: 0, reset_after_nanos, fallback: 0 }
    }

    /// A denied decision. `retry_after_nanos` is raised to at least 1 ns: a denial always tells
    /// the client to wait.
    // Always inlined, also into other crates: left a call on an algorithm's deny branch, its
    // result comes back through memory, so the allow branch's decision is kept in memory too and
    // is later copied by loads wider than the stores that wrote it (a store-forwarding stall on
    // every admission), and the check saves registers and sets up a frame on entry.
    #[inline(always)]
    pub fn denied(limit: u64, remaining: u64, retry_after_nanos: u64, reset_after_nanos: u64) -> Self {
        Decision {
            limit,
            remaining,
            retry_after_nanos: retry_after_nanos.max(1),
            reset_after_nanos,
            fallback: 0,
        }
    }

    /// The same decision marked as made by `fallback`.
    pub fn with_fallback(self, fallback: Fallback) -> Self {
        Decision { fallback: fallback.code(), ..self }
    }

    /// A copy that the compiler cannot merge with the original: `black_box` on one field keeps
    /// it from forwarding the original's place (the keyed table's `check` says why that matters).
    #[inline(always)]
    pub(crate) fn copied(&self) -> Self {
        Decision { limit: std::hint::black_box(self.limit), ..*self }
    }

    /// Whether the request may proceed.
    #[inline]
    pub fn is_allowed(&self) -> bool {
        self.retry_after_nanos == 0
    }

    /// The most units the limiter admits at once (the burst for the bucket algorithms, the limit
    /// per window for the window algorithms).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Units that could still be admitted right now, after this decision.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until this same request would be allowed; zero when allowed.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.retry_after_nanos
    }

    /// How long until the limiter is back to full (all of `limit` available).
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.reset_after_nanos
    }

    /// `Some` when a failure policy, not the algorithm, made this decision.
    pub fn fallback(&self) -> Option<Fallback> {
        Fallback::from_code(self.fallback)
    }
}

impl Fallback {
    /// Its code in a [`Decision`]: 1 and up (0 is none). The match is exhaustive, so a new
    /// variant must be given a code here and in [`from_code`](Self::from_code).
    fn code(self) -> u64 {
        match self {
            Fallback::TableFullDenied => 1,
            Fallback::TableFullUntracked => 2,
            Fallback::StoreUnavailableAllowed => 3,
            Fallback::StoreUnavailableDenied => 4,
            Fallback::LocalCache => 5,
            Fallback::StoreUnavailableLocal => 6,
            Fallback::StripeLease => 7,
            Fallback::Sketch => 8,
            Fallback::QuotaNotMoved => 9,
        }
    }

    fn from_code(code: u64) -> Option<Fallback> {
        Some(match code {
            1 => Fallback::TableFullDenied,
            2 => Fallback::TableFullUntracked,
            3 => Fallback::StoreUnavailableAllowed,
            4 => Fallback::StoreUnavailableDenied,
            5 => Fallback::LocalCache,
            6 => Fallback::StoreUnavailableLocal,
            7 => Fallback::StripeLease,
            8 => Fallback::Sketch,
            9 => Fallback::QuotaNotMoved,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallbacks_and_verdicts_round_trip() {
        let all = [
            Fallback::TableFullDenied,
            Fallback::TableFullUntracked,
            Fallback::StoreUnavailableAllowed,
            Fallback::StoreUnavailableDenied,
            Fallback::LocalCache,
            Fallback::StoreUnavailableLocal,
            Fallback::StripeLease,
            Fallback::Sketch,
            Fallback::QuotaNotMoved,
        ];
        for fallback in all {
            assert_eq!(Fallback::from_code(fallback.code()), Some(fallback));
            let allowed = Decision::allowed(5, 4, 7).with_fallback(fallback);
            assert!(allowed.is_allowed());
            assert_eq!(
                (allowed.fallback(), allowed.remaining(), allowed.reset_after_nanos()),
                (Some(fallback), 4, 7)
            );
            let denied = Decision::denied(5, 0, 0, 9).with_fallback(fallback);
            assert!(!denied.is_allowed());
            assert_eq!((denied.fallback(), denied.retry_after_nanos()), (Some(fallback), 1));
        }
        assert_eq!(Fallback::from_code(0), None);
        assert_eq!(Fallback::from_code(10), None);
        assert_eq!(Decision::allowed(1, 0, 0).fallback(), None);
        let shown = format!("{:?}", Decision::denied(3, 0, 2, 4));
        assert!(shown.contains("allowed: false") && shown.contains("fallback: None"), "{shown}");
    }

    #[test]
    fn a_copy_keeps_every_field() {
        let denied = Decision::denied(5, 3, 11, 13).with_fallback(Fallback::TableFullDenied);
        let allowed = Decision::allowed(7, 6, 17).with_fallback(Fallback::LocalCache);
        for decision in [denied, allowed, Decision::allowed(1, 0, 0)] {
            assert_eq!(decision.copied(), decision);
        }
    }
}
