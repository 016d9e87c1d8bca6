use super::*;
use proptest::prelude::*;

fn request(json: &str) -> PlaygroundRequest {
    serde_json::from_str(json).unwrap()
}

fn allowed(run: &PolicyRun) -> Vec<bool> {
    run.decisions.iter().map(|decision| decision.allowed).collect()
}

#[test]
fn the_exact_log_and_the_approximated_window_differ_on_the_same_stream() {
    // 10 a second: ten requests early in the first second, four early in the next. The log
    // has forgotten the first ten by then; the window still weighs them by 75%.
    let early: Vec<String> = (0..10).map(|index| format!("{{\"at_us\": {}}}", 100_000 + index * 10_000)).collect();
    let late: Vec<String> = (0..4).map(|index| format!("{{\"at_us\": {}}}", 1_250_000 + index * 10_000)).collect();
    let posted = request(&format!(
        r#"{{"policies": {{
            "log": {{"algorithm": "sliding_log", "limit": 10, "window": "1s"}},
            "window": {{"algorithm": "sliding_window", "limit": 10, "window": "1s"}}}},
          "trace": [{}, {}]}}"#,
        early.join(","),
        late.join(",")
    ));
    let response = posted.decide().unwrap();
    let [log, window] = &response.policies[..] else { panic!("two runs expected") };
    assert_eq!((log.name.as_str(), log.algorithm, log.limit), ("log", "sliding_log", 10));
    assert_eq!(window.algorithm, "sliding_window");
    assert_eq!(allowed(log), [true; 14]);
    assert_eq!(allowed(window)[..10], [true; 10]);
    assert!(allowed(window)[10..].contains(&false), "{:?}", allowed(window));
    assert_eq!(log.decisions[9].remaining, 0);
}

#[test]
fn each_policy_sees_the_whole_stream_on_its_own_state() {
    let posted = request(
        r#"{"policies": {
            "one": {"algorithm": "fixed_window", "limit": 1, "window": "1s"},
            "three": {"algorithm": "fixed_window", "limit": 3, "window": "1s"}},
          "trace": [{"at_us": 0}, {"at_us": 1}, {"at_us": 2}, {"at_us": 3, "key": "other"}]}"#,
    );
    let response = posted.decide().unwrap();
    assert_eq!(allowed(&response.policies[0]), [true, false, false, true]);
    assert_eq!(allowed(&response.policies[1]), [true, true, true, true]);
    assert_eq!(response.policies[1].decisions[2].remaining, 0);
}

#[test]
fn invalid_policies_get_the_configuration_files_messages() {
    let posted = request(r#"{"policies": {"api": {"algorithm": "token_bucket", "capacity": 0}}, "trace": []}"#);
    let PlaygroundError::Invalid(message) = posted.decide().unwrap_err() else { panic!("invalid expected") };
    assert!(message.contains("policies.api.capacity: must be a whole number ≥ 1, got 0"), "{message}");
}

/// Two sliding windows of 10 000 buckets (20 002 counters per key) over `keys` keys.
fn counters_trace(keys: usize) -> String {
    let window = r#"{"algorithm": "sliding_window", "limit": 10, "window": "10s", "buckets": 10000}"#;
    let trace: Vec<String> = (0..keys).map(|key| format!(r#"{{"at_us": 0, "key": "k{key}"}}"#)).collect();
    format!(r#"{{"policies": {{"a": {window}, "b": {window}}}, "trace": [{}]}}"#, trace.join(","))
}

#[test]
fn sliding_window_counters_are_bounded_by_keys_times_buckets() {
    assert!(request(&counters_trace(49)).decide().is_ok(), "49 × 20 002 = 980 098 counters");
    let PlaygroundError::TooLarge(message) = request(&counters_trace(50)).decide().unwrap_err() else {
        panic!("50 keys")
    };
    assert_eq!(
        message,
        "max_counters: the sliding windows would hold 1000100 counters (20002 per key, 50 keys), at most 1000000"
    );
}

#[test]
fn every_bound_is_named() {
    let policy = r#"{"algorithm": "fixed_window", "limit": 1, "window": "1s"}"#;
    let nine: Vec<String> = (0..9).map(|index| format!("\"p{index}\": {policy}")).collect();
    let cases = [
        (format!(r#"{{"policies": {{{}}}, "trace": []}}"#, nine.join(",")), "max_policies"),
        (
            format!(r#"{{"policies": {{"a": {policy}}}, "trace": [{}]}}"#, vec!["{\"at_us\": 0}"; 2001].join(",")),
            "max_trace",
        ),
        (format!(r#"{{"policies": {{"a": {policy}}}, "trace": [{{"at_us": 0, "cost": 101}}]}}"#), "max_cost"),
        (format!(r#"{{"policies": {{"a": {policy}}}, "trace": [{{"at_us": 2592000000001}}]}}"#), "max_offset"),
        (counters_trace(100), "max_counters"),
    ];
    for (json, bound) in cases {
        let PlaygroundError::TooLarge(message) = request(&json).decide().unwrap_err() else { panic!("{bound}") };
        assert!(message.starts_with(bound), "{bound}: {message}");
    }
}

#[test]
fn a_trace_out_of_order_or_with_an_empty_key_is_refused() {
    let policy = r#""a": {"algorithm": "fixed_window", "limit": 1, "window": "1s"}"#;
    let late = request(&format!(r#"{{"policies": {{{policy}}}, "trace": [{{"at_us": 5}}, {{"at_us": 4}}]}}"#));
    assert!(late.decide().unwrap_err().to_string().starts_with("trace[1].at_us"));
    let empty = request(&format!(r#"{{"policies": {{{policy}}}, "trace": [{{"at_us": 5, "key": ""}}]}}"#));
    assert!(empty.decide().unwrap_err().to_string().starts_with("trace[0].key"));
}

/// A policy body made of the right words with arbitrary values.
fn policy_body() -> impl Strategy<Value = serde_json::Value> {
    let algorithm = prop::sample::select(vec![
        "sliding_log",
        "fixed_window",
        "sliding_window",
        "token_bucket",
        "leaky_bucket",
        "nope",
    ]);
    let value = prop_oneof![
        any::<i64>().prop_map(serde_json::Value::from),
        (0u64..20).prop_map(serde_json::Value::from),
        prop::sample::select(vec!["1s", "250ms", "0s", "1h", "x", "-1s"]).prop_map(serde_json::Value::from),
        any::<bool>().prop_map(serde_json::Value::from),
    ];
    let field = prop::sample::select(vec![
        "limit",
        "window",
        "capacity",
        "refill_amount",
        "refill_interval",
        "interval",
        "burst",
        "variant",
        "mode",
    ]);
    (algorithm, prop::collection::btree_map(field, value, 0..5)).prop_map(|(algorithm, fields)| {
        let mut body: serde_json::Map<String, serde_json::Value> =
            fields.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
        body.insert("algorithm".into(), algorithm.into());
        serde_json::Value::Object(body)
    })
}

proptest! {
    /// Whatever the body holds, parsing it answers (a request or an error), never a panic.
    #[test]
    fn arbitrary_bodies_never_panic(body in "\\PC{0,300}") {
        if let Ok(posted) = serde_json::from_str::<PlaygroundRequest>(&body) {
            let _ = posted.decide();
        }
    }

    /// Policies made of the right words and traces of any shape decide or are refused,
    /// with one decision per request and policy when they decide.
    #[test]
    fn arbitrary_policies_and_traces_never_panic(
        policies in prop::collection::vec(policy_body(), 0..4),
        times in prop::collection::vec(0u64..5_000_000, 0..40),
        costs in prop::collection::vec(0u64..120, 40),
    ) {
        let policies: serde_json::Map<String, serde_json::Value> =
            policies.into_iter().enumerate().map(|(index, body)| (format!("p{index}"), body)).collect();
        let trace: Vec<serde_json::Value> = times
            .iter()
            .zip(&costs)
            .map(|(at_us, cost)| serde_json::json!({"at_us": at_us, "cost": cost}))
            .collect();
        let body = serde_json::json!({"policies": policies, "trace": trace});
        let posted: PlaygroundRequest = serde_json::from_value(body).unwrap();
        if let Ok(response) = posted.decide() {
            for run in &response.policies {
                prop_assert_eq!(run.decisions.len(), trace.len());
            }
        }
    }
}

/// The `(at ms, remaining)` points of the line of the only policy in `policy`, given a
/// request at each of `at_ms`.
fn level_of(policy: &str, at_ms: &[u64]) -> Vec<(u64, u64)> {
    let trace: Vec<String> = at_ms.iter().map(|ms| format!(r#"{{"at_us": {}}}"#, ms * 1000)).collect();
    let posted = request(&format!(r#"{{"policies": {{"p": {policy}}}, "trace": [{}]}}"#, trace.join(",")));
    let response = posted.decide().unwrap();
    response.policies[0].level.iter().map(|point| (point.at_us / 1000, point.remaining)).collect()
}

#[test]
fn the_quota_line_steps_where_each_algorithm_gives_quota_back() {
    // Token bucket, 3 tokens, 1 more every 500 ms from the first take (at 0): three
    // requests empty it, the fourth is rejected, then one token comes back at each of 500,
    // 1000 and 1500 ms.
    let bucket = r#"{"algorithm": "token_bucket", "capacity": 3, "refill_amount": 1, "refill_interval": "500ms"}"#;
    assert_eq!(
        level_of(bucket, &[0, 100, 200, 300]),
        [(0, 3), (0, 2), (100, 1), (200, 0), (300, 0), (500, 1), (1000, 2), (1500, 3)]
    );
    // Fixed window, 2 per second: the whole quota comes back at the window's edge.
    let fixed = r#"{"algorithm": "fixed_window", "limit": 2, "window": "1s"}"#;
    assert_eq!(level_of(fixed, &[200, 400, 600]), [(0, 2), (200, 1), (400, 0), (600, 0), (1000, 2)]);
    // Sliding log, 2 per second: each request's entry expires one window after it.
    let log = r#"{"algorithm": "sliding_log", "limit": 2, "window": "1s"}"#;
    assert_eq!(level_of(log, &[0, 300]), [(0, 2), (0, 1), (300, 0), (1000, 1), (1300, 2)]);
}

#[test]
fn the_quota_line_follows_the_first_key_only() {
    let posted = request(
        r#"{"policies": {"p": {"algorithm": "fixed_window", "limit": 2, "window": "1s"}},
          "trace": [{"at_us": 100000, "key": "a"}, {"at_us": 200000, "key": "b"}, {"at_us": 300000, "key": "a"}]}"#,
    );
    let level = &posted.decide().unwrap().policies[0].level;
    let points: Vec<(u64, u64)> = level.iter().map(|point| (point.at_us / 1000, point.remaining)).collect();
    assert_eq!(points, [(0, 2), (100, 1), (300, 0), (1000, 2)]);
}
