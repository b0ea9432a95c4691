//! The degrade failure policy: while Redis cannot answer, each key is decided by a local
//! in-memory kova limiter at this server's share of its limit; when Redis answers again, the
//! units the local limiter still counts as used are charged to Redis before the key's next
//! check there.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use crossbeam_utils::CachePadded;

use kova::keyed::{KeyedError, TableFullPolicy};
use kova::{
    AlgorithmKind, CheckError, Decision, Fallback, FixedWindow, Gcra, Keyed, Quota, SlidingWindowCounter,
    SlidingWindowLog, TokenBucket,
};

use crate::clock::LocalClock;
use crate::limit::RedisLimit;

/// One keyed table per algorithm, keyed by the Redis key (which names the algorithm too).
pub(crate) struct Degraded {
    servers: u64,
    token_bucket: Keyed<Vec<u8>, TokenBucket, LocalClock>,
    gcra: Keyed<Vec<u8>, Gcra, LocalClock>,
    fixed_window: Keyed<Vec<u8>, FixedWindow, LocalClock>,
    sliding_window_counter: Keyed<Vec<u8>, SlidingWindowCounter, LocalClock>,
    sliding_window_log: Keyed<Vec<u8>, SlidingWindowLog, LocalClock>,
    /// Set by the first local decision: until then a check looks up no local state at all.
    used: AtomicBool,
    /// Keys by stripe (a hash of the Redis key), so that forgetting what Redis was paid can
    /// tell the units admitted since `owed` read the state, and none is admitted meanwhile.
    stripes: Box<[CachePadded<Stripe>]>,
    hasher: ahash::RandomState,
}

/// How many stripes: keys sharing one only make forgetting keep more than it must (Redis is then
/// charged again for units already paid: stricter, never looser).
const STRIPES: usize = 256;

#[derive(Default)]
struct Stripe {
    /// Shared by local decisions, exclusive while a key's paid state is forgotten.
    lock: RwLock<()>,
    /// The units local decisions of the stripe's keys have admitted, wrapping.
    admitted: AtomicU64,
}

/// What [`Degraded::owed`] read: the units to charge Redis, and where the key's stripe stood
/// then, for [`Degraded::forget_paid`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owed {
    units: u64,
    admitted: u64,
}

impl Owed {
    /// The units to charge Redis.
    pub(crate) fn units(&self) -> u64 {
        self.units
    }
}

impl fmt::Debug for Degraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Degraded").field("servers", &self.servers).finish_non_exhaustive()
    }
}

/// Runs `$body` with `$table` bound to the table of `$kind`.
macro_rules! on_table {
    ($self:ident, $kind:expr, $table:ident => $body:expr) => {
        match $kind {
            AlgorithmKind::TokenBucket => {
                let $table = &$self.token_bucket;
                $body
            }
            AlgorithmKind::Gcra => {
                let $table = &$self.gcra;
                $body
            }
            AlgorithmKind::FixedWindow => {
                let $table = &$self.fixed_window;
                $body
            }
            AlgorithmKind::SlidingWindowCounter => {
                let $table = &$self.sliding_window_counter;
                $body
            }
            AlgorithmKind::SlidingWindowLog => {
                let $table = &$self.sliding_window_log;
                $body
            }
        }
    };
}

#[expect(
    clippy::expect_used,
    reason = "1 per second is a quota every algorithm holds, and the builder checked max_keys (1 to MAX_LOCAL_KEYS)"
)]
fn table<A: kova::Algorithm>(clock: &LocalClock, max_keys: usize) -> Keyed<Vec<u8>, A, LocalClock> {
    // Any quota the five algorithms accept: every check passes the limit's own share.
    let default = Quota::per_second(1).expect("1 per second is a valid quota");
    Keyed::builder(default)
        .clock(clock.clone())
        .max_keys(max_keys)
        .table_full(TableFullPolicy::DenyNew)
        .build()
        .expect("1 per second is valid for every algorithm")
}

impl Degraded {
    pub(crate) fn new(servers: NonZeroU32, clock: LocalClock, max_keys: usize) -> Self {
        Degraded {
            servers: u64::from(servers.get()),
            token_bucket: table(&clock, max_keys),
            gcra: table(&clock, max_keys),
            fixed_window: table(&clock, max_keys),
            sliding_window_counter: table(&clock, max_keys),
            sliding_window_log: table(&clock, max_keys),
            used: AtomicBool::new(false),
            stripes: (0..STRIPES).map(|_| CachePadded::default()).collect(),
            hasher: ahash::RandomState::new(),
        }
    }

    #[expect(clippy::indexing_slicing, reason = "the index is taken modulo the STRIPES stripes")]
    fn stripe(&self, key: &[u8]) -> &Stripe {
        // Truncating the hash keeps its low bits, which the modulo reads.
        #[expect(clippy::cast_possible_truncation, reason = "only the low bits are used")]
        let hash = self.hasher.hash_one(key) as usize;
        &self.stripes[hash % STRIPES]
    }

    /// This server's share of `limit`: the limit's own local quota when it has one, else its
    /// (effective) quota divided by the server count, at least one unit.
    pub(crate) fn share(&self, limit: &RedisLimit) -> Option<Quota> {
        if let Some(quota) = limit.local_quota() {
            return Some(quota);
        }
        let quota = limit.effective_quota();
        let n = self.servers;
        match limit.kind() {
            AlgorithmKind::Gcra | AlgorithmKind::TokenBucket => {
                // The rate over n (n times the interval), the burst over n.
                let interval = limit.step_nanos().checked_mul(n)?;
                Quota::from_nanos(1, interval).and_then(|q| q.with_burst((quota.burst() / n).max(1))).ok()
            }
            _ => Quota::from_nanos((quota.limit() / n).max(1), quota.period_nanos()).ok(),
        }
    }

    /// Decides `cost` for `key` locally, marked [`Fallback::StoreUnavailableLocal`] (or the
    /// table's own fallback when it is full of other keys). A cost above the share's capacity,
    /// or a share kova cannot build, is denied for `retry_nanos`.
    pub(crate) fn decide(&self, key: &[u8], limit: &RedisLimit, cost: u64, retry_nanos: u64) -> Decision {
        let denied = || {
            Decision::denied(limit.capacity(), 0, retry_nanos, retry_nanos)
                .with_fallback(Fallback::StoreUnavailableLocal)
        };
        let Some(share) = self.share(limit) else { return denied() };
        // Relaxed: a hint that local state may exist; `settle` reads it before looking the key
        // up, and a check that misses a state set concurrently only charges Redis less for it
        // once (see `StoreFailurePolicy::Degrade`).
        self.used.store(true, Ordering::Relaxed);
        let stripe = self.stripe(key);
        let key = key.to_vec();
        let decided = {
            let _shared = stripe.lock.read().unwrap_or_else(PoisonError::into_inner);
            let decided = on_table!(self, limit.kind(), table => table.check_n_with_quota(&key, share, cost));
            if cost > 0 && matches!(&decided, Ok(decision) if decision.is_allowed()) {
                // Release: `owed` reading this count sees the state that holds these units.
                stripe.admitted.fetch_add(cost, Ordering::Release);
            }
            decided
        };
        match decided {
            Ok(decision) => marked_local(decision),
            Err(KeyedError::Check(CheckError::CostExceedsCapacity { .. })) | Err(_) => denied(),
        }
    }

    /// The units `key` has used locally that its local limiter still counts (`capacity -
    /// remaining`, as kova's `Keyed::set_quota` counts them), or `None` when it holds no local
    /// state for `limit`.
    pub(crate) fn owed(&self, key: &[u8], limit: &RedisLimit) -> Option<Owed> {
        // Relaxed: see `decide`.
        if !self.used.load(Ordering::Relaxed) {
            return None;
        }
        // Read before the state: units admitted after it count in `forget_paid`'s difference,
        // those before it in the state (Acquire: see `decide`).
        let admitted = self.stripe(key).admitted.load(Ordering::Acquire);
        let key = key.to_vec();
        let units = on_table!(self, limit.kind(), table => {
            table.quota_of(&key)?;
            let peek = table.peek(&key);
            peek.limit().saturating_sub(peek.remaining())
        });
        Some(Owed { units, admitted })
    }

    /// Forgets what `key` owed (`owed`, read before Redis was charged it) and nothing admitted
    /// locally since: when a local decision came in between (a check whose call timed out, on
    /// this key or another of its stripe), the state is started again with those units, at
    /// now (they count as long as before, or longer). The algorithms cannot all give units
    /// back, nor tell which units came after `owed`: starting again is the same for all five,
    /// and never charges Redis less than was admitted.
    pub(crate) fn forget_paid(&self, key: &[u8], limit: &RedisLimit, owed: Owed) {
        let stripe = self.stripe(key);
        // No local decision of the stripe runs while the state is replaced.
        let _only = stripe.lock.write().unwrap_or_else(PoisonError::into_inner);
        let since = stripe.admitted.load(Ordering::Relaxed).wrapping_sub(owed.admitted);
        let key = key.to_vec();
        on_table!(self, limit.kind(), table => {
            if since == 0 {
                table.remove(&key);
                return;
            }
            let Some(share) = table.quota_of(&key) else { return };
            let peek = table.peek(&key);
            // `since` counts this key's admissions since `owed` and those of the stripe's other
            // keys (and undone ones): the key's own lie between what its state counts beyond what
            // was paid and `since`, and the larger is kept (what was paid may have left the
            // state meanwhile, a refill or a window's end during the round trip, so the smaller
            // would lose units admitted meanwhile); at most what the state still counts.
            let counted = peek.limit().saturating_sub(peek.remaining());
            let unpaid = since.min(counted);
            table.remove(&key);
            if unpaid > 0 {
                // Under its own share, on the room the removal made: admitted (unless a full
                // table gave that room to another key meanwhile).
                let _ = table.check_n_with_quota(&key, share, unpaid);
            }
        });
    }

    /// Gives back `cost` units a local decision of `key` took (a composite's check that a
    /// later limit denied): whether the key held local state that took them. The sliding window
    /// log takes no refunds.
    pub(crate) fn refund(&self, key: &[u8], limit: &RedisLimit, cost: u64) -> bool {
        let key = key.to_vec();
        on_table!(self, limit.kind(), table => table.refund(&key, cost))
    }

    /// Forgets `key`'s local state, whatever it holds (a reset).
    pub(crate) fn forget(&self, key: &[u8], limit: &RedisLimit) {
        let key = key.to_vec();
        on_table!(self, limit.kind(), table => table.remove(&key));
    }

    /// Keys holding local state, over all algorithms.
    pub(crate) fn len(&self) -> usize {
        self.token_bucket.len()
            + self.gcra.len()
            + self.fixed_window.len()
            + self.sliding_window_counter.len()
            + self.sliding_window_log.len()
    }
}

/// A local table's decision as the degraded limiter reports it: [`Fallback::StoreUnavailableLocal`],
/// also when the table could not move the key's state to a new share at once and decided it under
/// its previous one (`QuotaNotMoved`: still a local decision, which the callers must refund and
/// settle as one); the table's own fallback when it is full of other keys.
fn marked_local(decision: Decision) -> Decision {
    match decision.fallback() {
        None | Some(Fallback::QuotaNotMoved) => decision.with_fallback(Fallback::StoreUnavailableLocal),
        Some(_) => decision,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kova::{Clock, ManualClock, Quota};

    use super::*;

    fn degraded(clock: &ManualClock) -> Degraded {
        let clock: Arc<dyn Clock> = Arc::new(clock.clone());
        Degraded::new(NonZeroU32::MIN, LocalClock::new(Some(&clock)), 64)
    }

    /// A unit admitted locally between reading what is owed and forgetting what was paid stays
    /// owed, whatever the algorithm; with none in between, the state is forgotten.
    #[test]
    fn forgetting_what_was_paid_keeps_a_unit_admitted_meanwhile() {
        let clock = ManualClock::starting_at(1_000_000_000_000);
        let degraded = degraded(&clock);
        for kind in AlgorithmKind::ALL {
            let limit = RedisLimit::new(kind, Quota::per_second(10).unwrap()).unwrap();
            for _ in 0..3 {
                assert!(degraded.decide(b"k", &limit, 1, 0).is_allowed(), "{kind}");
            }
            let owed = degraded.owed(b"k", &limit).unwrap();
            assert_eq!(owed.units(), 3, "{kind}");
            // Redis is charged 3 units here; meanwhile a call that timed out is decided locally.
            assert!(degraded.decide(b"k", &limit, 1, 0).is_allowed(), "{kind}");
            degraded.forget_paid(b"k", &limit, owed);
            assert_eq!(degraded.owed(b"k", &limit).map(|o| o.units()), Some(1), "{kind}");

            let owed = degraded.owed(b"k", &limit).unwrap();
            degraded.forget_paid(b"k", &limit, owed);
            assert!(degraded.owed(b"k", &limit).is_none(), "{kind}");
        }
        assert_eq!(degraded.len(), 0);
    }

    /// A unit admitted meanwhile stays owed although paid units left the state during the round
    /// trip (GCRA refilled 100 ms of them): what the key counts beyond what was paid would say
    /// none. And an admission of another key of the same stripe meanwhile keeps at most that
    /// many of this key's units owed (Redis charged again: the stricter error).
    #[test]
    fn a_unit_admitted_meanwhile_stays_owed_though_paid_units_refilled() {
        let clock = ManualClock::starting_at(1_000_000_000_000);
        let degraded = degraded(&clock);
        let limit = RedisLimit::new(AlgorithmKind::Gcra, Quota::per_second(10).unwrap()).unwrap();
        for _ in 0..3 {
            assert!(degraded.decide(b"k", &limit, 1, 0).is_allowed());
        }
        let owed = degraded.owed(b"k", &limit).unwrap();
        clock.advance(std::time::Duration::from_millis(100));
        assert!(degraded.decide(b"k", &limit, 1, 0).is_allowed());
        degraded.forget_paid(b"k", &limit, owed);
        assert_eq!(degraded.owed(b"k", &limit).map(|o| o.units()), Some(1));
    }

    #[test]
    fn another_keys_admission_meanwhile_keeps_at_most_as_many_owed() {
        let clock = ManualClock::starting_at(1_000_000_000_000);
        let degraded = degraded(&clock);
        let limit = RedisLimit::new(AlgorithmKind::Gcra, Quota::per_second(10).unwrap()).unwrap();
        let index = |key: &[u8]| std::ptr::from_ref(degraded.stripe(key)) as usize;
        let other = (0u32..)
            .map(|n| format!("other-{n}").into_bytes())
            .find(|key| index(key) == index(b"k"))
            .expect("a key of the same stripe");
        for _ in 0..3 {
            assert!(degraded.decide(b"k", &limit, 1, 0).is_allowed());
        }
        let owed = degraded.owed(b"k", &limit).unwrap();
        assert!(degraded.decide(&other, &limit, 1, 0).is_allowed());
        degraded.forget_paid(b"k", &limit, owed);
        assert_eq!(degraded.owed(b"k", &limit).map(|o| o.units()), Some(1), "one stripe admission");
        assert_eq!(degraded.owed(&other, &limit).map(|o| o.units()), Some(1));
    }

    /// A local decision is marked local, also one decided under the key's previous share.
    #[test]
    fn a_decision_under_the_previous_share_is_still_marked_local() {
        let moved_late = Decision::allowed(5, 4, 0).with_fallback(Fallback::QuotaNotMoved);
        assert_eq!(marked_local(moved_late).fallback(), Some(Fallback::StoreUnavailableLocal));
        assert_eq!(
            marked_local(Decision::allowed(5, 4, 0)).fallback(),
            Some(Fallback::StoreUnavailableLocal)
        );
        let full = Decision::denied(5, 0, 1, 1).with_fallback(Fallback::TableFullDenied);
        assert_eq!(marked_local(full).fallback(), Some(Fallback::TableFullDenied));
    }
}
