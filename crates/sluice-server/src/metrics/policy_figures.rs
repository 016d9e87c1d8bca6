//! The figures of one policy that look at keys without naming any in a label: how full
//! keys are at each decision ([`FillHistogram`]), how many decisions came near the limit,
//! the heaviest keys with their error bounds ([`TopKeys`]), and the distinct keys seen
//! ([`Distinct`]).
//!
//! Each policy's figures are made once, when a configuration first names the policy, and
//! kept across reloads (as its check counters are); a check reaches them through the
//! policy's [`PolicyCounters`](crate::metrics::PolicyCounters) without a lookup.

use crate::metrics::distinct::Distinct;
use crate::metrics::fill::FillHistogram;
use crate::metrics::space_saving::key_hash;
use crate::metrics::top_keys::TopKeys;
use prometheus_client::metrics::counter::Counter;
use sluice_core::{Decision, Source, Timestamp, Verdict};

/// How the figures that look at keys are set up (the `top_keys` settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FigureSettings {
    /// Counters of each top-keys table, `k`; 0 keeps no table and no distinct-key sketch.
    pub(crate) top_keys: usize,
    /// Ranks of each policy's top keys exported to `/metrics` (0: none), at most `top_keys`.
    pub(crate) top_key_series: usize,
    /// Export keys as they are rather than hashed.
    pub(crate) raw_key_labels: bool,
}

impl Default for FigureSettings {
    fn default() -> FigureSettings {
        FigureSettings { top_keys: DEFAULT_TOP_KEYS, top_key_series: 0, raw_key_labels: false }
    }
}

/// The default number of counters of a top-keys table.
pub(crate) const DEFAULT_TOP_KEYS: usize = 64;

/// The most counters a top-keys table may have.
pub(crate) const MAX_TOP_KEYS: usize = 1024;

/// One policy's figures.
#[derive(Debug)]
pub(crate) struct PolicyFigures {
    pub(crate) fill: FillHistogram,
    pub(crate) near_limit: Counter,
    /// `None` with `top_keys: 0`.
    pub(crate) keys: Option<KeyFigures>,
}

/// The figures that keep keys: the top-keys tables and the distinct-key sketch.
#[derive(Debug)]
pub(crate) struct KeyFigures {
    pub(crate) top: TopKeys,
    pub(crate) distinct: Distinct,
}

/// One decision, as the figures see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen<'a> {
    /// When it was decided.
    pub(crate) now: Timestamp,
    /// The checked key.
    pub(crate) key: &'a [u8],
    /// The units it asked for.
    pub(crate) cost: u64,
}

/// The decision of `verdict` whose `remaining` is what the key has left, for the fill
/// ratio; `None` when it says something else: a leased answer's `remaining` is the units
/// this server holds (docs/leases.md), and a failure mode's comes from no state at all.
pub(crate) fn measured(verdict: &Verdict) -> Option<&Decision> {
    match verdict.source {
        Source::Store | Source::Cache | Source::Fallback => Some(&verdict.decision),
        Source::Lease | Source::FailedOpen | Source::FailedClosed => None,
    }
}

impl PolicyFigures {
    /// Figures made under `settings`, with `fill` and `near_limit` the series registered
    /// for the policy.
    pub(crate) fn new(settings: FigureSettings, fill: FillHistogram, near_limit: Counter) -> PolicyFigures {
        let keys = (settings.top_keys > 0)
            .then(|| KeyFigures { top: TopKeys::new(settings.top_keys), distinct: Distinct::default() });
        PolicyFigures { fill, near_limit, keys }
    }

    /// Counts a decision of this policy: `decision` when the policy's own is known (a
    /// policy that allowed beside the one reported has none), `allowed` whether the
    /// policy let it through (a shadow rejection did not).
    pub(crate) fn observe(&self, seen: Seen<'_>, decision: Option<&Decision>, allowed: bool) {
        if let Some(decision) = decision
            && self.fill.observe(decision.limit, decision.remaining)
        {
            self.near_limit.inc();
        }
        if let Some(keys) = &self.keys {
            let hash = key_hash(seen.key);
            keys.distinct.insert(hash);
            keys.top.record(seen.now, hash, seen.key, allowed, seen.cost);
        }
    }

    /// The bytes its tables and sketch hold on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.keys.as_ref().map_or(0, |keys| keys.top.heap_bytes() + keys.distinct.heap_bytes())
    }
}
