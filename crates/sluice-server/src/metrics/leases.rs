//! What this process's quota leases did (docs/leases.md), read from the store's
//! [`LeaseFigures`] when the metrics are rendered.

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_core::lease::{LeaseFigures, NoLease};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NeverLeasedLabels {
    policy: String,
    /// [`NoLease::label`]: `small_quota` or `inexact`.
    reason: &'static str,
}

/// The lease metrics.
#[derive(Debug, Default)]
pub(crate) struct LeaseMetrics {
    leased_checks: Counter,
    store_calls: Counter,
    cache_answers: Counter,
    units: Family<UnitLabels, Counter>,
    held: Gauge,
    never_leased: Family<NeverLeasedLabels, Gauge>,
    /// Serialises [`update`](Self::update) (each counter is raised to the store's total),
    /// and holds the `never_leased` series set last: they change only with them.
    updating: Mutex<Vec<(String, NoLease)>>,
}

impl LeaseMetrics {
    /// Registers every metric in `registry`, at 0.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "lease_checks",
            "Checks answered from leased units, without the store",
            self.leased_checks.clone(),
        );
        registry.register(
            "lease_store_calls",
            "Checks that went to the shared store (with or without a lease request); its blocked-key cache's \
             answers are counted apart (lease_cache_answers)",
            self.store_calls.clone(),
        );
        registry.register(
            "lease_cache_answers",
            "Checks not covered by leases that the store's blocked-key cache answered, without a call to Redis",
            self.cache_answers.clone(),
        );
        registry.register(
            "lease_units",
            "Leased units: leased (debited by the store to spend here), returned (given back unspent), \
             expired (given up unspent when their window or bucket ended)",
            self.units.clone(),
        );
        registry.register("lease_units_held", "Leased units held now, not yet spent", self.held.clone());
        registry.register(
            "lease_never_leased",
            "1 for each policy in force that never gets a lease, by reason: small_quota (its whole quota is 4 or \
             less, and a lease takes at most a quarter of what remains), inexact (a lease would not be exact)",
            self.never_leased.clone(),
        );
        for kind in ["leased", "returned", "expired"] {
            let _ = self.units.get_or_create(&UnitLabels { kind });
        }
    }

    /// Sets the metrics to `figures`, and the policies that never get a lease to
    /// `never_leased`.
    pub(crate) fn update(&self, figures: &LeaseFigures, never_leased: Vec<(String, NoLease)>) {
        let mut last_never_leased = self.updating.lock();
        raise(&self.leased_checks, figures.leased_checks);
        raise(&self.store_calls, figures.store_calls);
        raise(&self.cache_answers, figures.cache_answers);
        raise(&self.units.get_or_create(&UnitLabels { kind: "leased" }), figures.units_leased);
        raise(&self.units.get_or_create(&UnitLabels { kind: "expired" }), figures.units_expired);
        raise(&self.units.get_or_create(&UnitLabels { kind: "returned" }), figures.units_returned);
        self.held.set(i64::try_from(figures.units_held).unwrap_or(i64::MAX));
        if *last_never_leased != never_leased {
            self.never_leased.clear();
            for (policy, reason) in &never_leased {
                let labels = NeverLeasedLabels { policy: policy.clone(), reason: reason.label() };
                self.never_leased.get_or_create(&labels).set(1);
            }
            *last_never_leased = never_leased;
        }
    }
}

/// Raises `counter` to `total`, a count kept elsewhere.
pub(super) fn raise(counter: &Counter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `metrics`' series, as `/metrics` renders them.
    fn rendered(metrics: &LeaseMetrics) -> String {
        crate::metrics::rendered_with(|registry| metrics.register(registry))
    }

    #[test]
    fn cache_answers_are_counted_apart_from_store_calls() {
        let metrics = LeaseMetrics::default();
        let mut figures = LeaseFigures::default();
        figures.store_calls = 86;
        figures.cache_answers = 388_501;
        metrics.update(&figures, Vec::new());
        let text = rendered(&metrics);
        assert!(text.contains("\nsluice_lease_store_calls_total 86\n"), "{text}");
        assert!(text.contains("\nsluice_lease_cache_answers_total 388501\n"), "{text}");
    }

    #[test]
    fn each_policy_that_never_gets_a_lease_is_one_series_until_the_configuration_changes() {
        let metrics = LeaseMetrics::default();
        let small = |quota| NoLease::SmallQuota { quota };
        let figures = LeaseFigures::default();
        metrics.update(&figures, vec![("tiny".to_owned(), small(4)), ("single".to_owned(), small(1))]);
        let text = rendered(&metrics);
        assert!(text.contains("\nsluice_lease_never_leased{policy=\"tiny\",reason=\"small_quota\"} 1\n"), "{text}");
        assert!(text.contains("\nsluice_lease_never_leased{policy=\"single\",reason=\"small_quota\"} 1\n"), "{text}");
        // A reload that leaves one of them: the other's series is gone.
        metrics.update(&figures, vec![("single".to_owned(), small(1))]);
        let text = rendered(&metrics);
        assert!(!text.contains("policy=\"tiny\""), "{text}");
        assert!(text.contains("\nsluice_lease_never_leased{policy=\"single\",reason=\"small_quota\"} 1\n"), "{text}");
    }
}
