//! A configuration in force, with the counters of its policies and Envoy rules resolved
//! once, so that a check counts without looking a name up in the metrics' families.

use crate::config::service_file::ServiceConfig;
use crate::envoy::{OVERRIDE_NAME, Rule, Rules};
use crate::metrics::{Metrics, PolicyCounters};
use std::collections::HashMap;

/// A configuration in force, with its counters resolved.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) config: ServiceConfig,
    /// The counters of each policy, in [`ServiceConfig::policies`] order.
    pub(super) counters: Vec<PolicyCounters>,
    rule_counters: HashMap<String, PolicyCounters>,
}

impl Loaded {
    /// Resolves the counters of every policy and Envoy rule of `config`.
    pub(crate) fn new(config: ServiceConfig, metrics: &Metrics) -> Loaded {
        let counters = config.policies().iter().map(|entry| metrics.policy(entry.limit.name())).collect();
        let rules = config.envoy().into_iter().flat_map(Rules::rules);
        let names = rules.map(Rule::name).chain(config.envoy().map(|_| OVERRIDE_NAME));
        let rule_counters: HashMap<String, PolicyCounters> =
            names.map(|name| (name.to_owned(), metrics.policy(name))).collect();
        let policies = config.policies().iter().map(|entry| entry.limit.name());
        for name in policies.chain(rule_counters.keys().map(String::as_str)) {
            metrics.add_store_series(name);
        }
        Loaded { config, counters, rule_counters }
    }

    /// The counters of the policy at `index` in [`ServiceConfig::policies`].
    pub(crate) fn counters(&self, index: usize) -> Option<&PolicyCounters> {
        self.counters.get(index)
    }

    /// The counters of an Envoy rule of this configuration.
    pub(crate) fn rule_counters(&self, rule: &Rule) -> Option<&PolicyCounters> {
        self.rule_counters.get(rule.name())
    }

    /// The counters of the checks of Envoy descriptors' own limit overrides.
    pub(super) fn override_counters(&self) -> Option<&PolicyCounters> {
        self.rule_counters.get(OVERRIDE_NAME)
    }
}
