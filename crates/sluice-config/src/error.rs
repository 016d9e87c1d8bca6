//! Everything wrong with a configuration, collected so that one reading reports it all.

use std::fmt;

/// Everything wrong with a configuration: the problems found so far while reading it, in
/// the order found, and the error a reader returns when there is any.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Each problem, in the order found.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// A configuration with one problem, at `path` (empty for the whole file).
    pub fn single(path: &str, message: impl Into<String>) -> Self {
        ConfigError { problems: vec![Problem { path: path.to_owned(), message: message.into() }] }
    }

    /// Records that the value at `path` is wrong.
    pub fn push(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem { path: path.to_owned(), message: message.into() });
    }

    /// The value of `result`, or `None` with its error recorded at `path`.
    pub fn take<T>(&mut self, path: &str, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.push(path, message)).ok()
    }

    /// Records every problem of `other`.
    pub fn extend(&mut self, other: ConfigError) {
        self.problems.extend(other.problems);
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.problems.len()
    }

    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// `value` when no problem was found, else every problem.
    ///
    /// # Errors
    ///
    /// Every problem found, when there is one.
    pub fn into_result<T>(self, value: T) -> Result<T, ConfigError> {
        if self.problems.is_empty() { Ok(value) } else { Err(self) }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.problems.len();
        write!(f, "invalid configuration ({count} problem{}):", if count == 1 { "" } else { "s" })?;
        for problem in &self.problems {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

/// One problem, at a dotted path such as `policies.api.capacity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where the problem is (empty for the whole file).
    pub path: String,
    /// What is wrong, lowercase.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}
