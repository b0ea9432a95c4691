//! Settling a cost after the fact in Redis: a refund when the real cost was lower than the
//! estimate checked, an extra charge (into GCRA's bounded overdraft) when higher. Mirrors kova's
//! `RateLimiter::settle`, `charge` and `refund` (crates/kova/src/settle.rs).

use kova::reservation::Settlement;
use kova::AlgorithmKind;

use crate::error::{Error, StoreError};
use crate::limit::{RedisLimit, MAX_SPAN_MICROS};
use crate::limiter::RedisLimiter;
use crate::scripts::{arg_now, index, operation_script, Operation};

impl RedisLimiter {
    /// Settles a check of `estimated` units whose real cost turned out to be `actual` (an LLM
    /// call's tokens, known from the response), as kova's
    /// [`RateLimiter::settle`](kova::RateLimiter::settle) does, in one script run: a refund of
    /// the difference when lower, an extra charge when higher. The extra charge never waits and
    /// is never denied: it takes what is left, then, for GCRA, runs into a debt of up to the
    /// quota's [overdraft](kova::Quota::with_overdraft) that later checks pay off (they are
    /// denied until it has refilled); what does not fit is reported `uncharged`.
    ///
    /// Bound (GCRA, interval `T`, burst `B`, overdraft `D`): over any interval of length `L`,
    /// checks plus extra charges take at most `B + D + L / T` units.
    ///
    /// **When Redis cannot answer**, a settle is [`Error::Store`] under every failure policy:
    /// the real cost could not be recorded, and a made-up [`Settlement`] would hide that (a
    /// fail-open "charged" that charged nothing would silently grant the difference). Nothing
    /// was refunded or charged; the caller may settle again. The sliding window log takes no
    /// refunds: [`Error::Unsupported`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use kova::Quota;
    /// use kova_redis::{RedisLimit, RedisLimiter};
    /// let limiter = RedisLimiter::connect("redis://127.0.0.1:6379").await?;
    /// let tokens = RedisLimit::gcra(Quota::per_minute(10_000)?.with_overdraft(5_000))?;
    /// if limiter.check_n("tenant:7", &tokens, 800).await?.is_allowed() {
    ///     // ... the response used 1,500 tokens:
    ///     let settled = limiter.settle("tenant:7", &tokens, 800, 1_500).await?;
    ///     assert_eq!(settled.charged + settled.uncharged, 700);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settle(
        &self,
        key: impl AsRef<[u8]>,
        limit: &RedisLimit,
        estimated: u64,
        actual: u64,
    ) -> Result<Settlement, Error> {
        if actual <= estimated {
            let refunded = estimated - actual;
            self.refund(key, limit, refunded).await?;
            return Ok(Settlement { refunded, ..Settlement::default() });
        }
        let extra = actual - estimated;
        let charged = self.charge(key, limit, extra).await?;
        Ok(Settlement { refunded: 0, charged, uncharged: extra - charged })
    }

    /// Charges up to `cost` units now, never denied (see [`settle`](Self::settle)): takes what
    /// is left, then up to the quota's overdraft (GCRA). Returns the units charged.
    pub async fn charge(&self, key: impl AsRef<[u8]>, limit: &RedisLimit, cost: u64) -> Result<u64, Error> {
        let units = cost.min(debt_units(limit));
        if cost == 0 {
            supported(limit, "charge")?;
            return Ok(0);
        }
        let reply = self.run_settle(key.as_ref(), limit, "charge", units).await?;
        match reply.as_slice() {
            // Never more than was asked: a reply above it is not one of ours.
            [charged] if *charged >= 0 && (*charged as u64) <= units => Ok(*charged as u64),
            _ => Err(StoreError::Reply(format!("{reply:?}")).into()),
        }
    }

    /// Gives back `cost` units an earlier allowed check of `key` took, as kova's
    /// [`RateLimiter::refund`](kova::RateLimiter::refund) does: the state becomes what it would
    /// be had that check never happened, or full, never beyond; units whose window has passed
    /// are not given back. A store failure is [`Error::Store`] whatever the policy. A denial
    /// this limiter cached locally ([`Builder::cache_denials`](crate::Builder::cache_denials))
    /// still answers until its retry time (stricter, never looser).
    pub async fn refund(&self, key: impl AsRef<[u8]>, limit: &RedisLimit, cost: u64) -> Result<(), Error> {
        supported(limit, "refund")?;
        if cost == 0 {
            return Ok(());
        }
        // Giving back more than any state holds is giving back all of it: the clamp keeps
        // `cost * step` exact in the script.
        let units = cost.min(refund_units(limit));
        let reply = self.run_settle(key.as_ref(), limit, "refund", units).await?;
        match reply.as_slice() {
            [0] => Ok(()),
            _ => Err(StoreError::Reply(format!("{reply:?}")).into()),
        }
    }

    async fn run_settle(
        &self,
        key: &[u8],
        limit: &RedisLimit,
        op: &str,
        units: u64,
    ) -> Result<Vec<i64>, Error> {
        let operation = if op == "refund" { "refund" } else { "charge" };
        supported(limit, operation)?;
        let now = self.now_micros()?;
        let deadline = self.deadline();
        let key = self.keys().key(key, limit.kind());
        self.pay_back(&key, limit, now, deadline).await?;
        let [a, b] = limit.script_args();
        let mut invocation = operation_script(Operation::Settle).key(key.as_slice());
        arg_now(&mut invocation, now);
        invocation
            .arg(index(limit.kind()) + 1)
            .arg(op)
            .arg(units)
            .arg(self.margin_micros())
            .arg(a)
            .arg(b)
            .arg(debt_units(limit));
        Ok(self.invoke(invocation, deadline).await?)
    }
}

/// The sliding window log takes no refunds (as in kova's in-memory log).
pub(crate) fn supported(limit: &RedisLimit, operation: &'static str) -> Result<(), Error> {
    if limit.kind() == AlgorithmKind::SlidingWindowLog {
        return Err(Error::Unsupported { operation, algorithm: limit.kind().as_str() });
    }
    Ok(())
}

/// The most units one charge can take: burst + overdraft (the capacity for the algorithms
/// without a debt). At most 2^52 / interval for GCRA, checked by [`RedisLimit::new`].
fn debt_units(limit: &RedisLimit) -> u64 {
    limit.capacity() + limit.overdraft()
}

/// The units past which a refund gives back everything: enough intervals to cover the largest
/// deficit a GCRA holds (2^52 µs), or the capacity for the others (no count exceeds it).
pub(crate) fn refund_units(limit: &RedisLimit) -> u64 {
    match limit.kind() {
        AlgorithmKind::Gcra => MAX_SPAN_MICROS.div_ceil(limit.step_nanos() / crate::limit::MICROS),
        _ => limit.capacity(),
    }
}
