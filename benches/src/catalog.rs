//! The throughput scenarios: their names, what each does, and the quotas every subject gets.

use kova::{AlgorithmKind, Quota};

/// Keys in the large-table scenarios.
pub const LARGE_KEYS: usize = 1_000_000;
/// Keys in the small-table scenario.
pub const SMALL_KEYS: usize = 1_000;
/// The Zipf exponent of the skewed scenario.
pub const ZIPF_EXPONENT: f64 = 1.0;

/// A throughput scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Direct limiter shared by all threads (one hot key), every check admitted.
    Direct,
    /// [`Direct`](Self::Direct) with a request handler's work between two checks.
    DirectWork,
    /// Direct limiter shared by all threads, quota exhausted: every check denied.
    DirectDeny,
    /// Keyed table, all threads on one key.
    KeyedHot,
    /// [`KeyedHot`](Self::KeyedHot) with a request handler's work between two checks.
    KeyedHotWork,
    /// Keyed table, one key per thread.
    KeyedPerThread,
    /// Keyed table of 1,000 keys, uniform access.
    Keyed1k,
    /// Keyed table, 1,000 keys of its own per thread, uniform access.
    Keyed1kOwn,
    /// Keyed table of 1,000,000 live keys, uniform access.
    Keyed1mUniform,
    /// Keyed table of 1,000,000 live keys, Zipf access.
    Keyed1mZipf,
    /// A key never seen before on every check.
    KeyedChurn,
    /// A key never seen before on every check, into a kova table held at its key bound.
    KeyedFlood,
    /// [`KeyedChurn`](Self::KeyedChurn) at a quota a server gives its clients, 100 per minute.
    KeyedChurnMinute,
    /// [`KeyedFlood`](Self::KeyedFlood) at 100 per minute: the table is full of keys that are
    /// not idle.
    KeyedFloodMinute,
}

impl Scenario {
    /// All of them, in report order.
    pub const ALL: [Scenario; 14] = [
        Scenario::Direct,
        Scenario::DirectWork,
        Scenario::DirectDeny,
        Scenario::KeyedHot,
        Scenario::KeyedHotWork,
        Scenario::KeyedPerThread,
        Scenario::Keyed1k,
        Scenario::Keyed1kOwn,
        Scenario::Keyed1mUniform,
        Scenario::Keyed1mZipf,
        Scenario::KeyedChurn,
        Scenario::KeyedFlood,
        Scenario::KeyedChurnMinute,
        Scenario::KeyedFloodMinute,
    ];

    /// The name used by `--filter`, the JSON and the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Direct => "direct",
            Scenario::DirectWork => "direct_work",
            Scenario::DirectDeny => "direct_deny",
            Scenario::KeyedHot => "keyed_hot",
            Scenario::KeyedHotWork => "keyed_hot_work",
            Scenario::KeyedPerThread => "keyed_per_thread",
            Scenario::Keyed1k => "keyed_1k",
            Scenario::Keyed1kOwn => "keyed_1k_own",
            Scenario::Keyed1mUniform => "keyed_1m_uniform",
            Scenario::Keyed1mZipf => "keyed_1m_zipf",
            Scenario::KeyedChurn => "keyed_churn",
            Scenario::KeyedFlood => "keyed_flood",
            Scenario::KeyedChurnMinute => "keyed_churn_100pm",
            Scenario::KeyedFloodMinute => "keyed_flood_100pm",
        }
    }

    /// One line for the report.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Direct => {
                "one hot key: a direct limiter shared by every thread, quota never reached (every check \
                 admitted, so every check writes)"
            }
            Scenario::DirectDeny => {
                "one hot key, quota exhausted: every check denied (a denial writes nothing)"
            }
            Scenario::DirectWork => {
                "direct, with a request handler's work between two checks (`WORK_ROUNDS` rounds of a \
                 xorshift; the report gives their cost): the work, not the limiter, sets the pace"
            }
            Scenario::KeyedHot => "keyed table, every thread on the same key, every check admitted",
            Scenario::KeyedHotWork => {
                "keyed_hot, with a request handler's work between two checks (as direct_work)"
            }
            Scenario::KeyedPerThread => "keyed table, one key per thread (no sharing), every check admitted",
            Scenario::Keyed1k => "keyed table of 1,000 keys, uniform random access (fits in cache)",
            Scenario::Keyed1kOwn => {
                "keyed table, 1,000 keys of its own per thread, uniform random access: threads serving \
                 clients of their own (no key shared, a table of 1,000 keys per thread)"
            }
            Scenario::Keyed1mUniform => {
                "keyed table of 1,000,000 live keys, uniform random access (misses the cache)"
            }
            Scenario::Keyed1mZipf => {
                "keyed table of 1,000,000 live keys, Zipf (s = 1) access: a few hot keys, a long tail"
            }
            Scenario::KeyedChurn => {
                "a key never seen before on every check (a flood of new clients), at a quota whose unit \
                 is idle again within a clock tick: kova's default tables admit a new key's first check \
                 at their doorkeeper and insert nothing (a key enters the table on its second check); \
                 `gcra_no_doorkeeper`, governor and the Mutex map insert every key; the sketches \
                 (kova's, pingora's) write their shared counters"
            }
            Scenario::KeyedFlood => {
                "a key never seen before on every check, kova's tables bounded at 65,536 keys and kept \
                 full of keys idle again (1 ms after their check): the default tables admit most new \
                 keys at their doorkeeper without an insert (a key whose door word holds another key's \
                 entry of the last millisecond goes to the table); `gcra_no_doorkeeper` inserts every \
                 key, reclaiming idle keys to make room; the peers have no bound and grow"
            }
            Scenario::KeyedChurnMinute => {
                "keyed_churn at 100 per minute, a quota a server gives its clients: a new key's unit \
                 stays young for 600 ms, so the doorkeeper's words fill within milliseconds and most new \
                 keys go to the table (default bound: 1,048,576 keys, then evictions); kova with and \
                 without its doorkeeper, and governor"
            }
            Scenario::KeyedFloodMinute => {
                "keyed_flood at 100 per minute: kova's tables bounded at 65,536 keys, filled with keys \
                 that stay live for the measurement, so a new key evicts the held key closest to idle \
                 (the default `TableFullPolicy`); kova with and without its doorkeeper, and governor \
                 (no bound: it grows)"
            }
        }
    }

    /// Whether an exact limiter admits every check: all but [`DirectDeny`](Self::DirectDeny).
    /// Rows that admitted less are flagged in the report.
    pub fn all_admitted(self) -> bool {
        self != Scenario::DirectDeny
    }

    /// Whether every check brings a key never seen before (churn and flood, at either quota).
    pub fn new_keys(self) -> bool {
        matches!(
            self,
            Scenario::KeyedChurn
                | Scenario::KeyedFlood
                | Scenario::KeyedChurnMinute
                | Scenario::KeyedFloodMinute
        )
    }

    /// Whether this is one of the realistic-quota rows of churn and flood, which measure kova's
    /// GCRA with and without its doorkeeper and governor only.
    pub fn per_minute(self) -> bool {
        matches!(self, Scenario::KeyedChurnMinute | Scenario::KeyedFloodMinute)
    }

    /// The scenario whose keys and table bound this one shares (itself, or churn or flood for
    /// their realistic-quota forms).
    pub fn flow(self) -> Scenario {
        match self {
            Scenario::KeyedChurnMinute => Scenario::KeyedChurn,
            Scenario::KeyedFloodMinute => Scenario::KeyedFlood,
            other => other,
        }
    }

    /// Whether the scenario uses direct limiters (else keyed tables).
    pub fn is_direct(self) -> bool {
        matches!(self, Scenario::Direct | Scenario::DirectWork | Scenario::DirectDeny)
    }

    /// The tight loop this scenario is with work between checks, if it is one of those.
    pub fn without_work(self) -> Option<Scenario> {
        match self {
            Scenario::DirectWork => Some(Scenario::Direct),
            Scenario::KeyedHotWork => Some(Scenario::KeyedHot),
            _ => None,
        }
    }

    /// Rounds of [`work`](crate::throughput::work) between two checks: [`WORK_ROUNDS`] in the
    /// "with work" scenarios, 0 in the tight loops.
    pub fn work_rounds(self) -> u32 {
        if self.without_work().is_some() {
            WORK_ROUNDS
        } else {
            0
        }
    }

    /// The scenario whose subjects and quotas this one shares (itself, or its tight loop).
    pub fn base(self) -> Scenario {
        self.without_work().unwrap_or(self)
    }

    /// The floor measured beside it.
    pub fn floor_name(self) -> &'static str {
        match self.base() {
            Scenario::Direct | Scenario::KeyedHot | Scenario::KeyedPerThread => "floor_cas",
            Scenario::DirectDeny => crate::subject::LOAD_FLOOR,
            _ => "floor_read",
        }
    }

    /// The quota for `kind` (the peers get the single-word algorithms' quota).
    pub fn quota(self, kind: AlgorithmKind) -> Quota {
        let log = kind == AlgorithmKind::SlidingWindowLog;
        let q = match self.base() {
            // One unit per nanosecond, 1M burst: no thread can reach it. The log's ring grows
            // with its limit, so it gets 65,536 per ms (1 MiB ring), still out of reach.
            Scenario::Direct | Scenario::KeyedHot | Scenario::KeyedPerThread if log => {
                Quota::from_nanos(65_536, 1_000_000)
            }
            Scenario::Direct | Scenario::KeyedHot | Scenario::KeyedPerThread => {
                Quota::from_nanos(1_000_000, 1_000_000)
            }
            Scenario::DirectDeny => Quota::per_hour(1),
            // 1,000 keys: 4,096 per ms each for the log (64 KiB per key).
            Scenario::Keyed1k | Scenario::Keyed1kOwn if log => Quota::from_nanos(4_096, 1_000_000),
            Scenario::Keyed1k | Scenario::Keyed1kOwn => Quota::from_nanos(1_000_000, 1_000_000),
            // The tables are filled once and serve every round and thread count of both 1M
            // scenarios, so no key may run dry over all of them. Over all rounds the Zipf key 0,
            // a fourteenth of every check, is checked more often than any burst the packed words
            // hold, so the refill (one unit a nanosecond, as in `keyed_1k`) must outpace it; then
            // every round repeats the same experiment. A doorkeeper entry is young only within
            // the coarse tick it was written in, which the fill's two back-to-back checks of a
            // key share. The tables' bound is twice their keys, so no shard fills and none is
            // reclaimed. The log keeps 16 per second (320 B per key), so its hottest keys are
            // denied: its rows are flagged.
            Scenario::Keyed1mUniform | Scenario::Keyed1mZipf if log => Quota::per_second(16),
            Scenario::Keyed1mUniform | Scenario::Keyed1mZipf => Quota::from_nanos(1_000_000, 1_000_000),
            // New keys admitted and idle again within a clock tick: reclaimable at once.
            Scenario::KeyedChurn if log => Quota::from_nanos(16, 1_000_000),
            Scenario::KeyedChurn => Quota::from_nanos(1_000_000, 1_000_000),
            // One a millisecond: a key stays live for 1 ms after its check (thousands of keys at
            // these rates), so the reclaiming scan must pass over the newest keys to find idle ones.
            Scenario::KeyedFlood => Quota::from_nanos(1, 1_000_000),
            Scenario::KeyedChurnMinute | Scenario::KeyedFloodMinute => Quota::per_minute(100),
            Scenario::DirectWork | Scenario::KeyedHotWork => unreachable!("base() has no work"),
        };
        q.expect("benchmark quotas are valid")
    }

    /// The quotas in words, for the report.
    pub fn quota_text(self) -> String {
        let word = self.quota(AlgorithmKind::Gcra);
        if self.per_minute() {
            return quota_words(word);
        }
        let log = self.quota(AlgorithmKind::SlidingWindowLog);
        format!("{}; sliding_window_log {}", quota_words(word), quota_words(log))
    }
}

/// Rounds of [`work`](crate::throughput::work) between two checks in the "with work" scenarios:
/// a few hundred nanoseconds, the shape of a small request handler (the report gives the
/// measured cost).
pub const WORK_ROUNDS: u32 = 400;

/// "1000000 per 1 ms, burst 1000000".
pub fn quota_words(q: Quota) -> String {
    let period = q.period();
    let p = if period.as_secs() >= 1 && period.subsec_nanos() == 0 {
        format!("{} s", period.as_secs())
    } else if period.as_nanos() % 1_000_000 == 0 {
        format!("{} ms", period.as_millis())
    } else {
        format!("{} ns", period.as_nanos())
    };
    if q.burst() == q.limit() {
        format!("{} per {p}", q.limit())
    } else {
        format!("{} per {p}, burst {}", q.limit(), q.burst())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_quota_is_representable_by_every_algorithm() {
        for scenario in Scenario::ALL {
            for kind in AlgorithmKind::ALL {
                let quota = scenario.quota(kind);
                assert!(kova::AnyAlgorithm::new(kind, quota).is_ok(), "{} {kind}", scenario.name());
            }
            assert!(crate::peers::governor_quota(scenario.quota(AlgorithmKind::Gcra)).is_some());
        }
    }

    #[test]
    fn quota_words_read_well() {
        assert_eq!(quota_words(Quota::per_second(16).unwrap()), "16 per 1 s");
        assert_eq!(quota_words(Quota::from_nanos(1_000_000, 1_000_000).unwrap()), "1000000 per 1 ms");
        assert_eq!(
            quota_words(Quota::per_second(10).unwrap().with_burst(50).unwrap()),
            "10 per 1 s, burst 50"
        );
    }
}
