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

mod policy;

pub use sluice_config::{ConfigError, Problem, parse_duration};

use crate::Limit;
use serde_yaml_ng::{Mapping, Value};
use sluice_config::{Fields, show};

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
        let mut problems = ConfigError::default();
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

fn parse_top(top: &Mapping, problems: &mut ConfigError) -> Vec<Limit> {
    let fields = Fields::new(top, "");
    fields.finish(&["policies"], &[], problems);
    let policies = fields.require("policies", problems, |value| {
        value.as_mapping().cloned().ok_or_else(|| "must be a mapping of policy names to policies".to_owned())
    });
    policies.map(|policies| parse_policies(&policies, problems)).unwrap_or_default()
}

/// Parses a `policies` section of a file with more sections (the service's), recording every
/// problem in `problems` (paths start with `policies.`) and returning the limits that are valid.
pub fn parse_policies(policies: &Mapping, problems: &mut ConfigError) -> Vec<Limit> {
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
