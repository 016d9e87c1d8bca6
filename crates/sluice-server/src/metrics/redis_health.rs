//! Redis's health as the store sees it: whether it answers, its outages, and its errors by
//! cause, read from [`RedisStore::health`](sluice_redis::RedisStore::health) when the
//! metrics are rendered.

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_redis::{Cause, RedisHealth};
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    cause: &'static str,
}

/// A Redis Cluster master: its address and the slots it serves (`0-5460`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
    slots: String,
}

/// The metrics of Redis's health.
#[derive(Debug, Default)]
pub(crate) struct RedisHealthMetrics {
    available: Gauge,
    outage_seconds: Gauge<f64, AtomicU64>,
    outages: Counter,
    errors: Family<CauseLabels, Counter>,
    node_available: Family<NodeLabels, Gauge>,
    node_outage_seconds: Family<NodeLabels, Gauge<f64, AtomicU64>>,
    refused: Gauge,
    refusals: Counter,
    /// Serialises [`update`](Self::update): each counter is raised to the store's total.
    updating: Mutex<()>,
}

impl RedisHealthMetrics {
    /// Registers every metric in `registry`, the counters at 0.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "store_available",
            "1 while the store answers (Redis: on every connection and every Cluster master), 0 during an outage",
            self.available.clone(),
        );
        registry.register(
            "store_outage_seconds",
            "How long the current Redis outage has lasted (0: none)",
            self.outage_seconds.clone(),
        );
        registry.register("store_outages", "Redis outages seen", self.outages.clone());
        registry.register("redis_errors", "Checks and probes Redis failed, by cause", self.errors.clone());
        registry.register(
            "store_refused",
            "1 while Redis refuses Sluice's configuration (password, ACL, certificate): not ready",
            self.refused.clone(),
        );
        registry.register(
            "redis_refusals",
            "Checks and probes Redis refused for the configuration (also counted in redis_errors)",
            self.refusals.clone(),
        );
        for cause in Cause::ALL {
            let _ = self.errors.get_or_create(&CauseLabels { cause: cause.name() });
        }
        registry.register(
            "redis_node_available",
            "Redis Cluster: 1 while the master answers for its slots, 0 while its keys are answered by the failure mode",
            self.node_available.clone(),
        );
        registry.register(
            "redis_node_outage_seconds",
            "Redis Cluster: how long the master's current outage has lasted (0: none)",
            self.node_outage_seconds.clone(),
        );
    }

    /// Sets the metrics to `health`.
    pub(crate) fn update(&self, health: &RedisHealth) {
        let _one_at_a_time = self.updating.lock();
        self.available.set(i64::from(health.is_available()));
        self.outage_seconds.set(health.outage.map_or(0.0, |outage| outage.as_secs_f64()));
        raise(&self.outages, health.outages);
        self.refused.set(i64::from(health.refused));
        raise(&self.refusals, health.refusals);
        for (cause, total) in Cause::ALL.into_iter().zip(health.errors) {
            raise(&self.errors.get_or_create(&CauseLabels { cause: cause.name() }), total);
        }
        // Only the masters known now: one whose slots went to a promoted replica goes.
        self.node_available.clear();
        self.node_outage_seconds.clear();
        for node in &health.nodes {
            let labels = NodeLabels { node: node.address.clone(), slots: node.slot_ranges() };
            self.node_available.get_or_create(&labels).set(i64::from(node.outage.is_none()));
            self.node_outage_seconds.get_or_create(&labels).set(node.outage.map_or(0.0, |outage| outage.as_secs_f64()));
        }
    }
}

/// Raises `counter` to `total`, a count kept elsewhere.
fn raise(counter: &Counter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}
