//! The generated traces the accuracy section replays: a realistic mix of clients (normal,
//! heavy, abusive; Poisson arrivals with bursts and on/off sessions), the seeds' boundary burst
//! and a flood.

use kova::Quota;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// The kinds of client in the realistic trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientClass {
    /// On/off sessions at 10-60% of the quota's rate, occasional bursts.
    Normal,
    /// Always on, 60-120% of the rate, more bursts.
    Heavy,
    /// 2-6x the rate, large fast bursts.
    Abusive,
}

/// How the realistic trace is generated.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TraceConfig {
    /// Number of clients.
    pub clients: usize,
    /// Simulated time, nanoseconds.
    pub duration_ns: u64,
    /// The quota's limit (per period).
    pub limit: u64,
    /// The quota's period, nanoseconds.
    pub period_ns: u64,
    /// RNG seed: the same seed gives the same trace.
    pub seed: u64,
}

/// Replays every client's requests through one shared limiter in time order (a shared structure's
/// error comes from the keys that share it, so its clients cannot be replayed apart):
/// `check(client, time)` decides each request; the decisions come back per client.
pub fn replay_in_time_order(clients: &[Vec<u64>], mut check: impl FnMut(u32, u64) -> bool) -> Vec<Vec<bool>> {
    let mut order: Vec<(u64, u32, u32)> = clients
        .iter()
        .enumerate()
        .flat_map(|(c, times)| times.iter().enumerate().map(move |(i, &t)| (t, c as u32, i as u32)))
        .collect();
    order.sort_unstable();
    let mut out: Vec<Vec<bool>> = clients.iter().map(|t| vec![false; t.len()]).collect();
    for (t, c, i) in order {
        out[c as usize][i as usize] = check(c, t);
    }
    out
}

impl TraceConfig {
    /// The quota every client is limited by.
    pub fn quota(&self) -> Quota {
        Quota::from_nanos(self.limit, self.period_ns).expect("valid quota")
    }

    /// The class of client `i`: 93% normal, 6% heavy, 1% abusive.
    pub fn class_of(&self, i: usize) -> ClientClass {
        match i % 100 {
            0 => ClientClass::Abusive,
            1..=6 => ClientClass::Heavy,
            _ => ClientClass::Normal,
        }
    }
}

fn exp(rng: &mut SmallRng, mean: f64) -> f64 {
    let u: f64 = rng.random();
    -(1.0 - u).ln() * mean
}

fn geometric(rng: &mut SmallRng, mean: f64) -> u64 {
    // Sizes 1, 2, ... with the given mean.
    let p = 1.0 / mean.max(1.0);
    if p >= 1.0 {
        return 1;
    }
    let u: f64 = rng.random();
    1 + ((1.0 - u).ln() / (1.0 - p).ln()).floor() as u64
}

/// One client's request times (seconds internally, nanoseconds out), sorted.
pub fn client_times(config: &TraceConfig, client: usize) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(config.seed ^ (client as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let dur = config.duration_ns as f64 / 1e9;
    let rate = config.limit as f64 / (config.period_ns as f64 / 1e9);
    let class = config.class_of(client);
    // (base rate, burst every s, burst size, gap within a burst s)
    let (base, burst_every, burst_size, burst_gap) = match class {
        ClientClass::Normal => (rate * rng.random_range(0.1..0.6), 120.0, 15.0, 0.2),
        ClientClass::Heavy => (rate * rng.random_range(0.6..1.2), 60.0, 30.0, 0.1),
        ClientClass::Abusive => (rate * rng.random_range(2.0..6.0), 30.0, 100.0, 0.01),
    };
    let mut times = Vec::new();
    let mut t = 0.0;
    let mut on = class != ClientClass::Normal || rng.random::<f64>() < 1.0 / 3.0;
    while t < dur {
        let end = if class == ClientClass::Normal {
            (t + exp(&mut rng, if on { 600.0 } else { 1200.0 })).min(dur)
        } else {
            dur
        };
        if on {
            let mut s = t + exp(&mut rng, 1.0 / base);
            while s < end {
                times.push(s);
                s += exp(&mut rng, 1.0 / base);
            }
            let mut b = t + exp(&mut rng, burst_every);
            while b < end {
                let mut g = b;
                for _ in 0..geometric(&mut rng, burst_size) {
                    if g >= dur {
                        break;
                    }
                    times.push(g);
                    g += exp(&mut rng, burst_gap);
                }
                b += exp(&mut rng, burst_every);
            }
        }
        t = end;
        on = !on;
    }
    let mut ns: Vec<u64> = times.into_iter().map(|s| (s * 1e9) as u64).collect();
    ns.sort_unstable();
    ns
}

/// The seeds' boundary burst: `limit` requests evenly in the second before the edge at one
/// period, `limit` more in the second after it.
pub fn boundary_trace(limit: u64, period: u64) -> Vec<u64> {
    let second = 1_000_000_000u64.min(period / 2);
    let step = second / limit;
    let before = (0..limit).map(|i| period - second + i * step);
    let after = (0..limit).map(|i| period + i * step);
    before.chain(after).collect()
}

/// A flood: `10 * limit` per period, evenly, for five periods.
pub fn flood_trace(limit: u64, period: u64) -> Vec<u64> {
    let n = 10 * limit;
    let step = period / n;
    (0..5 * n).map(|i| i * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_deterministic_and_shaped() {
        let config = TraceConfig {
            clients: 100,
            duration_ns: 600_000_000_000,
            limit: 100,
            period_ns: 60_000_000_000,
            seed: 42,
        };
        assert_eq!(client_times(&config, 7), client_times(&config, 7));
        let per_client: Vec<usize> = (0..100).map(|c| client_times(&config, c).len()).collect();
        // The abusive client (0) sends far more than the limit; heavy ones (1..=6) around it.
        let rate_limit = 100.0 * 10.0; // limit per period x ten periods
        assert!(per_client[0] as f64 > 2.0 * rate_limit, "{per_client:?}");
        let heavy: usize = per_client[1..7].iter().sum();
        assert!((heavy as f64 / 6.0) > 0.6 * rate_limit);
        let normal_mean = per_client[7..].iter().sum::<usize>() as f64 / 93.0;
        assert!(normal_mean < 0.8 * rate_limit, "{normal_mean}");
        // Sorted.
        let t = client_times(&config, 0);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }
}
