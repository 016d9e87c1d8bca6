//! The service's configuration file: Sluice policies, Envoy domains and server settings.
//!
//! ```yaml
//! server:                # optional: the same settings as `sluice serve --help`
//!   http: 127.0.0.1:8080
//! policies:              # Sluice policies (see examples/policies.yaml)
//!   api:
//!     algorithm: token_bucket
//!     capacity: 100
//!     refill_interval: 1s
//!     shadow_mode: true  # count what would be rejected, reject nothing
//! domains: []            # Envoy rate limit domains (see docs/service.md)
//! ```
//!
//! A plain envoyproxy/ratelimit file (`domain:` and `descriptors:` at the top) loads too.

use crate::config::leases::check_leases;
use crate::config::server_section::parse_server;
use crate::config::settings::ServerSection;
use crate::config::settings::{SettingFlags, Settings};
use crate::envoy::Rules;
use serde_yaml_ng::{Mapping, Value};
use sluice_config::show;
use sluice_core::config::ConfigError;
use sluice_core::{Limit, LimitId};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The configuration served when `sluice serve` is given no file.
pub(crate) const BUILTIN: &str = include_str!("../../service.yaml");

/// A validated service configuration.
#[derive(Debug)]
pub(crate) struct ServiceConfig {
    policies: Vec<PolicyEntry>,
    by_name: HashMap<Arc<str>, usize>,
    /// The Envoy rules, when the file has domains.
    envoy: Option<Rules>,
    /// The `server:` section (empty when absent).
    pub(crate) server: ServerSection,
}

/// One named policy and whether it only reports.
#[derive(Clone, Debug)]
pub(crate) struct PolicyEntry {
    pub(crate) limit: Limit,
    /// Rejections are counted and recorded but reported as allowed.
    pub(crate) shadow: bool,
}

impl ServiceConfig {
    /// Parses and validates a configuration, reporting every problem with its path.
    pub(crate) fn parse(text: &str) -> Result<ServiceConfig, ConfigError> {
        let value: Value = serde_yaml_ng::from_str(text).map_err(|error| ConfigError::single("", error.to_string()))?;
        let Some(top) = value.as_mapping() else {
            return Err(ConfigError::single("", "must be a mapping with a `policies` or `domains` section"));
        };
        let mut problems = ConfigError::default();
        for key in top.keys() {
            if !matches!(key.as_str(), Some("policies" | "server" | "domains" | "domain" | "descriptors")) {
                problems.push(&show(key), "unknown section (policies, domains, server)");
            }
        }
        let server = parse_server(top, &mut problems);
        let policies = parse_policies(top, &mut problems);
        let envoy = parse_envoy(top, &policies, &mut problems);
        if top.get("policies").is_none() && top.get("domains").is_none() && top.get("domain").is_none() {
            problems.push("", "must have a `policies` or `domains` section");
        }
        problems.into_result(())?;
        let by_name = policies.iter().enumerate().map(|(index, entry)| (name_of(&entry.limit), index)).collect();
        let config = ServiceConfig { policies, by_name, envoy, server };
        config.leases_as_written()?;
        Ok(config)
    }

    /// Refuses leases the `server:` section turns on where they cannot work (the checks
    /// `sluice serve` makes again with its flags: [`check_leases`]).
    fn leases_as_written(&self) -> Result<(), ConfigError> {
        match Settings::resolve(&SettingFlags::default(), &self.server) {
            Ok(settings) => check_leases(&settings, self.limits())
                .map_err(|problem| ConfigError::single("server.lease_period", problem)),
            // Reported by the section's own reading.
            Err(_) => Ok(()),
        }
    }

    /// Reads and parses `path`.
    pub(crate) fn load(path: &Path) -> anyhow::Result<ServiceConfig> {
        ServiceConfig::from_file_bytes(path, &ServiceConfig::read_file(path)?)
    }

    /// The bytes of the configuration file at `path`.
    pub(crate) fn read_file(path: &Path) -> anyhow::Result<Vec<u8>> {
        std::fs::read(path)
            .map_err(|error| anyhow::anyhow!("cannot read the configuration file {}: {error}", path.display()))
    }

    /// The configuration in `bytes`, read from the file at `path` (named in messages).
    pub(crate) fn from_file_bytes(path: &Path, bytes: &[u8]) -> anyhow::Result<ServiceConfig> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{}: the configuration file is not UTF-8 text", path.display()))?;
        ServiceConfig::parse(text).map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))
    }

    /// The position of the policy called `name` in [`policies`](Self::policies).
    pub(crate) fn policy_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Every policy, in file order.
    pub(crate) fn policies(&self) -> &[PolicyEntry] {
        &self.policies
    }

    /// The Envoy rules, if the file has domains.
    pub(crate) fn envoy(&self) -> Option<&Rules> {
        self.envoy.as_ref()
    }

    /// Every limit whose state the store may hold (policies and Envoy rules).
    pub(crate) fn limits(&self) -> impl Iterator<Item = &Limit> {
        let rules = self.envoy.iter().flat_map(Rules::limits);
        self.policies.iter().map(|entry| &entry.limit).chain(rules)
    }

    /// The identities of every limit, to tell which states a reload keeps.
    pub(crate) fn limit_ids(&self) -> Vec<LimitId> {
        self.limits().map(Limit::id).collect()
    }
}

fn name_of(limit: &Limit) -> Arc<str> {
    Arc::from(limit.name())
}

/// The Envoy rules: a whole envoyproxy/ratelimit file (`domain:` at the top), or Sluice's
/// `domains:` list.
fn parse_envoy(top: &Mapping, policies: &[PolicyEntry], problems: &mut ConfigError) -> Option<Rules> {
    let limits: Vec<Limit> = policies.iter().map(|entry| entry.limit.clone()).collect();
    let parsed = if top.contains_key("domain") || top.contains_key("descriptors") {
        let mut envoy_part = top.clone();
        envoy_part.remove("server");
        Rules::from_yaml(&Value::Mapping(envoy_part), &limits)
    } else if let Some(domains) = top.get("domains") {
        Rules::from_domains(domains, &limits)
    } else {
        return None;
    };
    parsed.map_err(|error| problems.extend(error)).ok()
}

/// The `policies` section, each policy with its `shadow_mode`.
fn parse_policies(top: &Mapping, problems: &mut ConfigError) -> Vec<PolicyEntry> {
    let Some(section) = top.get("policies") else {
        return Vec::new();
    };
    let Some(section) = section.as_mapping() else {
        problems.push("policies", "must be a mapping of policy names to policies");
        return Vec::new();
    };
    let policies = sluice_tower::Policies::from_section(section, problems);
    policies.entries().map(|(limit, shadow)| PolicyEntry { limit: limit.clone(), shadow }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_configuration_is_valid() {
        let config = ServiceConfig::parse(BUILTIN).unwrap();
        assert!(config.policy_index("api").is_some());
    }

    #[test]
    fn shadow_mode_is_read_per_policy() {
        let text = "policies:\n  a: {algorithm: fixed_window, limit: 1, window: 1s, shadow_mode: true}\n  b: {algorithm: fixed_window, limit: 1, window: 1s}\n";
        let config = ServiceConfig::parse(text).unwrap();
        assert!(config.policies()[config.policy_index("a").unwrap()].shadow);
        assert!(!config.policies()[config.policy_index("b").unwrap()].shadow);
    }

    proptest::proptest! {
        /// Whatever the file holds, loading it answers (a configuration or problems).
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = ServiceConfig::parse(&text);
        }

        /// Files made of the right words in the wrong places never panic either.
        #[test]
        fn shuffled_sections_never_panic(
            words in proptest::collection::vec(proptest::sample::select(vec![
                "policies:", "domains:", "server:", "domain: d", "descriptors:", "- key: k", "  a:",
                "    algorithm: sliding_log", "    limit: 3", "    window: 1s", "    shadow_mode: true",
                "  - domain: e", "    rate_limit: {unit: second, requests_per_unit: 1}", "  http: x", "  - [1, 2]",
            ]), 0..12)
        ) {
            let _ = ServiceConfig::parse(&words.join("\n"));
        }
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let text = "server: {htp: x}\nextra: 1\npolicies:\n  a: {algorithm: fixed_window, limit: 0, window: 1s, shadow_mode: 3}\n";
        let message = ServiceConfig::parse(text).unwrap_err().to_string();
        for needle in [
            "server.htp: unknown setting (did you mean `http`?)",
            "extra: unknown section",
            "policies.a.shadow_mode: must be true or false",
            "policies.a.limit",
        ] {
            assert!(message.contains(needle), "{needle:?} missing from {message}");
        }
    }
}
