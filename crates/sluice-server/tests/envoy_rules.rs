//! Loading envoyproxy/ratelimit rules and resolving Envoy descriptors against them.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

// The tests live in `tests/envoy_rules/`, which Cargo does not take for test targets.
mod envoy_rules {
    mod arbitrary;
    mod errors;
    mod fixtures;
    mod matching;
}

use serde_yaml_ng::Value;
use sluice_core::config::parse_policies;
use sluice_core::{ConfigError, Limit, Policy};
use sluice_server::envoy::{Resolution, Rule, Rules};

/// Loads a file as the server will: its `policies` section first, then the rules.
pub(crate) fn load(text: &str) -> Result<Rules, ConfigError> {
    let top: Value = serde_yaml_ng::from_str(text).unwrap();
    let policies = match top.get("policies").and_then(Value::as_mapping) {
        Some(section) => {
            let mut problems = ConfigError::default();
            let policies = parse_policies(section, &mut problems);
            problems.into_result(policies).unwrap()
        }
        None => Vec::new(),
    };
    Rules::from_yaml(&top, &policies)
}

/// Loads a file that must be valid.
pub(crate) fn rules(text: &str) -> Rules {
    load(text).unwrap_or_else(|error| panic!("{error}"))
}

/// The problems of a file that must be invalid, as `path: message` lines.
pub(crate) fn problems(text: &str) -> Vec<String> {
    let error = load(text).expect_err("the file should be refused");
    error.problems.iter().map(ToString::to_string).collect()
}

/// A resolution in one line, for table tests:
/// `limit <name> <limit>/<window> at <state key>`, `unlimited <name>`, `blocked <name>`,
/// `no rule`; ` (shadow)` is appended for rules in shadow mode.
pub(crate) fn outcome(resolution: &Resolution<'_>) -> String {
    let text = match resolution {
        Resolution::NoRule => return "no rule".to_owned(),
        Resolution::Unlimited(rule) => format!("unlimited {}", rule.name()),
        Resolution::Blocked(rule) => format!("blocked {}", rule.name()),
        Resolution::Limited { limit, key, .. } => format!("limit {} {} at {key}", limit.name(), quota(limit)),
        Resolution::KeyTooLong { rule, len } => {
            format!("key of {len} bytes for {}", rule.map_or("an override", Rule::name))
        }
        Resolution::Overridden { limit, key, .. } => match limit {
            Some(limit) => format!("override {} at {key}", quota(limit)),
            None => format!("override blocking at {key}"),
        },
    };
    if resolution.shadow_mode() { format!("{text} (shadow)") } else { text }
}

fn quota(limit: &Limit) -> String {
    match limit.policy() {
        Policy::FixedWindow(window) => format!("{}/{:?}", window.limit(), window.window()),
        other => other.algorithm_name().to_owned(),
    }
}

/// One table row: a domain, a descriptor's entries, and the expected [`outcome`].
pub(crate) type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

/// Checks each row.
pub(crate) fn check_table(rules: &Rules, rows: &[Row<'_>]) {
    for (domain, entries, expected) in rows {
        let resolution = rules.resolve(domain, entries.iter().copied());
        assert_eq!(outcome(&resolution), *expected, "domain {domain:?}, entries {entries:?}");
    }
}
