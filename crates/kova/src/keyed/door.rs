//! The doorkeeper ([`KeyedBuilder::doorkeeper`](super::KeyedBuilder::doorkeeper)): a key's
//! first check is admitted here, recording only *when* in one word of a fixed array, and the
//! key enters the table on its second check within the time one unit takes to become idle. A
//! flood of one-off keys then never inserts, evicts or rehashes.
//!
//! # Why no key gets more than its quota
//! - A door admission is a check of one unit on a fresh state at time `t`: the decision a fresh
//!   key inserted at `t` gets. The entry (the key's fingerprint and `t`) stays until that unit is
//!   idle (`Door::new`'s `ttl`: at any later time the state is indistinguishable from fresh), or
//!   until an insert of the key takes it.
//! - Every insert of a key into the table takes its entry (a compare-exchange to the entry's
//!   taken mark, which no key's fingerprint matches, once the insert is sure to happen): if one
//!   is young, the new state is charged that unit *at `t`* (rounded up to the door's time unit,
//!   never earlier) before it is published, so the key's state is what it would have been had
//!   the first check inserted it. So the door charges exactly as the table does (up to the
//!   rounding, which only ever charges later, so denies sooner), and each entry once.
//! - An insert of a key sees the entry of every admission of it that stands. Inserts run under
//!   the shard's lock and announce themselves first (`lock.rs`'s insert count, odd while one is
//!   under way). An admission is made without the lock (`table/lookup.rs`): it reads the
//!   count (even), probes the table (the key absent), claims the word, and reads the count again
//!   after a `SeqCst` fence. Unchanged, the admission stands: any insert of the key announced
//!   after that fence reads the door after its own and finds the entry. Changed, the claim is
//!   undone and the check goes to the lock, where admissions and inserts are ordered; unless an
//!   insert took the entry first, charging its unit: then the undo finds the taken mark and the
//!   admission stands (going to the lock, it would be charged a second time). An entry gone any
//!   other way does not make it stand: a reset, removal or refund of the key that an insert made
//!   held meanwhile forgets it, and then nothing counts the unit while the fresh decision
//!   ignores what the key used.
//! - Keys of other shards share the array, but only replace an entry or a taken mark once it
//!   is expired (a compare-exchange, so that two keys never both take one word): a young entry
//!   is never lost, and an undo finds the mark of its entry as long as the entry would be young.
//!   A key whose word holds another key's young entry goes to the table as without a doorkeeper.
//! - Two keys with one word and one fingerprint make the second key pay the first key's unit:
//!   a rare false charge (never a false grant).

use crate::loom::atomic::{AtomicU64, Ordering};
use crate::loom::zeroed_atomics;
use crate::Algorithm;

use crate::clock::At;

/// Bits of an entry's time (in the door's units); the rest hold the fingerprint.
const TIME_BITS: u32 = 40;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// How far after a reading an entry may have been written and still read as young: a clock read
/// older than the writer's (another thread's later reading, a coarse clock's lag of
/// milliseconds). An older entry's age wraps around the time range: read as written this far in
/// the future at most, it is expired otherwise, as its age says, and a key back long after its
/// first check is a new key (only one back within this of a whole multiple of the range reads
/// its entry as young again, and is charged at most this far ahead).
const FUTURE_NANOS: u64 = 1_000_000_000;
/// The most units a ttl takes: well inside the half of the range that reads as the past.
const MAX_TTL_UNITS: u64 = 1 << (TIME_BITS - 2);
/// Fingerprint bits: its top bit is always set, so no entry is 0 (an empty word).
const FINGERPRINT_BITS: u32 = 64 - TIME_BITS;
/// The fingerprint's top bit: clear in every word that holds no entry (empty, or a taken mark).
const ENTRY_BIT: u64 = 1 << 63;

/// What the door said to a key's check, under the key's shard lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Admitted at the door at this time (nanoseconds): the check is decided on a fresh state
    /// then, and the key is not inserted.
    Admitted(u64),
    /// The key was admitted at the door at this time (nanoseconds, rounded up), and that unit is
    /// not idle yet: insert it, charged that unit first.
    Seen(u64),
    /// The word holds another key's young entry: insert the key as without a door.
    Busy,
}

/// A word taken for a key's first check ([`Door::claim`]).
#[must_use]
pub(super) struct Claim<'d> {
    word: &'d AtomicU64,
    entry: u64,
    /// The expired entry (or 0) it replaced.
    replaced: u64,
}

impl Claim<'_> {
    /// Gives the word back, for a claim made while an insert into the shard was under way:
    /// whether the check must go to the lock. False only when an insert of the key took the
    /// entry ([`Door::take`] leaves its mark): that insert charged the unit, so the admission
    /// stands. Any other fate (forgotten by a reset, removal or refund of the key held by then,
    /// or expired and replaced) means nothing counts the unit, and the key may have been held
    /// with a state the admission's fresh decision ignores: the check is decided at the lock.
    pub(super) fn undo(self) -> bool {
        // Relaxed: as in `Door::claim`.
        match self.word.compare_exchange(self.entry, self.replaced, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => true,
            Err(now_there) => now_there != taken(self.entry),
        }
    }
}

/// The mark [`Door::take`] leaves of `entry`: the entry without its fingerprint's top bit, so
/// that no key's fingerprint matches it, but tells the claim that made it that an insert took
/// it. Until the entry would have expired, no other key's claim replaces it
/// ([`Door::young`]): replaced, the undo would read the claim as untaken and charge its unit a
/// second time at the lock. A mark that is 0 (a fingerprint whose other bits are all clear,
/// written at time unit 0 modulo the time range) reads as an empty word: that rare claim may
/// be charged twice, a false charge (never a false grant).
fn taken(entry: u64) -> u64 {
    entry & !ENTRY_BIT
}

/// The doorkeeper's array.
pub(super) struct Door {
    words: Box<[AtomicU64]>,
    /// `log2(words.len())`.
    bits: u32,
    /// The door's time unit: `1 << shift` nanoseconds.
    shift: u32,
    /// Units after which an entry is expired.
    ttl_units: u64,
    /// [`FUTURE_NANOS`] in units (at least 1).
    future_units: u64,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door").field("words", &self.words.len()).field("shift", &self.shift).finish()
    }
}

/// Nanoseconds after which a single unit, checked at time 0 on a fresh state of `algorithm`,
/// has become idle, rounded up to a power of two (at most twice the least such time); `None`
/// when it does not within `2^62` nanoseconds. Found by doubling, not by bisecting the whole
/// range: packed time stamps wrap, so idleness holds from that time on only up to the wrap.
/// Time 0 starts a window, where a unit stays longest in the windowed algorithms.
pub(super) fn unit_idle_after<A: Algorithm>(algorithm: &A) -> Option<u64> {
    let cell = algorithm.new_cell();
    if !algorithm.decide_cell(&cell, &At(0), 1).is_allowed() {
        return None;
    }
    let mut after = 1u64;
    while !algorithm.is_idle(&cell, after) {
        after = after.checked_mul(2).filter(|&t| t <= 1 << 62)?;
    }
    Some(after)
}

impl Door {
    /// A door of `words` words (rounded up to a power of two) whose entries expire `ttl`
    /// nanoseconds after they were written.
    pub(super) fn new(words: usize, ttl: u64) -> Self {
        let words = words.max(1).next_power_of_two();
        let mut shift = 0;
        while (ttl >> shift) + 2 > MAX_TTL_UNITS {
            shift += 1;
        }
        // Rounded up, plus one for the rounding of `now` to units.
        let ttl_units = ttl.div_ceil(1 << shift) + 1;
        // Both bounds within a quarter of the time range: the past and the future never meet.
        let future_units = (FUTURE_NANOS >> shift).clamp(1, MAX_TTL_UNITS);
        Door { words: zeroed_atomics(words), bits: words.trailing_zeros(), shift, ttl_units, future_units }
    }

    /// Heap bytes of the array.
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words)
    }

    /// The word of `hash` (a remix, so that it does not follow the shard's or the probe's bits)
    /// and the key's fingerprint (other bits of the hash).
    #[expect(
        clippy::indexing_slicing,
        reason = "index is 0 for one word, else the top `bits` bits of a u64, below words.len() == 1 << bits"
    )]
    fn place(&self, hash: u64) -> (&AtomicU64, u64) {
        let mixed = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let index = if self.bits == 0 { 0 } else { (mixed >> (64 - self.bits)) as usize };
        let fingerprint = (hash >> 8) & ((1 << FINGERPRINT_BITS) - 1) | 1 << (FINGERPRINT_BITS - 1);
        (&self.words[index], fingerprint)
    }

    /// Asks the cache for the word of `hash`, which a check of a key not held reads next, when
    /// this thread's checks found a key missing lately ([`note_missing_key`]): in a flood of new
    /// keys the door's miss then overlaps the probe's, and a table whose keys are all held (a
    /// large one, where every check already waits for its own line) loads no door word it never
    /// reads.
    #[inline(always)]
    pub(super) fn prefetch_after_misses(&self, hash: u64) {
        let recent = RECENT_MISSES.get();
        if recent > 0 {
            RECENT_MISSES.set(recent - 1);
            super::line::prefetch_line(self.place(hash).0);
        }
    }

    /// `now` in units, rounded up (an entry never reads earlier than its check).
    fn units(&self, now: u64) -> u64 {
        now.div_ceil(1 << self.shift)
    }

    /// When `entry` was written (nanoseconds, a multiple of the unit), if it is young at `now`.
    /// A taken mark is young for as long as its entry would have been: it holds the word (every
    /// key's claim, its own key's too, reads it as another key's entry, [`Admission::Busy`]), so
    /// that the claim whose entry it was still finds it when that claim is undone.
    fn young(&self, entry: u64, now: u64) -> Option<u64> {
        if entry == 0 || (entry & ENTRY_BIT == 0 && crate::loom::faults::door_mark_free()) {
            return None;
        }
        let now_units = now >> self.shift;
        let age = now_units.wrapping_sub(entry) & TIME_MASK;
        let written = if age > TIME_MASK - self.future_units {
            // Written just after `now`: a later clock read than ours. Young.
            now_units.wrapping_add((TIME_MASK + 1) - age)
        } else if age < self.ttl_units {
            now_units - age.min(now_units)
        } else {
            return None;
        };
        Some(written << self.shift)
    }

    /// A check of one unit of a key (hash `hash`) not held, at `now`, under the key's shard lock.
    pub(super) fn admit(&self, hash: u64, now: u64) -> Admission {
        match self.claim(hash, now) {
            Ok(_) => Admission::Admitted(now),
            Err(admission) => admission,
        }
    }

    /// Takes the word of `hash` for its key's first check at `now`: the claim, or what the door
    /// says instead (never `Admitted`). Made under the key's shard lock ([`admit`](Self::admit)),
    /// or without it by `table/lookup.rs`, which confirms or undoes it.
    pub(super) fn claim(&self, hash: u64, now: u64) -> Result<Claim<'_>, Admission> {
        let (word, fingerprint) = self.place(hash);
        let entry = fingerprint << TIME_BITS | (self.units(now) & TIME_MASK);
        // Relaxed: a key's entries are ordered by its shard's lock, or, for a claim without the
        // lock, by the fences of `lock.rs`'s insert count; other keys only replace an expired
        // entry; no other memory is published through a word.
        let mut current = word.load(Ordering::Relaxed);
        loop {
            if let Some(written) = self.young(current, now) {
                return Err(if current >> TIME_BITS == fingerprint {
                    Admission::Seen(written)
                } else {
                    Admission::Busy
                });
            }
            if crate::loom::faults::door_claim_racy() {
                // The broken variant the should-fail model catches: a plain store can overwrite
                // another key's entry written since the load.
                word.store(entry, Ordering::Relaxed);
                return Ok(Claim { word, entry, replaced: current });
            }
            // Relaxed: as above.
            match word.compare_exchange(current, entry, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(Claim { word, entry, replaced: current }),
                Err(now_there) => current = now_there,
            }
        }
    }

    /// Takes the entry of the key of `hash` for its insert, under its shard lock: when the
    /// key's first check was admitted here (nanoseconds, rounded up), if that unit is not idle
    /// at `now`. The word is left holding the entry's taken mark (no entry to any reader), so
    /// that an admission without the lock whose claim is taken knows its unit is charged
    /// ([`Claim::undo`]).
    pub(super) fn take(&self, hash: u64, now: u64) -> Option<u64> {
        let (word, fingerprint) = self.place(hash);
        // Relaxed: as in `claim`.
        let mut entry = word.load(Ordering::Relaxed);
        loop {
            if entry >> TIME_BITS != fingerprint {
                return None;
            }
            let written = self.young(entry, now)?;
            if crate::loom::faults::door_entry_kept() {
                // The broken variant the should-fail model catches: the entry stays, and an
                // admission that undoes its claim is charged again at the lock.
                return Some(written);
            }
            // Relaxed: as in `claim`. Failing, the word changed: a claim undone, or the entry
            // expired and replaced; look again.
            match word.compare_exchange(entry, taken(entry), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(written),
                Err(now_there) => entry = now_there,
            }
        }
    }

    /// Forgets the entry of the key of `hash` (its reset or removal): its next check is a first
    /// one again. Another key's entry in the word stays.
    pub(super) fn forget(&self, hash: u64) {
        let (word, fingerprint) = self.place(hash);
        // Relaxed: as in `claim`.
        let entry = word.load(Ordering::Relaxed);
        if entry != 0 && entry >> TIME_BITS == fingerprint {
            // Relaxed: as in `claim`. Failing, the word changed: an expired entry replaced.
            let _ = word.compare_exchange(entry, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// When the key of `hash` was admitted at the door (nanoseconds, rounded up), if that unit
    /// is not idle at `now`.
    pub(super) fn seen(&self, hash: u64, now: u64) -> Option<u64> {
        let (word, fingerprint) = self.place(hash);
        // Relaxed: as in `admit`.
        let entry = word.load(Ordering::Relaxed);
        if entry >> TIME_BITS != fingerprint {
            return None;
        }
        self.young(entry, now)
    }
}

/// A fresh cell of `algorithm`, charged the unit the door admitted at `admitted` (if it did):
/// what the key's state would be had that check inserted it.
pub(super) fn fresh_cell<A: Algorithm>(algorithm: &A, admitted: Option<u64>) -> A::Cell {
    let cell = algorithm.new_cell();
    if let Some(at) = admitted {
        algorithm.decide_cell(&cell, &At(at), 1);
    }
    cell
}

std::thread_local! {
    /// How many of this thread's next checks prefetch their door word: a hint, so a thread's
    /// own count, never shared, for every table it checks.
    static RECENT_MISSES: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// How many checks after one that found its key missing prefetch the door word: enough that a
/// flood keeps prefetching while a few new keys among many held ones stop soon after.
const MISS_ECHO: u8 = 32;

/// Notes that this thread's check found its key missing, so that its next checks prefetch their
/// door word ([`Door::prefetch_after_misses`]).
#[inline]
pub(super) fn note_missing_key() {
    RECENT_MISSES.set(MISS_ECHO);
}

#[cfg(all(test, not(kova_loom)))]
mod tests {
    use super::*;
    use crate::{FixedWindow, Gcra, Quota, SlidingWindowCounter, SlidingWindowLog, TokenBucket};

    #[test]
    fn a_missing_key_makes_the_next_checks_prefetch_and_then_stops() {
        RECENT_MISSES.set(0);
        let door = Door::new(1 << 10, 1_000_000);
        door.prefetch_after_misses(7);
        assert_eq!(RECENT_MISSES.get(), 0, "no miss noted: nothing to count down");
        note_missing_key();
        for left in (0..MISS_ECHO).rev() {
            door.prefetch_after_misses(7);
            assert_eq!(RECENT_MISSES.get(), left);
        }
        door.prefetch_after_misses(7);
        assert_eq!(RECENT_MISSES.get(), 0);
        // Another thread's count is its own.
        note_missing_key();
        std::thread::spawn(|| assert_eq!(RECENT_MISSES.get(), 0)).join().unwrap();
    }

    /// A unit checked at any time `t0` is idle by `t0 + unit_idle_after` (what the door's
    /// expiry relies on), and one checked at 0 not at half that.
    fn idles_in_time<A: Algorithm>(algorithm: A) {
        let idle =
            unit_idle_after(&algorithm).unwrap_or_else(|| panic!("a unit of {} idles", algorithm.name()));
        assert!(idle > 0);
        for t0 in [0, 1, idle / 3, idle / 2, idle - 1, idle, 7 * idle + 5, 1 << 40] {
            let cell = algorithm.new_cell();
            assert!(algorithm.decide_cell(&cell, &At(t0), 1).is_allowed());
            assert!(algorithm.is_idle(&cell, t0 + idle), "{} at {t0}", algorithm.name());
        }
        let cell = algorithm.new_cell();
        algorithm.decide_cell(&cell, &At(0), 1);
        assert!(!algorithm.is_idle(&cell, idle / 2), "{}", algorithm.name());
    }

    #[test]
    fn a_unit_idles_within_the_computed_time() {
        let quota = Quota::from_nanos(10, 100_000_000).unwrap().with_burst(4).unwrap();
        idles_in_time(Gcra::from_quota(quota).unwrap());
        idles_in_time(TokenBucket::from_quota(quota).unwrap());
        idles_in_time(FixedWindow::from_quota(Quota::per_second(5).unwrap()).unwrap());
        idles_in_time(SlidingWindowCounter::from_quota(Quota::per_second(5).unwrap()).unwrap());
        idles_in_time(SlidingWindowLog::from_quota(Quota::per_second(5).unwrap()).unwrap());
    }

    #[test]
    fn the_first_check_is_admitted_the_second_seen_until_expiry() {
        let door = Door::new(1024, 1_000);
        let hash = 0x1234_5678_9ABC_DEF0;
        assert_eq!(door.seen(hash, 5_000), None);
        assert_eq!(door.admit(hash, 5_000), Admission::Admitted(5_000));
        assert_eq!(door.admit(hash, 5_500), Admission::Seen(5_000));
        assert_eq!(door.seen(hash, 5_999), Some(5_000));
        // A clock read older than the entry's: still young, written "later".
        assert_eq!(door.seen(hash, 4_000), Some(5_000));
        // Expired: admitted again.
        assert_eq!(door.seen(hash, 6_002), None);
        assert_eq!(door.admit(hash, 6_002), Admission::Admitted(6_002));
    }

    #[test]
    fn another_keys_young_entry_keeps_its_word() {
        let door = Door::new(1, 1_000);
        let (a, b) = (0x1111_0000_0000_0100, 0x2222_0000_0000_0200);
        assert_eq!(door.admit(a, 100), Admission::Admitted(100));
        assert_eq!(door.admit(b, 200), Admission::Busy);
        assert_eq!(door.seen(b, 200), None);
        assert_eq!(door.seen(a, 200), Some(100));
        // Once `a`'s entry is expired, `b` takes the word.
        assert_eq!(door.admit(b, 1_200), Admission::Admitted(1_200));
        assert_eq!(door.seen(a, 1_200), None);
    }

    /// An admission without the lock that must undo its claim stands only when an insert of the
    /// key took the entry (and charged its unit). Found by `tests/linearizable.rs`: a claim
    /// whose entry a reset forgot meanwhile stood, and the unit was charged nowhere.
    #[test]
    fn an_undone_claim_stands_only_when_an_insert_took_it() {
        let door = Door::new(8, 1_000);
        let hash = 0x1234_5678_9ABC_DEF0;
        let claim = door.claim(hash, 100).ok().unwrap();
        assert!(claim.undo(), "nothing took it: to the lock");
        assert_eq!(door.seen(hash, 100), None, "the undo emptied the word");

        let claim = door.claim(hash, 200).ok().unwrap();
        assert_eq!(door.take(hash, 200), Some(200));
        assert!(!claim.undo(), "an insert took it and charged it: it stands");
        assert_eq!(door.seen(hash, 200), None, "the taken mark is no entry");
        assert_eq!(door.admit(hash, 300), Admission::Busy, "the mark holds the word until it expires");
        assert_eq!(door.admit(hash, 1_300), Admission::Admitted(1_300), "the word is free again");
        door.forget(hash);

        let claim = door.claim(hash, 400).ok().unwrap();
        door.forget(hash);
        assert!(claim.undo(), "forgotten by a reset: charged nowhere, to the lock");
    }

    /// Another key sharing the word does not replace a young taken mark: if it did, the claim
    /// whose entry was taken would find that key's entry when undone and go to the lock, charged
    /// a second time. Found by `tests/keyed_door.rs`'s racing first checks (a key admitted 2 of
    /// its burst of 3).
    #[test]
    fn a_taken_mark_keeps_its_word_until_it_expires() {
        let door = Door::new(1, 1_000);
        let (a, b) = (0x1111_0000_0000_0100, 0x2222_0000_0000_0200);
        let claim = door.claim(a, 100).ok().unwrap();
        assert_eq!(door.take(a, 100), Some(100));
        assert_eq!(door.admit(b, 150), Admission::Busy, "another key's claim keeps off the mark");
        assert!(!claim.undo(), "the undo still finds its entry taken: the admission stands");
        assert_eq!(door.admit(b, 1_200), Admission::Admitted(1_200), "an expired mark is replaced");
    }

    #[test]
    fn long_ttls_use_coarser_units_and_round_up() {
        let hour = 3_600 * 1_000_000_000u64;
        let door = Door::new(8, hour);
        assert!(door.shift > 0);
        let hash = 0xABCD_EF01_2345_6789;
        let t0 = 10 * hour + 12_345;
        assert_eq!(door.admit(hash, t0), Admission::Admitted(t0));
        let seen = door.seen(hash, t0 + hour / 2).unwrap();
        assert!(seen >= t0 && seen < t0 + (1 << door.shift), "{seen} for {t0}");
        assert_eq!(door.seen(hash, t0 + hour + (4 << door.shift)), None);
    }
}
