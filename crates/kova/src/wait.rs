//! Waiting until a limiter admits: futures for async callers, a blocking wait for threads.
//!
//! - [`RateLimiter::until_ready`](crate::RateLimiter::until_ready),
//!   [`until_n_ready`](crate::RateLimiter::until_n_ready) and
//!   [`Keyed::until_key_n_ready`](crate::Keyed::until_key_n_ready) wait on the default
//!   [`ThreadTimer`], which runs under any executor (tokio included);
//!   [`RateLimiter::wait_n`](crate::RateLimiter::wait_n) blocks the thread (std only).
//! - A [`Pacer`] adds what those leave out: first come, first served across costs
//!   ([`Pacer::fair`]), jitter ([`Pacer::jitter`]), and any [`Timer`] (tokio's with the `tokio`
//!   feature, [`TokioTimer`]; your own, for a simulated clock).
//!
//! A wait is a loop of checks: check, and when denied, sleep the decision's `retry_after` (plus
//! jitter) and check again. So a waiter holds nothing while it sleeps, and a dropped future has
//! consumed nothing (it either returned an admitted decision, or every check it made was a
//! denial). A cost the limiter can never admit is an error at once, as in `check_n`.

mod block_on;
mod fair;
mod pacer;
mod timer;

pub use pacer::Pacer;
#[cfg(feature = "tokio")]
pub use timer::TokioTimer;
pub use timer::{ThreadTimer, Timer};
