//! A run that goes on in the response future, and what becomes of its charges if that future is
//! dropped before the run ends.

use std::sync::Arc;

use http::request::Parts;

use super::{Answer, Check, Progress, Run};
use crate::config::Config;

/// A run that goes on in the response future, awaiting a check. Dropped before it ends (the
/// client went away, an outer timeout fired while a store was slow), it gives back what its
/// earlier limits took, as a rejection does: the request was never served. Once it has ended,
/// nothing is left to give back (a rejection refunded it, a pass handed it to the response).
pub(crate) struct Awaiting {
    run: Run,
    config: Arc<Config>,
}

impl Awaiting {
    pub(crate) fn new(run: Run, config: Arc<Config>) -> Self {
        Awaiting { run, config }
    }

    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// [`Run::resume`] with the layer's config.
    pub(crate) fn resume(&mut self, parts: &Parts, check: &Check, answer: Answer) -> Progress {
        self.run.resume(&self.config, parts, check, answer)
    }
}

impl Drop for Awaiting {
    fn drop(&mut self) {
        self.run.refund_charged(&self.config);
    }
}
