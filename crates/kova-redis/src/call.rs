//! [`Call`]: one check as a script call, sent alone or in a batch.

use kova::AlgorithmKind;

use crate::scripts::script;

/// One check for a script: its algorithm, key, time (`None`: Redis `TIME`) and `ARGV[2..]`.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) kind: AlgorithmKind,
    pub(crate) key: Vec<u8>,
    pub(crate) now: Option<u64>,
    pub(crate) args: [u64; 5],
}

impl Call {
    /// Its own algorithm's script, alone.
    pub(crate) fn invocation(&self) -> redis::ScriptInvocation<'static> {
        let mut invocation = script(self.kind).key(self.key.as_slice());
        match self.now {
            Some(micros) => invocation.arg(micros),
            None => invocation.arg(""),
        };
        for arg in self.args {
            invocation.arg(arg);
        }
        invocation
    }
}
