//! Loading configuration: every algorithm, every problem reported at once.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use proptest::prelude::*;
use sluice_core::{Config, Policy};

const EXAMPLE: &str = "
policies:
  login:
    algorithm: sliding_log
    limit: 5
    window: 15m
    variant: attempts
  api:
    algorithm: token_bucket
    capacity: 500
    refill_amount: 1
    refill_interval: 10ms
  hourly:
    algorithm: fixed_window
    limit: 5000
    window: 1h
  daily:
    algorithm: fixed_window
    limit: 100
    window: 1d
    offset: 5h
  trial:
    algorithm: fixed_window
    limit: 3
    window: 1m
    alignment: anchored
  search:
    algorithm: sliding_window
    limit: 10
    window: 1m
    buckets: 6
  uploads:
    algorithm: leaky_bucket
    interval: 1s
    burst: 2
    mode: delay
";

#[test]
fn the_issue_example_and_every_algorithm_load() {
    let config = Config::from_yaml(EXAMPLE).unwrap();
    let names: Vec<&str> = config.limits().iter().map(|l| l.name()).collect();
    assert_eq!(names, ["login", "api", "hourly", "daily", "trial", "search", "uploads"]);
    let algorithms: Vec<&str> = config.limits().iter().map(|l| l.policy().algorithm_name()).collect();
    assert_eq!(
        algorithms,
        [
            "sliding_log",
            "token_bucket",
            "fixed_window",
            "fixed_window",
            "fixed_window",
            "sliding_window",
            "leaky_bucket"
        ]
    );
    let Policy::SlidingLog(login) = config.limit("login").unwrap().policy() else { panic!("login is a sliding log") };
    assert_eq!((login.limit(), login.window().as_secs()), (5, 900));
}

#[test]
fn every_problem_is_reported_at_once_with_its_path() {
    let text = "
policies:
  api:
    algorithm: token_bucket
    capacity: 0
    refill_interval: 10
  login:
    algorithm: sliding_log
    limit: -3
    window: 15 minutes
    varient: attempts
  odd:
    algorithm: sliding_window
    limit: 10
    window: 1m
    buckets: 7
  nope:
    algorithm: gcra
extra: true
";
    let error = Config::from_yaml(text).unwrap_err();
    let messages: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
    let expected = [
        "policies.api.capacity: must be a whole number ≥ 1, got 0",
        "policies.api.refill_interval: must be a duration with a unit",
        "policies.login.limit: must be a whole number ≥ 1, got -3",
        "policies.login.window: unknown unit ` minutes`",
        "policies.login.varient: unknown field, expected one of: algorithm, limit, window, variant",
        "policies.odd.buckets: must divide the window (60000000 µs) exactly",
        "policies.nope.algorithm: must be one of sliding_log, fixed_window, sliding_window, token_bucket, leaky_bucket, got gcra",
        "extra: unknown field, expected one of: policies",
    ];
    for want in expected {
        assert!(messages.iter().any(|m| m.starts_with(want)), "missing `{want}` in {messages:#?}");
    }
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
}

/// One policy with several wrong fields: each is reported, those the reader refuses and
/// those the algorithm's constructor refuses, in one go.
#[test]
fn every_problem_of_one_policy_is_reported() {
    let cases = [
        (
            "algorithm: sliding_log\n    limit: -2\n    window: 0s",
            &["policies.p.limit: must be a whole number ≥ 1, got -2", "policies.p.window: must be at least 1us"][..],
        ),
        (
            "algorithm: token_bucket\n    capacity: 9007199254740992\n    refill_amount: 0\n    refill_interval: 0ms",
            &[
                "policies.p.refill_amount: must be a whole number ≥ 1, got 0",
                "policies.p.capacity: must be below 2^53 to be computed exactly",
                "policies.p.refill_interval: must be at least 1us",
            ],
        ),
        (
            "algorithm: sliding_window\n    window: 1s\n    buckets: 20000",
            &["policies.p.limit: is required", "policies.p.buckets: must be between 1 and 10000"],
        ),
    ];
    for (body, wants) in cases {
        let text = format!("policies:\n  p:\n    {body}\n");
        let messages: Vec<String> =
            Config::from_yaml(&text).unwrap_err().problems.iter().map(ToString::to_string).collect();
        assert_eq!(messages, wants, "{body}");
    }
}

#[test]
fn constructor_limits_name_the_field() {
    let cases = [
        (
            "algorithm: token_bucket\n    capacity: 0\n    refill_interval: 1s",
            "policies.p.capacity: must be a whole number ≥ 1, got 0",
        ),
        ("algorithm: sliding_log\n    limit: 0\n    window: 1s", "policies.p.limit: must be a whole number ≥ 1, got 0"),
        (
            "algorithm: leaky_bucket\n    interval: 1s\n    burst: -2",
            "policies.p.burst: must be a whole number ≥ 0, got -2",
        ),
        (
            "algorithm: sliding_log\n    limit: 5000000000\n    window: 1s",
            "policies.p.limit: must be at most 1073741823",
        ),
        (
            "algorithm: sliding_log\n    limit: 1073741824\n    window: 1s",
            "policies.p.limit: must be at most 1073741823",
        ),
        (
            "algorithm: fixed_window\n    limit: 1\n    window: 1h\n    offset: 2h",
            "policies.p.offset: must be shorter than the window",
        ),
        (
            "algorithm: fixed_window\n    limit: 1\n    window: 1h\n    offset: 1.5",
            "policies.p.offset: must be a duration such as 5h, or a whole number of microseconds ≥ 0, got 1.5",
        ),
        (
            "algorithm: fixed_window\n    limit: 1\n    window: 1h\n    offset: -3",
            "policies.p.offset: must be a duration such as 5h, or a whole number of microseconds ≥ 0, got -3",
        ),
        (
            "algorithm: fixed_window\n    limit: 1\n    window: 1h\n    alignment: anchored\n    offset: 1m",
            "policies.p.offset: applies only",
        ),
        (
            "algorithm: sliding_window\n    limit: 9007199254740\n    window: 1s",
            "policies.p.limit: limit × bucket width (µs) must be below 2^53",
        ),
        ("algorithm: leaky_bucket\n    interval: 0s", "policies.p.interval: must be at least 1us"),
        ("algorithm: leaky_bucket\n    interval: 1d\n    burst: 1000000", "policies.p.burst: (burst + 1) × interval"),
        (
            "algorithm: token_bucket\n    capacity: 9007199254740992\n    refill_interval: 1s",
            "policies.p.capacity: must be below 2^53",
        ),
        (
            "algorithm: token_bucket\n    capacity: 1000000000\n    refill_interval: 1d",
            "policies.p.refill_interval: capacity / refill_amount × refill_interval",
        ),
    ];
    for (body, want) in cases {
        let text = format!("policies:\n  p:\n    {body}\n");
        let error = Config::from_yaml(&text).unwrap_err().to_string();
        assert!(error.contains(want), "`{want}` not in:\n{error}");
    }
}

#[test]
fn malformed_files_are_refused_clearly() {
    for (text, want) in [
        ("", "must be a mapping with a `policies` section"),
        ("policies: 3", "policies: must be a mapping"),
        ("policies: {}", "policies: must define at least one policy"),
        ("policies:\n  'bad name':\n    algorithm: sliding_log", "policy names must be"),
        ("policies:\n  p: [1, 2]", "policies.p: must be a mapping"),
        ("policies:\n  p:\n    limit: 3", "policies.p.algorithm: is required"),
        ("policies: [\n", "line"),
        ("policies:\n  p:\n    algorithm: sliding_log\n    limit: 1\n    limit: 2\n    window: 1s", "duplicate"),
    ] {
        let error = Config::from_yaml(text).unwrap_err().to_string();
        assert!(error.contains(want), "`{want}` not in:\n{error}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = Config::from_yaml(&text);
    }

    #[test]
    fn arbitrary_policy_fields_never_panic(
        algorithm in prop::sample::select(vec!["sliding_log", "fixed_window", "sliding_window", "token_bucket", "leaky_bucket", "x"]),
        fields in prop::collection::vec(
            (prop::sample::select(vec!["limit", "window", "variant", "alignment", "offset", "buckets", "capacity",
                                        "refill_amount", "refill_interval", "interval", "burst", "mode", "zzz"]),
             prop::sample::select(vec!["0", "1", "-1", "18446744073709551615", "99999999999999999999", "1us", "0s",
                                        "1d", "213503982d", "attempts", "anchored", "delay", "1.5", "[]", "~", "'7'"])),
            0..6),
    ) {
        let mut text = format!("policies:\n  p:\n    algorithm: {algorithm}\n");
        let mut seen = std::collections::HashSet::new();
        for (name, value) in fields {
            if seen.insert(name) {
                text.push_str(&format!("    {name}: {value}\n"));
            }
        }
        if let Err(error) = Config::from_yaml(&text) {
            prop_assert!(!error.problems.is_empty());
            for problem in &error.problems {
                prop_assert!(problem.path.is_empty() || problem.path.starts_with("policies"));
            }
        }
    }
}
