//! A Zipf sampler over a finite key space, by inversion of the exact CDF.
//!
//! Rank `k` (1-based, `1..=n`) is drawn with probability `k^-s / H(n, s)`. The CDF is computed
//! once (`n` doubles: 8 MB for a million keys) and each draw is a binary search, which is exact
//! and fast enough for pre-computing key sequences before a measurement starts.

use rand::Rng;

/// Zipf(`n`, `s`) over ranks `1..=n`.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// A sampler over `n >= 1` ranks with exponent `s >= 0` (`s = 0` is uniform).
    ///
    /// ```
    /// let zipf = kova_bench::zipf::Zipf::new(1000, 1.0);
    /// assert_eq!(zipf.len(), 1000);
    /// assert!((zipf.probability(1) / zipf.probability(2) - 2.0).abs() < 1e-9);
    /// ```
    pub fn new(n: usize, s: f64) -> Self {
        assert!(n >= 1, "a Zipf distribution needs at least one rank");
        assert!(s >= 0.0 && s.is_finite(), "the Zipf exponent must be finite and non-negative");
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 1..=n {
            total += (k as f64).powf(-s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        // Guard the last bucket against rounding below 1.0.
        *cdf.last_mut().expect("n >= 1") = 1.0;
        Zipf { cdf }
    }

    /// The number of ranks.
    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    /// Always false: a sampler has at least one rank.
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// The probability of rank `k` (1-based).
    pub fn probability(&self, k: usize) -> f64 {
        let below = if k >= 2 { self.cdf[k - 2] } else { 0.0 };
        self.cdf[k - 1] - below
    }

    /// Draws a rank, 0-based (`0..n`, 0 the most frequent), ready to use as a key index.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.random();
        // First index whose cumulative probability exceeds u.
        self.cdf.partition_point(|&c| c <= u).min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn probabilities_sum_to_one_and_follow_the_power_law() {
        let zipf = Zipf::new(10_000, 1.0);
        let total: f64 = (1..=zipf.len()).map(|k| zipf.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-9, "total {total}");
        // p(k) / p(10k) = 10^s.
        assert!((zipf.probability(3) / zipf.probability(30) - 10.0).abs() < 1e-6);
        // Harmonic number H(10^4) ~ ln(10^4) + 0.5772 = 9.7876: p(1) = 1/H.
        assert!((zipf.probability(1) - 1.0 / 9.787_606).abs() < 1e-5);
    }

    #[test]
    fn samples_match_the_distribution() {
        let zipf = Zipf::new(1_000, 1.0);
        let mut rng = SmallRng::seed_from_u64(7);
        let draws = 200_000;
        let mut counts = vec![0u32; zipf.len()];
        for _ in 0..draws {
            counts[zipf.sample(&mut rng)] += 1;
        }
        // The top ranks' frequencies are within 5% of their probabilities (a few standard
        // deviations at this sample size), and the order is the expected one.
        for k in 1..=5 {
            let expected = zipf.probability(k) * draws as f64;
            let got = counts[k - 1] as f64;
            assert!((got - expected).abs() / expected < 0.05, "rank {k}: {got} vs {expected}");
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[2]);
        // The tail still gets drawn: half the mass lies beyond rank ~ sqrt-ish; check the
        // share of the bottom 900 ranks against the exact value.
        let tail: u32 = counts[100..].iter().sum();
        let expected_tail: f64 = (101..=1000).map(|k| zipf.probability(k)).sum::<f64>() * draws as f64;
        assert!((tail as f64 - expected_tail).abs() / expected_tail < 0.03);
    }

    #[test]
    fn exponent_zero_is_uniform_and_one_rank_is_constant() {
        let uniform = Zipf::new(4, 0.0);
        for k in 1..=4 {
            assert!((uniform.probability(k) - 0.25).abs() < 1e-12);
        }
        let single = Zipf::new(1, 1.2);
        let mut rng = SmallRng::seed_from_u64(1);
        assert!((0..100).all(|_| single.sample(&mut rng) == 0));
    }
}
