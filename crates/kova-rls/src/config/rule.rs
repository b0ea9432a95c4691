//! What a descriptor node says about the requests it matches.

use std::time::Duration;

use kova::{AlgorithmKind, Quota};

/// The algorithm of a limit whose node has no `kova: { algorithm }`.
///
/// Fixed windows, because that is what envoyproxy/ratelimit counts with: a file written for it
/// means the same here (`requests_per_unit` per aligned `unit`, the count starting again at the
/// window's edge, `duration_until_reset` the time to that edge; windows are aligned to the Unix
/// epoch in memory ([`UnixClock`](crate::UnixClock)) as in Redis, whose `TIME` it is). A node opts into a smoother
/// algorithm with `kova: { algorithm: gcra, burst: N }`.
pub const DEFAULT_ALGORITHM: AlgorithmKind = AlgorithmKind::FixedWindow;

/// The unit of `requests_per_unit`, as envoyproxy/ratelimit reads it (case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unit {
    /// 1 s.
    Second,
    /// 60 s.
    Minute,
    /// 3,600 s.
    Hour,
    /// 86,400 s.
    Day,
    /// 7 days.
    Week,
    /// 30 days (envoyproxy/ratelimit's month).
    Month,
    /// 365 days (envoyproxy/ratelimit's year).
    Year,
}

impl Unit {
    /// Reads `second`, `minute`, `hour`, `day`, `week`, `month` or `year`, in any case.
    ///
    /// ```
    /// use kova_rls::Unit;
    /// assert_eq!(Unit::parse("Minute"), Some(Unit::Minute));
    /// assert_eq!(Unit::parse("fortnight"), None);
    /// ```
    pub fn parse(text: &str) -> Option<Unit> {
        Some(match text.to_ascii_lowercase().as_str() {
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    /// The unit's length.
    pub fn duration(self) -> Duration {
        const DAY: u64 = 86_400;
        Duration::from_secs(match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => DAY,
            Unit::Week => 7 * DAY,
            Unit::Month => 30 * DAY,
            Unit::Year => 365 * DAY,
        })
    }
}

/// A quota-carrying limit: what the file said and the kova quota it became.
#[derive(Debug, Clone, PartialEq)]
pub struct Limited {
    pub(crate) requests_per_unit: u32,
    pub(crate) unit: Unit,
    pub(crate) algorithm: AlgorithmKind,
    pub(crate) quota: Quota,
}

impl Limited {
    /// `requests_per_unit` as written (the protocol's `current_limit` carries it as a `u32`).
    pub fn requests_per_unit(&self) -> u32 {
        self.requests_per_unit
    }

    /// `unit` as written.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// The algorithm counting it.
    pub fn algorithm(&self) -> AlgorithmKind {
        self.algorithm
    }

    /// The kova quota: `requests_per_unit` per `unit`, with the `kova` block's burst.
    pub fn quota(&self) -> Quota {
        self.quota
    }
}

/// A node's `rate_limit`, or a request descriptor's own `limit`.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// `unlimited: true`: matched, never limited.
    Unlimited,
    /// Counted against a quota.
    Limited(Limited),
    /// `requests_per_unit: 0` per this unit: admits nothing, so every check that counts a unit
    /// is over the limit and one that counts none is not (envoyproxy/ratelimit's meaning of a
    /// 0). Only a request descriptor's own `limit` makes it; a file's 0 is refused where it is
    /// written.
    Zero(Unit),
}

/// The rule of one descriptor node with a `rate_limit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub(crate) policy: String,
    pub(crate) name: Option<String>,
    pub(crate) limit: Limit,
    pub(crate) shadow: bool,
    pub(crate) replaces: Vec<String>,
    pub(crate) line: u64,
}

impl Rule {
    /// The name it carries in `RateLimit-Policy` / `RateLimit`: the `rate_limit`'s `name` when
    /// that is a valid policy name, otherwise the node's path (`key` or `key_value` per level,
    /// joined by `.`, other characters than `A-Z a-z 0-9 _ - .` written `_`, at most 64).
    pub fn policy_name(&self) -> &str {
        &self.policy
    }

    /// The `rate_limit`'s `name`, the one other rules' `replaces` refer to.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The limit.
    pub fn limit(&self) -> &Limit {
        &self.limit
    }

    /// `shadow_mode`: decided and counted, never enforced.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The names of the rules this one replaces when both match one request. A shadow rule's
    /// are not applied: it enforces nothing, so taking another rule's place would lift a limit.
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// The line of the node's `key` in its file.
    pub fn line(&self) -> u64 {
        self.line
    }
}
