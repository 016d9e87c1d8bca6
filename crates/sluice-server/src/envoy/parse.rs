//! Building [`Rules`] from YAML, reporting every problem with its path.

mod spec;

use super::rules::{Level, Node, Quota, Rule, Rules};
use serde_yaml_ng::{Mapping, Value};
use sluice_config::{Fields, join, text};
use sluice_core::{ConfigError, Limit};
use spec::{Kind, Spec};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

const FILE_FIELDS: &[&str] = &["domain", "descriptors", "policies"];
const MULTI_DOMAIN_FIELDS: &[&str] = &["domains", "policies"];
const DOMAIN_FIELDS: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR_FIELDS: &[&str] =
    &["key", "value", "rate_limit", "policy", "shadow_mode", "detailed_metric", "descriptors"];
/// Fields of newer envoyproxy/ratelimit versions, refused with a message of their own.
const NEWER_DESCRIPTOR_FIELDS: &[&str] = &["share_threshold", "value_to_metric"];

/// Reads one file, keeping the problems and the rules (in file order) found so far.
pub(super) struct Parser<'p> {
    policies: &'p [Limit],
    problems: ConfigError,
    rules: Vec<Arc<Rule>>,
}

impl Rules {
    /// Loads a whole configuration file, already parsed as YAML: either an envoyproxy/ratelimit
    /// file (`domain` and `descriptors`) or Sluice's form with a `domains` list. A top-level
    /// `policies` section is allowed in both; it is parsed by the caller into `policies`.
    ///
    /// # Errors
    ///
    /// Every problem found, each with its path, such as
    /// `descriptors[2].rate_limit.unit: unknown unit "fortnight" (second, minute, hour, day, week)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sluice_server::envoy::{Resolution, Rules};
    ///
    /// let yaml = "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit: {unit: second, requests_per_unit: 500}\n";
    /// let rules = Rules::from_yaml(&serde_yaml_ng::from_str(yaml)?, &[])?;
    /// let Resolution::Limited { limit, key, .. } = rules.resolve("mongo_cps", [("database", "users")]) else {
    ///     panic!("the rule should match");
    /// };
    /// assert_eq!(limit.name(), "mongo_cps.database_users");
    /// assert_eq!(key.as_str(), "mongo_cps|database=users");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_yaml(top: &Value, policies: &[Limit]) -> Result<Rules, ConfigError> {
        Parser::new(policies).file(top)
    }

    /// Loads only a `domains` list, for a configuration whose top level holds more sections.
    /// Problem paths start with `domains`.
    ///
    /// # Errors
    ///
    /// Every problem found, each with its path.
    pub fn from_domains(domains: &Value, policies: &[Limit]) -> Result<Rules, ConfigError> {
        Parser::new(policies).domains(domains)
    }
}

/// Where a list of descriptors sits: its domain, and envoyproxy/ratelimit's dotted path.
struct Scope {
    domain: Arc<str>,
    path: String,
}

/// How a descriptor matches the value of an entry with its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Matcher {
    Exact(Box<str>),
    Prefix(Box<str>),
    Default,
}

impl<'p> Parser<'p> {
    pub(super) fn new(policies: &'p [Limit]) -> Self {
        Parser { policies, problems: ConfigError::default(), rules: Vec::new() }
    }

    /// A whole file: one envoyproxy/ratelimit domain, or a `domains` list.
    pub(super) fn file(mut self, top: &Value) -> Result<Rules, ConfigError> {
        let mut domains = HashMap::new();
        match top.as_mapping() {
            None => self.problems.push("", "must be a mapping with `domain` and `descriptors`, or with `domains`"),
            Some(top) => match top.get("domains") {
                Some(list) => {
                    Fields::new(top, "").finish(MULTI_DOMAIN_FIELDS, &[], &mut self.problems);
                    domains = self.domain_list(list, "domains");
                }
                None => {
                    Fields::new(top, "").finish(FILE_FIELDS, &[], &mut self.problems);
                    domains.extend(self.domain(top, ""));
                }
            },
        }
        self.problems.into_result(Rules::new(domains, self.rules))
    }

    /// A `domains` list alone.
    pub(super) fn domains(mut self, list: &Value) -> Result<Rules, ConfigError> {
        let domains = self.domain_list(list, "domains");
        self.problems.into_result(Rules::new(domains, self.rules))
    }

    fn domain_list(&mut self, list: &Value, path: &str) -> HashMap<Box<str>, Level> {
        let mut domains = HashMap::new();
        let Some(items) = list.as_sequence().filter(|items| !items.is_empty()) else {
            self.problems.push(path, "must be a list of at least one domain, each with `domain` and `descriptors`");
            return domains;
        };
        let mut first_at = HashMap::new();
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let Some(mapping) = item.as_mapping() else {
                self.problems.push(&item_path, "must be a mapping with `domain` and `descriptors`");
                continue;
            };
            Fields::new(mapping, &item_path).finish(DOMAIN_FIELDS, &[], &mut self.problems);
            let Some((name, level)) = self.domain(mapping, &item_path) else { continue };
            match first_at.entry(name.clone()) {
                Entry::Occupied(first) => {
                    let message = format!("duplicate domain \"{name}\" (first at {})", first.get());
                    self.problems.push(&join(&item_path, "domain"), message);
                }
                Entry::Vacant(slot) => {
                    slot.insert(item_path);
                    domains.insert(name, level);
                }
            }
        }
        domains
    }

    /// The `domain` and `descriptors` of `mapping` (whose other fields the caller checks).
    fn domain(&mut self, mapping: &Mapping, path: &str) -> Option<(Box<str>, Level)> {
        let fields = Fields::new(mapping, path);
        let name = fields.require("domain", &mut self.problems, name_text);
        let scope =
            Scope { domain: Arc::from(name.as_deref().unwrap_or_default()), path: name.clone().unwrap_or_default() };
        let level = self.level(fields.value("descriptors"), &fields.path("descriptors"), &scope);
        Some((name?.into_boxed_str(), level))
    }

    fn level(&mut self, list: Option<&Value>, path: &str, scope: &Scope) -> Level {
        let mut level = Level::default();
        let Some(list) = list else { return level };
        let Some(items) = list.as_sequence() else {
            self.problems.push(path, "must be a list of descriptors, each with a `key`");
            return level;
        };
        let mut first_at = HashMap::new();
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let Some((key, matcher, node)) = self.descriptor(item, &item_path, scope) else { continue };
            match first_at.entry((key.clone(), matcher.clone())) {
                Entry::Occupied(first) => {
                    let message =
                        format!("duplicate descriptor {} (first at {})", describe(&key, &matcher), first.get());
                    self.problems.push(&item_path, message);
                }
                Entry::Vacant(slot) => {
                    slot.insert(item_path);
                    level.insert(key, matcher, node);
                }
            }
        }
        level
    }

    fn descriptor(&mut self, item: &Value, path: &str, scope: &Scope) -> Option<(Box<str>, Matcher, Node)> {
        let Some(mapping) = item.as_mapping() else {
            self.problems.push(path, "must be a mapping with a `key`");
            return None;
        };
        let fields = Fields::new(mapping, path);
        let key = fields.require("key", &mut self.problems, name_text);
        let value = fields.text("value", &mut self.problems);
        let matcher = self.matcher(value.as_deref(), &fields.path("value"));
        let shadow_mode = fields.flag("shadow_mode", &mut self.problems);
        let detailed_metric = fields.flag("detailed_metric", &mut self.problems);
        let spec = self.spec(&fields).map(|spec| Spec { shadow_mode, detailed_metric, ..spec });
        fields.finish(DESCRIPTOR_FIELDS, NEWER_DESCRIPTOR_FIELDS, &mut self.problems);
        let segment = match &value {
            Some(value) => format!("{}_{value}", key.as_deref().unwrap_or_default()),
            None => key.clone().unwrap_or_default(),
        };
        let scope = Scope { domain: scope.domain.clone(), path: format!("{}.{segment}", scope.path) };
        let rule = spec.map(|spec| self.rule(spec, &scope));
        let children = self.level(fields.value("descriptors"), &fields.path("descriptors"), &scope);
        Some((key?.into_boxed_str(), matcher?, Node { rule, children }))
    }

    fn matcher(&mut self, value: Option<&str>, path: &str) -> Option<Matcher> {
        let Some(value) = value else { return Some(Matcher::Default) };
        let stem = value.strip_suffix('*');
        if stem.unwrap_or(value).contains('*') {
            let message = "a `*` may only end a value (a prefix match); inner wildcards are not supported";
            self.problems.push(path, message);
            return None;
        }
        Some(match stem {
            Some(prefix) => Matcher::Prefix(prefix.into()),
            None => Matcher::Exact(value.into()),
        })
    }

    fn rule(&mut self, spec: Spec, scope: &Scope) -> Arc<Rule> {
        let named = spec.name.is_some();
        let name: Arc<str> = Arc::from(spec.name.unwrap_or_else(|| scope.path.clone()));
        let quota = match spec.kind {
            Kind::Count(policy) => Quota::Limit(Limit::new(name.clone(), policy)),
            Kind::Unlimited => Quota::Unlimited,
            Kind::Blocked => Quota::Blocked,
        };
        let rule = Arc::new(Rule {
            name,
            named,
            domain: scope.domain.clone(),
            path: scope.path.as_str().into(),
            quota,
            unit: spec.unit,
            shadow_mode: spec.shadow_mode,
            detailed_metric: spec.detailed_metric,
        });
        self.rules.push(rule.clone());
        rule
    }
}

impl Level {
    fn insert(&mut self, key: Box<str>, matcher: Matcher, node: Node) {
        let choices = self.keys.entry(key).or_default();
        match matcher {
            Matcher::Exact(value) => {
                choices.exact.insert(value, node);
            }
            Matcher::Prefix(prefix) => choices.prefixes.push((prefix, node)),
            Matcher::Default => choices.default = Some(Box::new(node)),
        }
    }
}

/// Text that must not be empty: a domain, a key, a name.
fn name_text(value: &Value) -> Result<String, String> {
    let text = text(value)?;
    if text.is_empty() { Err("must not be empty".to_owned()) } else { Ok(text) }
}

/// A descriptor in messages: `key "path" value "/api/*"`.
fn describe(key: &str, matcher: &Matcher) -> String {
    match matcher {
        Matcher::Exact(value) => format!("key \"{key}\" value \"{value}\""),
        Matcher::Prefix(prefix) => format!("key \"{key}\" value \"{prefix}*\""),
        Matcher::Default => format!("key \"{key}\" without a value"),
    }
}
