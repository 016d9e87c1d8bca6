//! Whole files in the envoyproxy/ratelimit format, and one in Sluice's multi-domain form.

use crate::{check_table, rules};
use sluice_core::Policy;
use sluice_server::envoy::{Resolution, Unit};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/envoy/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

#[test]
fn edge_proxy() {
    let rules = rules(&fixture("edge_proxy.yaml"));
    check_table(
        &rules,
        &[
            (
                "edge",
                &[("source_cluster", "proxy"), ("destination_cluster", "mock")],
                "limit edge.source_cluster_proxy.destination_cluster_mock 1/60s at edge|source_cluster=proxy|destination_cluster=mock",
            ),
            ("edge", &[("source_cluster", "proxy"), ("destination_cluster", "other")], "no rule"),
            (
                "edge",
                &[("remote_address", "50.0.0.1")],
                "limit edge.remote_address 10/1s at edge|remote_address=50.0.0.1",
            ),
            ("edge", &[("remote_address", "50.0.0.5")], "blocked edge.remote_address_50.0.0.5"),
            ("edge", &[("tenant", "acme")], "limit edge.tenant 2/60s at edge|tenant=acme"),
            (
                "edge",
                &[("tenant", "acme"), ("plan", "gold")],
                "limit edge.tenant.plan 3/60s at edge|tenant=acme|plan=gold",
            ),
            ("edge", &[("tenant", "acme"), ("plan", "banned")], "blocked edge.tenant.plan_banned"),
            (
                "edge",
                &[("tenant", "acme"), ("tier", "pro")],
                "limit edge.tenant.tier 1/1s at edge|tenant=acme|tier=pro",
            ),
            (
                "edge",
                &[("tenant", "acme"), ("tier", "trial")],
                "limit edge.tenant.tier_trial 1/60s at edge|tenant=acme|tier=trial (shadow)",
            ),
            ("edge", &[("tenant", "acme"), ("internal", "yes")], "unlimited edge.tenant.internal"),
            ("edge", &[("tenant", "acme"), ("unknown", "x")], "no rule"),
            ("edge", &[("health_check", "lb")], "unlimited edge.health_check"),
        ],
    );
    assert_eq!(rules.len(), 10);
}

#[test]
fn messaging() {
    let rules = rules(&fixture("messaging.yaml"));
    check_table(
        &rules,
        &[
            (
                "messaging",
                &[("message_type", "marketing"), ("to_number", "2061111111")],
                "limit messaging.message_type_marketing.to_number 5/86400s at messaging|message_type=marketing|to_number=2061111111",
            ),
            ("messaging", &[("message_type", "receipt"), ("to_number", "2061111111")], "no rule"),
            (
                "messaging",
                &[("to_number", "2061111111")],
                "limit messaging.to_number 100/86400s at messaging|to_number=2061111111",
            ),
            ("messaging", &[("sender", "shop")], "limit messaging.sender 60/3600s at messaging|sender=shop"),
            ("messaging", &[("sender", "billing")], "limit billing_sender 600/3600s at messaging|sender=billing"),
            ("messaging", &[("sender", "alerts")], "no rule"),
            (
                "messaging",
                &[("template", "default")],
                "limit messaging.template_default 10000/604800s at messaging|template=default",
            ),
            (
                "messaging",
                &[("template", "default"), ("locale", "en")],
                "limit messaging.template_default.locale_en 5000/604800s at messaging|template=default|locale=en",
            ),
            (
                "messaging",
                &[("template", "default"), ("locale", "fr")],
                "limit messaging.template_default.locale 2000/604800s at messaging|template=default|locale=fr",
            ),
        ],
    );
    let to_number = rules.resolve("messaging", [("to_number", "1")]);
    assert!(to_number.rule().unwrap().detailed_metric());
    let weekly = rules.rules().find(|rule| rule.name() == "messaging.template_default").unwrap();
    assert_eq!(weekly.unit(), Some(Unit::Week));
}

#[test]
fn sluice_domains_with_policies() {
    let rules = rules(&fixture("sluice_domains.yaml"));
    let api = rules.resolve("edge", [("api_key", "k-123")]);
    let Resolution::Limited { rule, limit, key } = &api else { panic!("api keys should be limited: {api:?}") };
    assert!(matches!(limit.policy(), Policy::TokenBucket(bucket) if bucket.capacity() == 100));
    assert_eq!((rule.name(), rule.unit(), key.as_str()), ("edge.api_key", None, "edge|api_key=k-123"));
    check_table(
        &rules,
        &[
            ("edge", &[("api_key", "internal-batch")], "unlimited edge.api_key_internal-*"),
            (
                "edge",
                &[("path", "/login"), ("remote_address", "10.0.0.1")],
                "limit edge.path_/login.remote_address sliding_log at edge|path=/login|remote_address=10.0.0.1",
            ),
            (
                "mongo_cps",
                &[("database", "users")],
                "limit mongo_cps.database_users 500/1s at mongo_cps|database=users",
            ),
            ("mongo_cps", &[("api_key", "k-123")], "no rule"),
        ],
    );
    let mut domains: Vec<&str> = rules.domains().collect();
    domains.sort_unstable();
    assert_eq!(domains, ["edge", "mongo_cps"]);
}
