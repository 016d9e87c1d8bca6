//! Which rule a descriptor reaches: exact, then wildcard, then default, level by level.

use crate::{check_table, outcome, rules};
use sluice_core::Key;
use sluice_server::envoy::{Quota, Resolution, Unit};

const MONGO: &str = r#"
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 500}
  - key: database
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
    shadow_mode: true
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit: {unit: hour, requests_per_unit: 100, name: my_rule}
      - key: destination_cluster
        rate_limit: {unlimited: true}
  - key: path
    value: "/v1/*"
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: path
    value: "/v1/users/*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: "/v1/admin"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: blocked_user
    rate_limit: {unit: second, requests_per_unit: 0}
"#;

#[test]
fn exact_beats_wildcard_beats_default() {
    let rules = rules(MONGO);
    check_table(
        &rules,
        &[
            (
                "mongo_cps",
                &[("database", "users")],
                "limit mongo_cps.database_users 500/1s at mongo_cps|database=users",
            ),
            ("mongo_cps", &[("database", "orders")], "limit mongo_cps.database 50/60s at mongo_cps|database=orders"),
            ("mongo_cps", &[("path", "/v1/admin")], "limit mongo_cps.path_/v1/admin 1/1s at mongo_cps|path=/v1/admin"),
            ("mongo_cps", &[("path", "/v1/orders")], "limit mongo_cps.path_/v1/* 5/1s at mongo_cps|path=/v1/orders"),
            ("mongo_cps", &[("path", "/v1/")], "limit mongo_cps.path_/v1/* 5/1s at mongo_cps|path=/v1/"),
            // Wildcards are tried in file order, as envoyproxy/ratelimit does: the first one
            // listed wins even when a later one has a longer prefix.
            ("mongo_cps", &[("path", "/v1/users/7")], "limit mongo_cps.path_/v1/* 5/1s at mongo_cps|path=/v1/users/7"),
            ("mongo_cps", &[("path", "/v2/orders")], "limit mongo_cps.path 1000/86400s at mongo_cps|path=/v2/orders"),
            // Keys and values are case-sensitive.
            ("mongo_cps", &[("Database", "users")], "no rule"),
        ],
    );
}

#[test]
fn nested_descriptors_match_entry_by_entry() {
    let rules = rules(MONGO);
    check_table(
        &rules,
        &[
            (
                "mongo_cps",
                &[("source_cluster", "proxy"), ("destination_cluster", "bar")],
                "limit my_rule 100/3600s at mongo_cps|source_cluster=proxy|destination_cluster=bar",
            ),
            (
                "mongo_cps",
                &[("source_cluster", "proxy"), ("destination_cluster", "baz")],
                "unlimited mongo_cps.source_cluster_proxy.destination_cluster",
            ),
            // Stops at a descriptor without a rule.
            ("mongo_cps", &[("source_cluster", "proxy")], "no rule"),
            ("mongo_cps", &[("source_cluster", "other"), ("destination_cluster", "bar")], "no rule"),
        ],
    );
}

#[test]
fn a_request_deeper_or_shallower_than_the_tree_has_no_rule() {
    let rules = rules(MONGO);
    check_table(
        &rules,
        &[
            ("mongo_cps", &[("database", "users"), ("collection", "accounts")], "no rule"),
            ("mongo_cps", &[("source_cluster", "proxy"), ("destination_cluster", "bar"), ("x", "y")], "no rule"),
            ("mongo_cps", &[], "no rule"),
            ("unknown_domain", &[("database", "users")], "no rule"),
        ],
    );
}

#[test]
fn matching_never_backtracks_from_an_exact_value_to_the_default() {
    let rules = rules(
        "
domain: nest
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: user
        value: alice
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    value: partner
",
    );
    check_table(
        &rules,
        &[
            (
                "nest",
                &[("tenant", "acme"), ("user", "alice")],
                "limit nest.tenant_acme.user_alice 1/1s at nest|tenant=acme|user=alice",
            ),
            // `tenant=acme` is found, and has no `user=bob`: the default tenant is not tried.
            ("nest", &[("tenant", "acme"), ("user", "bob")], "no rule"),
            (
                "nest",
                &[("tenant", "other"), ("user", "bob")],
                "limit nest.tenant.user 2/1s at nest|tenant=other|user=bob",
            ),
            // A value listed without a rate_limit or children is whitelisted.
            ("nest", &[("tenant", "partner"), ("user", "bob")], "no rule"),
        ],
    );
}

#[test]
fn shadow_mode_unlimited_and_zero_requests_are_reported_as_such() {
    let rules = rules(MONGO);
    check_table(
        &rules,
        &[
            (
                "mongo_cps",
                &[("remote_address", "10.0.0.1")],
                "limit mongo_cps.remote_address 10/60s at mongo_cps|remote_address=10.0.0.1 (shadow)",
            ),
            ("mongo_cps", &[("blocked_user", "mallory")], "blocked mongo_cps.blocked_user"),
        ],
    );
    let blocked = rules.resolve("mongo_cps", [("blocked_user", "mallory")]);
    let rule = blocked.rule().unwrap();
    assert_eq!((rule.quota(), rule.unit(), rule.limit()), (&Quota::Blocked, Some(Unit::Second), None));
    assert!(!rules.resolve("mongo_cps", [("database", "users")]).shadow_mode());
}

#[test]
fn each_value_matched_by_a_default_has_its_own_counter() {
    let rules = rules(MONGO);
    let first = rules.resolve("mongo_cps", [("remote_address", "10.0.0.1")]);
    let second = rules.resolve("mongo_cps", [("remote_address", "10.0.0.2")]);
    let (Resolution::Limited { limit: a, key: key_a, .. }, Resolution::Limited { limit: b, key: key_b, .. }) =
        (first, second)
    else {
        panic!("both addresses should be limited");
    };
    assert_eq!(a.id(), b.id());
    assert_ne!(key_a, key_b);
    assert!(Key::new(key_a.as_bytes()).is_ok());
}

#[test]
fn a_state_key_longer_than_a_store_accepts_is_an_answer_not_a_panic() {
    let rules = rules(MONGO);
    let address = "1".repeat(Key::MAX_LEN);
    let resolution = rules.resolve("mongo_cps", [("remote_address", address.as_str())]);
    let expected_len = "mongo_cps|remote_address=".len() + Key::MAX_LEN;
    assert_eq!(outcome(&resolution), format!("key of {expected_len} bytes for mongo_cps.remote_address (shadow)"));
}

#[test]
fn a_changed_rule_gets_a_new_limit_id_and_the_others_keep_theirs() {
    let before = rules(MONGO);
    let after = rules(&MONGO.replace("requests_per_unit: 500", "requests_per_unit: 600"));
    let id = |rules: &sluice_server::envoy::Rules, name: &str| {
        rules.limits().find(|limit| limit.name() == name).map(sluice_core::Limit::id).unwrap()
    };
    assert_ne!(id(&before, "mongo_cps.database_users"), id(&after, "mongo_cps.database_users"));
    assert_eq!(id(&before, "mongo_cps.database"), id(&after, "mongo_cps.database"));
    assert_eq!(id(&before, "my_rule"), id(&after, "my_rule"));
}

#[test]
fn lists_every_rule_in_file_order() {
    let rules = rules(MONGO);
    let names: Vec<&str> = rules.rules().map(|rule| rule.name()).collect();
    let expected = [
        "mongo_cps.database_users",
        "mongo_cps.database",
        "mongo_cps.remote_address",
        "my_rule",
        "mongo_cps.source_cluster_proxy.destination_cluster",
        "mongo_cps.path_/v1/*",
        "mongo_cps.path_/v1/users/*",
        "mongo_cps.path_/v1/admin",
        "mongo_cps.path",
        "mongo_cps.blocked_user",
    ];
    assert_eq!(names, expected);
    assert_eq!(rules.len(), 10);
    // The unlimited and the blocked rules count nothing, so they have no limit.
    assert_eq!(rules.limits().count(), 8);
    assert_eq!(rules.domains().collect::<Vec<_>>(), ["mongo_cps"]);
}
