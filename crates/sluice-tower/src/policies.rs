//! Named policies from the YAML file the service reads, so code and configuration agree.

use serde_yaml_ng::{Mapping, Value};
use sluice_core::Limit;
use sluice_core::config::{ConfigError, parse_policies};

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
    /// Every policy in file order, with whether it is in shadow mode.
    entries: Vec<(Limit, bool)>,
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
        let mut problems = ConfigError::default();
        let policies = Policies::from_section(section, &mut problems);
        problems.into_result(policies)
    }

    /// Reads the `policies:` mapping of a larger file (the service's), recording every
    /// problem in `problems`, paths starting with `policies.`: among them a `shadow_mode`
    /// other than `true` or `false`. Holds the policies that are valid.
    pub fn from_section(section: &Mapping, problems: &mut ConfigError) -> Self {
        let mut stripped = section.clone();
        let mut shadowed = Vec::new();
        for (name, body) in &mut stripped {
            // A name that is not text is reported by `parse_policies`.
            let (Some(name), Some(body)) = (name.as_str(), body.as_mapping_mut()) else { continue };
            match body.remove("shadow_mode") {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => shadowed.push(name.to_owned()),
                Some(_) => problems.push(&format!("policies.{name}.shadow_mode"), "must be true or false"),
            }
        }
        let entries: Vec<(Limit, bool)> = parse_policies(&stripped, problems)
            .into_iter()
            .map(|limit| {
                let shadow = shadowed.iter().any(|name| name == limit.name());
                (limit, shadow)
            })
            .collect();
        let limits = entries.iter().filter(|(_, shadow)| !shadow).map(|(limit, _)| limit.clone()).collect();
        Policies { limits, entries }
    }

    /// Every policy in file order, with whether it is in shadow mode (`sluice serve` counts
    /// such a policy's checks but never refuses one).
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&Limit, bool)> {
        self.entries.iter().map(|(limit, shadow)| (limit, *shadow))
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
        if self.entries.iter().any(|(limit, shadow)| *shadow && limit.name() == name) {
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
