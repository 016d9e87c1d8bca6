//! The RLQS metrics: streams and buckets held now, and counts of reports, assignments and
//! abandons.

use crate::metrics::rlqs_buckets::{BucketCensus, ListedBuckets};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    answer: &'static str,
}

/// What Envoys holding limited buckets were last told, as the metrics name it.
pub(crate) const ANSWERS: [&str; 3] = ["share", "refusal", "none"];

/// Why buckets are abandoned, as the metrics name them.
pub(crate) const ABANDON_REASONS: [&str; 3] = ["stale", "reload", "shutdown"];

/// The RLQS metrics.
#[derive(Clone, Debug, Default)]
pub(crate) struct RlqsMetrics {
    streams: Gauge,
    buckets: Gauge,
    reports: Counter,
    assignments: Counter,
    tokens: Counter,
    refusals: Counter,
    abandons: Family<ReasonLabels, Counter>,
    holders: Family<AnswerLabels, Gauge>,
    /// The buckets the last census listed (not a metric: their keys name callers).
    listed: Arc<ListedBuckets>,
}

/// The RLQS counts now (the `sluice_rlqs_*` metrics), as the dashboard shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct RlqsCounts {
    /// Streams open (one per Envoy and filter).
    pub(crate) streams: u64,
    /// Buckets held, over every stream.
    pub(crate) buckets: u64,
    /// Bucket usages reported.
    pub(crate) reports: u64,
    /// Assignments sent, renewals included.
    pub(crate) assignments: u64,
    /// Tokens paid from limits' states for shares.
    pub(crate) tokens: u64,
    /// Refusals (`DENY_ALL`) sent for limited buckets.
    pub(crate) refusals: u64,
    /// Buckets abandoned (stale, reload, shutdown).
    pub(crate) abandons: u64,
}

impl RlqsMetrics {
    /// Registers every RLQS metric under `rlqs_`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("rlqs");
        registry.register("streams", "RLQS streams open (one per Envoy and filter domain)", self.streams.clone());
        registry.register("buckets", "RLQS buckets with a rule held, over every stream", self.buckets.clone());
        registry.register("reports", "Bucket usages reported by Envoys", self.reports.clone());
        registry.register("assignments", "Quota assignments sent (renewals included)", self.assignments.clone());
        registry.register("tokens", "Tokens paid from limits' states for RLQS shares", self.tokens.clone());
        registry.register("refusals", "Refusals (DENY_ALL) sent for limited buckets", self.refusals.clone());
        registry.register("abandons", "Buckets abandoned, by reason (stale, reload, shutdown)", self.abandons.clone());
        let holders = "Limited buckets held, by what their Envoy was last told (share, refusal, none)";
        registry.register("holders", holders, self.holders.clone());
        for reason in ABANDON_REASONS {
            let _ = self.abandons.get_or_create(&ReasonLabels { reason });
        }
        self.census([0; 3]);
    }

    /// Sets the streams and buckets held now.
    pub(crate) fn hold(&self, streams: usize, buckets: usize) {
        self.streams.set(i64::try_from(streams).unwrap_or(i64::MAX));
        self.buckets.set(i64::try_from(buckets).unwrap_or(i64::MAX));
    }

    /// Counts `count` bucket usages reported.
    pub(crate) fn count_reports(&self, count: usize) {
        self.reports.inc_by(count as u64);
    }

    /// Counts `count` assignments sent.
    pub(crate) fn count_assignments(&self, count: usize) {
        self.assignments.inc_by(count as u64);
    }

    /// Counts tokens paid for shares.
    pub(crate) fn count_tokens(&self, tokens: u64) {
        self.tokens.inc_by(tokens);
    }

    /// Counts `count` refusals sent.
    pub(crate) fn count_refusals(&self, count: usize) {
        self.refusals.inc_by(count as u64);
    }

    /// Sets how many limited buckets held were last told each of [`ANSWERS`].
    pub(crate) fn census(&self, counts: [usize; 3]) {
        for (answer, count) in ANSWERS.into_iter().zip(counts) {
            self.holders.get_or_create(&AnswerLabels { answer }).set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Replaces the buckets listed with those of the census `listed`.
    pub(crate) fn list(&self, listed: BucketCensus) {
        self.listed.publish(listed);
    }

    /// The buckets the last census listed.
    pub(crate) fn listed(&self) -> Arc<BucketCensus> {
        self.listed.last()
    }

    /// Counts `count` buckets abandoned for `reason` (one of [`ABANDON_REASONS`]).
    pub(crate) fn count_abandons(&self, reason: &'static str, count: usize) {
        self.abandons.get_or_create(&ReasonLabels { reason }).inc_by(count as u64);
    }

    /// The counts now.
    pub(crate) fn counts(&self) -> RlqsCounts {
        let abandons =
            ABANDON_REASONS.iter().map(|&reason| self.abandons.get_or_create(&ReasonLabels { reason }).get());
        RlqsCounts {
            streams: self.streams.get().unsigned_abs(),
            buckets: self.buckets.get().unsigned_abs(),
            reports: self.reports.get(),
            assignments: self.assignments.get(),
            tokens: self.tokens.get(),
            refusals: self.refusals.get(),
            abandons: abandons.sum(),
        }
    }
}
