//! Hostile input to the keyed table, the composites, the sketch and the striped limiter, table
//! driven as in `hostile_input.rs` (which has the quota, the direct limiter and the clocks): every
//! public constructor and method that takes a size, count, cost, duration or key, at its edges,
//! answers with a typed error or its documented decision, never a panic.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kova::limits::{KeyedLimits, Limits, LimitsError, MAX_LIMITS};
use kova::reservation::{ReserveError, Settlement};
use kova::sketch::Sketch;
use kova::striped::StripedLimiter;
use kova::wait::WaitError;
use kova::{CheckError, Gcra, Keyed, ManualClock, Quota, QuotaError};

#[path = "support/case_table.rs"]
mod case_table;

use case_table::{run, Case};

fn q(limit: u64) -> Quota {
    Quota::per_second(limit).unwrap()
}

fn keyed() -> Keyed<Vec<u8>, Gcra, ManualClock> {
    Keyed::with_clock(q(10), ManualClock::new()).unwrap()
}

const MIB: usize = 1 << 20;

/// Polls `future` once, on a waker that does nothing.
fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let mut future = pin!(future);
    future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

const KEYED: &[Case] = &[
    ("empty key", || {
        let table = keyed();
        assert_eq!(table.check_n(&Vec::new(), 10).unwrap().remaining(), 0);
        assert!(!table.check(&Vec::new()).is_allowed());
        assert_eq!(table.peek(&vec![0]).remaining(), 10);
    }),
    ("1 MiB key", || {
        let table = keyed();
        let key = vec![0xA5; MIB];
        assert!(table.check_n(&key, 10).unwrap().is_allowed());
        assert!(!table.check(&key).is_allowed());
        assert!(table.remove(&key));
        assert_eq!(table.peek(&key).remaining(), 10);
    }),
    ("check_n 0 is a peek and inserts nothing", || {
        let table = keyed();
        assert_eq!(table.check_n(&b"k".to_vec(), 0).unwrap().remaining(), 10);
        assert_eq!(table.len(), 0);
    }),
    ("check_n capacity + 1 and u64::MAX: an error, nothing inserted", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert_eq!(table.check_n(&key, 11), Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }));
        assert_eq!(
            table.check_n(&key, u64::MAX),
            Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 })
        );
        assert_eq!(table.len(), 0);
    }),
    ("refund u64::MAX: an absent key false, a held one back to full", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert!(!table.refund(&key, u64::MAX));
        assert!(table.check_n(&key, 10).unwrap().is_allowed());
        assert!(table.refund(&key, u64::MAX));
        assert_eq!(table.peek(&key).remaining(), 10);
    }),
    ("charge and settle u64::MAX", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert_eq!(table.charge(&key, u64::MAX), 10);
        assert_eq!(
            table.settle(&key, 0, u64::MAX),
            Settlement { refunded: 0, charged: 0, uncharged: u64::MAX }
        );
        assert_eq!(table.charge(&b"other".to_vec(), 0), 0);
    }),
    ("keyed reserve_n u64::MAX and within ZERO", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert_eq!(
            table.reserve_n(&key, u64::MAX).unwrap_err(),
            ReserveError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }
        );
        let all = table.reserve_n(&key, 10).unwrap();
        assert!(matches!(
            table.reserve_n_within(&key, 1, Duration::ZERO),
            Err(ReserveError::DelayTooLong { .. })
        ));
        assert_eq!(all.cancel(), 10);
    }),
    ("check_n_with_quota: an unrepresentable quota is an error", || {
        let table = keyed();
        assert!(matches!(
            table.check_n_with_quota(&b"k".to_vec(), q(1).with_burst(u64::MAX).unwrap(), 1),
            Err(kova::keyed::KeyedError::Quota(QuotaError::Unrepresentable { .. }))
        ));
        assert_eq!(table.len(), 0);
    }),
    ("check_n_with_quota: a cost above that quota's capacity", || {
        let table = keyed();
        assert_eq!(
            table.check_n_with_quota(&b"k".to_vec(), q(3), u64::MAX),
            Err(kova::keyed::KeyedError::Check(CheckError::CostExceedsCapacity {
                cost: u64::MAX,
                capacity: 3
            }))
        );
    }),
    ("set_quota of an absent key and an unrepresentable quota", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert_eq!(table.set_quota(&key, q(5)), Ok(false));
        assert!(table.check(&key).is_allowed());
        assert!(matches!(
            table.set_quota(&key, q(1).with_burst(u64::MAX).unwrap()),
            Err(QuotaError::Unrepresentable { .. })
        ));
        assert_eq!(table.peek(&key).remaining(), 9);
    }),
    ("keyed wait_n_within a cost that never fits, and ZERO when empty", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert!(matches!(table.wait_n_within(&key, u64::MAX, Duration::MAX), Err(WaitError::Check(_))));
        assert!(table.check_n(&key, 10).unwrap().is_allowed());
        assert!(matches!(
            table.wait_n_within(&key, 1, Duration::ZERO),
            Err(WaitError::DeadlinePassed { .. })
        ));
    }),
    ("keyed until_n_ready u64::MAX: ready at once with the error", || {
        let table = keyed();
        let key = b"k".to_vec();
        assert_eq!(
            poll_once(table.until_n_ready(&key, u64::MAX)),
            Poll::Ready(Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }))
        );
        assert_eq!(table.len(), 0);
    }),
    ("a table of one key: a second key gets the table-full decision", || {
        let table = Keyed::<Vec<u8>, Gcra>::builder(q(10))
            .clock(ManualClock::new())
            .max_keys(1)
            .doorkeeper(0)
            .table_full(kova::keyed::TableFullPolicy::DenyNew)
            .build()
            .unwrap();
        assert!(table.check(&b"a".to_vec()).is_allowed());
        let second = table.check(&b"b".to_vec());
        assert_eq!((second.is_allowed(), second.fallback()), (false, Some(kova::Fallback::TableFullDenied)));
        assert_eq!(table.len(), 1);
    }),
];

const COMPOSITE: &[Case] = &[
    ("Limits of no quota", || assert_eq!(Limits::<Gcra>::new([]).unwrap_err(), LimitsError::Empty)),
    ("Limits of 1 and of MAX_LIMITS quotas", || {
        assert_eq!(Limits::<Gcra>::new([q(1)]).unwrap().len(), 1);
        assert_eq!(Limits::<Gcra>::new(vec![q(1); MAX_LIMITS]).unwrap().len(), MAX_LIMITS);
    }),
    ("Limits of MAX_LIMITS + 1 and of very many quotas", || {
        assert_eq!(
            Limits::<Gcra>::new(vec![q(1); MAX_LIMITS + 1]).unwrap_err(),
            LimitsError::TooMany { count: MAX_LIMITS + 1, max: MAX_LIMITS }
        );
        assert!(matches!(Limits::<Gcra>::new(vec![q(1); 1 << 16]), Err(LimitsError::TooMany { .. })));
    }),
    ("Limits with an unrepresentable quota names its index", || {
        assert!(matches!(
            Limits::<Gcra>::new([q(1), q(1).with_burst(u64::MAX).unwrap()]),
            Err(LimitsError::Quota { index: 1, .. })
        ));
    }),
    ("Limits check_n 0, capacity + 1, u64::MAX; refund u64::MAX", || {
        for n in 1..=MAX_LIMITS {
            let limits = Limits::<Gcra, _>::with_clock(vec![q(10); n], ManualClock::new()).unwrap();
            assert!(limits.check_n(0).unwrap().is_allowed(), "{n} limits");
            assert_eq!(
                limits.check_n(11).unwrap_err(),
                CheckError::CostExceedsCapacity { cost: 11, capacity: 10 }
            );
            assert_eq!(
                limits.check_n(u64::MAX).unwrap_err(),
                CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }
            );
            assert!(limits.check_n(10).unwrap().is_allowed(), "{n} limits");
            limits.refund(u64::MAX);
            assert!(limits.peek().limit_decisions().iter().all(|d| d.remaining() == 10), "{n} limits");
        }
    }),
    ("KeyedLimits: empty and 1 MiB keys, u64::MAX cost, settle and refund", || {
        let limits = KeyedLimits::<Vec<u8>, Gcra, _>::with_clock([q(10), q(20)], ManualClock::new()).unwrap();
        let long = vec![7; MIB];
        for key in [Vec::new(), long] {
            assert!(limits.check_n(&key, 10).unwrap().is_allowed());
            assert_eq!(
                limits.check_n(&key, u64::MAX).unwrap_err(),
                CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 }
            );
            limits.refund(&key, u64::MAX);
            assert!(limits
                .peek(&key)
                .limit_decisions()
                .iter()
                .zip([10, 20])
                .all(|(d, full)| d.remaining() == full));
            let settled = limits.settle(&key, 0, u64::MAX);
            assert_eq!(settled.len(), 2);
            assert!(settled.iter().all(|s| s.charged + s.uncharged == u64::MAX));
        }
    }),
    ("KeyedLimits of no quota and of MAX_LIMITS + 1", || {
        assert_eq!(
            KeyedLimits::<u64, Gcra, _>::with_clock([], ManualClock::new()).unwrap_err(),
            LimitsError::Empty
        );
        assert!(matches!(
            KeyedLimits::<u64, Gcra, _>::with_clock(vec![q(1); MAX_LIMITS + 1], ManualClock::new()),
            Err(LimitsError::TooMany { .. })
        ));
    }),
    ("KeyedLimits builder max_keys 0", || {
        assert!(matches!(
            KeyedLimits::<u64, Gcra>::builder([q(1)]).clock(ManualClock::new()).max_keys(0).build(),
            Err(LimitsError::Table(kova::keyed::KeyedError::MaxKeys { max_keys: 0, .. }))
        ));
    }),
];

const HOT: &[Case] = &[
    ("Sketch: empty and 1 MiB keys, cost 0, capacity + 1, u64::MAX", || {
        let sketch = Sketch::builder(q(10)).clock(ManualClock::new()).build().unwrap();
        let long = vec![1u8; MIB];
        for key in [&[][..], &long[..]] {
            assert_eq!(sketch.check_n(key, 0).unwrap().remaining(), 10);
            assert!(sketch.check_n(key, 10).unwrap().is_allowed());
            assert_eq!(
                sketch.check_n(key, 11),
                Err(CheckError::CostExceedsCapacity { cost: 11, capacity: 10 })
            );
            assert_eq!(
                sketch.check_n(key, u64::MAX),
                Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 10 })
            );
        }
    }),
    ("StripedLimiter: cost 0, capacity, capacity + 1, u64::MAX, any stripe", || {
        let striped = StripedLimiter::<Gcra, _>::builder(q(1_000)).clock(ManualClock::new()).build().unwrap();
        assert_eq!(striped.check_n(0).unwrap().remaining(), 1_000);
        assert_eq!(
            striped.check_n(1_001),
            Err(CheckError::CostExceedsCapacity { cost: 1_001, capacity: 1_000 })
        );
        assert_eq!(
            striped.check_n_on(usize::MAX, u64::MAX),
            Err(CheckError::CostExceedsCapacity { cost: u64::MAX, capacity: 1_000 })
        );
        // A stripe index is taken modulo the stripe count.
        assert!(striped.check_n_on(usize::MAX, 1).unwrap().is_allowed());
        assert_eq!(striped.peek().remaining(), 999);
    }),
];

#[test]
fn keyed_edges() {
    run(KEYED);
}

#[test]
fn composite_edges() {
    run(COMPOSITE);
}

#[test]
fn sketch_and_striped_edges() {
    run(HOT);
}
