//! Named policies from a YAML file, validated all at once.
//!
//! ```yaml
//! policies:
//!   login:
//!     algorithm: sliding_log
//!     limit: 5
//!     window: 15m
//!     variant: attempts
//! ```
//!
//! Loading reports every problem in one go, each with its path
//! (`policies.api.capacity: must be a whole number ≥ 1, got 0`). Unknown fields are errors.

mod duration;
mod policy;
pub mod reader;

pub use duration::parse_duration;

use crate::Limit;
use reader::{Fields, Problems, show};
use serde_yaml_ng::{Mapping, Value};
use std::fmt;

/// A validated configuration: the named limits, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    limits: Vec<Limit>,
}

impl Config {
    /// Parses and validates a YAML configuration.
    ///
    /// # Errors
    ///
    /// Every problem found, each naming the policy and field.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = sluice_core::Config::from_yaml("policies:\n  api:\n    algorithm: token_bucket\n    capacity: 0\n    refill_interval: 1s\n    burst: 3\n");
    /// let message = config.unwrap_err().to_string();
    /// assert!(message.contains("policies.api.capacity: must be a whole number ≥ 1, got 0"));
    /// assert!(message.contains("policies.api.burst: unknown field"));
    /// ```
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let value: Value = serde_yaml_ng::from_str(text).map_err(|error| ConfigError::single("", error.to_string()))?;
        let mut problems = Problems::default();
        let limits = match value.as_mapping() {
            Some(top) => parse_top(top, &mut problems),
            None => {
                problems.push("", "must be a mapping with a `policies` section");
                Vec::new()
            }
        };
        problems.into_result(Config { limits })
    }

    /// The limits, in file order.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The limit called `name`.
    pub fn limit(&self, name: &str) -> Option<&Limit> {
        self.limits.iter().find(|limit| limit.name() == name)
    }
}

fn parse_top(top: &Mapping, problems: &mut Problems) -> Vec<Limit> {
    let fields = Fields::new(top, "");
    fields.finish(&["policies"], &[], problems);
    let policies = fields.require("policies", problems, |value| {
        value.as_mapping().cloned().ok_or_else(|| "must be a mapping of policy names to policies".to_owned())
    });
    policies.map(|policies| parse_policies(&policies, problems)).unwrap_or_default()
}

/// Parses the `policies` section of the service's file, where a policy may also say
/// `shadow_mode: true` (counted, never enforced): each limit with whether it is in shadow
/// mode, recording every problem (a `shadow_mode` other than `true` or `false` among them).
pub fn parse_policies_with_shadow_mode(policies: &Mapping, problems: &mut Problems) -> Vec<(Limit, bool)> {
    let mut stripped = policies.clone();
    let mut shadowed = Vec::new();
    for (name, body) in &mut stripped {
        let Some(body) = body.as_mapping_mut() else { continue };
        match body.remove("shadow_mode") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => shadowed.push(show(name)),
            Some(_) => problems.push(&format!("policies.{}.shadow_mode", show(name)), "must be true or false"),
        }
    }
    let limits = parse_policies(&stripped, problems);
    limits
        .into_iter()
        .map(|limit| {
            let shadow = shadowed.iter().any(|name| name == limit.name());
            (limit, shadow)
        })
        .collect()
}

/// Parses a `policies` section, recording every problem; shared with configuration files
/// that have more sections (the service's).
pub fn parse_policies(policies: &Mapping, problems: &mut Problems) -> Vec<Limit> {
    if policies.is_empty() {
        problems.push("policies", "must define at least one policy");
    }
    let mut limits = Vec::new();
    for (name, body) in policies {
        let Some(name) = name.as_str().filter(|name| valid_name(name)) else {
            let message = "policy names must be 1 to 128 letters, digits, `_`, `-` or `.`";
            problems.push(&format!("policies.{}", show(name)), message);
            continue;
        };
        let path = format!("policies.{name}");
        let Some(body) = body.as_mapping() else {
            problems.push(&path, "must be a mapping with an `algorithm` field");
            continue;
        };
        if let Some(policy) = policy::parse_policy(body, &path, problems) {
            limits.push(Limit::new(name, policy));
        }
    }
    limits
}

fn valid_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    (1..=128).contains(&name.len()) && name.chars().all(allowed)
}

/// Everything wrong with a configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Each problem, in the order found.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// A configuration with one problem, at `path` (empty for the whole file).
    pub fn single(path: &str, message: impl Into<String>) -> Self {
        ConfigError { problems: vec![Problem { path: path.to_owned(), message: message.into() }] }
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
