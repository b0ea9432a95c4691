//! A configuration error: the file, the line and the problem.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a configuration was refused. Its `Display` is `file:line:column: problem` (the line and
/// column left out where the problem has none, such as an unreadable file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    file: PathBuf,
    line: Option<u64>,
    column: Option<u64>,
    problem: String,
}

impl ConfigError {
    /// An error at `line`/`column` (1-based) of `file`; 0 for either means unknown.
    pub fn new(file: &Path, line: u64, column: u64, problem: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_owned(),
            line: (line > 0).then_some(line),
            column: (column > 0).then_some(column),
            problem: problem.into(),
        }
    }

    /// An error about the file as a whole.
    pub fn whole_file(file: &Path, problem: impl Into<String>) -> Self {
        ConfigError::new(file, 0, 0, problem)
    }

    /// The file that holds the problem.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The 1-based line of the problem, where it has one.
    pub fn line(&self) -> Option<u64> {
        self.line
    }

    /// What is wrong, without the position.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for ConfigError {}
