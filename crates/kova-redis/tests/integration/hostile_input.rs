//! Hostile input, table-driven: every public constructor and method that takes a size, count,
//! cost, duration or key, at its edges (0, 1, the maximum, the maximum + 1, `u64::MAX` /
//! `usize::MAX`, `Duration::ZERO` / `Duration::MAX`, an empty and a 1 MiB key), answers with a
//! typed error or its documented decision, never a panic. The quota and time ranges of the
//! scripts are in `bad_input.rs`.
//!
//! Each case is named and runs as its own task on one server (a panic is that case's failure);
//! the table fails naming every failing case.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::time::Duration;

use kova::reservation::{ReserveError, Settlement};
use kova::{CheckError, Fallback, ManualClock, Quota};
use kova_redis::{
    Builder, Error, Leasing, Limits, PrefixError, RedisLimit, RedisLimitError, StoreFailurePolicy,
    MAX_LOCAL_KEYS, MAX_LOG_LIMIT, MAX_PREFIX,
};

use crate::server::RedisServer;

/// What every case gets: the server's URL and a fresh manual clock.
#[derive(Clone)]
struct Ctx {
    url: String,
    clock: ManualClock,
}

impl Ctx {
    fn builder(&self) -> Builder {
        crate::deterministic(&self.clock)
    }
}

type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Case = (&'static str, fn(Ctx) -> CaseFuture);

async fn run(url: &str, cases: &[Case]) {
    let mut failed = Vec::new();
    for &(name, case) in cases {
        let ctx = Ctx { url: url.to_string(), clock: ManualClock::starting_at(1_700_000_000_000_000_000) };
        if let Err(error) = tokio::spawn(case(ctx)).await {
            let payload = error.into_panic();
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{name}: {why}"));
        }
    }
    assert!(failed.is_empty(), "{} of {} cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}

fn gcra(limit: u64) -> RedisLimit {
    RedisLimit::gcra(Quota::per_second(limit).unwrap()).unwrap()
}

const MIB: usize = 1 << 20;

const BUILDER: &[Case] = &[
    ("local_max_keys 0 with Degrade: a typed error", |ctx| {
        Box::pin(async move {
            let degrade = StoreFailurePolicy::Degrade { servers: NonZeroU32::MIN };
            let built = ctx.builder().store_failure(degrade).local_max_keys(0).open(&ctx.url);
            assert!(
                matches!(built, Err(Error::LocalMaxKeys { max_keys: 0, max: MAX_LOCAL_KEYS })),
                "{built:?}"
            );
        })
    }),
    ("local_max_keys 0, MAX_LOCAL_KEYS + 1, usize::MAX with the denial cache: typed errors", |ctx| {
        Box::pin(async move {
            for keys in [0, MAX_LOCAL_KEYS + 1, usize::MAX] {
                let built = ctx.builder().cache_denials(true).local_max_keys(keys).open(&ctx.url);
                assert!(
                    matches!(built, Err(Error::LocalMaxKeys { max_keys, .. }) if max_keys == keys),
                    "{built:?}"
                );
            }
        })
    }),
    ("local_max_keys 1 with Degrade: a table of one key", |ctx| {
        Box::pin(async move {
            let degrade = StoreFailurePolicy::Degrade { servers: NonZeroU32::MIN };
            let limiter = ctx.builder().store_failure(degrade).local_max_keys(1).open(&ctx.url).unwrap();
            assert!(limiter.check("one-key", &gcra(5)).await.unwrap().is_allowed());
        })
    }),
    ("prefix empty, MAX_PREFIX and MAX_PREFIX + 1 bytes", |ctx| {
        Box::pin(async move {
            let empty = ctx.builder().prefix("").connect(&ctx.url).await.unwrap();
            assert!(empty.check("prefix-empty", &gcra(5)).await.unwrap().is_allowed());
            let longest = ctx.builder().prefix(&"p".repeat(MAX_PREFIX)).connect(&ctx.url).await.unwrap();
            assert!(longest.check("prefix-max", &gcra(5)).await.unwrap().is_allowed());
            let too_long = ctx.builder().prefix(&"p".repeat(MAX_PREFIX + 1)).open(&ctx.url);
            assert!(
                matches!(too_long, Err(Error::Prefix(PrefixError::TooLong { len })) if len == MAX_PREFIX + 1)
            );
        })
    }),
    ("timeout ZERO: a call not answered at once is the failure policy's, marked", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().timeout(Duration::ZERO).store_failure(StoreFailurePolicy::FailClosed);
            let limiter = limiter.open(&ctx.url).unwrap();
            for _ in 0..20 {
                let decision = limiter.check("timeout-zero", &gcra(100)).await.unwrap();
                // Answered at the first poll (Redis was quick), or denied by the policy and
                // marked so: never an unmarked guess.
                match decision.fallback() {
                    None => assert!(decision.is_allowed(), "{decision:?}"),
                    Some(fallback) => {
                        assert_eq!(
                            (fallback, decision.is_allowed()),
                            (Fallback::StoreUnavailableDenied, false)
                        )
                    }
                }
            }
        })
    }),
    ("timeout, reconnect interval, TTL margin and unavailable retry Duration::MAX", |ctx| {
        Box::pin(async move {
            let limiter = ctx
                .builder()
                .timeout(Duration::MAX)
                .reconnect_interval(Duration::MAX)
                .ttl_margin(Duration::MAX)
                .unavailable_retry_after(Duration::MAX)
                .connect(&ctx.url)
                .await
                .unwrap();
            assert!(limiter.check_n("durations-max", &gcra(5), 5).await.unwrap().is_allowed());
            assert!(!limiter.check("durations-max", &gcra(5)).await.unwrap().is_allowed());
        })
    }),
    ("max_in_flight 0 (documented: at least 1) and usize::MAX", |ctx| {
        Box::pin(async move {
            for calls in [0, usize::MAX] {
                let limiter = ctx.builder().max_in_flight(calls).connect(&ctx.url).await.unwrap();
                assert!(limiter.check(format!("in-flight-{calls}"), &gcra(5)).await.unwrap().is_allowed());
            }
        })
    }),
    ("leasing batch 0 and u64::MAX, ttl ZERO and Duration::MAX: never past the limit", |ctx| {
        Box::pin(async move {
            for (batch, ttl) in
                [(0, Duration::ZERO), (1, Duration::ZERO), (u64::MAX, Duration::MAX), (0, Duration::MAX)]
            {
                let limiter =
                    ctx.builder().leasing(Leasing::new(batch, ttl)).connect(&ctx.url).await.unwrap();
                let key = format!("lease-{batch}-{}", ttl.as_secs());
                let mut admitted = 0;
                for _ in 0..8 {
                    admitted += u64::from(limiter.check(&key, &gcra(5)).await.unwrap().is_allowed());
                }
                assert_eq!(admitted, 5, "batch {batch}, ttl {ttl:?}");
            }
        })
    }),
];

const LIMITS: &[Case] = &[
    ("RedisLimit: the sliding log at MAX_LOG_LIMIT and MAX_LOG_LIMIT + 1", |_| {
        Box::pin(async move {
            assert!(RedisLimit::sliding_window_log(Quota::per_hour(MAX_LOG_LIMIT).unwrap()).is_ok());
            assert!(matches!(
                RedisLimit::sliding_window_log(Quota::per_hour(MAX_LOG_LIMIT + 1).unwrap()),
                Err(RedisLimitError::OutOfRange { value, max: MAX_LOG_LIMIT, .. }) if value == MAX_LOG_LIMIT + 1
            ));
        })
    }),
    ("with_local_quota: burst 1, the capacity, the capacity + 1", |_| {
        Box::pin(async move {
            let limit = RedisLimit::gcra(Quota::per_second(10).unwrap()).unwrap();
            assert!(limit.with_local_quota(Quota::per_second(1).unwrap()).is_ok());
            assert!(limit.with_local_quota(Quota::per_second(10).unwrap()).is_ok());
            assert_eq!(
                limit.with_local_quota(Quota::per_second(11).unwrap()).unwrap_err(),
                RedisLimitError::OutOfRange {
                    algorithm: "gcra",
                    field: "local quota burst",
                    value: 11,
                    max: 10
                }
            );
        })
    }),
    ("Limits of none, of MAX_LIMITS, of MAX_LIMITS + 1", |_| {
        Box::pin(async move {
            assert_eq!(Limits::new([]).unwrap_err(), kova::limits::LimitsError::Empty);
            assert_eq!(
                Limits::new(vec![gcra(1); kova::limits::MAX_LIMITS]).unwrap().len(),
                kova::limits::MAX_LIMITS
            );
            assert_eq!(
                Limits::new(vec![gcra(1); kova::limits::MAX_LIMITS + 1]).unwrap_err(),
                kova::limits::LimitsError::TooMany {
                    count: kova::limits::MAX_LIMITS + 1,
                    max: kova::limits::MAX_LIMITS
                }
            );
        })
    }),
];

const CALLS: &[Case] = &[
    ("empty and 1 MiB keys: their own state each", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            let limit = gcra(3);
            for key in [Vec::new(), vec![0x5A; MIB]] {
                limiter.reset(&key, &limit).await.unwrap();
                assert!(limiter.check_n(&key, &limit, 3).await.unwrap().is_allowed());
                assert!(!limiter.check(&key, &limit).await.unwrap().is_allowed());
            }
        })
    }),
    ("check_n 0 is a peek; capacity + 1 and u64::MAX are errors that take nothing", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            let limit = gcra(10);
            assert_eq!(limiter.check_n("cost-edges", &limit, 0).await.unwrap().remaining(), 10);
            for cost in [11, u64::MAX] {
                assert!(matches!(
                    limiter.check_n("cost-edges", &limit, cost).await,
                    Err(Error::Cost(CheckError::CostExceedsCapacity { cost: c, capacity: 10 })) if c == cost
                ));
            }
            assert_eq!(limiter.peek("cost-edges", &limit).await.unwrap().remaining(), 10);
        })
    }),
    ("charge, settle and refund u64::MAX", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            let limit = gcra(10);
            assert_eq!(limiter.charge("charge-max", &limit, 0).await.unwrap(), 0);
            assert_eq!(limiter.charge("charge-max", &limit, u64::MAX).await.unwrap(), 10);
            assert_eq!(
                limiter.settle("charge-max", &limit, 0, u64::MAX).await.unwrap(),
                Settlement { refunded: 0, charged: 0, uncharged: u64::MAX }
            );
            limiter.refund("charge-max", &limit, u64::MAX).await.unwrap();
            assert_eq!(limiter.peek("charge-max", &limit).await.unwrap().remaining(), 10);
            assert_eq!(limiter.settle("charge-max", &limit, u64::MAX, 0).await.unwrap().refunded, u64::MAX);
            assert_eq!(limiter.peek("charge-max", &limit).await.unwrap().remaining(), 10);
        })
    }),
    ("reserve_n capacity + 1 and u64::MAX; reserve_n_within ZERO when empty", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            let limit = gcra(10);
            for cost in [11, u64::MAX] {
                assert!(matches!(
                    limiter.reserve_n("reserve-edges", &limit, cost).await,
                    Err(Error::Reserve(ReserveError::CostExceedsCapacity { cost: c, capacity: 10 })) if c == cost
                ));
            }
            let all = limiter.reserve_n("reserve-edges", &limit, 10).await.unwrap();
            assert!(matches!(
                limiter.reserve_n_within("reserve-edges", &limit, 1, Duration::ZERO).await,
                Err(Error::Reserve(ReserveError::DelayTooLong { max_delay: Duration::ZERO, .. }))
            ));
            assert_eq!(all.cancel().await.unwrap(), 10);
            assert_eq!(limiter.peek("reserve-edges", &limit).await.unwrap().remaining(), 10);
        })
    }),
    ("check_limits_n 0, the capacity + 1, u64::MAX", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            let limits = Limits::new([gcra(10), gcra(20)]).unwrap();
            assert!(limiter.check_limits_n("limits-edges", &limits, 0).await.unwrap().is_allowed());
            for cost in [11, u64::MAX] {
                assert!(matches!(
                    limiter.check_limits_n("limits-edges", &limits, cost).await,
                    Err(Error::Cost(CheckError::CostExceedsCapacity { cost: c, capacity: 10 })) if c == cost
                ));
            }
            assert!(limiter.check_limits_n(vec![0u8; MIB], &limits, 10).await.unwrap().is_allowed());
        })
    }),
    ("refund_local 0 and u64::MAX without a degraded share: false", |ctx| {
        Box::pin(async move {
            let limiter = ctx.builder().connect(&ctx.url).await.unwrap();
            assert!(!limiter.refund_local("local", &gcra(5), 0));
            assert!(!limiter.refund_local("local", &gcra(5), u64::MAX));
        })
    }),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_at_every_edge() {
    let Some(server) = RedisServer::start() else { return };
    let url = server.url();
    run(&url, BUILDER).await;
    run(&url, LIMITS).await;
    run(&url, CALLS).await;
}
