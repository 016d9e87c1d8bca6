//! What the store holds and did for each policy, read from it at each scrape: the exact
//! number of states the embedded store holds (`policy_states`, beside the estimate of
//! distinct keys), and what this process's quota leases did on a shared store
//! (`lease_policy_*`, docs/leases.md). Neither touches the check path.
//!
//! Each is a fixed set of series per policy name, made when a configuration first names
//! the policy (as its check counters are), and only for the store that has the figure:
//! states on the embedded store (Redis holds keys with a TTL and is not walked), lease
//! figures with leases on. docs/service.md ("Series budget") counts them.

use super::leases::raise;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_core::lease::LimitLeaseFigures;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyUnitLabels {
    policy: String,
    /// `leased`, `returned` or `expired`.
    kind: &'static str,
}

/// Which per-policy store series the service exports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StoreSeries {
    /// `policy_states`: the embedded store is in use.
    pub(crate) states: bool,
    /// `lease_policy_*`: a shared store with leases on.
    pub(crate) leases: bool,
}

/// The kinds of `lease_policy_units`, in the order they are made.
const UNIT_KINDS: [&str; 3] = ["leased", "returned", "expired"];

/// The per-policy store series.
#[derive(Debug, Default)]
pub(crate) struct PolicyStoreMetrics {
    series: StoreSeries,
    /// The policies with series, by name.
    policies: Mutex<BTreeSet<String>>,
    states: Family<PolicyLabels, Gauge>,
    lease_checks: Family<PolicyLabels, Counter>,
    lease_units: Family<PolicyUnitLabels, Counter>,
    lease_held: Family<PolicyLabels, Gauge>,
}

impl PolicyStoreMetrics {
    /// The series `series` asks for, none made yet.
    pub(crate) fn new(series: StoreSeries) -> PolicyStoreMetrics {
        PolicyStoreMetrics { series, ..PolicyStoreMetrics::default() }
    }

    /// Registers the families in `registry`, for the store in use only.
    pub(crate) fn register(&self, registry: &mut Registry) {
        if self.series.states {
            let help = "States the embedded store holds for a policy now, exactly (one per key not yet back to \
                        fresh); not exported on Redis";
            registry.register("policy_states", help, self.states.clone());
        }
        if self.series.leases {
            let help = "Checks of a policy answered from leased units: store calls saved";
            registry.register("lease_policy_checks", help, self.lease_checks.clone());
            let help = "A policy's leased units: leased (debited by the store to spend here), returned (given back \
                        unspent), expired (given up unspent); a lease for several policies counts under each";
            registry.register("lease_policy_units", help, self.lease_units.clone());
            let help = "A policy's leased units held now, not yet spent";
            registry.register("lease_policy_units_held", help, self.lease_held.clone());
        }
    }

    /// Makes `policy`'s series, at 0, the first time it is named.
    pub(crate) fn add(&self, policy: &str) {
        if self.series == StoreSeries::default() || !self.policies.lock().insert(policy.to_owned()) {
            return;
        }
        let labels = PolicyLabels { policy: policy.to_owned() };
        if self.series.states {
            let _ = self.states.get_or_create(&labels);
        }
        if self.series.leases {
            let _ = self.lease_checks.get_or_create(&labels);
            let _ = self.lease_held.get_or_create(&labels);
            for kind in UNIT_KINDS {
                let _ = self.lease_units.get_or_create(&PolicyUnitLabels { policy: policy.to_owned(), kind });
            }
        }
    }

    /// Sets the series to what the store says: `states` by limit name (the embedded
    /// store's), `leases` by limit name. A name with no series of its own (a limit no
    /// configuration names as a policy) is left out, so the series stay those made.
    pub(crate) fn update(&self, states: Option<&BTreeMap<Arc<str>, usize>>, leases: &[LimitLeaseFigures]) {
        let policies = self.policies.lock();
        for policy in policies.iter().filter(|_| self.series.states) {
            let count = states.and_then(|states| states.get(policy.as_str())).copied().unwrap_or(0);
            let labels = PolicyLabels { policy: policy.clone() };
            self.states.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        for figures in leases.iter().filter(|figures| self.series.leases && policies.contains(&figures.name)) {
            let labels = PolicyLabels { policy: figures.name.clone() };
            raise(&self.lease_checks.get_or_create(&labels), figures.leased_checks);
            self.lease_held.get_or_create(&labels).set(i64::try_from(figures.units_held).unwrap_or(i64::MAX));
            let units = [figures.units_leased, figures.units_returned, figures.units_expired];
            for (kind, total) in UNIT_KINDS.into_iter().zip(units) {
                let labels = PolicyUnitLabels { policy: figures.name.clone(), kind };
                raise(&self.lease_units.get_or_create(&labels), total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `metrics`' series, as `/metrics` renders them.
    fn rendered(metrics: &PolicyStoreMetrics) -> String {
        crate::metrics::rendered_with(|registry| metrics.register(registry))
    }

    #[test]
    fn each_policy_has_five_lease_series_whatever_the_store_reports() {
        let metrics = PolicyStoreMetrics::new(StoreSeries { states: false, leases: true });
        metrics.add("api");
        let mut api = LimitLeaseFigures::default();
        api.name = "api".to_owned();
        (api.leased_checks, api.units_leased, api.units_returned, api.units_expired, api.units_held) =
            (7, 40, 5, 3, 25);
        let mut unnamed = api.clone();
        unnamed.name = "cl.throttle:".to_owned();
        metrics.update(None, &[api, unnamed]);
        let text = rendered(&metrics);
        let lines = text.lines().filter(|line| !line.starts_with('#')).count();
        assert_eq!(lines, 5, "{text}");
        assert!(text.contains("\nsluice_lease_policy_checks_total{policy=\"api\"} 7\n"), "{text}");
        assert!(text.contains("\nsluice_lease_policy_units_total{policy=\"api\",kind=\"returned\"} 5\n"), "{text}");
        assert!(text.contains("\nsluice_lease_policy_units_held{policy=\"api\"} 25\n"), "{text}");
        assert!(!text.contains("policy_states"), "no states series on a shared store: {text}");
    }
}
