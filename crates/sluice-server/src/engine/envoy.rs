//! The engine's side of the Envoy rate limit service: a descriptor's rule is checked, or
//! refused without a check, and counted under the rule's name, all here, so that the
//! gRPC front end counts nothing itself (as the HTTP one does not).

use crate::engine::{CheckError, Engine, Loaded, Outcome};
use crate::envoy::Rule;
use sluice::{Key, Limit};

impl Engine {
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
    ) -> Result<Outcome, CheckError> {
        let verdict = self.decide(key, std::slice::from_ref(limit), cost).await?;
        self.metrics().hot_keys().record(key.as_bytes(), !verdict.decision.allowed);
        Ok(self.report(verdict, limit, loaded.rule_counters(rule), rule_shadow || self.shadow_all()))
    }

    /// Checks `key` against a descriptor's own limit override, counted under the
    /// overrides' name.
    pub(crate) async fn check_override(
        &self,
        loaded: &Loaded,
        key: Key<'_>,
        limit: &Limit,
        cost: u64,
    ) -> Result<Outcome, CheckError> {
        let verdict = self.decide(key, std::slice::from_ref(limit), cost).await?;
        Ok(self.report(verdict, limit, loaded.override_counters(), self.shadow_all()))
    }

    /// Counts a rule that rejects without a check (a limit of 0); whether the rejection is
    /// only a shadow one, to be answered as allowed.
    pub(crate) fn refuse_rule(&self, loaded: &Loaded, rule: &Rule, rule_shadow: bool) -> bool {
        let shadow = rule_shadow || self.shadow_all();
        if let Some(counters) = loaded.rule_counters(rule) {
            counters.count(false, shadow);
        }
        shadow
    }

    /// Counts a limit override that can allow nothing (0 requests per unit); whether the
    /// rejection is only a shadow one.
    pub(crate) fn refuse_override(&self, loaded: &Loaded) -> bool {
        let shadow = self.shadow_all();
        if let Some(counters) = loaded.override_counters() {
            counters.count(false, shadow);
        }
        shadow
    }
}
