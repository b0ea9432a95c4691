//! [`Recent`]: each thread's entry for the key it checks again and again, found without the
//! map.
//!
//! A lookup in the map pins the map's memory for its duration, and unpinning is a locked
//! instruction (seize's guard swaps its thread's list of retired batches out when it leaves): on
//! a hot key that is as much again as the lease's compare-and-swap. A thread that looks one key
//! up twice in a row keeps that key's entry (an `Arc`, which the table holds too) and answers
//! from it with no guard, until it looks another key up twice in a row or an entry leaves the
//! table. A check that races with a departure may still answer from the departing entry, as a
//! lookup that races with a removal finds it; a check that comes after the departure does not.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use kova::AlgorithmKind;
use smallvec::SmallVec;

use super::entry::Entry;
use super::{KeyRef, INLINE_KEY};

/// Tells the local tables apart in [`KEPT`]: a table's number, never reused.
static TABLES: AtomicU64 = AtomicU64::new(1);

std::thread_local! {
    /// This thread's kept entry, for one local table at a time: one slot per thread serves a
    /// thread that checks one hot key, and std's thread-local is found with no call. A thread
    /// that answers for two tables in turn keeps neither, and a slot may keep an entry (a few
    /// hundred bytes) after its key left the table or its table was dropped, until its thread
    /// ends or keeps another.
    static KEPT: RefCell<Kept> = const { RefCell::new(Kept::EMPTY) };
}

/// A local table's side of the threads' kept entries: its number, and the count of entries that
/// have left its map.
pub(super) struct Recent {
    table: u64,
    /// Bumped each time an entry leaves the map (removed, replaced, purged): a thread's kept
    /// entry is used only while this count is what it was before the lookup that found it.
    /// Padded: every local answer reads it, and nothing else in [`Local`](super::Local) should
    /// share its line with it.
    departures: CachePadded<AtomicU64>,
}

impl Default for Recent {
    fn default() -> Self {
        // Relaxed: only uniqueness matters.
        Recent { table: TABLES.fetch_add(1, Ordering::Relaxed), departures: CachePadded::default() }
    }
}

/// One thread's kept entry.
struct Kept {
    /// The table that `entry` and `last` belong to (0: none).
    table: u64,
    /// The departure count read before the lookup that found `entry`.
    departures: u64,
    /// The entry's key (beside the entry, not in it: the table holds it inline). Inline here
    /// too: keeping a key of up to [`INLINE_KEY`] bytes allocates nothing.
    kind: Option<AlgorithmKind>,
    key: SmallVec<[u8; INLINE_KEY]>,
    /// The entry of the last key looked up twice in a row on this thread.
    entry: Option<Arc<Entry>>,
    /// The fingerprint of the last key looked up.
    last: u64,
}

impl Kept {
    const EMPTY: Kept =
        Kept { table: 0, departures: 0, kind: None, key: SmallVec::new_const(), entry: None, last: 0 };

    #[inline]
    fn holds(&self, key: KeyRef<'_>) -> bool {
        self.kind == Some(key.kind) && *self.key == *key.user_key
    }
}

/// What tells two keys apart for [`Recent::with_entry`], without hashing them: the algorithm, the
/// length, and the first and last 8 bytes (every byte of a key of up to 16). Two keys alike here
/// cost only a needless copy of an entry's `Arc` each time one follows the other.
#[inline]
fn fingerprint(key: KeyRef<'_>) -> u64 {
    let KeyRef { kind, user_key: key } = key;
    let shape = (key.len() as u64) << 8 | kind as u64;
    let (head, tail) = match (key.first_chunk::<8>(), key.last_chunk::<8>()) {
        (Some(head), Some(tail)) => (u64::from_le_bytes(*head), u64::from_le_bytes(*tail)),
        // Short keys, byte by byte: no call to copy a slice of unknown length.
        _ => (key.iter().fold(0, |word, &byte| word << 8 | u64::from(byte)), 0),
    };
    head ^ tail.rotate_left(32) ^ shape.rotate_left(16)
}

impl Recent {
    /// Runs `answer` on this thread's kept entry if it is this table's, for `key`, found under
    /// the departure count `departures` (no entry has left the table since). If it is not:
    /// whether this thread's previous lookup that missed was of the same key, in which case the
    /// entry that the caller looks up should be passed to [`keep`](Self::keep).
    #[inline(always)]
    pub(super) fn with_entry<R>(
        &self,
        key: KeyRef<'_>,
        departures: u64,
        answer: impl FnOnce(&Entry) -> R,
    ) -> Result<R, bool> {
        let missed = |kept: &RefCell<Kept>| {
            let Ok(mut kept) = kept.try_borrow_mut() else { return Err(false) };
            if kept.table == self.table && kept.departures == departures && kept.holds(key) {
                if let Some(entry) = kept.entry.as_deref() {
                    return Ok(answer(entry));
                }
            }
            let fingerprint = fingerprint(key);
            if kept.table != self.table {
                kept.table = self.table;
                kept.kind = None;
                kept.entry = None;
                kept.last = fingerprint;
                return Err(false);
            }
            let again = kept.last == fingerprint;
            kept.last = fingerprint;
            Err(again)
        };
        KEPT.try_with(missed).unwrap_or(Err(false))
    }

    /// The departure count, to read before a lookup whose entry is passed to
    /// [`keep`](Self::keep).
    #[inline]
    pub(super) fn departures(&self) -> u64 {
        // Acquire: pairs with `departed`'s Release. A count read after an entry's departure
        // comes after its removal from the map, so the lookup that follows this read cannot find
        // the departed entry and keep it under the newer count.
        self.departures.load(Ordering::Acquire)
    }

    /// Keeps `found` as this thread's entry for `key`, found by a lookup after reading
    /// `departures`.
    pub(super) fn keep(&self, key: KeyRef<'_>, departures: u64, found: &Arc<Entry>) {
        let _ = KEPT.try_with(|kept| {
            let Ok(mut kept) = kept.try_borrow_mut() else { return };
            if kept.table != self.table {
                return;
            }
            if !(kept.holds(key) && kept.entry.as_ref().is_some_and(|e| Arc::ptr_eq(e, found))) {
                kept.kind = Some(key.kind);
                kept.key.clear();
                kept.key.extend_from_slice(key.user_key);
                kept.entry = Some(Arc::clone(found));
            }
            kept.departures = departures;
        });
    }

    /// Records that an entry has left the map: every thread's kept entry is looked up again.
    pub(super) fn departed(&self) {
        // Release: pairs with `departures`' Acquire (see there); called after the removal.
        self.departures.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::RedisLimit;
    use kova::AlgorithmKind;

    fn key(user_key: &[u8]) -> KeyRef<'_> {
        KeyRef { kind: AlgorithmKind::Gcra, user_key }
    }

    fn entry() -> Arc<Entry> {
        Arc::new(Entry::new(RedisLimit::gcra(kova::Quota::per_second(10).unwrap()).unwrap(), 0))
    }

    fn found(recent: &Recent, user_key: &[u8]) -> Option<*const Entry> {
        recent.with_entry(key(user_key), recent.departures(), |e| e as *const Entry).ok()
    }

    /// A check of `user_key` that looks it up in the table (as `Local::answer` does, finding
    /// `found`) unless this thread keeps its entry.
    fn note(recent: &Recent, user_key: &[u8], found: &Arc<Entry>) {
        note_under(recent, key(user_key), found, recent.departures());
    }

    fn note_under(recent: &Recent, key: KeyRef<'_>, found: &Arc<Entry>, departures: u64) {
        if let Err(true) = recent.with_entry(key, departures, |_| ()) {
            recent.keep(key, departures, found);
        }
    }

    fn at(found: &Arc<Entry>) -> Option<*const Entry> {
        Some(Arc::as_ptr(found))
    }

    #[test]
    fn an_entry_is_kept_from_the_second_lookup_of_a_key_in_a_row() {
        let recent = Recent::default();
        let (a, b, a_bucket) = (entry(), entry(), entry());
        let a_bucket_key = KeyRef { kind: AlgorithmKind::TokenBucket, user_key: b"a" };
        note(&recent, b"a", &a);
        assert_eq!(found(&recent, b"a"), None, "kept after one lookup");
        note(&recent, b"a", &a);
        assert_eq!(found(&recent, b"a"), at(&a));
        assert_eq!(found(&recent, b"b"), None, "another key");
        let other_kind = recent.with_entry(a_bucket_key, recent.departures(), |_| ());
        assert_eq!(other_kind, Err(false), "another kind");
        note(&recent, b"b", &b);
        assert_eq!(found(&recent, b"a"), at(&a), "dropped by one lookup of another key");
        note(&recent, b"a", &a);
        note_under(&recent, a_bucket_key, &a_bucket, recent.departures());
        note(&recent, b"a", &a);
        assert_eq!(found(&recent, b"a"), at(&a));
        note(&recent, b"b", &b);
        note(&recent, b"b", &b);
        assert_eq!(found(&recent, b"a"), None, "kept past two lookups of another key in a row");
        assert_eq!(found(&recent, b"b"), at(&b));
    }

    #[test]
    fn a_kept_entry_is_dropped_when_any_entry_leaves_the_table() {
        let recent = Recent::default();
        let a = entry();
        note(&recent, b"a", &a);
        note(&recent, b"a", &a);
        assert!(found(&recent, b"a").is_some());
        recent.departed();
        assert_eq!(found(&recent, b"a"), None, "kept past a departure");
        // Found again after the departure by a lookup that read the count before it: not kept.
        note_under(&recent, key(b"a"), &a, recent.departures() - 1);
        note_under(&recent, key(b"a"), &a, recent.departures() - 1);
        assert_eq!(found(&recent, b"a"), None, "kept under a count read before a departure");
        note(&recent, b"a", &a);
        assert_eq!(found(&recent, b"a"), at(&a));
    }

    #[test]
    fn a_kept_entry_belongs_to_its_thread_and_its_table() {
        let (recent, other) = (Recent::default(), Recent::default());
        let a = entry();
        note(&recent, b"a", &a);
        note(&recent, b"a", &a);
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(found(&recent, b"a"), None, "another thread's entry"));
        });
        assert_eq!(found(&recent, b"a"), at(&a));
        assert_eq!(found(&other, b"a"), None, "another table's entry");
        // One slot per thread: a lookup in another table takes it.
        assert_eq!(found(&recent, b"a"), None, "kept past a lookup in another table");
    }

    #[test]
    fn fingerprints_tell_short_keys_and_key_ends_apart() {
        let print = |user_key: &[u8]| fingerprint(key(user_key));
        assert_ne!(print(b"a"), print(b"b"));
        assert_ne!(print(b"ab"), print(b"ba"));
        assert_ne!(print(b""), print(b"\0"));
        assert_ne!(print(b"user:1:0000000001"), print(b"user:1:0000000002"));
        assert_ne!(fingerprint(KeyRef { kind: AlgorithmKind::TokenBucket, user_key: b"a" }), print(b"a"));
    }
}
