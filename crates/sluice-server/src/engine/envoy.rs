//! The engine's side of the Envoy rate limit service: a descriptor's rule is checked, or
//! refused without a check, and counted under the rule's name, all here, so that the
//! gRPC front end counts nothing itself (as the HTTP one does not).
//!
//! A descriptor that adds no hits (`hits_addend: 0`) only looks, as a peek does through the
//! HTTP API: it is answered but not counted, in the checks or the figures.
//!
//! These checks are a view of the engine ([`Engine::envoy`]): they decide with its store,
//! clock and metrics, as its policy checks do, and count under the counters of the
//! configuration's Envoy rules ([`Loaded`]); they keep nothing of their own.

use crate::engine::{Answer, Engine, Loaded, RequestError};
use crate::envoy::{Rule, Unit};
use crate::metrics::{PolicyCounters, Seen, measured};
use sluice_core::{Decision, Key, Limit, StoreError, Verdict};
use std::time::Duration;

/// The engine's checks of Envoy descriptors and RLQS shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EnvoyChecks<'e> {
    engine: &'e Engine,
}

impl<'e> EnvoyChecks<'e> {
    /// The Envoy checks of `engine`.
    pub(super) fn new(engine: &'e Engine) -> EnvoyChecks<'e> {
        EnvoyChecks { engine }
    }

    /// Checks `key` against a rule's `limit` (`rule_shadow`: the rule is in shadow mode),
    /// counted under the rule.
    pub(crate) async fn check_rule(
        &self,
        loaded: &Loaded,
        key: Key<'_>,
        rule: &Rule,
        limit: &Limit,
        rule_shadow: bool,
        cost: u64,
    ) -> Result<Answer, RequestError> {
        let now = self.engine.now();
        let verdict = self.engine.decide(key, std::slice::from_ref(limit), now, cost).await?;
        let counters = loaded.rule_counters(rule).filter(|_| cost > 0);
        self.observe(counters, Seen { now, key: key.as_bytes(), cost }, &verdict);
        let outcome = self.engine.report(verdict, limit, counters, rule_shadow || self.engine.shadow_all());
        if cost > 0 {
            self.engine.observe(&outcome);
        }
        Ok(outcome)
    }

    /// Checks `key` against a descriptor's own limit override, counted under the
    /// overrides' name.
    pub(crate) async fn check_override(
        &self,
        loaded: &Loaded,
        key: Key<'_>,
        limit: &Limit,
        cost: u64,
    ) -> Result<Answer, RequestError> {
        let now = self.engine.now();
        let verdict = self.engine.decide(key, std::slice::from_ref(limit), now, cost).await?;
        let counters = loaded.override_counters().filter(|_| cost > 0);
        self.observe(counters, Seen { now, key: key.as_bytes(), cost }, &verdict);
        Ok(self.engine.report(verdict, limit, counters, self.engine.shadow_all()))
    }

    /// Counts a checked descriptor in its rule's figures (none for a peek: no `counters`).
    fn observe(&self, counters: Option<&PolicyCounters>, seen: Seen<'_>, verdict: &Verdict) {
        if let Some(counters) = counters {
            counters.observe(seen, measured(verdict), verdict.decision.allowed);
        }
    }

    /// Counts a rule that rejects without a check (a limit of 0) when `cost` adds hits;
    /// whether the rejection is only a shadow one, to be answered as allowed.
    pub(crate) fn refuse_rule(&self, loaded: &Loaded, rule: &Rule, rule_shadow: bool, cost: u64) -> bool {
        let shadow = rule_shadow || self.engine.shadow_all();
        if let Some(counters) = loaded.rule_counters(rule).filter(|_| cost > 0) {
            counters.count(false, shadow);
        }
        shadow
    }

    /// Counts a limit override that can allow nothing (0 requests per unit) when `cost`
    /// adds hits; whether the rejection is only a shadow one.
    pub(crate) fn refuse_override(&self, loaded: &Loaded, cost: u64) -> bool {
        let shadow = self.engine.shadow_all();
        if let Some(counters) = loaded.override_counters().filter(|_| cost > 0) {
            counters.count(false, shadow);
        }
        shadow
    }

    /// Takes `cost` of `limit` at `key` as one check of that cost would, without counting
    /// it among the rule's checks (RLQS counts shares in its own metrics). Only the store's
    /// own decision is returned (a lease's too: its units were debited in the store): when a
    /// failure mode decided instead, nothing was recorded, so the result is
    /// `StoreError::Unavailable` (an RLQS share must be paid from the state).
    pub(crate) async fn take_quota(&self, key: Key<'_>, limit: &Limit, cost: u64) -> Result<Decision, RequestError> {
        let verdict = self.engine.decide(key, std::slice::from_ref(limit), self.engine.now(), cost).await?;
        if verdict.source.is_without_store() {
            return Err(StoreError::Unavailable("the store did not decide: a failure mode did".into()).into());
        }
        // The store, its blocked-key cache, or units leased from it (debited there already).
        Ok(verdict.decision)
    }

    /// How long until the current window of `unit` ends: windows are aligned to the Unix
    /// epoch, as the fixed windows of `rate_limit` rules and overrides are.
    pub(crate) fn until_window_ends(&self, unit: Unit) -> Duration {
        let window = u64::try_from(unit.duration().as_micros()).unwrap_or(u64::MAX);
        let into = self.engine.now().as_micros() % window;
        Duration::from_micros(window - into)
    }
}
