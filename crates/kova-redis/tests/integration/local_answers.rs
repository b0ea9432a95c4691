//! The local layer's answers, as the check's first step: what they spend, when they stop, and
//! that they are made on the first poll with no allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kova::{Decision, Fallback, ManualClock, Quota};
use kova_redis::{Leasing, RedisLimit, RedisLimiter};

use crate::server::RedisServer;

/// Counts the allocations made on each thread, so that a test can see what one call allocates.
struct CountingAllocator;

std::thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the count is a
// thread-local `Cell` with a const initializer and no destructor, which never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Polls `future` once with a waker that does nothing: `Some` if it was ready.
fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

async fn check(limiter: &RedisLimiter, limit: &RedisLimit, cost: u64) -> (Decision, u64) {
    let d = limiter.check_n("k", limit, cost).await.unwrap();
    (d, limiter.stats().round_trips)
}

/// A hot key leases `batch` units; exactly those are answered locally, counting down, and the
/// check after the last goes to Redis again (for the next lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_spent_unit_by_unit_then_refilled() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(3_000_000_000);
    let limiter = crate::deterministic(&clock)
        .leasing(Leasing::new(5, Duration::from_secs(1)))
        .cache_denials(true)
        .connect(&server.url())
        .await
        .unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(1000).unwrap().with_burst(100).unwrap()).unwrap();
    // The first check finds the key cold; the second finds it hot and leases 5 more units.
    assert_eq!(check(&limiter, &limit, 1).await.0.fallback(), None);
    let (leased, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((leased.fallback(), leased.remaining()), (None, 98));
    assert_eq!(trips, 2);
    for left in (0..5).rev() {
        let (d, now_trips) = check(&limiter, &limit, 1).await;
        assert!(d.is_allowed());
        assert_eq!((d.fallback(), d.remaining(), now_trips), (Some(Fallback::LocalCache), left, 2));
    }
    // Exhausted: Redis decides (and leases again).
    let (d, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((d.fallback(), trips), (None, 3));
    // A cost above what the lease holds is not answered from it.
    let (d, trips) = check(&limiter, &limit, 6).await;
    assert_eq!((d.fallback(), trips), (None, 4));
    assert_eq!(limiter.stats().local_decisions, 5);
}

/// A lease is spent by checks under a limit that Redis sees alike (the same algorithm and
/// script arguments: here the same quota with its own share under the degrade policy), and
/// never under a limit with other arguments, whose checks go to Redis and start over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_spent_only_under_a_limit_that_redis_sees_alike() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(3_000_000_000);
    let limiter = crate::deterministic(&clock)
        .leasing(Leasing::new(5, Duration::from_secs(1)))
        .connect(&server.url())
        .await
        .unwrap();
    let quota = Quota::per_second(1000).unwrap().with_burst(100).unwrap();
    let limit = RedisLimit::gcra(quota).unwrap();
    let alike = limit.with_local_quota(Quota::per_second(10).unwrap()).unwrap();
    assert_ne!(limit, alike);
    let other = RedisLimit::gcra(Quota::per_second(1000).unwrap().with_burst(99).unwrap()).unwrap();
    check(&limiter, &limit, 1).await;
    assert_eq!(check(&limiter, &limit, 1).await.1, 2, "leased");
    let (d, trips) = check(&limiter, &alike, 1).await;
    assert_eq!((d.fallback(), d.limit(), d.remaining(), trips), (Some(Fallback::LocalCache), 100, 4, 2));
    // Other arguments: Redis decides, and the lease held for `limit` is dropped.
    let (d, trips) = check(&limiter, &other, 1).await;
    assert_eq!((d.fallback(), d.limit(), trips), (None, 99, 3));
    let (d, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((d.fallback(), trips), (None, 4), "a lease outlived a check under another limit");
    assert_eq!(limiter.stats().local_decisions, 1);
}

/// A reset ends the key's lease on the thread that checks the key again and again too (which
/// answers from the key's entry without looking it up in the local table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_ends_a_lease_that_a_thread_keeps() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(3_000_000_000);
    let limiter = crate::deterministic(&clock)
        .leasing(Leasing::new(50, Duration::from_secs(1)))
        .connect(&server.url())
        .await
        .unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(1000).unwrap().with_burst(100).unwrap()).unwrap();
    check(&limiter, &limit, 1).await;
    assert_eq!(check(&limiter, &limit, 1).await.1, 2, "leased");
    for _ in 0..5 {
        assert_eq!(check(&limiter, &limit, 1).await.0.fallback(), Some(Fallback::LocalCache));
    }
    limiter.reset("k", &limit).await.unwrap();
    let trips = limiter.stats().round_trips;
    let (d, now_trips) = check(&limiter, &limit, 1).await;
    assert_eq!(
        (d.fallback(), d.remaining(), now_trips),
        (None, 99, trips + 1),
        "answered from a lease held before the reset"
    );
}

/// A lease is spent up to the last nanosecond of its ttl, and not at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_ends_at_its_ttl() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(3_000_000_000);
    let ttl = Duration::from_millis(200);
    let limiter =
        crate::deterministic(&clock).leasing(Leasing::new(50, ttl)).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(1000).unwrap().with_burst(100).unwrap()).unwrap();
    check(&limiter, &limit, 1).await;
    // Leased now: the lease lasts until now + ttl.
    assert_eq!(check(&limiter, &limit, 1).await.1, 2);
    clock.advance(ttl - Duration::from_nanos(1));
    let (d, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((d.fallback(), trips), (Some(Fallback::LocalCache), 2));
    clock.advance(Duration::from_nanos(1));
    let (d, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((d.fallback(), trips), (None, 3), "a lease spent at its ttl: {d:?}");
}

/// A denial of cost `c` until `T` is answered locally for costs of at least `c` up to the last
/// nanosecond before `T`; a smaller cost, and any cost at `T`, go to Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_denial_holds_until_its_end_and_for_its_cost_or_more() {
    let Some(server) = RedisServer::start() else { return };
    let clock = ManualClock::starting_at(3_000_000_000);
    let limiter = crate::deterministic(&clock).cache_denials(true).connect(&server.url()).await.unwrap();
    let limit = RedisLimit::gcra(Quota::per_second(10).unwrap().with_burst(4).unwrap()).unwrap();
    assert!(check(&limiter, &limit, 4).await.0.is_allowed());
    let (denied, trips) = check(&limiter, &limit, 2).await;
    assert_eq!((denied.is_allowed(), denied.fallback()), (false, None));
    assert_eq!(denied.retry_after(), Duration::from_millis(200));
    for cost in [2, 3, 4] {
        let (d, now_trips) = check(&limiter, &limit, cost).await;
        assert_eq!((d.is_allowed(), d.fallback(), now_trips), (false, Some(Fallback::LocalCache), trips));
        assert_eq!((d.retry_after(), d.remaining()), (denied.retry_after(), denied.remaining()));
    }
    // Cost 1 was not denied: Redis decides it (denied for 100 ms, now the cached denial).
    let (one, trips) = check(&limiter, &limit, 1).await;
    assert_eq!((one.is_allowed(), one.fallback()), (false, None), "{one:?}");
    assert_eq!(one.retry_after(), Duration::from_millis(100));
    clock.advance(Duration::from_millis(100) - Duration::from_nanos(1));
    let (d, now_trips) = check(&limiter, &limit, 1).await;
    assert_eq!(
        (d.fallback(), d.retry_after(), now_trips),
        (Some(Fallback::LocalCache), Duration::from_nanos(1), trips)
    );
    clock.advance(Duration::from_nanos(1));
    let (d, now_trips) = check(&limiter, &limit, 1).await;
    assert_eq!(
        (d.is_allowed(), d.fallback(), now_trips),
        (true, None, trips + 1),
        "denied at its end: {d:?}"
    );
}

/// On Redis `TIME` and the coarse local clock (the defaults), a local answer, admitted from a
/// lease or denied from the cache, is made on the check's first poll and allocates nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_local_answer_is_ready_on_the_first_poll_and_allocates_nothing() {
    let Some(server) = RedisServer::start() else { return };
    let limiter = RedisLimiter::builder()
        .timeout(Duration::from_secs(5))
        .leasing(Leasing::new(1000, Duration::from_secs(30)))
        .cache_denials(true)
        .connect(&server.url())
        .await
        .unwrap();
    let leased = RedisLimit::gcra(Quota::per_second(1000).unwrap().with_burst(1000).unwrap()).unwrap();
    let scarce = RedisLimit::gcra(Quota::per_minute(1).unwrap()).unwrap();
    for _ in 0..3 {
        limiter.check("hot", &leased).await.unwrap();
        limiter.check("denied", &scarce).await.unwrap();
    }
    for (key, limit, allowed) in [("hot", &leased, true), ("denied", &scarce, false)] {
        let before = allocations();
        let answer = poll_once(limiter.check(key, limit));
        let allocated = allocations() - before;
        let d = answer.expect("a local answer is ready on the first poll").unwrap();
        assert_eq!((d.is_allowed(), d.fallback()), (allowed, Some(Fallback::LocalCache)), "{key}: {d:?}");
        assert_eq!(allocated, 0, "{key}: a local answer allocated {allocated} times");
    }
    // Checked again and again, the key's entry is kept by this thread and answered from without
    // the table: keeping it allocates nothing either.
    for check in 0..3 {
        let before = allocations();
        let answer = poll_once(limiter.check("hot", &leased));
        let allocated = allocations() - before;
        let d = answer.expect("a local answer is ready on the first poll").unwrap();
        assert_eq!(d.fallback(), Some(Fallback::LocalCache), "{check}: {d:?}");
        assert_eq!(allocated, 0, "{check}: a local answer allocated {allocated} times");
    }
}
