//! `sluice simulate` end to end: the real binary, a config file, a trace on stdin.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn simulate(policies: &[&str], trace: &str) -> Output {
    simulate_with("tests/fixtures/worked_examples.yaml", policies, trace)
}

fn simulate_with(config: &str, policies: &[&str], trace: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args(["simulate", "--config", config]);
    for policy in policies {
        command.args(["--policy", policy]);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(trace.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn lines(output: &Output) -> Vec<Value> {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn two_per_second_prints_every_field() {
    let output = simulate(&["two_per_second"], "100000 alice\n400000 alice\n500000 alice\n1100000 alice\n");
    assert!(output.status.success(), "{}", stderr(&output));
    let expected = [
        json!({"t": 100000, "key": "alice", "cost": 1, "allowed": true, "remaining": 1, "reset_after_us": 1000000, "retry_after_us": null, "cost_exceeds_limit": false, "delay_us": 0, "policy": "two_per_second"}),
        json!({"t": 400000, "key": "alice", "cost": 1, "allowed": true, "remaining": 0, "reset_after_us": 1000000, "retry_after_us": null, "cost_exceeds_limit": false, "delay_us": 0, "policy": "two_per_second"}),
        json!({"t": 500000, "key": "alice", "cost": 1, "allowed": false, "remaining": 0, "reset_after_us": 900000, "retry_after_us": 600000, "cost_exceeds_limit": false, "delay_us": 0, "policy": "two_per_second"}),
        json!({"t": 1100000, "key": "alice", "cost": 1, "allowed": true, "remaining": 0, "reset_after_us": 1000000, "retry_after_us": null, "cost_exceeds_limit": false, "delay_us": 0, "policy": "two_per_second"}),
    ];
    assert_eq!(lines(&output), expected);
}

#[test]
fn two_per_minute_and_the_attempts_example() {
    let hour = 3_600_000_000u64;
    let trace: String = [1u64, 30, 50, 100].iter().map(|s| format!("{} k\n", hour + s * 1_000_000)).collect();
    for policy in ["minute_accepted", "minute_attempts"] {
        let allowed: Vec<Value> = lines(&simulate(&[policy], &trace)).iter().map(|l| l["allowed"].clone()).collect();
        assert_eq!(allowed, [true, true, false, true], "{policy}");
    }
    let output = simulate(&["attempts"], "100000 k\n400000 k\n500000 k\n1100000 k\n");
    let allowed: Vec<Value> = lines(&output).iter().map(|l| l["allowed"].clone()).collect();
    assert_eq!(allowed, [true, true, false, false]);
}

#[test]
fn blank_lines_comments_costs_and_never() {
    let output = simulate(&["bucket"], "# the chat demo\n\n0 u 2\n   \n0 u 0\n0 u 5\n");
    let lines = lines(&output);
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[0]["cost"].clone(), lines[0]["remaining"].clone()), (json!(2), json!(1)));
    assert_eq!((lines[1]["allowed"].clone(), lines[1]["remaining"].clone()), (json!(true), json!(1)));
    assert_eq!((&lines[0]["peek"], &lines[1]["peek"]), (&Value::Null, &json!(true)), "a peek says it is one");
    assert_eq!((lines[2]["allowed"].clone(), lines[2]["retry_after_us"].clone()), (json!(false), Value::Null));
    assert_eq!((&lines[0]["cost_exceeds_limit"], &lines[2]["cost_exceeds_limit"]), (&json!(false), &json!(true)));
}

/// Issue 36.7: a cost-0 line on an exhausted key prints `allowed: false` (a cost-1 request
/// would not pass, as docs/semantics.md defines a peek), marked as a peek that consumed and
/// refused nothing.
#[test]
fn a_peek_of_an_exhausted_key_says_it_is_a_peek() {
    let output = simulate(&["two_per_second"], "100000 a\n200000 a\n300000 a 0\n");
    let lines = lines(&output);
    let peek = &lines[2];
    assert_eq!((&peek["cost"], &peek["allowed"], &peek["peek"]), (&json!(0), &json!(false), &json!(true)), "{peek}");
    // The request at 0.1 s leaves the 1 s window at 1.1 s: 0.8 s after the peek.
    assert_eq!(peek["retry_after_us"], json!(800000), "when a cost-1 request would pass");
}

#[test]
fn several_policies_report_the_most_restrictive() {
    // At 2 s: equal remaining goes to the first listed; then the longer retry_after wins.
    let output = simulate(&["bucket", "two_per_second"], "0 k\n2000000 k\n2000000 k\n2000000 k\n");
    let decided: Vec<(Value, Value)> =
        lines(&output).iter().map(|l| (l["allowed"].clone(), l["policy"].clone())).collect();
    let expected = [
        (json!(true), json!("two_per_second")),
        (json!(true), json!("bucket")),
        (json!(true), json!("bucket")),
        (json!(false), json!("bucket")),
    ];
    assert_eq!(decided, expected);
    assert_eq!(lines(&output)[3]["retry_after_us"], json!(2_000_000));
}

#[test]
fn bad_lines_are_reported_with_their_number_and_skipped() {
    let output = simulate(&["two_per_second"], "1 a\nnot a line\n2 a\n3 a x\n");
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(lines(&output).len(), 2, "good lines are still decided");
    let errors = stderr(&output);
    assert!(errors.contains("trace line 2: time `not`"), "{errors}");
    assert!(errors.contains("trace line 4: cost `x`"), "{errors}");
}

#[test]
fn unknown_policies_and_bad_configs_are_refused() {
    let output = simulate(&["nope"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("unknown policy `nope`; the configuration defines: two_per_second"));
    let output = simulate(&["two_per_second", "two_per_second"], "");
    assert!(stderr(&output).contains("given twice"));
    let output = simulate_with("tests/fixtures/missing.yaml", &["p"], "");
    assert!(stderr(&output).contains("cannot read the configuration file"));
    let output = simulate_with("Cargo.toml", &["p"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("Cargo.toml"), "{}", stderr(&output));
}

#[test]
fn the_shipped_example_runs() {
    let trace = std::fs::read_to_string("../../examples/trace.txt").unwrap();
    let output = simulate_with("../../examples/policies.yaml", &["burst2"], &trace);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(lines(&output).len(), 7);
}

/// The service's own file (with `server:` and shadow-mode policies) is a valid simulator
/// configuration: its policies decide as in a policy file.
#[test]
fn the_service_configuration_file_is_accepted() {
    let output = simulate_with("service.yaml", &["burst2"], "0 alice\n1 alice\n2 alice\n");
    assert!(output.status.success(), "{}", stderr(&output));
    let allowed: Vec<Value> = lines(&output).iter().map(|line| line["allowed"].clone()).collect();
    assert_eq!(allowed, [json!(true), json!(true), json!(false)]);
}

/// A store URL the one parser refuses is named, and nothing is decided.
#[test]
fn an_unknown_store_is_refused() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command.args(["simulate", "--config", "tests/fixtures/worked_examples.yaml", "--policy", "two_per_second"]);
    command.args(["--store", "mem"]);
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--store: unknown store `mem`: use memory"), "{}", stderr(&output));
}
