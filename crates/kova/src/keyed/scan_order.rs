//! The order in which a shard's reclamation scan (`Keyed::make_room`) visits its positions.

/// Consecutive positions the reclamation scan looks at before it jumps (a cache line or two).
const SCAN_RUN: usize = 8;

/// The order in which a shard's reclamation scan (`Keyed::make_room`) visits its positions:
/// runs of [`SCAN_RUN`] consecutive positions, each run a golden-ratio stride of runs after the
/// last, the stride coprime with the number of runs, so that every position comes in turn.
///
/// Positions follow the hashes (a probe starts where the hash's top bits say).
/// A scan in position order evicts by hash: keys just ahead of the cursor, not scanned for a
/// whole pass, pile up to twice the average load while those just behind it are gone, and at
/// the key bound a flood of new keys then probes runs of tens of thousands of lines (seen: a
/// table of 131,072 `u64` keys fell to about 10 thousand inserts a second after two passes).
/// Scattered runs spread each stretch of evictions over the whole array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScanOrder {
    positions: usize,
    runs: usize,
    stride: usize,
}

impl ScanOrder {
    /// The order over `positions` positions.
    pub(super) fn new(positions: usize) -> ScanOrder {
        let runs = positions.div_ceil(SCAN_RUN).max(1);
        // 0.618 of the runs, made coprime with their number.
        let mut stride = (runs * 618 / 1000).max(1);
        while gcd(stride, runs) != 1 {
            stride += 1;
        }
        ScanOrder { positions, runs, stride }
    }

    /// The position visited after `pos`.
    pub(super) fn next(self, pos: usize) -> usize {
        let next = pos + 1;
        if next % SCAN_RUN != 0 && next < self.positions {
            return next;
        }
        let run = (pos / SCAN_RUN + self.stride) % self.runs;
        run * SCAN_RUN
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position once per pass, from any start, and runs far apart.
    #[test]
    fn the_scan_visits_every_position_once_a_pass() {
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 7, 8, 9, 64, 88, 1_000]
        } else {
            &[1, 7, 8, 9, 64, 88, 1_000, 4_096, 238_320]
        };
        for &positions in sizes {
            let order = ScanOrder::new(positions);
            let start = positions / 3;
            let mut seen = vec![false; positions];
            let mut pos = start;
            for _ in 0..positions {
                assert!(pos < positions && !seen[pos], "{positions}: {pos} twice");
                seen[pos] = true;
                pos = order.next(pos);
            }
            assert_eq!(pos, start, "{positions}: a pass ends where it began");
            if positions >= 1_000 {
                let jump = order.next(SCAN_RUN - 1).abs_diff(SCAN_RUN - 1);
                assert!(jump >= positions / 4, "{positions}: a jump of {jump}");
            }
        }
    }
}
