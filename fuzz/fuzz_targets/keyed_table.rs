//! Target 4, keyed table: arbitrary sequences of check / peek / reset / remove / sweep / clock
//! advances on `kova::Keyed` (one shard, a few keys, so it fills and evicts), compared after every
//! step with a `HashMap` model: key -> the algorithm's packed word, driven by the algorithm's own
//! pure `decide`, with the table's documented bound and table-full policies (reclaim the idle keys,
//! else deny, evict the key closest to idle that is not actively limited, or allow untracked).
//!
//! Catches: a key's state lost or shared with another key (a line reused too early, a probe
//! that misses a key after a removal left a tombstone or a rehash moved it), an entry left
//! behind or dropped by
//! remove / sweep / eviction, `len()` drifting from the real count, an actively limited key
//! evicted, a table-full decision without its `Fallback`, `memory_bytes()` above
//! `memory_bound_bytes()`.
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use kova::keyed::TableFullPolicy;
use kova::{
    Decision, Fallback, FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter, TokenBucket,
    WordAlgorithm,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Op {
    Check(u8, u8),
    Peek(u8),
    Reset(u8),
    Remove(u8),
    Sweep,
    /// `period * n / 64`.
    Advance(u8),
}

#[derive(Debug, Arbitrary)]
struct Input {
    algorithm: u8,
    limit: u8,
    period: u16,
    max_keys: u8,
    policy: u8,
    ops: Vec<Op>,
}

/// The table as a map from key to packed word.
struct Model<W> {
    algorithm: W,
    max_keys: usize,
    policy: TableFullPolicy,
    words: HashMap<u8, u64>,
}

impl<W: WordAlgorithm> Model<W> {
    fn fresh(&self, now: u64, cost: u64) -> Decision {
        self.algorithm.decide(self.algorithm.fresh_word(), now, cost).0
    }

    fn peek_word(&self, word: u64, now: u64) -> Decision {
        self.algorithm.decide(word, now, 0).0
    }

    fn decide(&mut self, key: u8, now: u64, cost: u64) -> Decision {
        let word = self.words.get_mut(&key).expect("present");
        let (decision, new) = self.algorithm.decide(*word, now, cost);
        *word = new;
        decision
    }

    fn denied_full(&self, now: u64) -> Decision {
        let soonest = self
            .words
            .values()
            .map(|&w| self.peek_word(w, now).reset_after_nanos())
            .min()
            .unwrap_or(u64::MAX);
        let retry = if soonest > 0 && soonest < u64::MAX {
            soonest
        } else {
            self.algorithm.quota().emission_interval_nanos()
        };
        Decision::denied(self.algorithm.capacity(), 0, retry, 0).with_fallback(Fallback::TableFullDenied)
    }

    /// `check_n(key, cost)`; `held` says whether the real table still holds a key after the
    /// call (to tell which of equally good eviction victims it chose).
    fn check(&mut self, key: u8, now: u64, cost: u64, held: impl Fn(u8) -> bool) -> Decision {
        if self.words.contains_key(&key) {
            return self.decide(key, now, cost);
        }
        if cost == 0 {
            return self.fresh(now, 0);
        }
        if self.words.len() >= self.max_keys {
            // The scan (64 entries: more than the table holds) reclaims every idle key, up to
            // the table's batch of 16: here all of them (at most 8 keys).
            let algorithm = &self.algorithm;
            self.words.retain(|_, &mut w| !algorithm.is_idle_word(w, now));
        }
        if self.words.len() >= self.max_keys {
            match self.policy {
                TableFullPolicy::AllowUntracked => {
                    return self.fresh(now, cost).with_fallback(Fallback::TableFullUntracked);
                }
                TableFullPolicy::EvictClosestToIdle => {
                    let candidates: Vec<(u64, u8)> = self
                        .words
                        .iter()
                        .map(|(&k, &w)| (self.peek_word(w, now), k))
                        .filter(|(d, _)| d.remaining() > 0)
                        .map(|(d, k)| (d.reset_after_nanos(), k))
                        .collect();
                    let Some(best) = candidates.iter().map(|&(reset, _)| reset).min() else {
                        return self.denied_full(now);
                    };
                    let tied: Vec<u8> =
                        candidates.iter().filter(|&&(r, _)| r == best).map(|&(_, k)| k).collect();
                    // Among equally close keys the table takes the first its scan meets (hash
                    // order): accept the one it evicted, if it evicted one of them.
                    let victim = tied.iter().copied().find(|&k| !held(k)).unwrap_or(tied[0]);
                    self.words.remove(&victim);
                }
                _ => return self.denied_full(now),
            }
        }
        self.words.insert(key, self.algorithm.fresh_word());
        self.decide(key, now, cost)
    }
}

fn run<W: WordAlgorithm + Copy>(input: &Input, quota: Quota) {
    let Ok(algorithm) = W::from_quota(quota) else { return };
    let policy = match input.policy % 3 {
        0 => TableFullPolicy::DenyNew,
        1 => TableFullPolicy::EvictClosestToIdle,
        _ => TableFullPolicy::AllowUntracked,
    };
    let max_keys = usize::from(input.max_keys % 8) + 1;
    let clock = ManualClock::new();
    let table = Keyed::<u8, W>::builder(quota)
        .clock(clock.clone())
        .shards(1)
        .max_keys(max_keys)
        .reclaim_scan(64)
        .table_full(policy)
        // The model inserts a key on its first check (the doorkeeper's decisions are checked
        // against a table without one in `crates/kova/tests/keyed_door.rs`).
        .doorkeeper(0)
        .build()
        .expect("quota accepted above");
    let mut model = Model { algorithm, max_keys, policy, words: HashMap::new() };
    let capacity = algorithm.capacity();
    let mut now = 0u64;
    for (step, &op) in input.ops.iter().take(400).enumerate() {
        let (real, expected) = match op {
            Op::Check(key, cost) => {
                let (key, cost) = (key % 12, u64::from(cost) % (capacity + 1));
                let real = table.check_n(&key, cost).expect("cost within capacity");
                (Some(real), Some(model.check(key, now, cost, |k| table.quota_of(&k).is_some())))
            }
            Op::Peek(key) => {
                let key = key % 12;
                let expected = match model.words.get(&key) {
                    Some(&w) => model.peek_word(w, now),
                    None => model.fresh(now, 0),
                };
                (Some(table.peek(&key)), Some(expected))
            }
            Op::Reset(key) => {
                let key = key % 12;
                table.reset(&key);
                if let Some(w) = model.words.get_mut(&key) {
                    *w = algorithm.fresh_word();
                }
                (None, None)
            }
            Op::Remove(key) => {
                let key = key % 12;
                assert_eq!(
                    table.remove(&key),
                    model.words.remove(&key).is_some(),
                    "step {step}: remove({key})"
                );
                (None, None)
            }
            Op::Sweep => {
                let before = model.words.len();
                let algorithm = &model.algorithm;
                model.words.retain(|_, w| !algorithm.is_idle_word(*w, now));
                assert_eq!(table.sweep_idle(), before - model.words.len(), "step {step}: sweep_idle()");
                (None, None)
            }
            Op::Advance(n) => {
                now += quota.period_nanos() * u64::from(n) / 64;
                clock.set(now);
                (None, None)
            }
        };
        assert_eq!(
            real,
            expected,
            "{} step {step} {op:?} at t={now}, policy {policy:?}, max_keys {max_keys}",
            W::NAME
        );
        assert_eq!(table.len(), model.words.len(), "{} step {step} {op:?}: len", W::NAME);
        for key in 0..12u8 {
            assert_eq!(
                table.quota_of(&key).is_some(),
                model.words.contains_key(&key),
                "step {step} {op:?}: key {key} held?"
            );
        }
        assert!(table.memory_bytes() <= table.memory_bound_bytes(), "step {step}: memory above its bound");
    }
}

fuzz_target!(|input: Input| {
    let limit = u64::from(input.limit % 16) + 1;
    let period = u64::from(input.period).max(limit);
    let Ok(quota) = Quota::from_nanos(limit, period) else { return };
    match input.algorithm % 4 {
        0 => run::<Gcra>(&input, quota),
        1 => run::<TokenBucket>(&input, quota),
        2 => run::<FixedWindow>(&input, quota),
        _ => run::<SlidingWindowCounter>(&input, quota),
    }
});
