//! From the YAML as written to a validated tree: every refusal names its line.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use kova::{AlgorithmKind, AnyAlgorithm, Quota};
use serde_saphyr::{Location, Spanned};

use super::raw::{RawDescriptor, RawFile, RawKova, RawRateLimit};
use super::tree::{KeyNodes, Level, Node};
use super::{ConfigError, Domain, Limit, Limited, Rule, Unit, DEFAULT_ALGORITHM};

/// The longest policy name the headers carry (`kova_tower::headers::is_valid_policy_name`).
const MAX_POLICY_NAME: usize = 64;

/// Reads one file's text into its domain.
pub(crate) fn parse_domain(file: &Path, text: &str) -> Result<Domain, ConfigError> {
    let raw: RawFile = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        ConfigError::new(file, line, column, e.to_string())
    })?;
    let builder = Builder { file };
    let domain = raw.domain.value.trim();
    if domain.is_empty() {
        return Err(builder.at(&raw.domain.referenced, "`domain` is empty"));
    }
    let mut path = Vec::new();
    let root = builder.level(raw.descriptors.as_deref().unwrap_or_default(), &mut path)?;
    Ok(Domain { name: domain.to_owned(), root, line: raw.domain.referenced.line(), file: file.to_owned() })
}

struct Builder<'a> {
    file: &'a Path,
}

impl Builder<'_> {
    fn at(&self, location: &Location, problem: impl Into<String>) -> ConfigError {
        ConfigError::new(self.file, location.line(), location.column(), problem)
    }

    fn level(&self, descriptors: &[RawDescriptor], path: &mut Vec<String>) -> Result<Level, ConfigError> {
        let mut level = Level::default();
        for raw in descriptors {
            let key = &raw.key.value;
            if key.is_empty() {
                return Err(self.at(&raw.key.referenced, "descriptor `key` is empty"));
            }
            let value = raw.value.as_ref().map(|v| v.value.as_str()).filter(|v| !v.is_empty());
            path.push(match value {
                Some(value) => format!("{key}_{value}"),
                None => key.clone(),
            });
            let node = self.node(raw, path)?;
            path.pop();
            let nodes = level.keys.entry(key.clone()).or_default();
            self.insert(nodes, key, value, node)?;
        }
        Ok(level)
    }

    fn insert(
        &self,
        nodes: &mut KeyNodes,
        key: &str,
        value: Option<&str>,
        node: Node,
    ) -> Result<(), ConfigError> {
        let line = node.line;
        let first = match value {
            None => match &nodes.any {
                Some(first) => Some(first.line),
                None => {
                    nodes.any = Some(Box::new(node));
                    None
                }
            },
            Some(value) => match value.strip_suffix('*') {
                Some(prefix) => match nodes.prefixes.iter().find(|(p, _)| p == prefix) {
                    Some((_, first)) => Some(first.line),
                    None => {
                        nodes.prefixes.push((prefix.to_owned(), node));
                        None
                    }
                },
                None => match nodes.exact.get(value) {
                    Some(first) => Some(first.line),
                    None => {
                        nodes.exact.insert(value.to_owned(), node);
                        None
                    }
                },
            },
        };
        match first {
            None => Ok(()),
            Some(first) => Err(ConfigError::new(
                self.file,
                line,
                0,
                format!(
                    "duplicate descriptor key `{key}` value `{}` (first at line {first})",
                    value.unwrap_or("")
                ),
            )),
        }
    }

    fn node(&self, raw: &RawDescriptor, path: &mut Vec<String>) -> Result<Node, ConfigError> {
        let line = raw.key.referenced.line();
        let rule = match (&raw.rate_limit, &raw.kova) {
            (None, Some(kova)) => {
                return Err(self.at(&kova.referenced, "a `kova` block needs a `rate_limit` beside it"))
            }
            (None, None) => {
                if raw.shadow_mode.is_some() {
                    return Err(self.at(&raw.key.referenced, "`shadow_mode` needs a `rate_limit` beside it"));
                }
                None
            }
            (Some(rate_limit), kova) => Some(Arc::new(self.rule(raw, rate_limit, kova.as_ref(), path)?)),
        };
        let children = self.level(raw.descriptors.as_deref().unwrap_or_default(), path)?;
        Ok(Node { rule, children, line })
    }

    fn rule(
        &self,
        raw: &RawDescriptor,
        rate_limit: &Spanned<RawRateLimit>,
        kova: Option<&Spanned<RawKova>>,
        path: &[String],
    ) -> Result<Rule, ConfigError> {
        let at = &rate_limit.referenced;
        let spec = &rate_limit.value;
        let limit = if spec.unlimited.unwrap_or(false) {
            let extra = spec
                .unit
                .as_ref()
                .map(|u| u.referenced)
                .or(spec.requests_per_unit.as_ref().map(|r| r.referenced));
            if let Some(extra) = extra {
                return Err(
                    self.at(&extra, "an `unlimited` rate_limit takes no `unit` nor `requests_per_unit`")
                );
            }
            if let Some(kova) = kova {
                return Err(self.at(&kova.referenced, "an `unlimited` rate_limit takes no `kova` block"));
            }
            Limit::Unlimited
        } else {
            self.limited(spec, at, kova)?
        };
        let name = match &spec.name {
            Some(name) if name.value.is_empty() => return Err(self.at(&name.referenced, "`name` is empty")),
            Some(name) => Some(name.value.clone()),
            None => None,
        };
        let mut replaces = Vec::new();
        for replace in spec.replaces.iter().flatten() {
            if replace.name.value.is_empty() {
                return Err(self.at(&replace.name.referenced, "a `replaces` entry's `name` is empty"));
            }
            replaces.push(replace.name.value.clone());
        }
        let policy = match &name {
            Some(name) if kova_tower::headers::is_valid_policy_name(name) => name.clone(),
            _ => policy_name_of(path),
        };
        let shadow = raw.shadow_mode.unwrap_or(false);
        Ok(Rule { policy, name, limit, shadow, replaces, line: raw.key.referenced.line() })
    }

    fn limited(
        &self,
        spec: &RawRateLimit,
        at: &Location,
        kova: Option<&Spanned<RawKova>>,
    ) -> Result<Limit, ConfigError> {
        let unit_text = spec
            .unit
            .as_ref()
            .ok_or_else(|| self.at(at, "rate_limit needs a `unit` (or `unlimited: true`)"))?;
        let unit = Unit::parse(&unit_text.value).ok_or_else(|| {
            self.at(
                &unit_text.referenced,
                format!("unknown unit `{}` (second, minute, hour, day, week, month, year)", unit_text.value),
            )
        })?;
        let rpu = spec
            .requests_per_unit
            .as_ref()
            .ok_or_else(|| self.at(at, "rate_limit needs `requests_per_unit` (or `unlimited: true`)"))?;
        let requests_per_unit = u32::try_from(rpu.value).map_err(|_| {
            self.at(&rpu.referenced, format!("`requests_per_unit` {} is above {}", rpu.value, u32::MAX))
        })?;
        if requests_per_unit == 0 {
            // envoyproxy/ratelimit's way to block a value (its README's example blocks one
            // address): every hit that counts is over the limit. Nothing to count it with, so
            // no algorithm or burst.
            if let Some(kova) = kova {
                return Err(self.at(&kova.referenced, "a `requests_per_unit` of 0 takes no `kova` block"));
            }
            return Ok(Limit::Zero(unit));
        }
        let mut algorithm = DEFAULT_ALGORITHM;
        let mut quota = Quota::new(u64::from(requests_per_unit), unit.duration())
            .map_err(|e| self.at(&rpu.referenced, format!("not a quota: {e}")))?;
        if let Some(kova) = kova {
            if let Some(name) = &kova.value.algorithm {
                algorithm = name.value.parse().map_err(|_| {
                    self.at(
                        &name.referenced,
                        format!(
                            "unknown algorithm `{}` (gcra, token_bucket, fixed_window, sliding_window_counter, sliding_window_log)",
                            name.value
                        ),
                    )
                })?;
            }
            if let Some(burst) = &kova.value.burst {
                if !matches!(algorithm, AlgorithmKind::Gcra | AlgorithmKind::TokenBucket) {
                    return Err(self.at(
                        &burst.referenced,
                        format!("`burst` applies to gcra and token_bucket, not {}", algorithm.as_str()),
                    ));
                }
                quota = quota
                    .with_burst(burst.value)
                    .map_err(|e| self.at(&burst.referenced, format!("bad burst: {e}")))?;
            }
        }
        // The algorithm's own checks: what its packed state can hold.
        AnyAlgorithm::new(algorithm, quota)
            .map_err(|e| self.at(at, format!("{} cannot hold this limit: {e}", algorithm.as_str())))?;
        Ok(Limit::Limited(Limited { requests_per_unit, unit, algorithm, quota }))
    }
}

/// A valid policy name from a node's path: `key` or `key_value` per level joined by `.`.
pub(crate) fn policy_name_of(path: &[String]) -> String {
    let joined = path.join(".");
    let mut name: String = joined
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .collect();
    name.truncate(MAX_POLICY_NAME);
    name
}

/// Adds `domain` to `domains`, refusing a second file of the same domain.
pub(crate) fn add_domain(
    domains: &mut HashMap<String, Domain>,
    file: &Path,
    domain: Domain,
) -> Result<(), ConfigError> {
    if domains.contains_key(&domain.name) {
        return Err(ConfigError::new(
            file,
            domain.line,
            0,
            format!("domain `{}` is defined twice", domain.name),
        ));
    }
    domains.insert(domain.name.clone(), domain);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_policy_names_are_valid_and_bounded() {
        let name = policy_name_of(&["remote_address".into(), "path_/api v1".into()]);
        assert_eq!(name, "remote_address.path__api_v1");
        assert!(kova_tower::headers::is_valid_policy_name(&name));
        let long = policy_name_of(&["k".repeat(100)]);
        assert_eq!(long.len(), MAX_POLICY_NAME);
        assert!(kova_tower::headers::is_valid_policy_name(&long));
    }
}
