//! Settling an allowed request's limits from its response: what the response says each cost,
//! given back or charged through each limiter, before the response's headers are written.

use http::HeaderMap;
use kova::GiveBack;

use super::checked::{Checked, ToSettle};
use crate::config::Config;
use crate::headers::RateLimitHeaders;
use crate::{EventKind, SettleError};

/// An allowed request waiting for its response, to settle its limits' costs from it before
/// its headers are written.
#[derive(Debug)]
pub(crate) struct Settling {
    checked: Checked,
}

impl Settling {
    pub(crate) fn new(checked: Checked) -> Self {
        Settling { checked }
    }

    /// What the response says each limit to settle cost, in order.
    pub(crate) fn read(
        &self,
        config: &Config,
        headers: &HeaderMap,
        extensions: &http::Extensions,
    ) -> Vec<Option<Result<u64, SettleError>>> {
        let source = |item: &ToSettle| config.limit(item.index).settle_from();
        self.checked.to_settle.iter().map(|item| source(item)?.read(headers, extensions)).collect()
    }

    /// Settles every limit the response gave a cost for (`actuals`, from [`read`](Self::read)),
    /// reports each, and returns the response's headers, showing the state after settling.
    pub(crate) async fn finish(
        mut self,
        config: &Config,
        actuals: Vec<Option<Result<u64, SettleError>>>,
    ) -> Option<RateLimitHeaders> {
        let to_settle = std::mem::take(&mut self.checked.to_settle);
        for (item, actual) in to_settle.into_iter().zip(actuals) {
            let limit = config.limit(item.index);
            let (name, key, estimated) = (limit.name(), Some(&item.key), item.estimated);
            // What is settled: a lower cost gives back at most what the estimate's units still
            // count (none once its window has ended, not what has refilled since: more would
            // come off what later checks took); a higher one is still charged.
            let owed = |actual: u64| {
                if actual >= estimated {
                    return actual;
                }
                let counted = item.taken.still_counted(
                    config,
                    item.index,
                    item.composite,
                    &item.key,
                    estimated,
                    GiveBack::Settle,
                );
                estimated - counted.min(estimated - actual)
            };
            if let Some(member) = limit.member().filter(|_| item.composite) {
                // A composite settles every limit at once, each reported under its own name.
                let members = config.members(item.index, member.group.len);
                let failed = |actual, error: &SettleError| {
                    for limit in members {
                        let kind = EventKind::SettleFailed { estimated, actual, error };
                        config.record(limit.name(), key, kind);
                    }
                };
                match actual {
                    None => {}
                    Some(Err(error)) => failed(None, &error),
                    Some(Ok(actual)) => {
                        match member.group.limiter.settle(&item.key, estimated, owed(actual)).await {
                            Ok(all) => {
                                for (offset, (limit, settled)) in members.iter().zip(all).enumerate() {
                                    let settlement = settled.settlement;
                                    let kind = EventKind::Settled { estimated, actual, settlement };
                                    config.record(limit.name(), key, kind);
                                    if let Some(after) = settled.after {
                                        self.checked.update(item.index + offset, after);
                                    }
                                }
                            }
                            Err(error) => failed(Some(actual), &error),
                        }
                    }
                }
                continue;
            }
            match actual {
                // The response did not say: the estimate stands.
                None => {}
                Some(Err(error)) => {
                    config.record(
                        name,
                        key,
                        EventKind::SettleFailed { estimated, actual: None, error: &error },
                    );
                }
                Some(Ok(actual)) => match limit.limiter().settle(&item.key, estimated, owed(actual)).await {
                    Ok(settled) => {
                        let settlement = settled.settlement;
                        config.record(name, key, EventKind::Settled { estimated, actual, settlement });
                        if let Some(after) = settled.after {
                            self.checked.update(item.index, after);
                        }
                    }
                    Err(error) => {
                        let kind = EventKind::SettleFailed { estimated, actual: Some(actual), error: &error };
                        config.record(name, key, kind);
                    }
                },
            }
        }
        self.checked.pass_headers(config)
    }
}
