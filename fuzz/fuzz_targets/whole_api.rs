//! Target 6, the whole keyed API in one sequence: checks, peeks, refunds, resets, removals,
//! reservations and their cancellation, settling, charges and quota changes (`set_quota` between
//! the table's quota and another) of a few keys, with the clock moving, on one `kova::Keyed` table with the doorkeeper on or off and hot keys on or off,
//! compared after every step with the sequential specification the linearizability checker uses
//! (`kova::model::lincheck::word_api`: per key, the algorithm's own pure functions on a word);
//! and beside it, on the same clock, a `KeyedLimits` of two to four limits (the table's quota
//! and longer ones, in one table whose cell holds them all) checked, peeked and refunded, compared with the sequential
//! composite (`kova::model::lincheck::composite`: all or nothing, a denial takes nothing).
//!
//! Catches: any call whose answer or effect differs from one thread driving the key's word (the
//! door charging a unit twice or never, a reservation's cancel giving back too much, a refund or
//! a settlement through the door, a removal that leaves state behind, a quota change that
//! forgives or forgets what a key consumed).
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use kova::keyed::{HotKeys, KeyedReservation};
use kova::limits::KeyedLimits;
use kova::model::lincheck::composite::{Composite, LimitsOp};
use kova::model::lincheck::word_api::{Op as ApiOp, Output, WordApi, WordState};
use kova::model::lincheck::Spec;
use kova::reservation::Settlement;
use kova::{
    Clock, FixedWindow, Gcra, Keyed, ManualClock, Quota, SlidingWindowCounter, TokenBucket, WordAlgorithm,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Op {
    Check(u8, u8),
    Peek(u8),
    Refund(u8, u8),
    Reset(u8),
    Remove(u8),
    Reserve(u8, u8),
    /// The oldest reservation still held.
    Cancel,
    Settle(u8, u8, u8),
    Charge(u8, u8),
    /// `set_quota` to the table's quota (even) or the other one (odd).
    SetQuota(u8, u8),
    /// `period * n / 64`.
    Advance(u8),
    /// On the `KeyedLimits`: `check_n`, `peek`, `refund`.
    LimitsCheck(u8, u8),
    LimitsPeek(u8),
    LimitsRefund(u8, u8),
}

#[derive(Debug, Arbitrary)]
struct Input {
    algorithm: u8,
    limit: u8,
    burst: u8,
    overdraft: u8,
    door: bool,
    hot: bool,
    /// How many limits the `KeyedLimits` has: 2 + this % 3.
    limits: u8,
    ops: Vec<Op>,
}

fn run<W: WordAlgorithm + Clone>(input: &Input, quota: Quota, other: Quota) {
    let Ok(algorithm) = W::from_quota(quota) else { return };
    let Ok(other_algorithm) = W::from_quota(other) else { return };
    let clock = ManualClock::new();
    let builder = Keyed::<u8, W>::builder(quota).clock(clock.clone()).shards(2);
    let builder = if input.door { builder } else { builder.doorkeeper(0) };
    let builder =
        if input.hot { builder.hot_keys(HotKeys::new(2)).expect("valid hot keys") } else { builder };
    let table: Keyed<u8, W, ManualClock> = builder.build().expect("quota checked");
    let spec = WordApi::keyed(algorithm);
    // Each key's state under the specification of its quota (an index into `quotas`/`specs`).
    let (quotas, specs) = ([quota, other], [spec.clone(), WordApi::keyed(other_algorithm)]);
    let mut model: BTreeMap<u8, (WordState, usize)> = BTreeMap::new();
    let mut held: Vec<(u32, u8, KeyedReservation<'_, u8, W, ManualClock>)> = Vec::new();
    let mut next_id = 0u32;
    let period = quota.period_nanos();
    // The composite: the table's quota and one to three longer ones (two limits share one
    // 128-bit word; three or four are checked then refunded over two words).
    let count = 2 + usize::from(input.limits % 3);
    let longer = [
        Quota::per_minute(quota.burst() * 3),
        Quota::per_hour(quota.burst() * 50),
        Quota::per_day(quota.burst() * 500),
    ];
    let (mut limit_quotas, mut algorithms) = (vec![quota], vec![spec.algorithm.clone()]);
    for longer in longer.into_iter().take(count - 1) {
        let Ok(longer) = longer else { return };
        let Ok(algorithm) = W::from_quota(longer) else { return };
        limit_quotas.push(longer);
        algorithms.push(algorithm);
    }
    let limits = KeyedLimits::<u8, W>::builder(limit_quotas)
        .clock(clock.clone())
        .shards(2)
        .build()
        .expect("two to four limits");
    let composite = Composite { algorithms };
    let mut composite_model: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for (step, &op) in input.ops.iter().take(256).enumerate() {
        let now = clock.now_nanos();
        let key_of = |k: u8| k % 4;
        let limits_op = match op {
            Op::LimitsCheck(k, cost) => Some((key_of(k), LimitsOp::Check(u64::from(cost % 8)))),
            Op::LimitsPeek(k) => Some((key_of(k), LimitsOp::Peek)),
            Op::LimitsRefund(k, cost) => Some((key_of(k), LimitsOp::Refund(u64::from(cost % 4)))),
            _ => None,
        };
        if let Op::SetQuota(k, to) = op {
            let (key, to) = (key_of(k), usize::from(to % 2));
            let moved = table.set_quota(&key, quotas[to]).expect("a quota the table was built with");
            let (state, at) = model.entry(key).or_insert_with(|| (spec.fresh(), 0));
            if !moved {
                // Not held: without the door, nothing changed a key that no call inserted.
                assert!(
                    input.door || state.word == spec.fresh().word,
                    "step {step}: set_quota found key {key} not held, whose state is {state:?} ({input:?})"
                );
            } else if *at != to {
                *state = specs[to].carried_over_from(&specs[*at].algorithm, state, now);
                *at = to;
                // A move is a forget: every reservation gives nothing back now (see below).
                forget_reservations(&mut model, &mut held);
            }
            continue;
        }
        if let Some((key, op)) = limits_op {
            let real = match op {
                LimitsOp::Check(cost) => Some(limits.check_n(&key, cost)),
                LimitsOp::Peek => Some(Ok(limits.peek(&key))),
                LimitsOp::Refund(cost) => {
                    limits.refund(&key, cost);
                    None
                }
            };
            let words = composite_model.entry(key).or_insert_with(|| composite.fresh());
            let expected = composite.call(words, now, &op);
            assert_eq!(real, expected, "step {step}: limits {op:?} on key {key} at t={now} ({input:?})");
            continue;
        }
        let (key, api, real) = match op {
            Op::Advance(n) => {
                clock.advance_nanos(period / 64 * u64::from(n));
                continue;
            }
            Op::SetQuota(..) => unreachable!("handled above"),
            Op::Check(k, cost) => {
                let cost = u64::from(cost % 8);
                (key_of(k), ApiOp::Check(cost), Output::Decided(table.check_n(&key_of(k), cost)))
            }
            Op::Peek(k) => (key_of(k), ApiOp::Peek, Output::Decided(Ok(table.peek(&key_of(k))))),
            Op::Refund(k, cost) => {
                let cost = u64::from(cost % 4);
                table.refund(&key_of(k), cost);
                (key_of(k), ApiOp::Refund(cost), Output::Done)
            }
            Op::Reset(k) => {
                table.reset(&key_of(k));
                (key_of(k), ApiOp::Reset, Output::Done)
            }
            Op::Remove(k) => {
                table.remove(&key_of(k));
                (key_of(k), ApiOp::Reset, Output::Done)
            }
            Op::Reserve(k, cost) => {
                let (key, cost) = (key_of(k), u64::from(cost % 6));
                next_id += 1;
                let made = table.reserve_n(&key, cost).map(|r| {
                    let made = (r.delay().as_nanos() as u64, r.ready_at_nanos());
                    held.push((next_id, key, r));
                    made
                });
                (key, ApiOp::Reserve { id: next_id, cost }, Output::Reserved(made))
            }
            Op::Cancel => {
                if held.is_empty() {
                    continue;
                }
                let (id, key, reservation) = held.remove(0);
                (key, ApiOp::Cancel(id), Output::Units(reservation.cancel()))
            }
            Op::Settle(k, estimated, actual) => {
                let (key, estimated) = (key_of(k), u64::from(estimated % 6));
                let actual = u64::from(actual % 8);
                let settled = table.settle(&key, estimated, actual);
                (
                    key,
                    ApiOp::Settle(estimated, actual),
                    Output::Settled(Settlement { refunded: 0, ..settled }),
                )
            }
            Op::Charge(k, cost) => {
                let (key, cost) = (key_of(k), u64::from(cost % 8));
                (key, ApiOp::Charge(cost), Output::Charged(table.charge(&key, cost)))
            }
            Op::LimitsCheck(..) | Op::LimitsPeek(..) | Op::LimitsRefund(..) => unreachable!("handled above"),
        };
        // A reservation cancelled after a reset or removal of any key gives nothing back (the
        // table counts those, not per key), so the model forgets every reservation then.
        if matches!(api, ApiOp::Reset) {
            forget_reservations(&mut model, &mut held);
        }
        let (state, at) = model.entry(key).or_insert_with(|| (spec.fresh(), 0));
        let expected = specs[*at].call(state, now, &api);
        if matches!(op, Op::Remove(_)) {
            // A removed key forgets its own quota too: it is fresh under the table's.
            (*state, *at) = (spec.fresh(), 0);
        }
        assert_eq!(real, expected, "step {step}: {op:?} on key {key} at t={now} ({input:?})");
    }
}

/// Forgets every reservation, in the model and in hand, keeping each key's word and quota.
fn forget_reservations<T>(model: &mut BTreeMap<u8, (WordState, usize)>, held: &mut Vec<T>) {
    for (state, _) in model.values_mut() {
        state.forget_reservations();
    }
    held.clear();
}

fuzz_target!(|input: Input| {
    let limit = u64::from(input.limit % 8) + 1;
    let Ok(quota) = Quota::per_second(limit) else { return };
    // The other quota: another rate, and for the buckets another burst (and overdraft).
    let Ok(other) = Quota::per_second(limit + 2) else { return };
    let burst = u64::from(input.burst % 8) + 1;
    match input.algorithm % 4 {
        0 => {
            let (Ok(quota), Ok(other)) = (quota.with_burst(burst), other.with_burst(9 - burst)) else {
                return;
            };
            let overdraft = u64::from(input.overdraft % 4);
            run::<Gcra>(&input, quota.with_overdraft(overdraft), other.with_overdraft(3 - overdraft));
        }
        1 => {
            let (Ok(quota), Ok(other)) = (quota.with_burst(burst), other.with_burst(9 - burst)) else {
                return;
            };
            run::<TokenBucket>(&input, quota, other);
        }
        2 => run::<FixedWindow>(&input, quota, other),
        _ => run::<SlidingWindowCounter>(&input, quota, other),
    }
});
