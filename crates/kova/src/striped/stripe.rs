//! One stripe's word: the units it holds and when the oldest of them was leased.

/// Bits of the unit count.
pub(crate) const UNITS_BITS: u32 = 24;
/// Bits of the lease stamp.
pub(crate) const STAMP_BITS: u32 = 40;
const STAMP_SHIFT: u32 = UNITS_BITS;
const UNITS_MASK: u64 = (1 << UNITS_BITS) - 1;
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;
/// The most units a stripe holds (so the largest batch).
pub(crate) const MAX_UNITS: u64 = UNITS_MASK;
/// A stamp counts time in units of `2^STAMP_UNIT_SHIFT` ns (65.5 us): 40 bits then cover 2^56 ns,
/// about 834 days. The stamp takes the bits a batch does not need: the wider it is, the longer a
/// stripe can sit unused before its stamp wraps (see [`AHEAD`]).
pub(crate) const STAMP_UNIT_SHIFT: u32 = 16;
/// A stamp this many units or more ahead of the clock reads as the clock being behind it (not as
/// a lease from long ago): half the stamp's range. For ordering two stamps ([`older`]).
const BEHIND: u64 = 1 << (STAMP_BITS - 1);
/// How far ahead of a reading a lease's stamp may be and still be one (another thread read a
/// later time; a coarse clock trails the precise one by milliseconds): 2^20 units, 68.7 s. A
/// stamp further ahead is a lease from long ago, whose stamp has wrapped around: expired. Only a
/// lease within this much of a whole multiple of the stamp's range (about 834 days) old reads as
/// new.
const AHEAD: u64 = 1 << 20;
/// The longest lease, in stamp units: well inside the part of the range read as the past.
pub(crate) const MAX_LEASE_UNITS: u64 = 1 << (STAMP_BITS - 2);

/// An empty stripe.
pub(crate) const EMPTY: u64 = 0;

pub(crate) fn pack(units: u64, stamp: u64) -> u64 {
    debug_assert!(units <= MAX_UNITS);
    ((stamp & STAMP_MASK) << STAMP_SHIFT) | (units & UNITS_MASK)
}

pub(crate) fn unpack(word: u64) -> (u64, u64) {
    (word & UNITS_MASK, word >> STAMP_SHIFT)
}

/// The stamp of a clock reading.
pub(crate) fn stamp_of(now: u64) -> u64 {
    (now >> STAMP_UNIT_SHIFT) & STAMP_MASK
}

/// How long ago (in stamp units) a lease stamped `stamp` was taken at `now_stamp`, or `None`
/// when its stamp is at most [`AHEAD`] ahead of the reading (another thread read a later time).
fn age(stamp: u64, now_stamp: u64) -> Option<u64> {
    let elapsed = now_stamp.wrapping_sub(stamp) & STAMP_MASK;
    (elapsed <= STAMP_MASK - AHEAD).then_some(elapsed)
}

/// Whether a lease stamped `stamp` is at least `lease_units` old at `now_stamp`. A stamp a little
/// ahead of the clock (another thread read a later time) is not expired.
pub(crate) fn expired(stamp: u64, now_stamp: u64, lease_units: u64) -> bool {
    age(stamp, now_stamp).is_some_and(|age| age >= lease_units)
}

/// Stamp units until a lease stamped `stamp` expires (0 when it has).
pub(crate) fn until_expiry(stamp: u64, now_stamp: u64, lease_units: u64) -> u64 {
    age(stamp, now_stamp).map_or(lease_units, |age| lease_units.saturating_sub(age))
}

/// The older of two stamps: units merged into one stripe expire with the oldest of them, so no
/// unit outlives its own lease.
pub(crate) fn older(a: u64, b: u64) -> u64 {
    if (a.wrapping_sub(b) & STAMP_MASK) < BEHIND {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_at_the_edges() {
        for units in [0, 1, MAX_UNITS - 1, MAX_UNITS] {
            for stamp in [0, 1, STAMP_MASK - 1, STAMP_MASK] {
                assert_eq!(unpack(pack(units, stamp)), (units, stamp));
            }
        }
        assert_eq!(unpack(pack(3, STAMP_MASK + 2)), (3, 1));
        assert_eq!(unpack(EMPTY), (0, 0));
    }

    #[test]
    fn expiry_reads_wrapped_and_backward_stamps() {
        assert!(!expired(10, 12, 3));
        assert!(expired(10, 13, 3));
        // Across the wrap.
        assert!(expired(STAMP_MASK, 2, 3));
        assert!(!expired(STAMP_MASK, 1, 3));
        // A stamp ahead of the clock is not expired, and has its whole lease to go.
        assert!(!expired(20, 12, 3));
        assert_eq!(until_expiry(20, 12, 3), 3);
        assert_eq!(until_expiry(10, 11, 3), 2);
        assert_eq!(until_expiry(10, 19, 3), 0);
        // A lease from long ago, past half the stamp's range (417 days), is expired, not read as
        // a stamp ahead of the clock; only one at most AHEAD ahead is.
        assert!(expired(0, BEHIND + 5, 3));
        assert!(expired(AHEAD + 1, 0, 3));
        assert!(!expired(AHEAD, 0, 3));
        assert_eq!(until_expiry(0, BEHIND + 5, 3), 0);
    }

    #[test]
    fn older_picks_the_earlier_stamp_across_the_wrap() {
        assert_eq!(older(5, 9), 5);
        assert_eq!(older(9, 5), 5);
        assert_eq!(older(STAMP_MASK, 1), STAMP_MASK);
        assert_eq!(older(1, STAMP_MASK), STAMP_MASK);
    }
}
