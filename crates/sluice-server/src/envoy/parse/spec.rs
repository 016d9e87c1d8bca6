//! The part of a descriptor that makes it a rule: its `rate_limit` or its Sluice `policy`.

use super::{Parser, name_text};
use crate::envoy::Unit;
use serde_yaml_ng::Value;
use sluice_config::{Fields, show, text};
use sluice_core::{Alignment, FixedWindow, Limit, Policy};
use std::time::Duration;

const RATE_LIMIT_FIELDS: &[&str] = &["unit", "requests_per_unit", "unlimited", "name", "replaces"];
/// Fields of newer envoyproxy/ratelimit versions, refused with a message of their own.
const NEWER_RATE_LIMIT_FIELDS: &[&str] = &["unit_multiplier"];

/// What a `rate_limit` or `policy` asks for, before the rule's name is known.
pub(super) struct Spec {
    pub(super) name: Option<String>,
    pub(super) unit: Option<Unit>,
    pub(super) kind: Kind,
    pub(super) shadow_mode: bool,
    pub(super) detailed_metric: bool,
}

/// What the rule will do.
pub(super) enum Kind {
    Count(Policy),
    Unlimited,
    Blocked,
}

impl Parser<'_> {
    /// The descriptor's `rate_limit` or Sluice `policy`, if it has one.
    pub(super) fn spec(&mut self, fields: &Fields<'_>) -> Option<Spec> {
        let rate_limit = fields.value("rate_limit");
        let policy = fields.value("policy");
        if rate_limit.is_some() && policy.is_some() {
            self.problems.push(&fields.path("policy"), "cannot be combined with `rate_limit`");
            return None;
        }
        if let Some(rate_limit) = rate_limit {
            return self.rate_limit(rate_limit, &fields.path("rate_limit"));
        }
        policy.and_then(|policy| self.policy(policy, &fields.path("policy")))
    }

    fn rate_limit(&mut self, value: &Value, path: &str) -> Option<Spec> {
        let Some(mapping) = value.as_mapping() else {
            self.problems.push(path, "must be a mapping with `unit` and `requests_per_unit`, or `unlimited: true`");
            return None;
        };
        let fields = Fields::new(mapping, path);
        let unlimited = fields.flag("unlimited", &mut self.problems);
        let name = fields.text("name", &mut self.problems);
        self.replaces(&fields, name.as_deref());
        let counted = if unlimited {
            // envoyproxy/ratelimit refuses a unit here too, and ignores `requests_per_unit`.
            if fields.value("unit").is_some() {
                self.problems.push(&fields.path("unit"), "must not be set when `unlimited` is true");
            }
            Some((Kind::Unlimited, None))
        } else {
            self.window(&fields)
        };
        fields.finish(RATE_LIMIT_FIELDS, NEWER_RATE_LIMIT_FIELDS, &mut self.problems);
        let (kind, unit) = counted?;
        Some(Spec { name, unit, kind, shadow_mode: false, detailed_metric: false })
    }

    /// `requests_per_unit` per `unit`, as an aligned fixed window; zero blocks every request.
    fn window(&mut self, fields: &Fields<'_>) -> Option<(Kind, Option<Unit>)> {
        let unit = fields.require("unit", &mut self.problems, |value| Unit::parse(&text(value)?));
        let requests = fields.require("requests_per_unit", &mut self.problems, requests_per_unit);
        let (unit, requests) = (unit?, requests?);
        if requests == 0 {
            return Some((Kind::Blocked, Some(unit)));
        }
        match FixedWindow::new(u64::from(requests), unit.duration(), Alignment::Aligned, Duration::ZERO) {
            Ok(window) => Some((Kind::Count(window.into()), Some(unit))),
            Err(error) => {
                self.problems.push(&fields.path("requests_per_unit"), error.to_string());
                None
            }
        }
    }

    /// Checks the shape of `replaces`, which is otherwise ignored.
    fn replaces(&mut self, fields: &Fields<'_>, own_name: Option<&str>) {
        let Some(list) = fields.value("replaces") else { return };
        let path = fields.path("replaces");
        let Some(items) = list.as_sequence() else {
            self.problems.push(&path, "must be a list of mappings with a `name`");
            return;
        };
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let Some(mapping) = item.as_mapping() else {
                self.problems.push(&item_path, "must be a mapping with a `name`");
                continue;
            };
            let entry = Fields::new(mapping, &item_path);
            let name = entry.require("name", &mut self.problems, name_text);
            entry.finish(&["name"], &[], &mut self.problems);
            if name.is_some() && name.as_deref() == own_name {
                self.problems.push(&entry.path("name"), "must not name the rule itself");
            }
        }
    }

    fn policy(&mut self, value: &Value, path: &str) -> Option<Spec> {
        let name = name_text(value).map_err(|message| self.problems.push(path, message)).ok()?;
        let Some(limit) = self.policies.iter().find(|limit| limit.name() == name) else {
            let defined: Vec<&str> = self.policies.iter().map(Limit::name).collect();
            let known = if defined.is_empty() { "no policies are defined".to_owned() } else { defined.join(", ") };
            self.problems.push(path, format!("unknown policy \"{name}\" ({known})"));
            return None;
        };
        let kind = Kind::Count(limit.policy().clone());
        Some(Spec { name: None, unit: None, kind, shadow_mode: false, detailed_metric: false })
    }
}

fn requests_per_unit(value: &Value) -> Result<u32, String> {
    let count = value.as_u64().and_then(|count| u32::try_from(count).ok());
    count.ok_or_else(|| format!("must be a whole number from 0 to {}, got {}", u32::MAX, show(value)))
}
