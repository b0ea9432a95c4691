//! [`CachedDenial`]: one key's remembered denial, read by every check of the key without a lock.
//!
//! A denial has four fields that must be read together (a cost from one denial and a retry time
//! from another could deny what Redis would admit), and is written rarely (after a round trip).
//! So it is a sequence lock over atomics: the one writer (under its entry's lock) makes the
//! sequence odd, stores the fields, makes it even again; a reader that sees the same even
//! sequence before and after its reads has read one denial whole. A reader that races with a
//! write answers "no denial", and the check asks Redis, which decides it exactly.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A denial remembered: costs of at least `cost` are denied until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Denial {
    pub(crate) cost: u64,
    pub(crate) until: u64,
    pub(crate) remaining: u64,
    pub(crate) reset_until: u64,
}

/// `repr(C)`: `until`, which every check reads, first (see `Entry`).
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct CachedDenial {
    /// 0: no denial.
    until: AtomicU64,
    /// Even: the fields hold one denial (or none); odd: a write is under way.
    sequence: AtomicU64,
    cost: AtomicU64,
    remaining: AtomicU64,
    reset_until: AtomicU64,
}

impl CachedDenial {
    /// Remembers `denial`, or forgets the one held. Callers hold the entry's lock: one writer
    /// at a time.
    pub(crate) fn set(&self, denial: Option<Denial>) {
        let d = denial.unwrap_or(Denial { cost: 0, until: 0, remaining: 0, reset_until: 0 });
        // Relaxed: only writers (serialized by the entry's lock) change the sequence.
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence.store(sequence.wrapping_add(1), Ordering::Relaxed);
        // Release fence: a reader whose field load reads a store below synchronizes with it
        // through its Acquire fence, so its second sequence load sees the odd value (or later)
        // and it discards what it read.
        fence(Ordering::Release);
        self.until.store(d.until, Ordering::Relaxed);
        self.cost.store(d.cost, Ordering::Relaxed);
        self.remaining.store(d.remaining, Ordering::Relaxed);
        self.reset_until.store(d.reset_until, Ordering::Relaxed);
        // Release: a reader that loads this even sequence with Acquire sees every field above.
        self.sequence.store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// The denial held, read whole; `None` when there is none or a write raced with the read.
    #[inline]
    pub(crate) fn get(&self) -> Option<Denial> {
        // Relaxed: a hint read first so that a key with no denial pays one load. The denial
        // itself is read under the sequence below.
        if self.until.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // Acquire: pairs with the writer's final Release store; the fields read below are at
        // least that write's.
        let before = self.sequence.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let denial = Denial {
            until: self.until.load(Ordering::Relaxed),
            cost: self.cost.load(Ordering::Relaxed),
            remaining: self.remaining.load(Ordering::Relaxed),
            reset_until: self.reset_until.load(Ordering::Relaxed),
        };
        // Acquire fence: the field loads above come before the second sequence load, and pair
        // with the writer's Release fence (see `set`).
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        let after = self.sequence.load(Ordering::Relaxed);
        (before == after && denial.until != 0).then_some(denial)
    }

    /// The held denial's `until` (0: none), as a hint: a purge keeps an entry whose denial is live.
    pub(crate) fn until_hint(&self) -> u64 {
        // Relaxed: a purge that misreads keeps or drops an entry; either is safe.
        self.until.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_denial_is_read_as_written_and_forgotten() {
        let cached = CachedDenial::default();
        assert_eq!(cached.get(), None);
        let d = Denial { cost: 3, until: 100, remaining: 1, reset_until: 200 };
        cached.set(Some(d));
        assert_eq!(cached.get(), Some(d));
        cached.set(None);
        assert_eq!(cached.get(), None);
    }

    /// Readers racing with a writer never see fields of two denials mixed: every denial written
    /// has all four fields derived from one number.
    #[test]
    fn racing_readers_see_whole_denials_or_none() {
        let cached = CachedDenial::default();
        let stop = AtomicBool::new(false);
        let denial = |i: u64| Denial { cost: i, until: i + 1, remaining: i + 2, reset_until: i + 3 };
        // How many readers have seen a denial: the writer goes on until both have (a busy
        // machine may not schedule a reader during the first writes), for at most 10 s.
        let readers_seeing = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut seen = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            if let Some(d) = cached.get() {
                                assert_eq!(d, denial(d.cost), "a torn read");
                                if seen == 0 {
                                    readers_seeing.fetch_add(1, Ordering::Relaxed);
                                }
                                seen += 1;
                            }
                        }
                        seen
                    })
                })
                .collect();
            let start = std::time::Instant::now();
            let mut i = 1u64;
            while i < 200_000
                || (readers_seeing.load(Ordering::Relaxed) < 2 && start.elapsed().as_secs() < 10)
            {
                cached.set(Some(denial(i * 10)));
                i += 1;
            }
            stop.store(true, Ordering::Relaxed);
            for r in readers {
                assert!(r.join().unwrap() > 0);
            }
        });
    }
}
