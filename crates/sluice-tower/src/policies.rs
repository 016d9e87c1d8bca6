//! Named policies from the YAML file the service reads, so code and configuration agree.

use serde_yaml_ng::Value;
use sluice::Limit;
use sluice::config::reader::Problems;
use sluice::config::{ConfigError, parse_policies};

/// The policies of a configuration file, by name.
///
/// Only the file's `policies:` mapping is read: a file with other sections (the service's
/// `server:` and `domains:`) is fine.
///
/// # Examples
///
/// ```
/// use sluice_tower::Policies;
///
/// let policies = Policies::from_yaml(
///     "server:\n  listen: 0.0.0.0:8080\npolicies:\n  per_second:\n    algorithm: fixed_window\n    limit: 10\n    window: 1s\n",
/// )?;
/// let per_second = policies.limit("per_second")?;
/// assert_eq!(per_second.name(), "per_second");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policies {
    limits: Vec<Limit>,
}

impl Policies {
    /// Reads the `policies:` mapping of a YAML document.
    ///
    /// # Errors
    ///
    /// Every problem found (each with its path), or a document without `policies:`.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let value: Value = serde_yaml_ng::from_str(text).map_err(|error| ConfigError::single("", error.to_string()))?;
        let Some(section) = value.get("policies").and_then(Value::as_mapping) else {
            return Err(ConfigError::single("policies", "must be a mapping of policy names to policies"));
        };
        let mut problems = Problems::default();
        let limits = parse_policies(section, &mut problems);
        problems.into_result(Policies { limits })
    }

    /// Every policy, in file order.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The policy called `name`.
    ///
    /// # Errors
    ///
    /// When there is none.
    pub fn limit(&self, name: &str) -> Result<Limit, UnknownPolicy> {
        self.limits.iter().find(|limit| limit.name() == name).cloned().ok_or_else(|| UnknownPolicy(name.to_owned()))
    }

    /// The policies called `names`, for [`RateLimiterBuilder::limits`](sluice::RateLimiterBuilder::limits).
    ///
    /// # Errors
    ///
    /// When one of them does not exist.
    pub fn all_of<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<Vec<Limit>, UnknownPolicy> {
        names.into_iter().map(|name| self.limit(name)).collect()
    }
}

/// A policy name the configuration does not define.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy `{0}`")]
pub struct UnknownPolicy(pub String);
