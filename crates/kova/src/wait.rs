//! Waiting until a limiter admits: futures for async callers, a blocking wait for threads.
//!
//! - [`RateLimiter::until_ready`](crate::RateLimiter::until_ready),
//!   [`until_n_ready`](crate::RateLimiter::until_n_ready) and
//!   [`Keyed::until_n_ready`](crate::Keyed::until_n_ready) wait on the default
//!   [`ThreadTimer`], which runs under any executor (tokio included);
//!   [`RateLimiter::wait_n`](crate::RateLimiter::wait_n) blocks the thread (std only).
//! - A [`Pacer`] adds what those leave out: first come, first served across costs
//!   ([`Pacer::fair`]), jitter ([`Pacer::jitter`]), and any [`Timer`] (tokio's with the `tokio`
//!   feature, `TokioTimer`; [`ManualTimer`] on a [`ManualClock`](crate::ManualClock)'s
//!   simulated time, to test waiting code without waiting; your own).
//!
//! - A wait with a deadline ([`RateLimiter::until_n_ready_within`](crate::RateLimiter::until_n_ready_within),
//!   [`wait_n_within`](crate::RateLimiter::wait_n_within), their keyed forms (the key first) and the
//!   [`Pacer`]'s) fails at once with [`WaitError::DeadlinePassed`], taking nothing, when a denial
//!   shows the admission would come after it.
//!
//! A wait is a loop of checks: check, and when denied, sleep the decision's `retry_after` (plus
//! jitter) and check again. So a waiter holds nothing while it sleeps, and a dropped future has
//! consumed nothing (it either returned an admitted decision, or every check it made was a
//! denial). A cost the limiter can never admit is an error at once, as in `check_n`.

mod block_on;
mod check_first;
mod deadline;
mod fair;
mod manual_timer;
mod pacer;
mod timer;

pub use deadline::WaitError;
pub use manual_timer::{ManualSleep, ManualTimer};
pub use pacer::Pacer;
#[cfg(feature = "tokio")]
pub use timer::TokioTimer;
pub use timer::{ThreadTimer, Timer};
