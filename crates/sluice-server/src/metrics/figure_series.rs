//! The per-policy figures as `/metrics` series, a fixed number per policy whatever the
//! keys: `fill_ratio` (a histogram), `near_limit`, `keys_estimate`, and, when the operator
//! asks for them, the top keys' ranks (`top_key_count` and `top_key_error`, with
//! `rank` 1..=`top_key_series` and the key as a label). One more series, `figures_bytes`,
//! says what the tables hold. docs/service.md ("Series budget") counts them.
//!
//! A key label is the first 16 hex digits of the key's SHA-256 (stable across processes
//! and versions, so dashboards can join on it), unless `raw_key_labels` is on. A rank with
//! no key yet is exported with an empty key and 0, so the number of series stays the same.

use crate::metrics::fill::FillHistogram;
use crate::metrics::policy_figures::{FigureSettings, PolicyFigures};
use crate::metrics::top_keys::By;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};
use sluice_core::Timestamp;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RankLabels {
    policy: String,
    /// `denied` or `consumed`.
    by: &'static str,
    rank: usize,
    key: String,
}

/// Every policy's figures and their series.
#[derive(Debug)]
pub(crate) struct FigureSeries {
    settings: FigureSettings,
    /// Each policy's figures, by name, in the order they were first named.
    figures: Mutex<Vec<(String, Arc<PolicyFigures>)>>,
    fill: Family<PolicyLabels, FillHistogram>,
    near_limit: Family<PolicyLabels, Counter>,
    keys_estimate: Family<PolicyLabels, Gauge>,
    top_count: Family<RankLabels, Gauge>,
    top_error: Family<RankLabels, Gauge>,
    bytes: Gauge,
}

impl FigureSeries {
    /// The series of figures made under `settings`, registered in `registry`.
    pub(crate) fn new(settings: FigureSettings, registry: &mut Registry) -> FigureSeries {
        let series = FigureSeries {
            settings,
            figures: Mutex::default(),
            fill: Family::default(),
            near_limit: Family::default(),
            keys_estimate: Family::default(),
            top_count: Family::default(),
            top_error: Family::default(),
            bytes: Gauge::default(),
        };
        series.register(registry);
        series
    }

    fn register(&self, registry: &mut Registry) {
        registry.register("fill_ratio", "used / limit at each decision, by policy", self.fill.clone());
        registry.register("near_limit", "Decisions at 0.8 of their limit or more, by policy", self.near_limit.clone());
        registry.register(
            "figures_bytes",
            "Bytes the top-keys tables and distinct-key sketches hold",
            self.bytes.clone(),
        );
        if self.settings.top_keys > 0 {
            let help = "Distinct keys a policy has checked since it was loaded (HyperLogLog, 1.6 % standard error)";
            registry.register("keys_estimate", help, self.keys_estimate.clone());
        }
        if self.settings.top_key_series > 0 {
            let help = "This minute's heaviest keys by rank: denied checks or consumed units (an overestimate by at most top_key_error)";
            registry.register("top_key_count", help, self.top_count.clone());
            let help = "How much top_key_count may overstate (at most the epoch's total / top_keys)";
            registry.register("top_key_error", help, self.top_error.clone());
        }
    }

    /// The figures of `policy`, made the first time it is named.
    pub(crate) fn of(&self, policy: &str) -> Arc<PolicyFigures> {
        let mut figures = self.figures.lock();
        if let Some((_, known)) = figures.iter().find(|(name, _)| name == policy) {
            return Arc::clone(known);
        }
        let labels = PolicyLabels { policy: policy.to_owned() };
        let fill = self.fill.get_or_create(&labels).clone();
        let near_limit = self.near_limit.get_or_create(&labels).clone();
        let made = Arc::new(PolicyFigures::new(self.settings, fill, near_limit));
        figures.push((policy.to_owned(), Arc::clone(&made)));
        made
    }

    /// The figures of `policy`, if it was ever named.
    pub(crate) fn find(&self, policy: &str) -> Option<Arc<PolicyFigures>> {
        self.figures.lock().iter().find(|(name, _)| name == policy).map(|(_, figures)| Arc::clone(figures))
    }

    /// Sets the series read at a scrape: estimates, ranks and bytes, as of `now`.
    pub(crate) fn update(&self, now: Timestamp) {
        let figures = self.figures.lock().clone();
        let bytes: usize = figures.iter().map(|(_, figures)| figures.heap_bytes()).sum();
        self.bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        // Ranks change keys between scrapes: the old label sets go, the new ones come.
        self.top_count.clear();
        self.top_error.clear();
        for (policy, figures) in &figures {
            let Some(keys) = &figures.keys else { continue };
            let estimate = i64::try_from(keys.distinct.estimate()).unwrap_or(i64::MAX);
            self.keys_estimate.get_or_create(&PolicyLabels { policy: policy.clone() }).set(estimate);
            for by in By::ALL.into_iter().filter(|_| self.settings.top_key_series > 0) {
                let [current, _] = keys.top.read(by, now);
                for rank in 1..=self.settings.top_key_series {
                    let entry = current.keys.get(rank - 1);
                    let key = entry.map_or_else(String::new, |entry| self.label_of(&entry.key));
                    let labels = RankLabels { policy: policy.clone(), by: by.name(), rank, key };
                    let (count, error) = entry.map_or((0, 0), |entry| (entry.count, entry.error));
                    self.top_count.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
                    self.top_error.get_or_create(&labels).set(i64::try_from(error).unwrap_or(i64::MAX));
                }
            }
        }
    }

    /// A key as a label value: hashed, or as it is when the operator opted in.
    fn label_of(&self, key: &[u8]) -> String {
        if self.settings.raw_key_labels {
            return String::from_utf8_lossy(key).into_owned();
        }
        hashed_label(key)
    }
}

/// The first 16 hex digits (64 bits) of the SHA-256 of `key`.
pub(crate) fn hashed_label(key: &[u8]) -> String {
    let digest = Sha256::digest(key);
    digest[..8].iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashed_label_is_the_head_of_the_keys_sha256() {
        // sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(hashed_label(b"abc"), "ba7816bf8f01cfea");
    }
}
