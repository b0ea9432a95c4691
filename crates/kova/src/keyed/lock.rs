//! [`Cold`]: a shard's insert lock (`crate::loom`'s mutex, loom's under `cfg(kova_loom)`) with
//! the figures it publishes.

use crate::loom::Mutex;
pub(super) use crate::loom::MutexGuard;

/// Locks `mutex`, ignoring poisoning: the table's invariants hold between any two statements of
/// a locked section that can panic (a user's `Hash`/`Eq`/`Clone`), so a poisoned lock is usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

use crate::loom::atomic::{AtomicUsize, Ordering};

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
