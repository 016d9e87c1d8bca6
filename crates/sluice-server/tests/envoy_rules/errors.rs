//! Refused files: every problem, each with its path.

use crate::{load, problems};

#[test]
fn an_unknown_unit_names_the_units_that_exist() {
    let file = "
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: fortnight, requests_per_unit: 1}
";
    assert_eq!(
        problems(file),
        [r#"descriptors[2].rate_limit.unit: unknown unit "fortnight" (second, minute, hour, day, week)"#]
    );
    let month = problems(&file.replace("fortnight", "month"));
    assert_eq!(
        month,
        [
            r#"descriptors[2].rate_limit.unit: unit "month" is not supported: months and years vary in length (second, minute, hour, day, week)"#
        ]
    );
}

#[test]
fn a_missing_requests_per_unit_is_not_taken_as_zero() {
    // envoyproxy/ratelimit reads a missing count as 0, which blocks every request.
    let file = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second}\n";
    assert_eq!(problems(file), ["descriptors[0].rate_limit.requests_per_unit: is required"]);
    let negative = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n";
    assert_eq!(
        problems(negative),
        ["descriptors[0].rate_limit.requests_per_unit: must be a whole number from 0 to 4294967295, got -1"]
    );
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    let file = "
domain: d
domian: typo
descriptors:
  - key: a
    limit: 5
    rate_limit: {unit: second, requests_per_unit: 1, burst: 2}
    share_threshold: true
";
    assert_eq!(
        problems(file),
        [
            "domian: unknown field, expected one of: domain, descriptors, policies (did you mean `domain`?)",
            "descriptors[0].rate_limit.burst: unknown field, expected one of: unit, requests_per_unit, unlimited, name, replaces",
            "descriptors[0].limit: unknown field, expected one of: key, value, rate_limit, policy, shadow_mode, detailed_metric, descriptors",
            "descriptors[0].share_threshold: is a newer envoyproxy/ratelimit feature that sluice does not support",
        ]
    );
}

#[test]
fn duplicate_descriptors_at_one_level_are_refused() {
    let file = "
domain: d
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: parent
    descriptors:
      - key: path
        value: /api/*
      - key: path
      - key: path
        value: /api/*
      - key: path
";
    assert_eq!(
        problems(file),
        [
            r#"descriptors[1]: duplicate descriptor key "database" value "users" (first at descriptors[0])"#,
            r#"descriptors[2].descriptors[2]: duplicate descriptor key "path" value "/api/*" (first at descriptors[2].descriptors[0])"#,
            r#"descriptors[2].descriptors[3]: duplicate descriptor key "path" without a value (first at descriptors[2].descriptors[1])"#,
        ]
    );
}

#[test]
fn a_policy_must_exist_and_excludes_a_rate_limit() {
    let file = "
policies:
  api: {algorithm: token_bucket, capacity: 100, refill_amount: 10, refill_interval: 1s}
domains:
  - domain: edge
    descriptors:
      - key: api_key
        policy: apii
      - key: user
        policy: api
        rate_limit: {unit: second, requests_per_unit: 1}
";
    assert_eq!(
        problems(file),
        [
            r#"domains[0].descriptors[0].policy: unknown policy "apii" (api)"#,
            "domains[0].descriptors[1].policy: cannot be combined with `rate_limit`",
        ]
    );
    let without_policies = "domain: d\ndescriptors:\n  - key: a\n    policy: api\n";
    assert_eq!(
        problems(without_policies),
        [r#"descriptors[0].policy: unknown policy "api" (no policies are defined)"#]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let file = "
domains:
  - domain: edge
    descriptors:
      - key: ''
        rate_limit: {unlimited: true, unit: second}
      - key: path
        value: /a*b
      - key: n
        value: 1.50
        shadow_mode: yes
  - domain: edge
  - descriptors: []
";
    assert_eq!(
        problems(file),
        [
            "domains[0].descriptors[0].key: must not be empty",
            "domains[0].descriptors[0].rate_limit.unit: must not be set when `unlimited` is true",
            "domains[0].descriptors[1].value: a `*` may only end a value (a prefix match); inner wildcards are not supported",
            "domains[0].descriptors[2].value: must be text: quote it, or it reads as the number 1.5",
            "domains[0].descriptors[2].shadow_mode: must be true or false, got yes",
            r#"domains[1].domain: duplicate domain "edge" (first at domains[0])"#,
            "domains[2].domain: is required",
        ]
    );
}

#[test]
fn replaces_is_checked_but_not_applied() {
    let file = "
domain: d
descriptors:
  - key: a
    rate_limit:
      name: mine
      unit: second
      requests_per_unit: 1
      replaces: [{name: mine}, {name: ''}, {other: x}]
";
    assert_eq!(
        problems(file),
        [
            "descriptors[0].rate_limit.replaces[0].name: must not name the rule itself",
            "descriptors[0].rate_limit.replaces[1].name: must not be empty",
            "descriptors[0].rate_limit.replaces[2].name: is required",
            "descriptors[0].rate_limit.replaces[2].other: unknown field, expected one of: name",
        ]
    );
}

#[test]
fn the_top_level_must_be_one_of_the_two_forms() {
    assert_eq!(problems("[1, 2]"), ["must be a mapping with `domain` and `descriptors`, or with `domains`"]);
    assert_eq!(problems("descriptors: []"), ["domain: is required"]);
    assert_eq!(
        problems("domain: d\ndomains: []"),
        [
            "domain: unknown field, expected one of: domains, policies (did you mean `domains`?)",
            "domains: must be a list of at least one domain, each with `domain` and `descriptors`",
        ]
    );
    assert_eq!(
        problems("domain: d\ndescriptors: {key: a}"),
        ["descriptors: must be a list of descriptors, each with a `key`"]
    );
}

#[test]
fn what_envoyproxy_ratelimit_accepts_loads() {
    // A domain without descriptors, nulls for absent fields, a number as a value, an empty
    // value (no value), and `requests_per_unit` beside `unlimited` (ignored, as there).
    let file = "
domain: d
descriptors:
  - key: a
    value: 5
    rate_limit:
  - key: b
    value: ''
    rate_limit: {unlimited: true, requests_per_unit: 7}
    descriptors:
";
    let rules = load(file).unwrap();
    assert_eq!(rules.len(), 1);
    assert!(load("domain: empty").unwrap().is_empty());
}
