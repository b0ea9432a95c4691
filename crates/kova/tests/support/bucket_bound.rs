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

/// The units of a cancelled reservation of `cost` that may have been used, at its ready time:
/// none when it was cancelled in time (`in_time`: its holder says it will not use them, and
/// what the cancel did not give back is lost to everyone), all of them when it was cancelled
/// after its time had come (they count as used).
pub fn used_after_cancel(cost: u64, in_time: bool) -> u64 {
    if in_time {
        0
    } else {
        cost
    }
}
