//! The configuration: envoyproxy/ratelimit's YAML, one domain per file, plus kova's `kova`
//! block per descriptor.
//!
//! ```yaml
//! domain: edge
//! descriptors:
//!   - key: remote_address            # any value: one counter per address
//!     rate_limit: { unit: second, requests_per_unit: 10 }
//!     kova: { algorithm: gcra, burst: 20 }   # kova's extension (default: fixed_window)
//!   - key: path
//!     value: /health
//!     rate_limit: { unlimited: true }
//!   - key: api_key
//!     descriptors:                   # nested: matched by the request's next entry
//!       - key: path
//!         rate_limit: { unit: minute, requests_per_unit: 100 }
//!         shadow_mode: true          # decided and counted, never enforced
//! ```
//!
//! Matching is envoyproxy/ratelimit's: a request descriptor's entries walk down the tree in
//! order, each taking the node of its key and exact value, else of a value prefix
//! (`value: "GET*"`), else of its key without a value; the rule is that of the node the last
//! entry reaches. An unknown domain or a descriptor that reaches no rule is not limited.

mod build;
mod error;
mod raw;
mod rule;
mod tree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) use build::policy_name_of;
pub use error::ConfigError;
pub use rule::{Limit, Limited, Rule, Unit, DEFAULT_ALGORITHM};

/// The rules of one domain.
#[derive(Debug)]
pub struct Domain {
    name: String,
    root: tree::Level,
    line: u64,
    /// The file it came from.
    file: PathBuf,
}

impl Domain {
    /// The domain's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The rule a request descriptor of these `(key, value)` entries matches, if any.
    ///
    /// ```
    /// let config = kova_rls::Config::from_yaml(
    ///     "inline.yaml".as_ref(),
    ///     "domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    /// )?;
    /// let domain = config.domain("d").unwrap();
    /// assert!(domain.find([("user", "alice")]).is_some());
    /// assert!(domain.find([("user", "alice"), ("path", "/")]).is_none()); // no nested node
    /// # Ok::<(), kova_rls::ConfigError>(())
    /// ```
    pub fn find<'a, I>(&self, entries: I) -> Option<&Arc<Rule>>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: ExactSizeIterator,
    {
        self.root.find(entries)
    }
}

/// Every domain the service knows, and the files they came from.
#[derive(Debug, Default)]
pub struct Config {
    domains: HashMap<String, Domain>,
    files: Vec<PathBuf>,
}

impl Config {
    /// Reads `path`: one YAML file, or every `*.yaml` / `*.yml` file of a directory (in name
    /// order, each one domain, as envoyproxy/ratelimit reads its config directory).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::from_sources(&read_sources(path)?)
    }

    /// Builds a config from sources already read (what [`read_sources`] returns).
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (file, text) in sources {
            build::add_domain(&mut config.domains, file, build::parse_domain(file, text)?)?;
            config.files.push(file.clone());
        }
        Ok(config)
    }

    /// Reads one file's text (`file` names it in errors).
    pub fn from_yaml(file: &Path, text: &str) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        build::add_domain(&mut config.domains, file, build::parse_domain(file, text)?)?;
        config.files.push(file.to_owned());
        Ok(config)
    }

    /// The domain called `name`.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// The names of the domains, in no particular order.
    pub fn domain_names(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// The files read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Checks every limit of every rule with `accepts` (a backend's own bounds, such as what
    /// Redis's scripts can hold: [`Backend::accepts`](crate::Backend::accepts)), so that a
    /// limit the backend cannot serve is refused where the file is loaded, naming its line,
    /// rather than failing every request that reaches it.
    pub fn check_limits(&self, accepts: impl Fn(&Limited) -> Result<(), String>) -> Result<(), ConfigError> {
        let mut names: Vec<&String> = self.domains.keys().collect();
        names.sort();
        for domain in names.into_iter().filter_map(|name| self.domains.get(name)) {
            let mut rules = Vec::new();
            domain.root.rules(&mut rules);
            rules.sort_by_key(|rule| rule.line());
            for rule in rules {
                if let Limit::Limited(limited) = rule.limit() {
                    accepts(limited)
                        .map_err(|problem| ConfigError::new(&domain.file, rule.line(), 0, problem))?;
                }
            }
        }
        Ok(())
    }
}

/// The files under `path` and their text: the file itself, or a directory's YAML files in name
/// order. The reloader compares these to decide whether anything changed.
pub fn read_sources(path: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let read = |file: &Path| {
        std::fs::read_to_string(file).map_err(|e| ConfigError::whole_file(file, format!("cannot read: {e}")))
    };
    let meta =
        std::fs::metadata(path).map_err(|e| ConfigError::whole_file(path, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![(path.to_owned(), read(path)?)]);
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| ConfigError::whole_file(path, format!("cannot list: {e}")))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ConfigError::whole_file(path, "no *.yaml or *.yml file in the directory"));
    }
    files.into_iter().map(|file| read(&file).map(|text| (file, text))).collect()
}
