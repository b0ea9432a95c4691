//! The switches the loom models turn on through `kova::loom_racy`: deliberately broken variants
//! of the keyed table's protocols (the should-fail models, which prove the models can fail) and
//! two that are not broken but steer a table onto its other protocol. Each is read through a
//! function here that is a constant outside loom builds, so the code that asks compiles to the
//! real protocol alone.
//!
//! Under loom each switch is a std thread-local, not loom's: loom runs every thread of a model on
//! the OS thread that called `loom::model`, so a switch covers the whole model (and only it:
//! other tests run their models on other OS threads).

/// How the keyed table's lock holder looks at a word cell before unlinking its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// The real protocol: freeze the word.
    Freeze,
    /// The sliding log's protocol (hide the line), for words too (not racy).
    HideEntry,
    /// RACY: a plain load, and checks do not look again.
    LoadOnly,
}

/// When a sketch's check raises the key's other cells (`sketch.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SketchRaise {
    /// The real protocol: by `fetch_max`, before the commit.
    BeforeCommit,
    /// RACY: by `fetch_max`, after the commit.
    AfterCommit,
    /// RACY: by plain stores, before the commit.
    PlainStore,
}

/// What the keyed tables built on this OS thread (so, in the loom models run on it) have
/// reclaimed after a grace period, so far. The models compare it before and after to show that a
/// scenario really frees and reuses what the table retired.
#[cfg(kova_loom)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reclaimed {
    /// Removed lines made reusable (the next insert may take them).
    pub lines: usize,
    /// Replaced arrays freed.
    pub arrays: usize,
}

#[cfg(kova_loom)]
pub(crate) use switches::*;

#[cfg(kova_loom)]
mod switches {
    use std::cell::Cell;

    use super::{Look, Reclaimed, SketchRaise};

    std::thread_local! {
        static SKIP_PIN_FENCE: Cell<bool> = const { Cell::new(false) };
        static SKIP_GRACE_PERIODS: Cell<bool> = const { Cell::new(false) };
        static LOOK: Cell<Look> = const { Cell::new(Look::Freeze) };
        static CELLS_BOXED: Cell<bool> = const { Cell::new(false) };
        static SKIP_STRIPE_CAS: Cell<bool> = const { Cell::new(false) };
        static SKIP_DOOR_CAS: Cell<bool> = const { Cell::new(false) };
        static SKIP_DOOR_COUNT: Cell<bool> = const { Cell::new(false) };
        static KEEP_DOOR_ENTRY: Cell<bool> = const { Cell::new(false) };
        static FREE_DOOR_MARK: Cell<bool> = const { Cell::new(false) };
        static HOT_SLOT_OPEN: Cell<bool> = const { Cell::new(false) };
        static SKIP_VISIT_RELOOK: Cell<bool> = const { Cell::new(false) };
        static RESET_COUNTED_ONCE: Cell<bool> = const { Cell::new(false) };
        static SKETCH_RAISE: Cell<SketchRaise> = const { Cell::new(SketchRaise::BeforeCommit) };
        static RECLAIMED: Cell<Reclaimed> = const { Cell::new(Reclaimed { lines: 0, arrays: 0 }) };
    }

    /// Runs `f` with `switch` set to `value`, then puts back what it was (also when `f` panics).
    fn with_switch<T: Copy + 'static, R>(
        switch: &'static std::thread::LocalKey<Cell<T>>,
        value: T,
        f: impl FnOnce() -> R,
    ) -> R {
        struct Reset<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<T>>, T);
        impl<T: Copy + 'static> Drop for Reset<T> {
            fn drop(&mut self) {
                self.0.with(|cell| cell.set(self.1));
            }
        }
        let _reset = Reset(switch, switch.with(|cell| cell.replace(value)));
        f()
    }

    /// Runs `f` with pins publishing their epoch without a fence.
    pub(crate) fn with_pin_fence_skipped<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_PIN_FENCE, true, f)
    }

    /// Runs `f` with retired places handed back at the next lock, grace period or not.
    pub(crate) fn with_grace_periods_skipped<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_GRACE_PERIODS, true, f)
    }

    /// Runs `f` with word cells looked at by `look`.
    pub(crate) fn with_look<R>(look: Look, f: impl FnOnce() -> R) -> R {
        with_switch(&LOOK, look, f)
    }

    /// Runs `f` with the tables it builds keeping word cells boxed.
    pub(crate) fn with_cells_boxed<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&CELLS_BOXED, true, f)
    }

    /// Runs `f` with striped limiters spending a stripe by load and store, not a CAS.
    pub(crate) fn with_stripe_cas_skipped<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_STRIPE_CAS, true, f)
    }

    /// Runs `f` with the keyed table's doorkeeper taking a word by load and store, not a CAS.
    pub(crate) fn with_door_cas_skipped<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_DOOR_CAS, true, f)
    }

    pub(crate) fn door_claim_racy() -> bool {
        SKIP_DOOR_CAS.with(Cell::get)
    }

    /// Runs `f` with the direct limiter's reset counted once, done, before the cell changes.
    pub(crate) fn with_reset_counted_once<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&RESET_COUNTED_ONCE, true, f)
    }

    pub(crate) fn reset_counted_once() -> bool {
        RESET_COUNTED_ONCE.with(Cell::get)
    }

    /// Runs `f` with door admissions without the lock standing whatever inserts ran meanwhile.
    pub(crate) fn with_door_count_unchecked<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_DOOR_COUNT, true, f)
    }

    pub(crate) fn door_count_unchecked() -> bool {
        SKIP_DOOR_COUNT.with(Cell::get)
    }

    /// Runs `f` with inserts reading a key's door entry without taking it.
    pub(crate) fn with_door_entry_kept<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&KEEP_DOOR_ENTRY, true, f)
    }

    pub(crate) fn door_entry_kept() -> bool {
        KEEP_DOOR_ENTRY.with(Cell::get)
    }

    /// Runs `f` with a door word's taken mark free for any key's claim at once.
    pub(crate) fn with_door_mark_free<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&FREE_DOOR_MARK, true, f)
    }

    pub(crate) fn door_mark_free() -> bool {
        FREE_DOOR_MARK.with(Cell::get)
    }

    pub(crate) fn pin_fence_skipped() -> bool {
        SKIP_PIN_FENCE.with(Cell::get)
    }

    pub(crate) fn stripe_cas_skipped() -> bool {
        SKIP_STRIPE_CAS.with(Cell::get)
    }

    /// Runs `f` with hot keys demoted without closing their slot (a load, not a freeze).
    pub(crate) fn with_visit_relook_skipped<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&SKIP_VISIT_RELOOK, true, f)
    }

    pub(crate) fn visit_relook_skipped() -> bool {
        SKIP_VISIT_RELOOK.with(Cell::get)
    }

    pub(crate) fn with_hot_slot_left_open<R>(f: impl FnOnce() -> R) -> R {
        with_switch(&HOT_SLOT_OPEN, true, f)
    }

    pub(crate) fn hot_slot_left_open() -> bool {
        HOT_SLOT_OPEN.with(Cell::get)
    }

    /// Runs `f` with sketches raising a key's other cells as `raise` says.
    pub(crate) fn with_sketch_raise<R>(raise: SketchRaise, f: impl FnOnce() -> R) -> R {
        with_switch(&SKETCH_RAISE, raise, f)
    }

    pub(crate) fn sketch_raise() -> SketchRaise {
        SKETCH_RAISE.with(Cell::get)
    }

    pub(crate) fn grace_periods_skipped() -> bool {
        SKIP_GRACE_PERIODS.with(Cell::get)
    }

    pub(crate) fn look() -> Look {
        LOOK.with(Cell::get)
    }

    /// Boxed cells, or `hiding_entries` (which only a boxed cell's line can do).
    pub(crate) fn cells_boxed() -> bool {
        CELLS_BOXED.with(Cell::get) || look() == Look::HideEntry
    }

    pub(crate) fn reclaimed() -> Reclaimed {
        RECLAIMED.with(Cell::get)
    }

    pub(crate) fn count_reclaimed(lines: usize, arrays: usize) {
        RECLAIMED.with(|total| {
            let Reclaimed { lines: l, arrays: a } = total.get();
            total.set(Reclaimed { lines: l + lines, arrays: a + arrays });
        });
    }
}

/// Whether a pin publishes its epoch without its fence (`loom_racy::pinning_without_fence`).
/// Read by the portable pin only (x86 pins with a locked exchange, outside Miri).
#[cfg(not(kova_loom))]
#[cfg_attr(all(any(target_arch = "x86", target_arch = "x86_64"), not(miri)), allow(dead_code))]
#[inline(always)]
pub(crate) const fn pin_fence_skipped() -> bool {
    false
}

/// Whether a composite's write on a boxed cell stands without looking at its line again
/// (`loom_racy::visit_without_relook`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn visit_relook_skipped() -> bool {
    false
}

/// Whether retired places are handed back before their grace period ends
/// (`loom_racy::without_grace_periods`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn grace_periods_skipped() -> bool {
    false
}

/// How the lock holder looks at a word cell (`loom_racy::looking_without_freezing`,
/// `loom_racy::hiding_entries`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn look() -> Look {
    Look::Freeze
}

/// Whether tables keep word cells boxed, not inline (`loom_racy::boxed_cells`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn cells_boxed() -> bool {
    false
}

/// Counts places reclaimed after their grace period (`loom_racy::reclaimed`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) fn count_reclaimed(_lines: usize, _arrays: usize) {}

/// Whether striped limiters spend a stripe by load and store (`loom_racy::striped_take_load_store`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn stripe_cas_skipped() -> bool {
    false
}

/// Whether a reset is counted once, before the cell changes (`loom_racy::reset_counted_once`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn reset_counted_once() -> bool {
    false
}

/// Whether the doorkeeper takes a word by load and store (`loom_racy::door_without_cas`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn door_claim_racy() -> bool {
    false
}

/// Whether a door admission without the lock stands without checking the shard's insert count
/// (`loom_racy::door_admission_unchecked`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn door_count_unchecked() -> bool {
    false
}

/// Whether an insert reads its key's door entry without taking it
/// (`loom_racy::door_entry_kept`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn door_entry_kept() -> bool {
    false
}

/// Whether a door word's taken mark is free for any key's claim at once
/// (`loom_racy::door_mark_free`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn door_mark_free() -> bool {
    false
}

/// Whether the keyed table demotes a hot key without closing its slot's central word
/// (`loom_racy::hot_demote_without_close`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn hot_slot_left_open() -> bool {
    false
}

/// When a sketch raises a key's other cells (`loom_racy::sketch_raise_after_commit`,
/// `loom_racy::sketch_raise_by_store`).
#[cfg(not(kova_loom))]
#[inline(always)]
pub(crate) const fn sketch_raise() -> SketchRaise {
    SketchRaise::BeforeCommit
}
