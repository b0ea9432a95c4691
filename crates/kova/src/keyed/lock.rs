//! [`Cold`]: a shard's insert lock (`crate::loom`'s mutex, loom's under `cfg(kova_loom)`) with
//! the figures it publishes.

use crate::loom::Mutex;
pub(super) use crate::loom::MutexGuard;

/// Locks `mutex`, ignoring poisoning: the table's invariants hold between any two statements of
/// a locked section that can panic (a user's `Hash`/`Eq`/`Clone`), so a poisoned lock is usable.
///
/// A taken lock is first retried with `try_lock` under a short backoff, and only then waited
/// for with `lock`. A shard's locked sections are short (an insert, an eviction), so a waiter
/// almost always gets the lock within the backoff. std's `lock` spins only briefly, then marks
/// the lock as having waiters and parks in the kernel; the thread it wakes takes the lock still
/// marked, so that thread's unlock makes a wake-up system call too, waiter or not. Under a
/// steady flood of new keys from two threads those calls cost more than the locked sections.
/// `try_lock` never marks the lock, so an unlock stays a plain store unless a thread really
/// parked.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(not(kova_loom))]
    {
        let backoff = crossbeam_utils::Backoff::new();
        while !backoff.is_completed() {
            match mutex.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => backoff.snooze(),
            }
        }
    }
    // Under loom the models explore `lock`'s blocking directly: a spin would only add states.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

use crate::loom::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

/// The part of a shard only inserts and removals touch: the lock around its writer, mirrors of
/// the writer's figures so that `len` and `memory_bytes` need no lock, and the count of inserts
/// that a doorkeeper's admission without the lock checks (`table/lookup.rs`).
pub(super) struct Cold<W> {
    writer: Mutex<W>,
    len: AtomicUsize,
    memory: AtomicUsize,
    /// Odd while a lock holder may make a key present that a probe without the lock missed (an
    /// insert, or a quota move's re-insert), even otherwise; it only grows.
    inserts: AtomicU64,
}

impl<W> Cold<W> {
    pub(super) fn new(writer: W, memory: usize) -> Self {
        Cold {
            writer: Mutex::new(writer),
            len: AtomicUsize::new(0),
            memory: AtomicUsize::new(memory),
            inserts: AtomicU64::new(0),
        }
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

    /// Announces an insert, under the lock, before the lock holder reads the doorkeeper for the
    /// key (the count turns odd).
    pub(super) fn begin_insert(&self) {
        // Relaxed: only the lock holder writes the count; the fence orders it.
        self.inserts.fetch_add(1, Ordering::Relaxed);
        // SeqCst: pairs with the fence of a door admission without the lock (which claimed the
        // door's word, then reads this count). In the fences' single total order one comes
        // first: if ours, that admission sees the count odd and undoes its claim; if theirs, our
        // read of the door after this fence sees their entry and charges it to the key.
        fence(Ordering::SeqCst);
    }

    /// Ends an insert announced by [`begin_insert`](Self::begin_insert), once its key is
    /// published (the count turns even).
    pub(super) fn end_insert(&self) {
        // Release: an admission that reads this count (Acquire) then probes the array sees the
        // key this insert published.
        self.inserts.fetch_add(1, Ordering::Release);
    }

    /// The count of announced and ended inserts (odd while one is under way).
    pub(super) fn inserts(&self, order: Ordering) -> u64 {
        self.inserts.load(order)
    }
}
