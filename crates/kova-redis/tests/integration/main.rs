//! Integration tests against real `redis-server` processes (started and stopped by the tests).
//! One binary, modules by concern. Each test starts its own server(s) on free loopback ports.

mod composite;
mod conformance;
mod server;

mod bad_input;
mod cluster;
mod degrade;
mod failover;
mod faults;
mod hostile_input;
mod integers;
mod integers_operations;
mod local;
mod local_answers;
mod policies;
mod settle_reserve;
mod shared_key;
mod single;

use std::time::Duration;

use kova::ManualClock;
use kova_redis::{Builder, RedisLimiter};

/// A builder reading `clock`, with a timeout roomy enough for a loaded 2-core CI machine and a
/// TTL margin long enough that no key expires (in Redis's real time) before the test's
/// simulated time says it should.
pub fn deterministic(clock: &ManualClock) -> Builder {
    RedisLimiter::builder()
        .client_clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .ttl_margin(Duration::from_secs(3600))
}
