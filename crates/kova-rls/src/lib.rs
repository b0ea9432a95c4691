//! # kova-rls: Envoy's rate limit service on kova
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

mod config;
mod decide;
mod key;
mod memory;
mod response;
pub mod telemetry;

pub use config::{read_sources, Config, ConfigError, Domain, Limit, Limited, Rule, Unit, DEFAULT_ALGORITHM};
pub use decide::{Decider, RequestError, RequestLimits};
pub use key::{descriptor_key, MAX_EXACT_KEY_BYTES};
pub use memory::{MemoryBackend, MemoryOptions};
mod reload;
mod server;
mod service;

pub use reload::Reloader;
pub use server::{serve, Listeners, RenderMetrics};
pub use service::RateLimitGrpc;
