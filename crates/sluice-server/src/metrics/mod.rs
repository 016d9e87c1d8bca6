//! Prometheus metrics, rendered as text at `/metrics`.
//!
//! Per-policy counters are looked up once per configuration ([`PolicyCounters`]), so a
//! check touches only atomics.

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_core::lease::{LeaseFigures, LimitLeaseFigures, NoLease};
use sluice_core::{Source, Timestamp};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

mod distinct;
mod figure_series;
mod fill;
mod latency;
mod leases;
mod per_second;
mod policy_counters;
mod policy_figures;
mod policy_store;
mod redis_health;
mod rlqs;
mod rlqs_buckets;
mod space_saving;
#[cfg(test)]
mod space_saving_props;
mod throttle;
mod top_keys;

use figure_series::FigureSeries;
use latency::LatencyHistogram;
use leases::LeaseMetrics;
pub(crate) use per_second::{PerSecond, Seconds};
use policy_counters::CheckLabels;
pub(crate) use policy_counters::{PolicyCounters, RlqsChecks};
pub(crate) use policy_figures::{DEFAULT_TOP_KEYS, FigureSettings, MAX_TOP_KEYS, PolicyFigures, Seen, measured};
use policy_store::PolicyStoreMetrics;
pub(crate) use policy_store::StoreSeries;
use redis_health::RedisHealthMetrics;
pub(crate) use rlqs::{RlqsCounts, RlqsMetrics};
pub(crate) use rlqs_buckets::{BucketCensus, LISTED_BUCKETS, RlqsBucket};
use sluice_redis::RedisHealth;
pub(crate) use top_keys::{By, EPOCH_MICROS, EpochTop};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// Every metric the service exports.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    checks: Family<CheckLabels, Counter>,
    without_store: Family<SourceLabels, Counter>,
    store_latency: LatencyHistogram,
    store_errors: Family<KindLabels, Counter>,
    reloads: Family<ResultLabels, Counter>,
    snapshots: Family<ResultLabels, Counter>,
    keys: Gauge,
    /// One series once a snapshot was written, none before (or with snapshots off).
    snapshot_age: Family<NoLabels, Gauge<f64, AtomicU64>>,
    per_second: PerSecond,
    redis: RedisHealthMetrics,
    leases: LeaseMetrics,
    /// Each policy's states and lease figures, for the store in use.
    store: PolicyStoreMetrics,
    rlqs: RlqsMetrics,
    throttle: throttle::ThrottleCounters,
    figures: FigureSeries,
    /// Off only for the benchmark's baseline: no policy gets figures.
    figures_on: bool,
    /// Held through a scrape, so that two scrapes do not interleave the ranks' series.
    rendering: parking_lot::Mutex<()>,
}

/// The failure modes that decide without the store, as the metrics name them.
pub(crate) const WITHOUT_STORE: [&str; 3] = ["failed_open", "failed_closed", "fallback"];

impl Metrics {
    /// Creates and registers every metric, with the per-policy figures set up by `figures`.
    pub(crate) fn new(figures: FigureSettings) -> Metrics {
        let mut registry = Registry::with_prefix("sluice");
        let figures = FigureSeries::new(figures, &mut registry);
        let metrics = Metrics {
            registry,
            checks: Family::default(),
            without_store: Family::default(),
            store_latency: LatencyHistogram::default(),
            store_errors: Family::default(),
            reloads: Family::default(),
            snapshots: Family::default(),
            keys: Gauge::default(),
            snapshot_age: Family::default(),
            redis: RedisHealthMetrics::default(),
            leases: LeaseMetrics::default(),
            store: PolicyStoreMetrics::default(),
            per_second: PerSecond::default(),
            rlqs: RlqsMetrics::default(),
            throttle: throttle::ThrottleCounters::default(),
            figures,
            figures_on: true,
            rendering: parking_lot::Mutex::default(),
        };
        metrics.register()
    }

    /// The same metrics, but no policy gets figures: the benchmark's baseline.
    pub(crate) fn without_figures(self) -> Metrics {
        Metrics { figures_on: false, ..self }
    }

    /// The same metrics, with the per-policy series of the store in use (`series`):
    /// each policy's states, or what leases did for it. Before any policy is named.
    pub(crate) fn with_store_series(mut self, series: StoreSeries) -> Metrics {
        self.store = PolicyStoreMetrics::new(series);
        self.store.register(&mut self.registry);
        self
    }

    /// Makes the store's series of `policy` (a policy, Envoy rule or the overrides), at
    /// 0, the first time it is named.
    pub(crate) fn add_store_series(&self, policy: &str) {
        self.store.add(policy);
    }

    /// The figures of `policy`, if a configuration ever named it.
    pub(crate) fn figures_of(&self, policy: &str) -> Option<Arc<PolicyFigures>> {
        self.figures.find(policy)
    }

    fn register(mut self) -> Metrics {
        let registry = &mut self.registry;
        registry.register(
            "checks",
            "Checked requests by policy and outcome (allowed, rejected, shadow_rejected)",
            self.checks.clone(),
        );
        registry.register(
            "decisions_without_store",
            "Decisions made while the store could not answer, by failure mode",
            self.without_store.clone(),
        );
        registry.register("store_latency_seconds", "Time the store took to decide", self.store_latency.clone());
        registry.register("store_errors", "Checks the store could not decide, by kind", self.store_errors.clone());
        registry.register("config_reloads", "Configuration reloads by result (ok, failed)", self.reloads.clone());
        registry.register(
            "snapshots",
            "Snapshots of the in-memory store by result (ok, failed)",
            self.snapshots.clone(),
        );
        registry.register("keys", "States held by the in-memory store (one per policy and key)", self.keys.clone());
        registry.register(
            "snapshot_age_seconds",
            "Seconds since the last snapshot was written (no series before the first)",
            self.snapshot_age.clone(),
        );
        // Every series exists from the start, at 0, so rates and alerts see the first event.
        for result in ["ok", "failed"] {
            let _ = self.reloads.get_or_create(&ResultLabels { result });
            let _ = self.snapshots.get_or_create(&ResultLabels { result });
        }
        for source in WITHOUT_STORE {
            let _ = self.without_store.get_or_create(&SourceLabels { source });
        }
        for kind in ["unavailable", "malformed", "refused", "full"] {
            let _ = self.store_errors.get_or_create(&KindLabels { kind });
        }
        self.redis.register(registry);
        self.leases.register(registry);
        self.rlqs.register(registry);
        self
    }

    /// The RLQS metrics.
    pub(crate) fn rlqs(&self) -> &RlqsMetrics {
        &self.rlqs
    }

    /// The counters of `policy`.
    pub(crate) fn policy(&self, policy: &str) -> PolicyCounters {
        PolicyCounters::resolve(&self.checks, policy, self.figures_on.then(|| self.figures.of(policy)))
    }

    /// The counters of the requests Envoys report deciding on RLQS assignments of
    /// `policy` (`source="rlqs"`), resolved once per bucket rather than per report.
    pub(crate) fn rlqs_checks(&self, policy: &str) -> RlqsChecks {
        RlqsChecks::resolve(&self.checks, policy)
    }

    /// The counters of `CL.THROTTLE` calls with `max_burst`, `count` and `period`
    /// (bounded in number: `metrics/throttle.rs`).
    pub(crate) fn throttle(&self, parameters: (i64, i64, i64)) -> PolicyCounters {
        self.throttle.of(self, parameters)
    }

    /// Counts a decision by its source, when the store did not make it: the failure mode
    /// answered, so the store was unavailable for it (also counted in `store_errors`).
    pub(crate) fn count_source(&self, source: Source) {
        let name = match source {
            Source::FailedOpen => "failed_open",
            Source::FailedClosed => "failed_closed",
            Source::Fallback => "fallback",
            Source::Store | Source::Cache | Source::Lease => return,
        };
        self.without_store.get_or_create(&SourceLabels { source: name }).inc();
        self.store_errors.get_or_create(&KindLabels { kind: "unavailable" }).inc();
    }

    /// Decisions made without the store so far, in [`WITHOUT_STORE`] order.
    pub(crate) fn without_store(&self) -> [u64; 3] {
        WITHOUT_STORE.map(|source| self.without_store.get_or_create(&SourceLabels { source }).get())
    }

    /// Checks allowed and rejected per second over the last minutes (for the dashboard).
    pub(crate) fn per_second(&self) -> &PerSecond {
        &self.per_second
    }

    /// Records how long the store took.
    pub(crate) fn observe_store(&self, elapsed: Duration) {
        self.store_latency.observe(elapsed);
    }

    /// Counts a store error.
    pub(crate) fn count_store_error(&self, error: &sluice_core::StoreError) {
        let kind = match error {
            sluice_core::StoreError::Unavailable(_) => "unavailable",
            sluice_core::StoreError::Malformed(_) => "malformed",
            sluice_core::StoreError::Refused(_) => "refused",
            sluice_core::StoreError::Full { .. } => "full",
            _ => "other",
        };
        self.store_errors.get_or_create(&KindLabels { kind }).inc();
    }

    /// Counts a configuration reload.
    pub(crate) fn count_reload(&self, ok: bool) {
        self.reloads.get_or_create(&ResultLabels { result: if ok { "ok" } else { "failed" } }).inc();
    }

    /// Counts a snapshot.
    pub(crate) fn count_snapshot(&self, ok: bool) {
        self.snapshots.get_or_create(&ResultLabels { result: if ok { "ok" } else { "failed" } }).inc();
    }

    /// Renders every metric, with the gauges read now.
    pub(crate) fn render(&self, gauges: Gauges) -> String {
        let Gauges { keys, states, redis, leases, lease_policies, never_leased, snapshot_age, now } = gauges;
        let _rendering = self.rendering.lock();
        self.figures.update(now);
        self.keys.set(keys.map_or(0, |keys| i64::try_from(keys).unwrap_or(i64::MAX)));
        self.redis.update(&redis.unwrap_or_default());
        self.leases.update(&leases.unwrap_or_default(), never_leased);
        self.store.update(states.as_ref(), &lease_policies);
        match snapshot_age {
            Some(age) => _ = self.snapshot_age.get_or_create(&NoLabels).set(age.as_secs_f64()),
            None => self.snapshot_age.clear(),
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What `/metrics` reads at each scrape, from the store and the service.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    /// The states the embedded store holds; `None` on Redis.
    pub(crate) keys: Option<usize>,
    /// The states the embedded store holds, by limit name; `None` on Redis.
    pub(crate) states: Option<BTreeMap<Arc<str>, usize>>,
    /// Redis's health; `None` on the embedded store.
    pub(crate) redis: Option<RedisHealth>,
    /// What the leases did; `None` without leases.
    pub(crate) leases: Option<LeaseFigures>,
    /// What the leases did, by limit name (empty without leases).
    pub(crate) lease_policies: Vec<LimitLeaseFigures>,
    /// The limits in force that never get a lease, by name, with why (none with leases off).
    pub(crate) never_leased: Vec<(String, NoLease)>,
    /// How long ago the last snapshot was written; `None` before the first.
    pub(crate) snapshot_age: Option<Duration>,
    /// The time of the scrape, on the decisions' clock (the top keys' epochs).
    pub(crate) now: Timestamp,
}

/// The label set of a series that has none: a family of it holds one series or none.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct NoLabels;

impl EncodeLabelSet for NoLabels {
    fn encode(&self, _: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        Ok(())
    }
}

/// The text `/metrics` renders for the series `register` registers, under Sluice's prefix.
#[cfg(test)]
pub(crate) fn rendered_with(register: impl FnOnce(&mut Registry)) -> String {
    let mut registry = Registry::with_prefix("sluice");
    register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}
