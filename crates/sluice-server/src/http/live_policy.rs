//! One policy (or Envoy rule) as the live view shows it: its counts, its figures, and
//! what the store holds and leases did for it.

use crate::config::service_file::PolicyEntry;
use crate::engine::Loaded;
use crate::engine::front::Front;
use crate::envoy::Rules;
use crate::http::top::{TopEpoch, epoch};
use crate::metrics::{By, PolicyCounters, PolicyFigures};
use serde::Serialize;
use sluice_core::Timestamp;
use sluice_core::lease::LimitLeaseFigures;
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// Every policy in force, then every Envoy rule with a limit, with their counts, figures
/// and store figures (`shadow_all`: `--shadow-mode`).
pub(crate) fn live_policies(front: &Front, loaded: &Loaded, shadow_all: bool, now: Timestamp) -> Vec<LivePolicy> {
    let store = StoreNow::read(front);
    let policies = loaded.config.policies().iter().enumerate();
    let policies = policies.map(|(index, entry)| live_policy(entry, loaded.counters(index), shadow_all, now));
    let rules = loaded.config.envoy().into_iter().flat_map(Rules::rules).filter_map(|rule| {
        let entry = PolicyEntry { limit: rule.limit()?.clone(), shadow: rule.shadow_mode() };
        let mut policy = live_policy(&entry, loaded.rule_counters(rule), shadow_all, now);
        policy.envoy_rule = true;
        Some(policy)
    });
    let mut listed: Vec<LivePolicy> = policies.chain(rules).collect();
    for policy in &mut listed {
        (policy.states, policy.leases) = (store.states_of(&policy.name), store.leases_of(&policy.name));
    }
    listed
}

/// A policy and its counts.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LivePolicy {
    /// The policy's name.
    pub(crate) name: String,
    /// Its algorithm.
    pub(crate) algorithm: &'static str,
    /// Its limit.
    pub(crate) limit: u64,
    /// Its limit with its window, or its bucket's size and rate, in words (`2 / 1 s`,
    /// `capacity 100, 10 per 1 s`).
    pub(crate) limit_text: String,
    /// Whether it is an Envoy rule (else a policy of the `policies` section).
    pub(crate) envoy_rule: bool,
    /// Whether it is in shadow mode.
    pub(crate) shadow_mode: bool,
    /// Requests it allowed.
    pub(crate) allowed: u64,
    /// Requests it rejected.
    pub(crate) rejected: u64,
    /// Requests it would have rejected, in shadow mode.
    pub(crate) shadow_rejected: u64,
    /// Decisions at 0.8 of its limit or more.
    pub(crate) near_limit: u64,
    /// Distinct keys it has checked, estimated (HyperLogLog); null with `top_keys: 0`.
    pub(crate) keys_estimate: Option<u64>,
    /// States the embedded store holds for it now, exactly; null on Redis.
    pub(crate) states: Option<u64>,
    /// What quota leases did for it; null without leases.
    pub(crate) leases: Option<LivePolicyLeases>,
    /// This minute's most denied keys (the first [`LIVE_TOP`]), with their error bounds;
    /// null with `top_keys: 0`.
    pub(crate) top_denied: Option<TopEpoch>,
    /// This minute's keys that consumed the most units (the first [`LIVE_TOP`]).
    pub(crate) top_consumed: Option<TopEpoch>,
}

/// Keys of each top list the live view shows (`/v1/top` has them all).
pub(crate) const LIVE_TOP: usize = 5;

/// What quota leases did for one policy since the start, as `sluice_lease_policy_*`
/// counts it (a lease for several policies counts under each).
#[derive(Debug, Default, Serialize, ToSchema)]
pub(crate) struct LivePolicyLeases {
    /// Leased units held now, not yet spent or given up.
    pub(crate) units_held: u64,
    /// Units leased for it.
    pub(crate) units_leased: u64,
    /// Its unspent leased units given back to the store.
    pub(crate) units_returned: u64,
    /// Its leased units given up unspent.
    pub(crate) units_expired: u64,
    /// Its checks decided from leased units: store calls saved.
    pub(crate) leased_checks: u64,
}

/// What the store says of each policy, read once per poll.
#[derive(Debug, Default)]
struct StoreNow {
    /// States held by limit name (the embedded store).
    states: Option<BTreeMap<Arc<str>, usize>>,
    /// What the leases did by limit name (leases on).
    leases: Option<Vec<LimitLeaseFigures>>,
}

impl StoreNow {
    /// What `front`'s store says now.
    fn read(front: &Front) -> StoreNow {
        let backend = front.engine.backend();
        let leases_on = !front.service.settings.lease_period.is_zero() && backend.redis().is_some();
        StoreNow {
            states: backend.memory().map(sluice_core::MemoryStore::len_by_name),
            leases: leases_on.then(|| backend.lease_figures_by_limit()),
        }
    }

    fn states_of(&self, name: &str) -> Option<u64> {
        Some(self.states.as_ref()?.get(name).map_or(0, |count| *count as u64))
    }

    fn leases_of(&self, name: &str) -> Option<LivePolicyLeases> {
        let figures = self.leases.as_ref()?;
        Some(figures.iter().find(|figures| figures.name == name).map_or_else(LivePolicyLeases::default, |figures| {
            LivePolicyLeases {
                units_held: figures.units_held,
                units_leased: figures.units_leased,
                units_returned: figures.units_returned,
                units_expired: figures.units_expired,
                leased_checks: figures.leased_checks,
            }
        }))
    }
}

/// A policy in force with its counts and figures (`shadow_all`: `--shadow-mode`).
fn live_policy(entry: &PolicyEntry, counters: Option<&PolicyCounters>, shadow_all: bool, now: Timestamp) -> LivePolicy {
    let [allowed, rejected, shadow_rejected] = counters.map_or([0; 3], PolicyCounters::totals);
    let figures = counters.and_then(PolicyCounters::figures);
    let policy = entry.limit.policy();
    LivePolicy {
        name: entry.limit.name().to_owned(),
        algorithm: policy.algorithm_name(),
        limit: policy.limit(),
        limit_text: crate::config::policy_text::describe(policy),
        envoy_rule: false,
        shadow_mode: entry.shadow || shadow_all,
        allowed,
        rejected,
        shadow_rejected,
        near_limit: figures.map_or(0, |figures| figures.near_limit.get()),
        keys_estimate: figures.and_then(|figures| Some(figures.keys.as_ref()?.distinct.estimate())),
        states: None,
        leases: None,
        top_denied: figures.and_then(|figures| top_now(figures, By::Denied, now)),
        top_consumed: figures.and_then(|figures| top_now(figures, By::Consumed, now)),
    }
}

/// This minute's first [`LIVE_TOP`] keys of a policy's table `by`.
fn top_now(figures: &PolicyFigures, by: By, now: Timestamp) -> Option<TopEpoch> {
    let [mut current, _] = figures.keys.as_ref()?.top.read(by, now);
    current.keys.truncate(LIVE_TOP);
    Some(epoch(current))
}
