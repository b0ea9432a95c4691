//! # kova-rls: Envoy's rate limit service on kova
//!
//! The `kova-rls` binary serves `envoy.service.ratelimit.v3.RateLimitService` (see the
//! crate's README); this library is its parts: the [`Config`] (envoyproxy/ratelimit's YAML),
//! the [`Decider`] that answers one request, its [`Backend`] ([`MemoryBackend`] or
//! [`RedisBackend`]), the tonic service
//! ([`RateLimitGrpc`]), the [`Reloader`] and [`serve`].
//!
//! ```
//! use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{rate_limit_descriptor::Entry, RateLimitDescriptor};
//! use envoy_types::pb::envoy::service::ratelimit::v3::{rate_limit_response::Code, RateLimitRequest};
//! use kova_rls::{Config, Decider, MemoryBackend, MemoryOptions, RequestLimits};
//!
//! let yaml = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n";
//! let config = Config::from_yaml("edge.yaml".as_ref(), yaml)?;
//! let decider = Decider::new(config, MemoryBackend::new(MemoryOptions::default())?, RequestLimits::default());
//! let entry = Entry { key: "user".into(), value: "alice".into() };
//! let descriptors = vec![RateLimitDescriptor { entries: vec![entry], ..Default::default() }];
//! let request = RateLimitRequest { domain: "edge".into(), descriptors, hits_addend: 1 };
//! # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! # runtime.block_on(async {
//! assert_eq!(decider.decide(&request).await?.overall_code, Code::Ok as i32);
//! let denied = decider.decide(&request).await?;
//! assert_eq!(denied.overall_code, Code::OverLimit as i32);
//! assert!(denied.response_headers_to_add.iter().any(|h| h.key == "retry-after"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
// Nothing a request or a config file holds makes the library panic: a new panic site is a
// decision, taken with `#[expect(..., reason = "why it cannot fire")]`. Not in its unit tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

mod backend;
mod config;
mod decide;
mod key;
mod limit_override;
mod memory;
mod response;
pub mod telemetry;
mod unix_clock;

pub use backend::{Backend, BackendError};
pub use config::{read_sources, Config, ConfigError, Domain, Limit, Limited, Rule, Unit, DEFAULT_ALGORITHM};
pub use decide::{Decider, RequestError, RequestLimits};
pub use key::{descriptor_key, MAX_EXACT_KEY_BYTES};
pub use memory::{MemoryBackend, MemoryOptions};
pub use unix_clock::UnixClock;
mod redis_backend;
mod reload;
mod server;
mod service;

pub use redis_backend::RedisBackend;
pub use reload::Reloader;
pub use server::{serve, Listeners, RenderMetrics};
pub use service::RateLimitGrpc;
