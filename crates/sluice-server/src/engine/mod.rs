//! The decision path shared by the HTTP and gRPC front ends: resolve policies, apply
//! shadow mode, ask the store, count.
//!
//! [`Engine`] checks keys against named policies (the HTTP API); [`envoy::EnvoyChecks`],
//! a view of it, checks Envoy descriptors against rules and takes RLQS shares.

pub(crate) mod backend;
mod envoy;
pub(crate) mod front;
mod loaded;
pub(crate) mod service_state;

pub(crate) use loaded::Loaded;

use crate::config::service_file::ServiceConfig;
use crate::engine::backend::Backend;
use crate::metrics::{Metrics, PolicyCounters, Seen, measured};
use arc_swap::ArcSwap;
use envoy::EnvoyChecks;
use sluice_core::{Check, Clock, Decision, Key, Limit, Source, StoreError, SystemClock, Timestamp, Verdict};
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::Instant;

/// What the service answers for one checked request.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
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
pub(crate) enum RequestError {
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

/// The decision path, as one thread uses it: a store of its own (on Redis, a connection
/// driven by that thread's runtime), and the configuration and metrics every engine of the
/// process shares, so that a reload reaches every worker at once.
#[derive(Debug)]
pub(crate) struct Engine {
    backend: Backend,
    shared: Arc<ProcessWide>,
    clock: SystemClock,
}

/// What every engine of the process shares.
#[derive(Debug)]
struct ProcessWide {
    loaded: ArcSwap<Loaded>,
    metrics: Metrics,
    /// Every policy is in shadow mode (`--shadow-mode`).
    shadow_all: bool,
}

/// Positions in [`ServiceConfig::policies`] of the policies one request names.
type Chosen = SmallVec<[usize; 4]>;

impl Engine {
    /// An engine serving `config` with `backend`; `shadow_all` puts every policy in shadow mode.
    pub(crate) fn new(backend: Backend, config: ServiceConfig, metrics: Metrics, shadow_all: bool) -> Engine {
        let loaded = ArcSwap::from_pointee(Loaded::new(config, &metrics));
        let shared = Arc::new(ProcessWide { loaded, metrics, shadow_all });
        Engine { backend, shared, clock: SystemClock::new() }
    }

    /// An engine for the calling thread: the same configuration and metrics, and a store
    /// connection driven by this thread's runtime ([`Backend::for_this_thread`]).
    pub(crate) async fn for_this_thread(&self) -> Engine {
        let backend = self.backend.for_this_thread().await;
        Engine { backend, shared: Arc::clone(&self.shared), clock: SystemClock::new() }
    }

    /// The configuration in force.
    pub(crate) fn loaded(&self) -> arc_swap::Guard<Arc<Loaded>> {
        self.shared.loaded.load()
    }

    /// Replaces the configuration in force, atomically, for every engine sharing it.
    pub(crate) fn replace(&self, config: ServiceConfig) {
        self.shared.loaded.store(Arc::new(Loaded::new(config, &self.shared.metrics)));
    }

    /// The metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The time decisions are made at now.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The store.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Its checks of Envoy descriptors and RLQS shares.
    pub(crate) fn envoy(&self) -> EnvoyChecks<'_> {
        EnvoyChecks::new(self)
    }

    fn shadow_all(&self) -> bool {
        self.shared.shadow_all
    }

    /// Checks `key` against the named policies with `cost` (0 peeks), all or nothing.
    ///
    /// Policies in shadow mode are checked apart from the enforced ones, so that what they
    /// would reject never blocks (nor un-records) what the enforced ones allow. One
    /// configuration serves the whole check, even if a reload lands meanwhile.
    pub(crate) async fn check(&self, key: &[u8], names: &[impl AsRef<str>], cost: u64) -> Result<Answer, RequestError> {
        let key = Key::new(key).map_err(|error| RequestError::InvalidKey(error.to_string()))?;
        let loaded = self.loaded();
        let chosen = choose(&loaded, names)?;
        let policies = loaded.config.policies();
        let (shadowed, enforced): (Chosen, Chosen) =
            chosen.into_iter().partition(|&index| self.shadow_all() || policies[index].shadow);
        let enforced = self.check_group(&loaded, key, &enforced, cost, false).await?;
        let shadowed = self.check_group(&loaded, key, &shadowed, cost, true).await?;
        let outcome = match (enforced, shadowed) {
            (Some(enforced), _) if !enforced.decision.allowed => enforced,
            (Some(enforced), Some(shadowed)) if !shadowed.shadow_rejected => {
                let verdict = Verdict::combine(&[enforced.decision, shadowed.decision]);
                if verdict.is_some_and(|v| v.limit == 1) { shadowed } else { enforced }
            }
            (_, Some(shadowed)) => shadowed,
            (Some(enforced), None) => enforced,
            (None, None) => return Err(RequestError::NoPolicy),
        };
        // A peek (cost 0) decides nothing: it is not counted as a check.
        if cost > 0 {
            self.observe(&outcome);
        }
        Ok(outcome)
    }

    /// Counts a check in the dashboard's per-second history. A shadow rejection was let
    /// through: it counts as allowed. (Its key is in its policy's figures.)
    fn observe(&self, outcome: &Answer) {
        self.shared.metrics.per_second().record(self.clock.now(), outcome.decision.allowed);
    }

    /// Decides `cost` for `key` under `limit`, a policy no configuration names (`CL.THROTTLE`
    /// builds one from its arguments); the caller counts the outcome under its own label.
    pub(crate) async fn check_limit(&self, key: &[u8], limit: &Limit, cost: u64) -> Result<Verdict, RequestError> {
        let key = Key::new(key).map_err(|error| RequestError::InvalidKey(error.to_string()))?;
        let now = self.clock.now();
        let verdict = self.decide(key, std::slice::from_ref(limit), now, cost).await?;
        if cost > 0 {
            self.shared.metrics.per_second().record(now, verdict.decision.allowed);
        }
        Ok(verdict)
    }

    /// Forgets `key`'s states under the named policies (every policy when none is named).
    pub(crate) async fn reset(&self, key: &[u8], names: &[impl AsRef<str>]) -> Result<(), RequestError> {
        let key = Key::new(key).map_err(|error| RequestError::InvalidKey(error.to_string()))?;
        let loaded = self.loaded();
        let limits: Vec<Limit> = if names.is_empty() {
            loaded.config.limits().cloned().collect()
        } else {
            let policies = loaded.config.policies();
            choose(&loaded, names)?.into_iter().map(|index| policies[index].limit.clone()).collect()
        };
        Ok(self.backend.reset(key, &limits).await?)
    }

    /// Checks the policies at `group` together; `None` when the group is empty.
    async fn check_group(
        &self,
        loaded: &Loaded,
        key: Key<'_>,
        group: &[usize],
        cost: u64,
        shadow: bool,
    ) -> Result<Option<Answer>, RequestError> {
        let policies = loaded.config.policies();
        let now = self.clock.now();
        let verdict = match group {
            [] => return Ok(None),
            // The common case borrows the configuration's limit: nothing cloned.
            [one] => self.decide(key, std::slice::from_ref(&policies[*one].limit), now, cost).await?,
            several => {
                // On the heap: inline, they made every check's future 240 bytes larger (528 → 288).
                let limits: Vec<Limit> = several.iter().map(|&index| policies[index].limit.clone()).collect();
                self.decide(key, &limits, now, cost).await?
            }
        };
        let index = group[verdict.limit];
        let counting = cost > 0;
        if counting {
            self.count_group(
                loaded,
                Seen { now: self.clock.now(), key: key.as_bytes(), cost },
                group,
                &verdict,
                shadow,
            );
        }
        let counters = counting.then(|| &loaded.counters[index]);
        Ok(Some(self.report(verdict, &policies[index].limit, counters, shadow)))
    }

    /// Counts a group's decision in its policies' figures, and an allowed one in the checks
    /// of the policies other than the one reported (which [`Engine::report`] counts).
    ///
    /// An allowed request passed every policy of the group: each counts it, and each had
    /// `cost` units consumed. A rejected one counts under the policy that rejected it only.
    fn count_group(&self, loaded: &Loaded, seen: Seen<'_>, group: &[usize], verdict: &Verdict, shadow: bool) {
        let index = group[verdict.limit];
        let allowed = verdict.decision.allowed;
        loaded.counters[index].observe(seen, measured(verdict), allowed);
        if !allowed {
            return;
        }
        for &other in group.iter().filter(|&&other| other != index) {
            loaded.counters[other].count(true, shadow);
            loaded.counters[other].observe(seen, None, true);
        }
    }

    /// Asks the store to decide at `now`, timing and counting what it answered.
    async fn decide(&self, key: Key<'_>, limits: &[Limit], now: Timestamp, cost: u64) -> Result<Verdict, RequestError> {
        let started = Instant::now();
        let verdict = self.backend.check(Check::new(key, limits, now, cost)).await;
        self.shared.metrics.observe_store(started.elapsed());
        let verdict = verdict.inspect_err(|error| self.shared.metrics.count_store_error(error))?;
        self.shared.metrics.count_source(verdict.source);
        Ok(verdict)
    }

    /// The outcome reported for `verdict`, decided by `limit`, counted under `counters`.
    fn report(&self, verdict: Verdict, limit: &Limit, counters: Option<&PolicyCounters>, shadow: bool) -> Answer {
        if let Some(counters) = counters {
            counters.count(verdict.decision.allowed, shadow);
        }
        let mut decision = verdict.decision;
        let shadow_rejected = shadow && !decision.allowed;
        decision.allowed |= shadow_rejected;
        Answer { decision, limit: limit.clone(), source: verdict.source, shadow_rejected }
    }
}

/// The positions of the named policies in `loaded`'s configuration.
fn choose(loaded: &Loaded, names: &[impl AsRef<str>]) -> Result<Chosen, RequestError> {
    if names.is_empty() {
        return Err(RequestError::NoPolicy);
    }
    let policies = loaded.config.policies();
    let mut chosen = Chosen::new();
    for name in names.iter().map(AsRef::as_ref) {
        let Some(index) = loaded.config.policy_index(name) else {
            let known: Vec<&str> = policies.iter().map(|entry| entry.limit.name()).collect();
            return Err(RequestError::UnknownPolicy { name: name.to_owned(), known: known.join(", ") });
        };
        if chosen.contains(&index) {
            return Err(RequestError::DuplicatePolicy(name.to_owned()));
        }
        chosen.push(index);
    }
    Ok(chosen)
}
