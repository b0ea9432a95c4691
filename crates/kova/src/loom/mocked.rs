//! loom's types, under `--cfg kova_loom`. Loom's mutex, because a std mutex held across a loom
//! switch point would block loom's single OS thread; its `UnsafeCell`, whose accesses loom
//! tracks (a line reused while a check still reads it is a causality violation).

pub(crate) use ::loom::cell::UnsafeCell;
pub(crate) use ::loom::sync::{atomic, Arc, Mutex, MutexGuard};
pub(crate) use ::loom::thread_local;

/// Loom has no 128-bit atomic: this stand-in makes each operation one step under loom's mutex,
/// so models explore every interleaving of whole operations (their atomicity, not the orderings
/// of a real 128-bit CAS, which is sequentially consistent on x86-64 anyway).
#[derive(Debug)]
pub(crate) struct AtomicU128(Mutex<u128>);

// A poisoned lock still holds a whole value: every operation writes it in one step.
impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        AtomicU128(Mutex::new(value))
    }

    pub(crate) fn load(&self, _: atomic::Ordering) -> u128 {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn store(&self, value: u128, _: atomic::Ordering) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = value;
    }

    pub(crate) fn compare_exchange_weak(
        &self,
        current: u128,
        new: u128,
        _: atomic::Ordering,
        _: atomic::Ordering,
    ) -> Result<u128, u128> {
        let mut value = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if *value == current {
            *value = new;
            Ok(current)
        } else {
            Err(*value)
        }
    }
}

/// `len` atomics, all 0 (std's shim takes them from zeroed memory).
pub(crate) fn zeroed_atomics(len: usize) -> Box<[atomic::AtomicU64]> {
    (0..len).map(|_| atomic::AtomicU64::new(0)).collect()
}
