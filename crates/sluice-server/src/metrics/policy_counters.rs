//! The counters of one policy's checks (`sluice_checks_total{policy, outcome}`), and of
//! the requests Envoys report deciding on its RLQS shares (`source="rlqs"`), each looked
//! up once per configuration (or bucket), so that a check touches only atomics.

use super::policy_figures::{PolicyFigures, Seen};
use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sluice_core::Decision;
use std::sync::Arc;

/// The labels of `sluice_checks_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct CheckLabels {
    policy: String,
    /// `allowed`, `rejected` or `shadow_rejected`.
    outcome: &'static str,
    /// `rlqs` for requests Envoy decided on an RLQS share and reported; no label for the
    /// checks Sluice decides itself.
    source: Option<&'static str>,
}

impl EncodeLabelSet for CheckLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut labels = vec![("policy", self.policy.as_str()), ("outcome", self.outcome)];
        labels.extend(self.source.map(|source| ("source", source)));
        labels.encode(encoder)
    }
}

/// The counters of one policy, resolved once per configuration.
#[derive(Clone, Debug, Default)]
pub(crate) struct PolicyCounters {
    allowed: Counter,
    rejected: Counter,
    shadow_rejected: Counter,
    /// Its figures that look at keys; `None` only in the benchmark's baseline.
    figures: Option<Arc<PolicyFigures>>,
}

impl PolicyCounters {
    /// The counters of `policy` in `checks`, with its `figures`.
    pub(super) fn resolve(
        checks: &Family<CheckLabels, Counter>,
        policy: &str,
        figures: Option<Arc<PolicyFigures>>,
    ) -> PolicyCounters {
        let counter =
            |outcome| checks.get_or_create(&CheckLabels { policy: policy.to_owned(), outcome, source: None }).clone();
        PolicyCounters {
            allowed: counter("allowed"),
            rejected: counter("rejected"),
            shadow_rejected: counter("shadow_rejected"),
            figures,
        }
    }

    /// Counts one request's outcome under this policy.
    pub(crate) fn count(&self, allowed: bool, shadow: bool) {
        match (allowed, shadow) {
            (true, _) => self.allowed.inc(),
            (false, false) => self.rejected.inc(),
            (false, true) => self.shadow_rejected.inc(),
        };
    }

    /// Counts a decision of this policy in its figures: `decision` when the policy's own
    /// is known, `allowed` whether the policy let the request through.
    pub(crate) fn observe(&self, seen: Seen<'_>, decision: Option<&Decision>, allowed: bool) {
        if let Some(figures) = &self.figures {
            figures.observe(seen, decision, allowed);
        }
    }

    /// Its figures that look at keys (`None` only in the benchmark's baseline).
    pub(crate) fn figures(&self) -> Option<&PolicyFigures> {
        self.figures.as_deref()
    }

    /// Requests counted so far: allowed, rejected and shadow-rejected.
    pub(crate) fn totals(&self) -> [u64; 3] {
        [self.allowed.get(), self.rejected.get(), self.shadow_rejected.get()]
    }
}

/// The requests Envoys report deciding on RLQS assignments of one policy.
#[derive(Clone, Debug, Default)]
pub(crate) struct RlqsChecks {
    allowed: Counter,
    rejected: Counter,
}

impl RlqsChecks {
    /// The counters of `policy` in `checks`, labelled `source="rlqs"`.
    pub(super) fn resolve(checks: &Family<CheckLabels, Counter>, policy: &str) -> RlqsChecks {
        let counter = |outcome| {
            let labels = CheckLabels { policy: policy.to_owned(), outcome, source: Some("rlqs") };
            checks.get_or_create(&labels).clone()
        };
        RlqsChecks { allowed: counter("allowed"), rejected: counter("rejected") }
    }

    /// Counts a report's `allowed` and `denied` requests.
    pub(crate) fn count(&self, allowed: u64, denied: u64) {
        self.allowed.inc_by(allowed);
        self.rejected.inc_by(denied);
    }
}
