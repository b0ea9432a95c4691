//! The shards' insert lock: std's mutex, or loom's under `cfg(kova_loom)` (a std mutex held across
//! a loom switch point would block loom's single OS thread), and [`Cold`], the lock with the
//! figures it publishes.
//!
//! This belongs in `crate::sync` beside the atomics; it lives here until that file gains a
//! `Mutex` re-export.

#[cfg(kova_loom)]
pub(super) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(kova_loom))]
pub(super) use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, ignoring poisoning: the table's invariants hold between any two statements of
/// a locked section that can panic (a user's `Hash`/`Eq`/`Clone`), so a poisoned lock is usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

use crate::sync::atomic::{AtomicUsize, Ordering};

/// The part of a shard only inserts and removals touch: the lock around its writer, and mirrors
/// of the writer's figures so that `len` and `memory_bytes` need no lock.
pub(super) struct Cold<W> {
    writer: Mutex<W>,
    len: AtomicUsize,
    memory: AtomicUsize,
}

impl<W> Cold<W> {
    pub(super) fn new(writer: W, memory: usize) -> Self {
        Cold { writer: Mutex::new(writer), len: AtomicUsize::new(0), memory: AtomicUsize::new(memory) }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, W> {
        lock(&self.writer)
    }

    /// The writer, from the shard's `Drop`.
    pub(super) fn writer_mut(&mut self) -> &mut W {
        self.writer.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keys held (a snapshot).
    pub(super) fn len(&self) -> usize {
        // Relaxed: a statistic, written under the lock.
        self.len.load(Ordering::Relaxed)
    }

    /// Bytes held (a snapshot).
    pub(super) fn memory(&self) -> usize {
        // Relaxed: a statistic, written under the lock.
        self.memory.load(Ordering::Relaxed)
    }

    /// Publishes the writer's figures at the end of a locked section.
    pub(super) fn publish(&self, len: usize, memory: usize) {
        // Relaxed: statistics.
        self.len.store(len, Ordering::Relaxed);
        self.memory.store(memory, Ordering::Relaxed);
    }
}
