//! The loaded rules: one descriptor tree per domain, and the rules at its nodes.

use super::Unit;
use sluice_core::Limit;
use std::collections::HashMap;
use std::sync::Arc;

/// Every domain's descriptor tree, validated, ready to [`resolve`](Rules::resolve) requests.
///
/// The default value has no domains: every request resolves to
/// [`Resolution::NoRule`](super::Resolution::NoRule).
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub(super) domains: HashMap<Box<str>, Level>,
    rules: Vec<Arc<Rule>>,
}

impl Rules {
    pub(super) fn new(domains: HashMap<Box<str>, Level>, rules: Vec<Arc<Rule>>) -> Rules {
        Rules { domains, rules }
    }

    /// Every rule, in file order.
    pub fn rules(&self) -> impl ExactSizeIterator<Item = &Rule> {
        self.rules.iter().map(|rule| &**rule)
    }

    /// The limits of the rules that count requests, in file order.
    pub fn limits(&self) -> impl Iterator<Item = &Limit> {
        self.rules().filter_map(Rule::limit)
    }

    /// The number of rules (counted, unlimited and blocked).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is no rule at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The domains, in no particular order.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(|domain| &**domain)
    }
}

/// What a descriptor with a `rate_limit` (or a Sluice `policy`) does to the requests it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub(super) name: Arc<str>,
    /// Whether `name` is the file's `rate_limit.name` (else it is the rule's path).
    pub(super) named: bool,
    pub(super) domain: Arc<str>,
    pub(super) path: Box<str>,
    pub(super) quota: Quota,
    pub(super) unit: Option<Unit>,
    pub(super) shadow_mode: bool,
    pub(super) detailed_metric: bool,
}

impl Rule {
    /// The rule's name: `rate_limit.name` when given, else its [`path`](Rule::path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `rate_limit.name` the file gives the rule, if any: the only name fit for clients
    /// to see (Envoy prints it in its `x-ratelimit-limit` header), as envoyproxy/ratelimit
    /// reports no name for a rule without one.
    pub fn given_name(&self) -> Option<&str> {
        self.named.then_some(&*self.name)
    }

    /// The domain the rule belongs to.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// envoyproxy/ratelimit's name for the rule (its statistics key): the domain, then each
    /// descriptor as `key_value` or `key`, joined by `.`, such as `messaging.message_type_marketing.to_number`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the rule does.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The limit to check, when the rule counts requests.
    pub fn limit(&self) -> Option<&Limit> {
        match &self.quota {
            Quota::Limit(limit) => Some(limit),
            Quota::Unlimited | Quota::Blocked => None,
        }
    }

    /// The `rate_limit.unit`, when the rule has one (not for `unlimited` or a Sluice `policy`).
    pub fn unit(&self) -> Option<Unit> {
        self.unit
    }

    /// Whether the rule only observes: requests over the limit are counted and reported but
    /// allowed (`shadow_mode: true`).
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// Whether metrics should carry the request's value for this rule (`detailed_metric: true`).
    pub fn detailed_metric(&self) -> bool {
        self.detailed_metric
    }
}

/// The three things a rule can do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Quota {
    /// Count requests against a limit: an aligned fixed window of `requests_per_unit` per
    /// `unit`, or a Sluice policy.
    Limit(Limit),
    /// `unlimited: true`: allow without counting (envoyproxy/ratelimit answers OK without
    /// asking its cache, with `limit_remaining` at `u32::MAX`).
    Unlimited,
    /// `requests_per_unit: 0`: every request is over the limit (envoyproxy/ratelimit's way to
    /// block a value); there is nothing to count.
    Blocked,
}

/// One level of a descriptor tree: the descriptors under a domain or under a descriptor,
/// grouped by key.
#[derive(Clone, Debug, Default)]
pub(super) struct Level {
    pub(super) keys: HashMap<Box<str>, Choices>,
}

/// The descriptors of one level that share a key.
#[derive(Clone, Debug, Default)]
pub(super) struct Choices {
    /// `value: users`, looked up first.
    pub(super) exact: HashMap<Box<str>, Node>,
    /// `value: /api/*`, stored without the `*`; tried next, in file order.
    pub(super) prefixes: Vec<(Box<str>, Node)>,
    /// No value: matches any value, tried last.
    pub(super) default: Option<Box<Node>>,
}

/// One descriptor: its rule, if any, and the descriptors nested under it.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    pub(super) rule: Option<Arc<Rule>>,
    pub(super) children: Level,
}
