//! Several limits on one key in Redis, decided all or nothing in one script run: mirrors kova's
//! `Limits` (crates/kova/src/limits/), "10 a second, bursts of 50, AND 1,000 an hour".

use kova::limits::{LimitsDecision, LimitsError, MAX_LIMITS};
use kova::{CheckError, Decision, Fallback};

use crate::error::{Error, StoreError};
use crate::limit::{RedisLimit, MICROS};
use crate::limiter::RedisLimiter;
use crate::policy::StoreFailurePolicy;
use crate::scripts::{arg_now, index, operation_script, Operation};

/// Up to [`MAX_LIMITS`] [`RedisLimit`]s on one key, checked together by
/// [`RedisLimiter::check_limits_n`]: admitted only if every limit admits, and then charged to
/// every limit; a denial takes nothing from any. The limits may mix algorithms.
///
/// Every limit's state lives under the key's own hash tag (`prefix:{tag}:limits:<i>:alg`), so a
/// cluster holds all of them on one node and one script decides them atomically, in one round
/// trip: exactly kova's sequential composite, under any concurrency. A composite's state is its
/// own: the same limit checked alone on the same key uses another Redis key.
///
/// ```
/// use kova::Quota;
/// use kova_redis::{Limits, RedisLimit};
/// let limits = Limits::new([
///     RedisLimit::gcra(Quota::per_second(10)?.with_burst(50)?)?,
///     RedisLimit::gcra(Quota::per_hour(1_000)?)?,
///     RedisLimit::fixed_window(Quota::per_day(10_000)?)?,
/// ])?;
/// assert_eq!((limits.len(), limits.capacity()), (3, 50));
/// assert!(Limits::new([]).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limits {
    limits: Vec<RedisLimit>,
    capacity: u64,
}

impl Limits {
    /// The limits, in order (the order of [`LimitsDecision::limit_decisions`]):
    /// [`LimitsError::Empty`] for none, [`LimitsError::TooMany`] past [`MAX_LIMITS`].
    pub fn new(limits: impl IntoIterator<Item = RedisLimit>) -> Result<Self, LimitsError> {
        let limits: Vec<RedisLimit> = limits.into_iter().collect();
        if limits.len() > MAX_LIMITS {
            return Err(LimitsError::TooMany { count: limits.len(), max: MAX_LIMITS });
        }
        let capacity = limits.iter().map(RedisLimit::capacity).min().ok_or(LimitsError::Empty)?;
        Ok(Limits { limits, capacity })
    }

    /// The limits, in order.
    pub fn limits(&self) -> &[RedisLimit] {
        &self.limits
    }

    /// How many limits.
    pub fn len(&self) -> usize {
        self.limits.len()
    }

    /// Always false: a composite has at least one limit.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// The most units one check can be admitted for (the smallest capacity).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

impl RedisLimiter {
    /// Checks one unit of `key` against every limit of `limits`, all or nothing.
    pub async fn check_limits(
        &self,
        key: impl AsRef<[u8]>,
        limits: &Limits,
    ) -> Result<LimitsDecision, Error> {
        self.check_limits_n(key, limits, 1).await
    }

    /// How `key` stands against every limit of `limits`, changing nothing.
    pub async fn peek_limits(&self, key: impl AsRef<[u8]>, limits: &Limits) -> Result<LimitsDecision, Error> {
        self.check_limits_n(key, limits, 0).await
    }

    /// Checks `cost` units of `key` against every limit of `limits` in one script run: if every
    /// limit admits, each takes the cost; otherwise none takes anything. The answer names the
    /// deciding limit ([`LimitsDecision::decided_by`]: the one with least left, or the denying
    /// one to wait for longest) and carries every limit's decision for its headers, as kova's
    /// in-memory [`Limits`](kova::limits::Limits) does. A cost above the smallest capacity is
    /// [`Error::Cost`]; 0 is a peek. Composites always ask Redis: the local layer's leases and
    /// denial cache are for single limits.
    ///
    /// **When Redis cannot answer** the failure policy decides every limit, each decision
    /// marked: fail open admits (`remaining` 0, [`Fallback::StoreUnavailableAllowed`]), fail
    /// closed denies ([`Fallback::StoreUnavailableDenied`]), and
    /// [`Degrade`](StoreFailurePolicy::Degrade) checks each limit's local share in order, giving
    /// back what the earlier ones took when a later one denies
    /// ([`Fallback::StoreUnavailableLocal`]; a sliding window log's local units are not given
    /// back, which is stricter).
    pub async fn check_limits_n(
        &self,
        key: impl AsRef<[u8]>,
        limits: &Limits,
        cost: u64,
    ) -> Result<LimitsDecision, Error> {
        if cost > limits.capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity: limits.capacity }.into());
        }
        let now = self.now_micros()?;
        let deadline = self.deadline();
        let keys: Vec<Vec<u8>> = (limits.limits.iter().enumerate())
            .map(|(i, limit)| self.keys().limits_key(key.as_ref(), i, limit.kind()))
            .collect();
        let mut reply = Ok(());
        for (key, limit) in keys.iter().zip(&limits.limits) {
            reply = self.pay_back(key, limit, now, deadline).await;
            if reply.is_err() {
                break;
            }
        }
        let raw = match reply {
            Ok(()) => self.invoke(limits_invocation(self, &keys, limits, now, cost), deadline).await,
            Err(e) => Err(e),
        };
        match raw.and_then(|raw| parse(&raw, limits)) {
            Ok(decision) => Ok(decision),
            Err(error) => self.limits_unavailable(&keys, limits, cost, error),
        }
    }

    /// Puts every limit of `limits` back to fresh for `key`. A store failure is [`Error::Store`]
    /// whatever the policy.
    pub async fn reset_limits(&self, key: impl AsRef<[u8]>, limits: &Limits) -> Result<(), Error> {
        let keys: Vec<Vec<u8>> = (limits.limits.iter().enumerate())
            .map(|(i, limit)| self.keys().limits_key(key.as_ref(), i, limit.kind()))
            .collect();
        for key in &keys {
            self.delete_key(key).await?;
        }
        Ok(())
    }

    fn limits_unavailable(
        &self,
        keys: &[Vec<u8>],
        limits: &Limits,
        cost: u64,
        error: StoreError,
    ) -> Result<LimitsDecision, Error> {
        let retry = self.unavailable_retry_nanos();
        let each = |decide: &dyn Fn(&RedisLimit) -> Decision| -> Vec<Decision> {
            limits.limits.iter().map(decide).collect()
        };
        let (decisions, allowed) = match self.policy() {
            StoreFailurePolicy::FailOpen => (
                each(&|l| {
                    Decision::allowed(l.capacity(), 0, 0).with_fallback(Fallback::StoreUnavailableAllowed)
                }),
                true,
            ),
            StoreFailurePolicy::FailClosed => (
                each(&|l| {
                    Decision::denied(l.capacity(), 0, retry, retry)
                        .with_fallback(Fallback::StoreUnavailableDenied)
                }),
                false,
            ),
            StoreFailurePolicy::Degrade { .. } => match self.degraded() {
                Some(degraded) => {
                    let mut decisions = Vec::with_capacity(keys.len());
                    let mut allowed = true;
                    for (i, (key, limit)) in keys.iter().zip(&limits.limits).enumerate() {
                        let decision = degraded.decide(key, limit, cost, retry);
                        decisions.push(decision);
                        if decision.is_allowed() {
                            continue;
                        }
                        // Check then refund, as kova's composite of three or four limits: the
                        // earlier limits give back what they took; every other limit reports a
                        // peek of its share.
                        allowed = false;
                        for (earlier, (key, limit)) in
                            decisions.iter_mut().zip(keys.iter().zip(&limits.limits)).take(i)
                        {
                            degraded.refund(key, limit, cost);
                            *earlier = degraded.decide(key, limit, 0, retry);
                        }
                        for (key, limit) in keys.iter().zip(&limits.limits).skip(i + 1) {
                            decisions.push(degraded.decide(key, limit, 0, retry));
                        }
                        break;
                    }
                    (decisions, allowed)
                }
                None => return Err(Error::Store(error)),
            },
            _ => return Err(Error::Store(error)),
        };
        self.note_fallback();
        LimitsDecision::from_decisions(&decisions, allowed).ok_or(Error::Limits(LimitsError::Empty))
    }
}

fn limits_invocation(
    limiter: &RedisLimiter,
    keys: &[Vec<u8>],
    limits: &Limits,
    now: Option<u64>,
    cost: u64,
) -> redis::ScriptInvocation<'static> {
    let mut invocation = operation_script(Operation::Limits).prepare_invoke();
    for key in keys {
        invocation.key(key.as_slice());
    }
    arg_now(&mut invocation, now);
    invocation.arg(cost).arg(limiter.margin_micros());
    for limit in &limits.limits {
        let [a, b] = limit.script_args();
        invocation.arg(index(limit.kind()) + 1).arg(a).arg(b);
    }
    invocation
}

/// The script's reply: whether admitted, then four values per limit.
fn parse(raw: &[i64], limits: &Limits) -> Result<LimitsDecision, StoreError> {
    let bad = || StoreError::Reply(format!("{raw:?}"));
    let Some((&verdict, each)) = raw.split_first() else { return Err(bad()) };
    if each.len() != 4 * limits.len() {
        return Err(bad());
    }
    let as_u64 = |v: i64| u64::try_from(v).map_err(|_| bad());
    let mut decisions = Vec::with_capacity(limits.len());
    for (limit, r) in limits.limits.iter().zip(each.chunks_exact(4)) {
        let &[allowed, remaining, retry, reset] = r else { return Err(bad()) };
        let nanos = |micros: i64| as_u64(micros)?.checked_mul(MICROS).ok_or_else(bad);
        let (remaining, retry, reset) = (as_u64(remaining)?, nanos(retry)?, nanos(reset)?);
        decisions.push(match allowed {
            1 => Decision::allowed(limit.capacity(), remaining, reset),
            0 => Decision::denied(limit.capacity(), remaining, retry, reset),
            _ => return Err(bad()),
        });
    }
    let allowed = match verdict {
        1 => true,
        0 => false,
        _ => return Err(bad()),
    };
    LimitsDecision::from_decisions(&decisions, allowed).ok_or_else(bad)
}
