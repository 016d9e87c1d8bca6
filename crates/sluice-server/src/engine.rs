//! The decision path shared by the HTTP and gRPC front ends: resolve policies, apply
//! shadow mode, ask the store, count.

use crate::backend::Backend;
use crate::envoy::{Rule, Rules};
use crate::metrics::{Metrics, PolicyCounters};
use crate::service_config::ServiceConfig;
use arc_swap::ArcSwap;
use sluice::{Clock, Decision, Key, Limit, Source, StoreError, SystemClock, Verdict};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A configuration in force, with its counters resolved.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) config: ServiceConfig,
    counters: Vec<PolicyCounters>,
    rule_counters: HashMap<String, PolicyCounters>,
}

impl Loaded {
    /// Resolves the counters of every policy and Envoy rule of `config`.
    pub(crate) fn new(config: ServiceConfig, metrics: &Metrics) -> Loaded {
        let counters = config.policies().iter().map(|entry| metrics.policy(entry.limit.name())).collect();
        let rules = config.envoy().into_iter().flat_map(Rules::rules);
        let rule_counters = rules.map(|rule| (rule.name().to_owned(), metrics.policy(rule.name()))).collect();
        Loaded { config, counters, rule_counters }
    }

    /// The counters of an Envoy rule of this configuration.
    pub(crate) fn rule_counters(&self, rule: &Rule) -> PolicyCounters {
        self.rule_counters.get(rule.name()).cloned().unwrap_or_default()
    }
}

/// What the service answers for one checked request.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    /// The decision reported to the caller (`allowed` is true when shadow mode let a
    /// rejection through).
    pub(crate) decision: Decision,
    /// The policy whose decision is reported.
    pub(crate) limit: Limit,
    /// Who decided.
    pub(crate) source: Source,
    /// A policy in shadow mode would have rejected the request.
    pub(crate) shadow_rejected: bool,
}

/// Why a request could not be checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error("unknown policy `{name}`; the configuration defines: {known}")]
    UnknownPolicy { name: String, known: String },
    #[error("policy `{0}` is listed twice")]
    DuplicatePolicy(String),
    #[error("at least one policy must be given")]
    NoPolicy,
    #[error("invalid key: {0}")]
    InvalidKey(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The shared decision path.
#[derive(Debug)]
pub(crate) struct Engine {
    backend: Backend,
    loaded: ArcSwap<Loaded>,
    metrics: Metrics,
    clock: SystemClock,
    shadow_all: bool,
}

type Chosen = SmallVec<[(Limit, bool, PolicyCounters); 4]>;

impl Engine {
    /// An engine serving `config` with `backend`; `shadow_all` puts every policy in shadow mode.
    pub(crate) fn new(backend: Backend, config: ServiceConfig, metrics: Metrics, shadow_all: bool) -> Engine {
        let loaded = ArcSwap::from_pointee(Loaded::new(config, &metrics));
        Engine { backend, loaded, metrics, clock: SystemClock::new(), shadow_all }
    }

    /// The configuration in force.
    pub(crate) fn loaded(&self) -> arc_swap::Guard<Arc<Loaded>> {
        self.loaded.load()
    }

    /// Replaces the configuration in force, atomically.
    pub(crate) fn replace(&self, config: ServiceConfig) {
        self.loaded.store(Arc::new(Loaded::new(config, &self.metrics)));
    }

    /// The metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The store.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Checks `key` against the named policies with `cost` (0 peeks), all or nothing.
    ///
    /// Policies in shadow mode are checked apart from the enforced ones, so that what they
    /// would reject never blocks (nor un-records) what the enforced ones allow.
    pub(crate) async fn check(&self, key: &[u8], names: &[impl AsRef<str>], cost: u64) -> Result<Outcome, CheckError> {
        let key = Key::new(key).map_err(|error| CheckError::InvalidKey(error.to_string()))?;
        let chosen = self.choose(names)?;
        let (shadowed, enforced): (Chosen, Chosen) = chosen.into_iter().partition(|(_, shadow, _)| *shadow);
        let enforced = self.check_group(key, &enforced, cost, false).await?;
        let shadowed = self.check_group(key, &shadowed, cost, true).await?;
        Ok(match (enforced, shadowed) {
            (Some(enforced), _) if !enforced.decision.allowed => enforced,
            (Some(enforced), Some(shadowed)) if !shadowed.shadow_rejected => {
                let verdict = Verdict::combine(&[enforced.decision, shadowed.decision]);
                if verdict.is_some_and(|v| v.limit == 1) { shadowed } else { enforced }
            }
            (_, Some(shadowed)) => shadowed,
            (Some(enforced), None) => enforced,
            (None, None) => return Err(CheckError::NoPolicy),
        })
    }

    /// Checks one key against one policy chosen elsewhere (Envoy descriptors).
    pub(crate) async fn check_limit(
        &self,
        key: Key<'_>,
        limit: &Limit,
        shadow: bool,
        counters: &PolicyCounters,
        cost: u64,
    ) -> Result<Outcome, CheckError> {
        let group: Chosen = SmallVec::from_iter([(limit.clone(), shadow || self.shadow_all, counters.clone())]);
        let outcome = self.check_group(key, &group, cost, shadow || self.shadow_all).await?;
        outcome.ok_or(CheckError::NoPolicy)
    }

    /// Forgets `key`'s states under the named policies (every policy when none is named).
    pub(crate) async fn reset(&self, key: &[u8], names: &[impl AsRef<str>]) -> Result<(), CheckError> {
        let key = Key::new(key).map_err(|error| CheckError::InvalidKey(error.to_string()))?;
        let limits: Vec<Limit> = if names.is_empty() {
            self.loaded().config.limits()
        } else {
            self.choose(names)?.into_iter().map(|(limit, _, _)| limit).collect()
        };
        Ok(self.backend.reset(key, &limits).await?)
    }

    fn choose(&self, names: &[impl AsRef<str>]) -> Result<Chosen, CheckError> {
        if names.is_empty() {
            return Err(CheckError::NoPolicy);
        }
        let loaded = self.loaded.load();
        let mut chosen = Chosen::new();
        for name in names.iter().map(AsRef::as_ref) {
            let Some(index) = loaded.config.policy_index(name) else {
                let known: Vec<&str> = loaded.config.policies().iter().map(|entry| entry.limit.name()).collect();
                return Err(CheckError::UnknownPolicy { name: name.to_owned(), known: known.join(", ") });
            };
            if chosen.iter().any(|(limit, _, _)| limit.name() == name) {
                return Err(CheckError::DuplicatePolicy(name.to_owned()));
            }
            let entry = &loaded.config.policies()[index];
            chosen.push((entry.limit.clone(), entry.shadow || self.shadow_all, loaded.counters[index].clone()));
        }
        Ok(chosen)
    }

    async fn check_group(
        &self,
        key: Key<'_>,
        group: &Chosen,
        cost: u64,
        shadow: bool,
    ) -> Result<Option<Outcome>, CheckError> {
        if group.is_empty() {
            return Ok(None);
        }
        let limits: SmallVec<[Limit; 4]> = group.iter().map(|(limit, _, _)| limit.clone()).collect();
        let started = Instant::now();
        let verdict = self.backend.check(key, &limits, self.clock.now(), cost).await;
        self.metrics.observe_store(started.elapsed());
        let verdict = verdict.inspect_err(|error| self.metrics.count_store_error(error))?;
        self.metrics.count_source(verdict.source);
        let (limit, _, counters) = &group[verdict.limit];
        counters.count(verdict.decision.allowed, shadow);
        let mut decision = verdict.decision;
        let shadow_rejected = shadow && !decision.allowed;
        if shadow_rejected {
            decision.allowed = true;
        }
        Ok(Some(Outcome { decision, limit: limit.clone(), source: verdict.source, shadow_rejected }))
    }
}
