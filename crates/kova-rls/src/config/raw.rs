//! The YAML file as written: envoyproxy/ratelimit's schema plus kova's `kova` block, every node
//! that validation may complain about wrapped in [`Spanned`] for its line.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// One file: one domain.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub(crate) domain: Spanned<String>,
    #[serde(default)]
    pub(crate) descriptors: Option<Vec<RawDescriptor>>,
}

/// A descriptor node: `key`, optional `value`, an optional limit, nested nodes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDescriptor {
    pub(crate) key: Spanned<String>,
    #[serde(default)]
    pub(crate) value: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) rate_limit: Option<Spanned<RawRateLimit>>,
    #[serde(default)]
    pub(crate) descriptors: Option<Vec<RawDescriptor>>,
    #[serde(default)]
    pub(crate) shadow_mode: Option<bool>,
    /// envoyproxy/ratelimit's per-value statistics: accepted, without effect here.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) detailed_metric: Option<bool>,
    /// envoyproxy/ratelimit's value-in-metric-name switch: accepted, without effect here.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) value_to_metric: Option<bool>,
    /// kova's extension: the algorithm and burst of this node's limit.
    #[serde(default)]
    pub(crate) kova: Option<Spanned<RawKova>>,
}

/// `rate_limit`: `unit` + `requests_per_unit`, or `unlimited: true`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRateLimit {
    #[serde(default)]
    pub(crate) unit: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) requests_per_unit: Option<Spanned<u64>>,
    #[serde(default)]
    pub(crate) unlimited: Option<bool>,
    #[serde(default)]
    pub(crate) name: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) replaces: Option<Vec<RawReplace>>,
}

/// One entry of `replaces`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplace {
    pub(crate) name: Spanned<String>,
}

/// `kova: { algorithm, burst }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKova {
    #[serde(default)]
    pub(crate) algorithm: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) burst: Option<Spanned<u64>>,
}
