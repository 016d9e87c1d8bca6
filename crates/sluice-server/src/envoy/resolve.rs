//! Matching a request's descriptor against a domain's tree, as envoyproxy/ratelimit does.
//!
//! The entries are matched one level at a time. At each level, for the entry's key, the
//! descriptor with the same value wins, then the first wildcard (`value: prefix*`) in file
//! order whose prefix starts the value, then the descriptor without a value. The search
//! never backtracks: an exact match without the next level fails even when the default has
//! it. The descriptor reached by the last entry decides; a request that runs past the tree
//! or stops at a descriptor without a rule has no limit.

use super::rules::{Choices, Level, Node, Quota, Rule, Rules};
use super::state_key::StateKey;
use super::unit::Unit;
use sluice_core::{Alignment, FixedWindow, Limit};
use std::time::Duration;

/// What applies to one request descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution<'a> {
    /// No rule matches (unknown domain, no descriptor, depth mismatch): the descriptor is not
    /// limited.
    NoRule,
    /// The rule is `unlimited`: allow without counting.
    Unlimited(&'a Rule),
    /// The rule has `requests_per_unit: 0`: the request is over the limit (unless the rule is
    /// in shadow mode).
    Blocked(&'a Rule),
    /// Check `limit` at `key`.
    Limited {
        /// The rule that matched.
        rule: &'a Rule,
        /// The rule's limit.
        limit: &'a Limit,
        /// Where the request is counted: one counter per distinct request.
        key: StateKey,
    },
    /// The descriptor carries its own `limit` (an override set by Envoy's route
    /// configuration), which envoyproxy/ratelimit applies in place of any rule, in any domain
    /// the configuration has, never in shadow mode.
    Overridden {
        /// `requests_per_unit` per `unit` as an aligned fixed window; `None` when the override
        /// allows no request.
        limit: Option<Limit>,
        /// The override's requests per unit.
        requests_per_unit: u32,
        /// The override's unit.
        unit: Unit,
        /// Where the request is counted.
        key: StateKey,
    },
    /// A rule with a limit matched (or an override applies), but its state key would be `len`
    /// bytes, more than a store accepts ([`sluice_core::Key::MAX_LEN`]).
    KeyTooLong {
        /// The rule that matched; `None` for an override.
        rule: Option<&'a Rule>,
        /// The length the key would have had.
        len: usize,
    },
}

impl<'a> Resolution<'a> {
    /// The matched rule, if any.
    pub fn rule(&self) -> Option<&'a Rule> {
        match *self {
            Resolution::NoRule | Resolution::Overridden { .. } => None,
            Resolution::Unlimited(rule) | Resolution::Blocked(rule) | Resolution::Limited { rule, .. } => Some(rule),
            Resolution::KeyTooLong { rule, .. } => rule,
        }
    }

    /// Whether the matched rule is in shadow mode (an over-limit answer becomes OK).
    pub fn shadow_mode(&self) -> bool {
        self.rule().is_some_and(Rule::shadow_mode)
    }
}

impl Rules {
    /// Finds the rule for one descriptor of a request to `domain`: its entries, as
    /// `(key, value)` pairs in order.
    ///
    /// Allocates only the state key of a [`Resolution::Limited`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_server::envoy::{Resolution, Rules};
    ///
    /// let yaml = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 10}\n";
    /// let rules = Rules::from_yaml(&serde_yaml_ng::from_str(yaml)?, &[])?;
    /// let entries = [("remote_address", "10.0.0.1")];
    /// let Resolution::Limited { key, .. } = rules.resolve("edge", entries.iter().copied()) else {
    ///     panic!("the default should match any address");
    /// };
    /// assert_eq!(key.as_str(), "edge|remote_address=10.0.0.1");
    /// assert_eq!(rules.resolve("edge", [("remote_address", "10.0.0.1"), ("path", "/")]), Resolution::NoRule);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve<'e, I>(&self, domain: &str, entries: I) -> Resolution<'_>
    where
        I: IntoIterator<Item = (&'e str, &'e str)>,
        I::IntoIter: Clone,
    {
        let entries = entries.into_iter();
        let found = self.domains.get(domain).and_then(|level| level.find(entries.clone()));
        let Some(rule) = found.and_then(|node| node.rule.as_deref()) else {
            return Resolution::NoRule;
        };
        match &rule.quota {
            Quota::Unlimited => Resolution::Unlimited(rule),
            Quota::Blocked => Resolution::Blocked(rule),
            Quota::Limit(limit) => match StateKey::encode(domain, entries) {
                Ok(key) => Resolution::Limited { rule, limit, key },
                Err(len) => Resolution::KeyTooLong { rule: Some(rule), len },
            },
        }
    }

    /// What applies to a descriptor that carries a `limit` override of `requests_per_unit`
    /// per `unit`: the override, in a domain this configuration has (whatever its rules say);
    /// no limit in another domain, as envoyproxy/ratelimit does.
    pub fn resolve_override<'e, I>(
        &self,
        domain: &str,
        entries: I,
        requests_per_unit: u32,
        unit: Unit,
    ) -> Resolution<'_>
    where
        I: IntoIterator<Item = (&'e str, &'e str)>,
        I::IntoIter: Clone,
    {
        if !self.domains.contains_key(domain) {
            return Resolution::NoRule;
        }
        let limit = FixedWindow::new(u64::from(requests_per_unit), unit.duration(), Alignment::Aligned, Duration::ZERO)
            .ok()
            .map(|window| Limit::new(OVERRIDE_NAME, window));
        match StateKey::encode(domain, entries.into_iter()) {
            Ok(key) => Resolution::Overridden { limit, requests_per_unit, unit, key },
            Err(len) => Resolution::KeyTooLong { rule: None, len },
        }
    }
}

/// The name of every override's limit (in metrics and headers). Overrides of the same
/// size share it; their states stay apart by descriptor, in the state key.
pub const OVERRIDE_NAME: &str = "envoy_override";

impl Level {
    /// The descriptor the last entry reaches, if every entry finds one.
    fn find<'e>(&self, entries: impl Iterator<Item = (&'e str, &'e str)>) -> Option<&Node> {
        let mut level = self;
        let mut reached = None;
        for (key, value) in entries {
            let node = level.keys.get(key)?.pick(value)?;
            level = &node.children;
            reached = Some(node);
        }
        reached
    }
}

impl Choices {
    fn pick(&self, value: &str) -> Option<&Node> {
        self.exact
            .get(value)
            .or_else(|| self.prefixes.iter().find(|(prefix, _)| value.starts_with(&**prefix)).map(|(_, node)| node))
            .or(self.default.as_deref())
    }
}
