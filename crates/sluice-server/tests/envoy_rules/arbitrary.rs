//! No input makes loading or resolving panic.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_yaml_ng::{Mapping, Value};
use sluice_core::Key;
use sluice_server::envoy::{Resolution, Rules};

/// Field names the loader knows, some it refuses by name, and a stranger, so that generated
/// files reach deep into the parser instead of stopping at the first unknown field.
const NAMES: &[&str] = &[
    "domain",
    "domains",
    "descriptors",
    "key",
    "value",
    "rate_limit",
    "policy",
    "shadow_mode",
    "detailed_metric",
    "unit",
    "requests_per_unit",
    "unlimited",
    "name",
    "replaces",
    "policies",
    "share_threshold",
    "other",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        (0u64..3).prop_map(|n| Value::Number(n.into())),
        any::<f64>().prop_map(|n| Value::Number(n.into())),
        prop::sample::select(&["second", "MINUTE", "week", "month", "a*", "a*b", "*", "", "api"][..])
            .prop_map(|text| Value::String(text.to_owned())),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn yaml() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Sequence),
            prop::collection::vec((prop::sample::select(NAMES), inner), 0..6).prop_map(|fields| {
                let mapping: Mapping =
                    fields.into_iter().map(|(name, value)| (Value::String(name.to_owned()), value)).collect();
                Value::Mapping(mapping)
            }),
        ]
    })
}

/// Descriptor trees that are mostly valid, over a small alphabet, so that resolution finds
/// rules; any field may still be replaced by arbitrary YAML.
fn descriptors() -> impl Strategy<Value = Value> {
    let leaf = Just(Value::Null);
    leaf.prop_recursive(4, 48, 4, |children| {
        let key = prop_oneof![8 => prop::sample::select(&["a", "b"][..]), 1 => Just("")];
        let value = prop_oneof![8 => prop::sample::select(&["x", "y", "x*", "*", ""][..]), 1 => Just("x*y")];
        let descriptor = (
            key,
            prop::option::of(value),
            prop::option::weighted(0.7, rate_limit()),
            prop::option::of(any::<bool>()),
            children,
            prop::option::weighted(0.05, yaml()),
        );
        let descriptor = descriptor.prop_map(|(key, value, rate_limit, shadow, children, junk)| {
            let mut mapping = Mapping::new();
            mapping.insert("key".into(), key.into());
            mapping.extend(value.map(|value| ("value".into(), value.into())));
            mapping.extend(rate_limit.map(|rate_limit| ("rate_limit".into(), rate_limit)));
            mapping.extend(shadow.map(|shadow| ("shadow_mode".into(), shadow.into())));
            mapping.insert("descriptors".into(), children);
            mapping.extend(junk.map(|junk| (Value::String(NAMES[junk_index(&junk)].to_owned()), junk)));
            Value::Mapping(mapping)
        });
        prop::collection::vec(descriptor, 0..4).prop_map(Value::Sequence)
    })
}

fn rate_limit() -> impl Strategy<Value = Value> {
    let units = prop_oneof![8 => prop::sample::select(&["second", "DAY", "week"][..]), 1 => Just("month")];
    prop_oneof![
        (units, 0u64..4).prop_map(|(unit, count)| {
            let mut mapping = Mapping::new();
            mapping.insert("unit".into(), unit.into());
            mapping.insert("requests_per_unit".into(), count.into());
            Value::Mapping(mapping)
        }),
        Just(serde_yaml_ng::from_str("{unlimited: true}").unwrap()),
        Just(serde_yaml_ng::from_str("{name: n, unit: hour, requests_per_unit: 2}").unwrap()),
    ]
}

/// Picks a field name for a junk value, deterministically from the value.
fn junk_index(junk: &Value) -> usize {
    format!("{junk:?}").len() % NAMES.len()
}

fn entries() -> impl Strategy<Value = Vec<(String, String)>> {
    let key = prop_oneof![4 => prop::sample::select(&["a", "b"][..]).prop_map(str::to_owned), 1 => ".{0,3}"];
    let value = prop_oneof![
        4 => prop::sample::select(&["x", "y", "xz", "", "*"][..]).prop_map(str::to_owned),
        1 => "x.{0,4}",
        1 => ".{1000,1100}",
    ];
    prop::collection::vec((key, value), 0..4)
}

/// Every request of one to three entries over the keys and values the trees use.
fn small_requests() -> Vec<Vec<(&'static str, &'static str)>> {
    let entries: Vec<(&str, &str)> =
        ["a", "b"].into_iter().flat_map(|key| ["x", "y", "xz", ""].map(|value| (key, value))).collect();
    let mut requests: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
    let mut last = requests.clone();
    for _ in 0..3 {
        last = last.iter().flat_map(|request| entries.iter().map(|entry| [&request[..], &[*entry]].concat())).collect();
        requests.extend(last.iter().cloned());
    }
    requests
}

/// A rule found for a request sits at the request's depth, one descriptor per entry, each
/// with the entry's key; a counted rule's state key fits a store.
fn check_resolution(rules: &Rules, request: &[(&str, &str)]) -> Result<(), TestCaseError> {
    let resolution = rules.resolve("d", request.iter().copied());
    if let Resolution::Limited { key, .. } = &resolution {
        prop_assert!(Key::new(key.as_bytes()).is_ok());
    }
    let Some(rule) = resolution.rule() else { return Ok(()) };
    let segments: Vec<&str> = rule.path().split('.').collect();
    prop_assert_eq!(segments.len(), request.len() + 1, "{} for {:?}", rule.path(), request);
    for (segment, (key, _)) in segments[1..].iter().zip(request) {
        prop_assert!(*segment == *key || segment.starts_with(&format!("{key}_")), "{} for {:?}", rule.path(), request);
    }
    prop_assert!(rules.rules().any(|listed| listed == rule));
    Ok(())
}

proptest! {
    // Failures are saved beside this file (the default looks for a lib.rs or main.rs).
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/envoy_rules/arbitrary.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn loading_and_resolving_never_panic(top in yaml(), domain in "[a-z]{0,3}", entries in entries()) {
        let refill_interval = std::time::Duration::from_secs(1);
        let bucket = sluice_core::TokenBucketSettings { capacity: 5, refill_amount: 1, refill_interval };
        let policies = [sluice_core::Limit::new("api", sluice_core::TokenBucket::new(bucket).unwrap())];
        let Ok(rules) = Rules::from_yaml(&top, &policies) else { return Ok(()) };
        let _ = Rules::from_domains(&top, &policies);
        let pairs: Vec<(&str, &str)> = entries.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
        for domain in rules.domains().chain([domain.as_str()]) {
            if let Resolution::Limited { key, .. } = rules.resolve(domain, pairs.iter().copied()) {
                prop_assert!(Key::new(key.as_bytes()).is_ok());
            }
        }
    }

    #[test]
    fn nearly_valid_trees_resolve_to_rules_at_the_requests_depth(tree in descriptors(), entries in entries()) {
        let mut top = Mapping::new();
        top.insert("domain".into(), "d".into());
        top.insert("descriptors".into(), tree);
        let Ok(rules) = Rules::from_yaml(&Value::Mapping(top), &[]) else { return Ok(()) };
        let random: Vec<(&str, &str)> = entries.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
        for request in small_requests().into_iter().chain([random]) {
            check_resolution(&rules, &request)?;
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        if let Ok(top) = serde_yaml_ng::from_str::<Value>(&text) {
            let _ = Rules::from_yaml(&top, &[]);
        }
    }
}
