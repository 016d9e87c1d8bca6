//! Named policies from the YAML file the service reads, so code and configuration agree.

use serde_yaml_ng::Value;
use sluice_core::Limit;
use sluice_core::config::reader::Problems;
use sluice_core::config::{ConfigError, parse_policies_with_shadow_mode};

/// The policies of a configuration file, by name.
///
/// Only the file's `policies:` mapping is read: a file with other sections (the service's
/// `server:` and `domains:`) is fine. A policy in shadow mode (`shadow_mode: true`, counted
/// by `sluice serve` but never enforced) is read and checked too, but not handed out: the
/// layer has no shadow mode, and would enforce it.
///
/// # Examples
///
/// ```
/// use sluice_tower::Policies;
///
/// let policies = Policies::from_yaml(
///     "server:\n  http: 0.0.0.0:8080\npolicies:\n  per_second:\n    algorithm: fixed_window\n    limit: 10\n    window: 1s\n",
/// )?;
/// let per_second = policies.limit("per_second")?;
/// assert_eq!(per_second.name(), "per_second");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policies {
    /// The policies not in shadow mode.
    limits: Vec<Limit>,
    /// The names of those in shadow mode.
    shadowed: Vec<String>,
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
        let (mut limits, mut shadowed) = (Vec::new(), Vec::new());
        for (limit, shadow) in parse_policies_with_shadow_mode(section, &mut problems) {
            match shadow {
                true => shadowed.push(limit.name().to_owned()),
                false => limits.push(limit),
            }
        }
        problems.into_result(Policies { limits, shadowed })
    }

    /// Every policy not in shadow mode, in file order.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The policy called `name`.
    ///
    /// # Errors
    ///
    /// When there is none, or it is in shadow mode.
    pub fn limit(&self, name: &str) -> Result<Limit, PolicyLookupError> {
        if self.shadowed.iter().any(|shadowed| shadowed == name) {
            return Err(PolicyLookupError::ShadowMode(name.to_owned()));
        }
        let found = self.limits.iter().find(|limit| limit.name() == name).cloned();
        found.ok_or_else(|| PolicyLookupError::Unknown(name.to_owned()))
    }

    /// The policies called `names`, for [`RateLimiterBuilder::limits`](sluice_core::RateLimiterBuilder::limits).
    ///
    /// # Errors
    ///
    /// When one of them does not exist, or is in shadow mode.
    pub fn all_of<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<Vec<Limit>, PolicyLookupError> {
        names.into_iter().map(|name| self.limit(name)).collect()
    }
}

/// A policy asked of [`Policies`] that the layer cannot have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyLookupError {
    /// The configuration does not define it.
    #[error("unknown policy `{0}`")]
    Unknown(String),
    /// It is in shadow mode, which the layer does not have.
    #[error(
        "policy `{0}` is in shadow mode (`shadow_mode: true`), which the layer does not have: it would be enforced; take it out of shadow mode to use it here"
    )]
    ShadowMode(String),
}
