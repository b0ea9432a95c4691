//! GCRA's bound on units used at given times: within any closed interval `[a, b]`, at most
//! `burst + (b - a) / interval` (the reservation tests' model).

use proptest::prelude::*;

/// Fails when `used` (`(time ns, units)`, in any order) takes more than the bound somewhere.
pub fn check_bucket_bound(used: &mut [(u64, u64)], burst: u64, interval: u64) -> Result<(), TestCaseError> {
    used.sort();
    for (i, &(a, _)) in used.iter().enumerate() {
        let mut total = 0;
        for &(b, cost) in &used[i..] {
            total += cost;
            let allowed = burst + (b - a) / interval;
            prop_assert!(
                total <= allowed,
                "{} units in [{}, {}] ns, bound {}: {:?}",
                total,
                a,
                b,
                allowed,
                used
            );
        }
    }
    Ok(())
}

/// The units of a cancelled reservation of `cost` that stay used: all of them when it was no
/// longer in the future (`in_future` false), else those the cancel did not give back (the
/// deficit, in nanoseconds, fell by `back_nanos`; a partly given-back unit counts as given).
pub fn kept_after_cancel(cost: u64, in_future: bool, back_nanos: u64, interval: u64) -> u64 {
    if in_future {
        cost.saturating_sub(back_nanos.div_ceil(interval))
    } else {
        cost
    }
}
