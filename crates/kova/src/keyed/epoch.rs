//! Grace periods for the keyed table: epoch-based reclamation, crossbeam-epoch's protocol step for
//! step, without its garbage queues and without the collection its pins run.
//!
//! # Why not crossbeam-epoch itself
//! Every 128th pin of a thread, crossbeam collects: it reads every other thread's record and
//! advances the global epoch, a write to the line that every pin reads. Two threads checking
//! keys of their own then trade cache lines that no check needs, and stop scaling. Here the
//! epoch advances only when a shard waits for a grace period (under its lock, when it holds
//! something retired), so a check writes nothing shared: only its own record and the key's
//! state word. (kova-bench's `keyed_per_thread` and `floor_pin_cas` measure both pins.)
//!
//! # Protocol
//! - Each thread owns a **record** (one cache line) in a global list: its pinned epoch, or
//!   "unpinned". A thread that exits gives its record back for a later thread; records are
//!   never freed (outside loom, where they live and die with each execution).
//! - **Pin**: load the global epoch, exchange it, marked pinned, into the thread's record, then a
//!   `SeqCst` fence (on x86 the exchange is a locked instruction, a full barrier, and stands for
//!   the fence, as crossbeam's compare-exchange does). Pins nest; only the outermost writes.
//!   On Linux on x86-64 the pin is a plain store instead, and a stamp runs a heavy barrier on
//!   every CPU in place of the pins' fences (`barrier.rs`).
//!   **Unpin**: store "unpinned" (Release).
//! - **Stamp** (a lock holder that unlinked something): a `SeqCst` fence, then load the global
//!   epoch.
//! - **Advance** (only while pinned): load the global epoch `e`, a `SeqCst` fence, read every
//!   record; if each is unpinned or pinned in `e`, an Acquire fence and store `e + 1`
//!   (Release). The caller is pinned in `e`, so no thread can move the epoch past `e + 1`
//!   meanwhile, and a racing advance stores the same value.
//! - What was stamped `s` is unreachable once an advance returns `s + 2` or more: every thread
//!   pinned when it was unlinked has unpinned since (the second advance could not happen
//!   before), and a thread that pinned after the stamp's fence sees it unlinked. The Acquire
//!   fences order the unpins (through the records' release sequences: a later pin is an
//!   exchange, a read-modify-write) before whatever the caller then frees.
//!
//! Under loom the pin's store and fence are loom's (the fence a real `SeqCst` fence), and
//! `kova::loom_racy::pinning_without_fence` takes the fence away, which the models must catch.

use std::cell::Cell;
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::barrier;
use crate::loom::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// A record's state while its thread is not pinned. Pinned: [`pinned_in`].
const UNPINNED: u64 = 0;

/// A record's state while its thread is pinned in `epoch`: the epoch shifted left, the low bit
/// set (so never [`UNPINNED`]).
#[inline(always)]
const fn pinned_in(epoch: u64) -> u64 {
    epoch << 1 | 1
}

/// One thread's participation: the epoch it is pinned in.
struct Record {
    /// [`UNPINNED`], or [`pinned_in`] the epoch the thread pinned in.
    state: AtomicU64,
    /// Whether a thread owns the record.
    taken: AtomicBool,
    /// The next record in the list: set before the record is published, never changed after.
    next: *const CachePadded<Record>,
}

// SAFETY: `next` is written only before the record is published (Release) and read after it is
// found (Acquire); the records it points to are shared the same way and never freed while the
// list can be read. The other fields are atomics.
unsafe impl Send for Record {}
// SAFETY: as for `Send`.
unsafe impl Sync for Record {}

/// The global epoch and the list of records.
struct Registry {
    epoch: CachePadded<AtomicU64>,
    head: AtomicPtr<CachePadded<Record>>,
}

impl Registry {
    #[cfg(not(kova_loom))]
    const fn new() -> Self {
        Registry { epoch: CachePadded::new(AtomicU64::new(0)), head: AtomicPtr::new(ptr::null_mut()) }
    }

    #[cfg(kova_loom)]
    fn new() -> Self {
        Registry { epoch: CachePadded::new(AtomicU64::new(0)), head: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Every record, newest first.
    fn records(&self) -> impl Iterator<Item = &CachePadded<Record>> + '_ {
        // Acquire: pairs with the Release that published each record, so its `next` is read.
        let mut at = self.head.load(Ordering::Acquire).cast_const();
        std::iter::from_fn(move || {
            // SAFETY: records are published fully written and never freed while the registry
            // lives (loom's `Drop` below runs when no thread can scan).
            let record = unsafe { at.as_ref() }?;
            at = record.next;
            Some(record)
        })
    }

    /// A record for a thread: a free one, or a new one at the head of the list.
    fn acquire(&self) -> NonNull<CachePadded<Record>> {
        for record in self.records() {
            // Acquire: pairs with the Release that gave it back, after its last unpin.
            if !record.taken.load(Ordering::Relaxed)
                && record.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return NonNull::from(record);
            }
        }
        let record = Box::into_raw(Box::new(CachePadded::new(Record {
            state: AtomicU64::new(UNPINNED),
            taken: AtomicBool::new(true),
            next: ptr::null(),
        })));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `record` is ours alone until the exchange below publishes it.
            unsafe { (&mut *record).next = head };
            // Release: publishes the record and its `next` to `records`' Acquire.
            match self.head.compare_exchange_weak(head, record, Ordering::Release, Ordering::Relaxed) {
                // SAFETY: from `Box::into_raw`, not null.
                Ok(_) => return unsafe { NonNull::new_unchecked(record) },
                Err(now) => head = now,
            }
        }
    }
}

impl Drop for Registry {
    /// Frees the records. Only loom's registry is ever dropped (one per execution, when its
    /// threads are done); the static one lives as long as the process.
    fn drop(&mut self) {
        // Relaxed: the registry is ours alone (`&mut self`).
        let mut at = self.head.load(Ordering::Relaxed);
        while !at.is_null() {
            // SAFETY: every record came from `Box::into_raw` in `acquire`, is in the list once,
            // and nothing can reach it any more (the registry is being dropped).
            let record = unsafe { Box::from_raw(at) };
            at = record.next.cast_mut();
        }
    }
}

#[cfg(not(kova_loom))]
static REGISTRY: Registry = Registry::new();

#[cfg(not(kova_loom))]
#[inline(always)]
fn registry() -> &'static Registry {
    &REGISTRY
}

#[cfg(kova_loom)]
loom::lazy_static! {
    /// Loom's statics are per execution. In an `Arc`: loom drops them before the main thread's
    /// locals, whose participant still gives its record back.
    static ref REGISTRY: crate::loom::Arc<Registry> = crate::loom::Arc::new(Registry::new());
}

#[cfg(kova_loom)]
fn registry() -> &'static Registry {
    &REGISTRY
}

/// A thread's hold on a record, with the depth of its pins.
struct Participant {
    record: NonNull<CachePadded<Record>>,
    /// Guards alive on this participant.
    nesting: Cell<usize>,
    /// Keeps loom's registry, and so the record, alive until the participant is dropped.
    #[cfg(kova_loom)]
    _registry: crate::loom::Arc<Registry>,
}

impl Participant {
    fn new() -> Self {
        Participant {
            record: registry().acquire(),
            nesting: Cell::new(0),
            #[cfg(kova_loom)]
            _registry: crate::loom::Arc::clone(&REGISTRY),
        }
    }

    #[inline(always)]
    fn record(&self) -> &Record {
        // SAFETY: the record is ours while the participant lives, and outlives it.
        unsafe { self.record.as_ref() }
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        debug_assert_eq!(self.nesting.get(), 0, "a participant dropped while pinned");
        // Release: the record's last unpin happens before its next owner's pins.
        self.record().taken.store(false, Ordering::Release);
    }
}

crate::loom::thread_local! {
    /// This thread's participant.
    static PARTICIPANT: Participant = Participant::new();
}

/// Proof that the thread is pinned: whatever it reaches while the guard lives (through pointers
/// loaded after the pin) is not freed before the guard drops.
/// Not `Send` (its `NonNull`): the pin belongs to this thread.
pub(super) struct Guard {
    participant: NonNull<Participant>,
    /// Whether the guard owns its participant (pinned while the thread-local was gone).
    temporary: bool,
}

/// Pins the current thread.
#[inline(always)]
pub(super) fn pin() -> Guard {
    PARTICIPANT
        .try_with(|participant| Guard::enter(NonNull::from(participant), false))
        // While the thread's locals are being destroyed: a participant of the guard's own.
        .unwrap_or_else(|_| Guard::enter(NonNull::from(Box::leak(Box::new(Participant::new()))), true))
}

impl Guard {
    /// A guard on `participant`, which lives at least as long as the guard: the thread's own
    /// until its locals are destroyed, which happens only when no guard of it is alive (guards
    /// are not `Send` and are dropped before the function that pinned returns); a temporary one
    /// until the guard frees it.
    #[inline(always)]
    fn enter(participant: NonNull<Participant>, temporary: bool) -> Guard {
        let guard = Guard { participant, temporary };
        guard.join();
        guard
    }

    /// Unpins (unless an outer guard still pins the thread) while `f` runs, then pins again:
    /// what this guard protected may be freed meanwhile. Pinned again also when `f` unwinds (a
    /// user's quota function that panics): the guard's drop then unpins once, and the thread's
    /// count of pins stays true.
    pub(super) fn repin_after<R>(&mut self, f: impl FnOnce() -> R) -> R {
        /// Pins the guard again when dropped, on return or on unwind.
        struct Rejoin<'g>(&'g Guard);
        impl Drop for Rejoin<'_> {
            fn drop(&mut self) {
                self.0.join();
            }
        }
        self.leave();
        let _rejoin = Rejoin(self);
        f()
    }

    /// Counts this guard's pin, pinning the thread if it is the outermost.
    #[inline(always)]
    fn join(&self) {
        // SAFETY: the participant outlives the guard (`enter`).
        let p = unsafe { self.participant.as_ref() };
        let nesting = p.nesting.get();
        p.nesting.set(nesting + 1);
        if nesting == 0 {
            let epoch = registry().epoch.load(Ordering::Relaxed);
            publish_pin(&p.record().state, pinned_in(epoch));
        }
    }

    /// Uncounts this guard's pin, unpinning the thread if it was the outermost.
    #[inline(always)]
    fn leave(&self) {
        // SAFETY: the participant outlives the guard (`enter`).
        let p = unsafe { self.participant.as_ref() };
        let nesting = p.nesting.get() - 1;
        p.nesting.set(nesting);
        if nesting == 0 {
            // Release: everything read while pinned happens before an advance that sees this.
            p.record().state.store(UNPINNED, Ordering::Release);
        }
    }

    /// The epoch stamp of whatever this thread unlinked before the call.
    pub(super) fn stamp(&self) -> u64 {
        if barrier::asymmetric() {
            // Pins publish with a plain store: a heavy barrier stands for their fences
            // (`barrier.rs`), then the epoch is read after it.
            barrier::heavy();
        } else {
            // SeqCst: orders the unlinks before the load, against every pin's fence: a thread
            // that pins after this fence sees them; one pinned before holds the epoch back
            // (`advance`).
            fence(Ordering::SeqCst);
        }
        // Acquire: the epoch read after the barrier; free on x86, and what `seal`'s lazy stamps
        // read too (`current`).
        registry().epoch.load(Ordering::Acquire)
    }

    /// Advances the global epoch if every pinned thread is pinned in it; returns the epoch.
    pub(super) fn advance(&self) -> u64 {
        let registry = registry();
        let epoch = registry.epoch.load(Ordering::Relaxed);
        // SeqCst: pairs with the pins' fences, so a record read below shows every pin that
        // happened before this fence.
        fence(Ordering::SeqCst);
        for record in registry.records() {
            let state = record.state.load(Ordering::Relaxed);
            if state != UNPINNED && state != pinned_in(epoch) {
                return epoch;
            }
        }
        // Acquire: the unpins (or the exchanges that followed them) read above happen before
        // whatever the caller frees once the epoch has moved on.
        fence(Ordering::Acquire);
        // Release: pairs with `current`'s Acquire and the next advance's fence.
        registry.epoch.store(epoch + 1, Ordering::Release);
        epoch + 1
    }
}

impl Drop for Guard {
    #[inline(always)]
    fn drop(&mut self) {
        self.leave();
        if self.temporary {
            // SAFETY: leaked by `pin` for this guard alone, which is its last user.
            drop(unsafe { Box::from_raw(self.participant.as_ptr()) });
        }
    }
}

/// Stores `pinned` into a record and fences, so that no load after the pin is satisfied before
/// the store is visible to an advance's scan.
#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(kova_loom)))]
#[inline(always)]
fn publish_pin(state: &AtomicU64, pinned: u64) {
    if barrier::asymmetric() {
        // Relaxed, no fence: the side that frees runs a heavy barrier that orders this store
        // before it or the pinned section's loads after it (`barrier.rs`).
        state.store(pinned, Ordering::Relaxed);
    } else {
        // SeqCst exchange: on x86 a locked instruction, a full barrier, cheaper than `mfence`
        // (crossbeam-epoch pins with a locked compare-exchange for the same reason).
        state.swap(pinned, Ordering::SeqCst);
    }
    // The compiler fence keeps the compiler from moving the pinned section's loads above the
    // store.
    crate::loom::atomic::compiler_fence(Ordering::SeqCst);
}

/// Stores `pinned` into a record and fences (the portable form, and loom's).
#[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri), not(kova_loom))))]
#[inline(always)]
fn publish_pin(state: &AtomicU64, pinned: u64) {
    if crate::loom::faults::pin_fence_skipped() {
        state.store(pinned, Ordering::Relaxed);
        return;
    }
    // An exchange, so that the record's release sequence runs from the last unpin through it;
    // SeqCst fence: pairs with `stamp`'s and `advance`'s.
    state.swap(pinned, Ordering::SeqCst);
    fence(Ordering::SeqCst);
}

/// The global epoch now.
pub(super) fn current() -> u64 {
    // Acquire: pairs with the advance that stored it.
    registry().epoch.load(Ordering::Acquire)
}

/// Whether what was stamped `stamp` is unreachable at epoch `epoch`.
pub(super) fn expired(stamp: u64, epoch: u64) -> bool {
    epoch >= stamp + 2
}

#[cfg(all(test, not(kova_loom)))]
pub(super) mod tests {
    use super::*;

    /// This thread's record's state.
    fn my_state() -> u64 {
        PARTICIPANT.with(|p| p.record().state.load(Ordering::Relaxed))
    }

    #[test]
    fn pins_nest_and_the_outermost_unpins() {
        assert_eq!(my_state(), UNPINNED);
        let outer = pin();
        assert_ne!(my_state(), UNPINNED);
        let inner = pin();
        drop(inner);
        assert_ne!(my_state(), UNPINNED, "the outer guard still pins");
        drop(outer);
        assert_eq!(my_state(), UNPINNED);
    }

    /// A closure that unwinds while the guard is unpinned leaves the thread's pins counted
    /// right: the guard is pinned again and its drop unpins the thread once.
    #[test]
    fn a_repin_whose_closure_panics_keeps_the_count_of_pins() {
        let unwound = std::panic::catch_unwind(|| {
            let mut guard = pin();
            guard.repin_after(|| panic!("a user's quota function"));
        });
        assert!(unwound.is_err());
        assert_eq!(my_state(), UNPINNED);
        let guard = pin();
        assert_ne!(my_state(), UNPINNED, "a pin after the unwind is published");
        drop(guard);
        assert_eq!(my_state(), UNPINNED);
    }

    #[test]
    fn a_pinned_thread_holds_the_epoch_back_until_it_unpins() {
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let guard = pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        let guard = pin();
        let stamp = guard.stamp();
        // Other tests' threads may pin and unpin meanwhile; the holder stays pinned in an epoch
        // at most `stamp`, so two epochs past the stamp cannot come while it does.
        for _ in 0..16 {
            assert!(!expired(stamp, guard.advance()), "advanced past a pinned thread");
        }
        drop(guard);
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        // Unpinned, this thread can advance twice (other tests' pins may delay it: retry).
        let mut epoch = current();
        for _ in 0..1_000_000 {
            epoch = pin().advance();
            if expired(stamp, epoch) {
                break;
            }
            std::thread::yield_now();
        }
        assert!(expired(stamp, epoch), "the epoch stayed at {epoch} after a stamp of {stamp}");
    }

    pub(in crate::keyed) const ALIVE: u64 = 0xA11E;
    pub(in crate::keyed) const DEAD: u64 = 0xDEAD;

    /// A thread that pins, reads the box `shared` points to and lingers while pinned, until
    /// `stop`: it panics if a box it reads was marked [`DEAD`]; it returns how many it read.
    /// Returns once the thread has read: on a busy machine it may be scheduled only after the
    /// caller's replacements would all have run.
    pub(in crate::keyed) fn spawn_pinned_reader(
        shared: &std::sync::Arc<AtomicPtr<AtomicU64>>,
        stop: &std::sync::Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<u64> {
        let reading = std::sync::Arc::new(AtomicBool::new(false));
        let (shared, stop, started) = (shared.clone(), stop.clone(), reading.clone());
        let reader = std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _guard = pin();
                // Acquire: pairs with the writer's swap, after the box was written.
                let value = shared.load(Ordering::Acquire);
                // Linger while pinned, so that a free that does not wait lands here.
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                // SAFETY: loaded while pinned: freed only after its grace period.
                assert_eq!(unsafe { (*value).load(Ordering::Relaxed) }, ALIVE);
                reads += 1;
                // Relaxed: a start signal; nothing is published through it.
                started.store(true, Ordering::Relaxed);
            }
            reads
        });
        while !reading.load(Ordering::Relaxed) {
            std::thread::yield_now();
        }
        reader
    }

    /// Readers pin and read a shared box while a writer replaces it, waits for the old one's
    /// grace period, marks it dead and frees it: no reader may see a dead value (under Miri, no
    /// reader may touch a freed box). Broken on purpose, it fails: without the wait, or with an
    /// advance that ignores pinned threads.
    #[test]
    fn a_replaced_value_is_freed_only_after_its_readers_unpin() {
        let fresh = || Box::into_raw(Box::new(AtomicU64::new(ALIVE)));
        let shared = std::sync::Arc::new(AtomicPtr::new(fresh()));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let readers = vec![spawn_pinned_reader(&shared, &stop)];
        for _ in 0..if cfg!(miri) { 20 } else { 2_000 } {
            let guard = pin();
            // AcqRel: publishes the new box to the readers' Acquire, and takes the old one's
            // contents with it.
            let old = shared.swap(fresh(), Ordering::AcqRel);
            let stamp = guard.stamp();
            drop(guard);
            while !expired(stamp, pin().advance()) {
                std::thread::yield_now();
            }
            // SAFETY: its grace period has ended: no reader holds it.
            unsafe {
                (*old).store(DEAD, Ordering::Relaxed);
                drop(Box::from_raw(old));
            }
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(reads > 0);
        // SAFETY: every thread that read it has stopped.
        drop(unsafe { Box::from_raw(shared.load(Ordering::Relaxed)) });
    }

    #[test]
    fn an_exited_threads_record_is_reused() {
        let count = || registry().records().count();
        // Warm up: this thread's record, and one for the threads below.
        std::thread::spawn(|| drop(pin())).join().unwrap();
        let before = count();
        for _ in 0..100 {
            std::thread::spawn(|| drop(pin())).join().unwrap();
        }
        // Other tests run threads at the same time; 100 threads one after another need no more
        // than a handful of records beyond theirs.
        assert!(count() <= before + 16, "{before} records before, {} after", count());
    }

    #[test]
    fn a_pin_from_a_thread_local_destructor_is_a_temporary_participant() {
        struct PinsOnDrop;
        impl Drop for PinsOnDrop {
            fn drop(&mut self) {
                assert!(PARTICIPANT.try_with(|_| ()).is_err(), "the participant is still alive");
                let guard = pin();
                let _ = guard.stamp();
            }
        }
        std::thread_local! {
            static LATE: PinsOnDrop = const { PinsOnDrop };
        }
        std::thread::spawn(|| {
            // Registered before the participant, so destroyed after it (in reverse order).
            LATE.with(|_| ());
            drop(pin());
        })
        .join()
        .unwrap();
    }
}
