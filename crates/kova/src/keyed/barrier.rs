//! Asymmetric fences for the epoch (`epoch.rs`): on Linux, a pin publishes itself with a plain
//! store, and the rare side that must see every pin runs a heavy barrier instead, membarrier(2)'s
//! `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, which runs a full memory barrier on every CPU that is
//! running a thread of this process (a thread not running has passed one, switching out).
//!
//! # Why
//! A pin's store must be visible before the pinned section's loads. With a symmetric protocol
//! that takes a full barrier on every pin (on x86 a locked exchange, a large share of a keyed
//! check that hits the cache). A heavy barrier gives the same order from the other side: once it has
//! returned, each thread's pin made before its CPU's barrier is visible, and each load made
//! after it sees what was unlinked before the barrier began.
//!
//! `KOVA_SYMMETRIC_PINS` in the environment (read once) keeps the full barrier on every pin,
//! to compare the two.
//!
//! # How a retired batch is stamped
//! A heavy barrier costs microseconds while other threads run, too much for each locked section
//! that unlinks something (a flood of new keys evicts on every insert). So a section seals its
//! batch with a [`Ticket`]: a full fence after its unlinks, then the count of barriers started.
//! Any barrier started later ([`covers`]) began after the unlinks were visible to every CPU; the
//! epoch read after it has completed is the batch's stamp, exactly as the symmetric protocol's
//! stamp is the epoch read after its fence. A thread whose pin came before its CPU's barrier is
//! then visible to every advance that frees the batch (both come after the stamp, which comes
//! after the barrier), and holds the epoch back; one whose loads came after it cannot reach the
//! batch. Barriers run at most every [`SPACING_NANOS`] unless a shard needs room
//! ([`run`] with `urgent`), and one barrier covers every ticket taken before it, in every shard.
//!
//! # Where it applies, and what checks it
//! On Linux on x86-64 only. x86's memory order (TSO) keeps a thread's loads before its later
//! stores, so an advance that reads a thread's newer pin (a plain store, not a read-modify-write
//! in the unpin's release sequence) still finds that thread's earlier pinned loads done; weaker
//! orders would need that argued anew. Elsewhere, under Miri and under loom, or where the kernel
//! refuses the registration, [`asymmetric`] is false: pins take the full barrier and a section
//! stamps its batch at once, the protocol the loom models check. Loom cannot model membarrier(2),
//! so the asymmetric side rests on its documented contract (the technique of seize, liburcu and
//! folly's hazard pointers), exercised by the stress tests in `epoch.rs` and `reclaim.rs`.

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri), not(kova_loom)))]
mod linux {
    use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
    use std::sync::{Mutex, OnceLock};

    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    /// The slow barrier that needs no registration (a grace period of the kernel's RCU).
    const GLOBAL: libc::c_int = 1 << 0;

    fn membarrier(command: libc::c_int) -> bool {
        // SAFETY: membarrier(2) takes a command and two integer arguments and touches no
        // memory of ours; a refused command returns -1.
        unsafe { libc::syscall(libc::SYS_membarrier, command, 0, 0) == 0 }
    }

    const UNDECIDED: u8 = 0;
    const ASYMMETRIC: u8 = 1;
    const SYMMETRIC: u8 = 2;
    /// The protocol, decided once: every pin and every seal reads it.
    static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

    /// Whether the process registered for expedited barriers (at the first use; the answer
    /// never changes after, so a pin and the seals that must see it agree on the protocol).
    #[inline(always)]
    pub(in crate::keyed) fn asymmetric() -> bool {
        // Relaxed: the mode is one of three values set once; a thread that reads UNDECIDED
        // decides under `decide`'s `OnceLock`, which returns the one answer.
        match MODE.load(Ordering::Relaxed) {
            ASYMMETRIC => true,
            SYMMETRIC => false,
            _ => decide(),
        }
    }

    #[cold]
    fn decide() -> bool {
        static DECIDED: OnceLock<bool> = OnceLock::new();
        let asymmetric = *DECIDED.get_or_init(|| {
            std::env::var_os("KOVA_SYMMETRIC_PINS").is_none() && membarrier(REGISTER_PRIVATE_EXPEDITED)
        });
        MODE.store(if asymmetric { ASYMMETRIC } else { SYMMETRIC }, Ordering::Relaxed);
        asymmetric
    }

    /// The time barriers are spaced by, read by every seal's collection that finds its batch
    /// not covered: the coarse time where a clock keeps it (one load), else quanta's time-stamp
    /// counter from the first barrier's origin. The two count from different origins, so
    /// spacing compares them by their distance, never their order: a switch from one to the
    /// other (a clock made after the first barrier) costs at most one barrier run early or
    /// late.
    fn now_nanos() -> u64 {
        crate::clock::coarse_nanos_if_running().unwrap_or_else(|| {
            static ORIGIN: OnceLock<quanta::Instant> = OnceLock::new();
            let origin = *ORIGIN.get_or_init(quanta::Instant::now);
            u64::try_from(quanta::Instant::now().saturating_duration_since(origin).as_nanos())
                .unwrap_or(u64::MAX)
        })
    }

    /// Barriers started (the one running included) and completed, in order: they run one at a
    /// time, under `RUNNING`.
    static STARTED: AtomicU64 = AtomicU64::new(0);
    static COMPLETED: AtomicU64 = AtomicU64::new(0);
    /// When the last barrier completed (precise nanoseconds, 0: never).
    static LAST_NANOS: AtomicU64 = AtomicU64::new(0);
    static RUNNING: Mutex<()> = Mutex::new(());

    /// A point after a section's unlinks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(in crate::keyed) struct Ticket(u64);

    pub(in crate::keyed) fn ticket() -> Ticket {
        // SeqCst fence: the unlinks before it are visible to every CPU before the load below,
        // and so before any barrier whose start (a later value of STARTED) this load missed.
        fence(Ordering::SeqCst);
        Ticket(STARTED.load(Ordering::Relaxed))
    }

    /// Whether a barrier started after `ticket` has completed.
    pub(in crate::keyed) fn covers(ticket: Ticket) -> bool {
        // Acquire: pairs with the Release store after the barrier, so what the caller reads
        // next (the epoch, for the stamp) comes after it.
        COMPLETED.load(Ordering::Acquire) > ticket.0
    }

    /// The least time between two barriers that no shard needs at once.
    pub(in crate::keyed) const SPACING_NANOS: u64 = 1_000_000;

    /// Runs a heavy barrier if `ticket` is not covered yet and either `urgent` or none has
    /// completed for [`SPACING_NANOS`]; whether `ticket` is covered after.
    pub(in crate::keyed) fn run(ticket: Ticket, urgent: bool) -> bool {
        if covers(ticket) {
            return true;
        }
        if !urgent && now_nanos().abs_diff(LAST_NANOS.load(Ordering::Relaxed)) < SPACING_NANOS {
            return false;
        }
        let _running = match RUNNING.try_lock() {
            Ok(running) => running,
            Err(std::sync::TryLockError::Poisoned(running)) => running.into_inner(),
            // Another thread's barrier is running; an urgent caller waits for it and runs its
            // own if that one started too early.
            Err(std::sync::TryLockError::WouldBlock) if urgent => {
                RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            }
            Err(std::sync::TryLockError::WouldBlock) => return covers(ticket),
        };
        if covers(ticket) {
            return true;
        }
        // SeqCst: a ticket that reads the old count was taken (its fence passed) before this.
        let number = STARTED.fetch_add(1, Ordering::SeqCst) + 1;
        heavy();
        LAST_NANOS.store(now_nanos().max(1), Ordering::Relaxed);
        // Release: pairs with `covers`.
        COMPLETED.store(number, Ordering::Release);
        covers(ticket)
    }

    /// A full memory barrier on every CPU running a thread of this process, and on this one.
    pub(in crate::keyed) fn heavy() {
        if membarrier(PRIVATE_EXPEDITED) {
            return;
        }
        // Refused although the registration succeeded, which the kernel's contract does not
        // foresee: register again, else take the slow barrier that needs no registration. A pin
        // made with a plain store cannot be made safe any other way.
        if (membarrier(REGISTER_PRIVATE_EXPEDITED) && membarrier(PRIVATE_EXPEDITED)) || membarrier(GLOBAL) {
            return;
        }
        eprintln!("kova: membarrier(2) refused after it was registered; aborting rather than free memory a check may read");
        std::process::abort();
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri), not(kova_loom)))]
pub(super) use linux::{asymmetric, covers, heavy, run, ticket, Ticket};

/// Symmetric everywhere else: [`asymmetric`] is false, so callers take the symmetric protocol
/// and never reach the rest (kept so that they compile alike on every target).
#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri), not(kova_loom))))]
mod symmetric {
    #[inline(always)]
    pub(in crate::keyed) fn asymmetric() -> bool {
        false
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(in crate::keyed) struct Ticket;

    pub(in crate::keyed) fn ticket() -> Ticket {
        Ticket
    }

    pub(in crate::keyed) fn covers(_ticket: Ticket) -> bool {
        true
    }

    pub(in crate::keyed) fn run(_ticket: Ticket, _urgent: bool) -> bool {
        true
    }

    pub(in crate::keyed) fn heavy() {
        crate::loom::atomic::fence(crate::loom::atomic::Ordering::SeqCst);
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", not(miri), not(kova_loom))))]
pub(super) use symmetric::{asymmetric, covers, heavy, run, ticket, Ticket};
