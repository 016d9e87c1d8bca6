//! `CL.THROTTLE`'s counters: a call names no policy, only parameters, so each distinct
//! `max_burst`, `count`, `period` is a policy of its own in `sluice_checks_total`, labelled
//! `cl.throttle:<max_burst>:<count>:<period>`. The first [`MAX_LABELLED`] parameter sets get a
//! label each; later ones count under `cl.throttle:other`, so a client that makes up
//! parameters cannot grow the metrics without bound.

use crate::metrics::{Metrics, PolicyCounters};
use ahash::AHashMap;
use parking_lot::Mutex;

/// Parameter sets that get a label of their own.
pub(crate) const MAX_LABELLED: usize = 64;

/// `max_burst`, `count`, `period`.
type Parameters = (i64, i64, i64);

/// The counters of each parameter set seen so far.
#[derive(Debug, Default)]
pub(crate) struct ThrottleCounters {
    labelled: Mutex<AHashMap<Parameters, PolicyCounters>>,
    other: Mutex<Option<PolicyCounters>>,
}

impl ThrottleCounters {
    /// The counters of `parameters`, registered with `metrics` on first use.
    pub(crate) fn of(&self, metrics: &Metrics, parameters: Parameters) -> PolicyCounters {
        let mut labelled = self.labelled.lock();
        if let Some(counters) = labelled.get(&parameters) {
            return counters.clone();
        }
        if labelled.len() < MAX_LABELLED {
            let (burst, count, period) = parameters;
            let counters = metrics.policy(&format!("cl.throttle:{burst}:{count}:{period}"));
            labelled.insert(parameters, counters.clone());
            return counters;
        }
        drop(labelled);
        self.other.lock().get_or_insert_with(|| metrics.policy("cl.throttle:other")).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sets_past_the_bound_share_one_label() {
        let metrics = Metrics::new(crate::metrics::FigureSettings::default());
        let counters = ThrottleCounters::default();
        for period in 1..=(MAX_LABELLED as i64 + 10) {
            counters.of(&metrics, (0, 1, period)).count(true, false);
        }
        counters.of(&metrics, (0, 1, 1)).count(false, false);
        let text = metrics.render(Default::default());
        assert!(text.contains(r#"policy="cl.throttle:0:1:64",outcome="allowed"} 1"#), "{text}");
        assert!(!text.contains("cl.throttle:0:1:65"), "{text}");
        assert!(text.contains(r#"policy="cl.throttle:other",outcome="allowed"} 10"#), "{text}");
        assert!(text.contains(r#"policy="cl.throttle:0:1:1",outcome="rejected"} 1"#), "{text}");
    }
}
