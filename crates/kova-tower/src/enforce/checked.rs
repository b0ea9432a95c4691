//! What a request's run has checked so far: each limit's decision (what its headers show) and
//! the allowed checks to settle from the response.

use kova::Decision;
use smallvec::SmallVec;

use super::taken::Taken;
use crate::config::Config;
use crate::headers::{self, RateLimitHeaders};
use crate::partition::PARTITION_KEY_LEN;
use crate::LimitKey;

/// One limit checked: its index in the layer, its decision, and its `pk` when the layer
/// publishes partition keys.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) index: usize,
    pub(crate) decision: Decision,
    pub(crate) partition_key: Option<[u8; PARTITION_KEY_LEN]>,
}

impl Entry {
    fn partition_key(&self) -> Option<&[u8]> {
        self.partition_key.as_ref().map(|pk| &pk[..])
    }
}

/// An allowed check to settle from the response.
#[derive(Debug)]
pub(crate) struct ToSettle {
    pub(crate) index: usize,
    pub(crate) key: LimitKey,
    pub(crate) estimated: u64,
    /// Settled by the composite the limit at `index` heads, for all its limits.
    pub(crate) composite: bool,
    /// When: of the lower part of a settlement, only what still counts is given back.
    pub(crate) taken: Taken,
}

/// Entries kept inline: a request checked against up to this many limits allocates nothing
/// for them.
const INLINE_ENTRIES: usize = 4;

/// The checks of one request so far.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Every limit checked, in order.
    pub(crate) entries: SmallVec<[Entry; INLINE_ENTRIES]>,
    /// Allowed checks of limits that settle from the response.
    pub(crate) to_settle: Vec<ToSettle>,
}

impl Checked {
    /// Replaces the decision of the limit at `index` (its state after a refund or a settle).
    pub(crate) fn update(&mut self, index: usize, decision: Decision) {
        if let Some(entry) = self.entries.iter_mut().find(|e| e.index == index) {
            entry.decision = decision;
        }
    }

    /// The headers of an allowed request (none in shadow mode); the legacy ones describe the
    /// limit with the least left.
    pub(crate) fn pass_headers(&self, config: &Config) -> Option<RateLimitHeaders> {
        if config.shadow {
            return None;
        }
        let tightest = self
            .entries
            .iter()
            .map(|e| &e.decision)
            .filter(|d| headers::is_measurement(d))
            .min_by_key(|d| d.remaining());
        self.headers(config, tightest)
    }

    /// The headers for the limits checked so far; the legacy ones describe `legacy`.
    pub(crate) fn headers(&self, config: &Config, legacy: Option<&Decision>) -> Option<RateLimitHeaders> {
        if self.entries.is_empty() {
            return None;
        }
        let policy = if self.entries.len() == config.limits.len() && config.partition_keys.is_none() {
            config.all_policies.clone()
        } else {
            let items = self.entries.iter().map(|e| (config.limit(e.index).policy_item(), e.partition_key()));
            headers::policy_value(items)?
        };
        let measured = self.entries.iter().filter(|e| headers::is_measurement(&e.decision));
        let state = headers::state_value(
            measured.map(|e| (config.limit(e.index).name(), &e.decision, e.partition_key())),
        );
        let legacy = legacy.filter(|_| config.legacy_headers).map(headers::legacy_values);
        Some(RateLimitHeaders { policy, state, legacy })
    }
}
