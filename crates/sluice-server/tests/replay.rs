//! `sluice replay` end to end: the real binary, a policy file, logs in each format.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const CONFIG: &str = "tests/fixtures/replay.yaml";

/// Runs `sluice replay --config CONFIG ARGS…` with `log` on standard input.
fn replay(args: &[&str], log: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["replay", "--config", CONFIG])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The `--json` summary of replaying `log` through `policies` with `args`.
fn summary(policies: &[&str], args: &[&str], log: &str) -> Value {
    let mut all: Vec<&str> = vec!["--json"];
    for policy in policies {
        all.extend(["--policy", policy]);
    }
    all.extend(args);
    let output = replay(&all, log);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A unique temporary path for this test process.
fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-replay-{}-{name}", std::process::id()))
}

/// A combined line from `ip` at second `second` of 10/Oct/2000:13:55 (-0700).
fn combined(ip: &str, user: &str, second: u32, agent: &str) -> String {
    format!(
        "{ip} - {user} [10/Oct/2000:13:55:{second:02} -0700] \"GET /a HTTP/1.1\" 200 512 \"-\" \"{agent}\" \"k-{user}\"\n"
    )
}

/// Nine lines: seven requests, one bad line (6), one blank line (9).
fn small_log() -> String {
    let mut log = String::new();
    for (ip, second) in [("10.0.0.1", 36), ("10.0.0.1", 36), ("10.0.0.1", 36), ("10.0.0.2", 36), ("10.0.0.1", 37)] {
        log += &combined(ip, "-", second, "curl/8");
    }
    log += "this is not a log line\n";
    log += &combined("10.0.0.3", "-", 38, "curl/8");
    log += &combined("10.0.0.1", "-", 38, "curl/8");
    log + "\n"
}

#[test]
fn summary_numbers_of_a_small_log_computed_by_hand() {
    let summary = summary(&["two_per_second", "one_per_second"], &[], &small_log());
    assert_eq!((&summary["lines"], &summary["requests"], &summary["bad_lines"]), (&json!(9), &json!(7), &json!(1)));
    // Times at the log's own offset (its first line's, -0700).
    assert_eq!(summary["utc_offset"], "-07:00");
    assert_eq!(summary["first_time"], "2000-10-10T13:55:36-07:00");
    assert_eq!(summary["last_time"], "2000-10-10T13:55:38-07:00");
    // Sliding log, 2 per second: the third request of 10.0.0.1 at :36 is the only rejection;
    // at :37 and :38 the earlier requests have left the window (now − 1 s, now].
    let sliding = &summary["policies"][0];
    assert_eq!((&sliding["name"], &sliding["description"]), (&json!("two_per_second"), &json!("2 / 1 s")));
    assert_eq!((&sliding["allowed"], &sliding["rejected"], &sliding["keys"]), (&json!(6), &json!(1), &json!(3)));
    assert_eq!(sliding["limited_keys"], 1);
    assert!((sliding["limited_key_share"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    assert!((sliding["rejected_share"].as_f64().unwrap() - 1.0 / 7.0).abs() < 1e-9);
    assert_eq!(sliding["top_limited_keys"], json!([{"key": "10.0.0.1", "requests": 5, "rejected": 1}]));
    assert_eq!(sliding["peak_requests"], json!({"per_second": 4, "second": "2000-10-10T13:55:36-07:00"}));
    assert_eq!(sliding["peak_allowed"], json!({"per_second": 3, "second": "2000-10-10T13:55:36-07:00"}));
    // Fixed window, 1 per second: both repeats of 10.0.0.1 at :36 are rejected.
    let fixed = &summary["policies"][1];
    assert_eq!((&fixed["allowed"], &fixed["rejected"]), (&json!(5), &json!(2)));
    assert_eq!(fixed["top_limited_keys"], json!([{"key": "10.0.0.1", "requests": 5, "rejected": 2}]));
    assert_eq!(fixed["peak_allowed"], json!({"per_second": 2, "second": "2000-10-10T13:55:36-07:00"}));
}

#[test]
fn text_summary_names_each_policy_and_its_top_keys() {
    let output = replay(&["--policy", "one_per_second"], &small_log());
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "standard input: 9 lines, 7 requests (combined, keyed by ip), 2000-10-10T13:55:36-07:00 to 2000-10-10T13:55:38-07:00",
        "bad lines: 1 (skipped)",
        "  line 6: expected",
        "policy one_per_second (fixed_window, 1 / 1 s)",
        "  rejected      2 (28.6%)",
        "  keys          3, 1 ever limited (33.3%)",
        "  peak          4 requests/s at 2000-10-10T13:55:36-07:00",
        "    10.0.0.1  2 of 5",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
}

#[test]
fn bad_lines_are_counted_and_the_first_five_shown_with_their_numbers() {
    let mut log = combined("10.0.0.1", "-", 36, "a");
    for index in 0..7 {
        log += &format!("junk {index}\n");
    }
    log += "10.0.0.1 - - [10/Oct/2000:13:55:99 -0700] \"GET /\" 200 1\n";
    let summary = summary(&["one_per_second"], &[], &log);
    assert_eq!((&summary["bad_lines"], &summary["requests"]), (&json!(8), &json!(1)));
    let numbers: Vec<&Value> = summary["first_bad_lines"].as_array().unwrap().iter().map(|bad| &bad["line"]).collect();
    assert_eq!(numbers, [2, 3, 4, 5, 6]);
    assert!(summary["first_bad_lines"][0]["error"].as_str().unwrap().contains("expected"));
}

#[test]
fn key_choices_of_combined_logs() {
    // One address, three users, two agents, in one second.
    let log: String = [("ann", "a"), ("bob", "b"), ("cy", "a")]
        .iter()
        .map(|(user, agent)| combined("10.0.0.9", user, 36, agent))
        .collect();
    let rejected_and_keys = |key: &str| {
        let summary = summary(&["one_per_second"], &["--key", key], &log);
        let policy = &summary["policies"][0];
        (policy["rejected"].as_u64().unwrap(), policy["keys"].as_u64().unwrap(), summary["key"].clone())
    };
    assert_eq!(rejected_and_keys("ip"), (2, 1, json!("ip")));
    assert_eq!(rejected_and_keys("user"), (0, 3, json!("user")));
    assert_eq!(rejected_and_keys("user_agent"), (1, 2, json!("user_agent")));
    assert_eq!(rejected_and_keys("referer"), (2, 1, json!("referer")));
    assert_eq!(rejected_and_keys("request"), (2, 1, json!("request")));
    assert_eq!(rejected_and_keys("quoted:4"), (0, 3, json!("quoted:4")));
    let top = &summary(&["one_per_second"], &["--key", "user_agent"], &log)["policies"][0]["top_limited_keys"];
    assert_eq!(top, &json!([{"key": "a", "requests": 2, "rejected": 1}]));
}

#[test]
fn the_common_log_format_without_referer_and_agent() {
    let log = "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 2326\n".repeat(3);
    let summary = summary(&["two_per_second"], &[], &log);
    assert_eq!(summary["policies"][0]["rejected"], 1);
    let by_agent = self::summary(&["two_per_second"], &["--key", "user_agent"], &log);
    assert_eq!(by_agent["bad_lines"], 3);
    assert!(by_agent["first_bad_lines"][0]["error"].as_str().unwrap().contains("no user_agent field"));
}

#[test]
fn json_lines_with_chosen_fields_and_each_time_unit() {
    let log = [
        r#"{"ts": "2000-10-10T20:55:36.100Z", "req": {"user": "ann"}}"#,
        r#"{"ts": 971211336200, "req": {"user": "ann"}}"#,
        r#"{"ts": 971211336.3, "req": {"user": "ann"}}"#,
        r#"{"ts": 971211337150000, "req": {"user": "ann"}}"#,
        r#"{"ts": "2000-10-10T20:55:37Z", "req": {"user": 7}}"#,
        r#"{"req": {"user": "ann"}}"#,
    ]
    .join("\n");
    let summary =
        summary(&["two_per_second"], &["--format", "json", "--time-field", "ts", "--key-field", "req.user"], &log);
    assert_eq!((&summary["requests"], &summary["bad_lines"]), (&json!(5), &json!(1)));
    assert_eq!(summary["first_bad_lines"][0], json!({"line": 6, "error": "no field `ts`"}));
    assert_eq!(summary["key"], "req.user");
    // ann at .1, .2, .3 (rejected), 1.15 (the .1 left the window): keys ann and 7.
    let policy = &summary["policies"][0];
    assert_eq!((&policy["rejected"], &policy["keys"]), (&json!(1), &json!(2)));
    assert_eq!(summary["last_time"], "2000-10-10T20:55:37.150000Z");
}

#[test]
fn trace_lines_replay_with_their_costs() {
    let summary = summary(&["two_per_second"], &["--format", "trace"], "# demo\n1000000 a 2\n1500000 a\n2000001 a\n");
    let policy = &summary["policies"][0];
    assert_eq!((&policy["allowed"], &policy["rejected"]), (&json!(2), &json!(1)));
    assert_eq!((&summary["lines"], &summary["requests"]), (&json!(4), &json!(3)));
}

#[test]
fn a_late_line_is_decided_at_the_latest_time_seen() {
    // a at 10.9 s; b at 11.1 s; then a logged at 10.95 s, decided at 11.1 s: a new window,
    // so allowed (at its own time it would share a's window and be rejected).
    let log = "10900000 a\n11100000 b\n10950000 a\n";
    let summary = summary(&["one_per_second"], &["--format", "trace"], log);
    assert_eq!(summary["late_lines"], 1);
    assert_eq!(summary["policies"][0]["rejected"], 0);
    assert_eq!(summary["last_time"], "1970-01-01T00:00:11.100000Z");
    // A trace writes no offset: times are in UTC.
    assert_eq!(summary["utc_offset"], "+00:00");
    // In order, the same requests see the rejection.
    let ordered = self::summary(&["one_per_second"], &["--format", "trace"], "10900000 a\n10950000 a\n11100000 b\n");
    assert_eq!((&ordered["late_lines"], &ordered["policies"][0]["rejected"]), (&json!(0), &json!(1)));
}

#[test]
fn reads_a_log_file_and_writes_a_self_contained_report() {
    let log_path = temp_path("access.log");
    let report_path = temp_path("report.html");
    std::fs::write(&log_path, small_log()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["replay", "--config", CONFIG, "--policy", "two_per_second", "--policy", "one_per_second", "--report"])
        .args([&report_path, &log_path])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("policy one_per_second"));
    // Standard error is not a terminal here: no progress bar; only where the report went
    // (issue 36.6: `--report` confirmed nothing).
    let absolute = std::path::absolute(&report_path).unwrap();
    assert_eq!(stderr(&output), format!("report written to {} (open it in a browser)\n", absolute.display()));
    let html = std::fs::read_to_string(&report_path).unwrap();
    std::fs::remove_file(&log_path).unwrap();
    std::fs::remove_file(&report_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in ["http://", "https://", "<script src", "<link", "@import", "url("] {
        assert!(!html.contains(forbidden), "the report references {forbidden}");
    }
    let data = html.split("type=\"application/json\">").nth(1).unwrap().split("</script>").next().unwrap();
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["summary"]["policies"][1]["name"], "one_per_second");
    assert_eq!(data["charts"][0]["series"]["allowed"], json!([3, 1, 2]));
    assert_eq!(data["charts"][1]["series"]["rejected"], json!([2, 0, 0]));
    // The top key's timeline, drawn by the second pass: 10.0.0.1 only.
    assert_eq!(data["charts"][1]["keys"][0]["allowed"], json!([1, 1, 1]));
    assert_eq!(data["charts"][1]["keys"][0]["rejected"], json!([2, 0, 0]));
}

#[test]
fn a_report_from_standard_input_says_why_key_timelines_are_missing() {
    let report_path = temp_path("stdin-report.html");
    let output = replay(&["--policy", "one_per_second", "--report", report_path.to_str().unwrap()], &small_log());
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&report_path).unwrap();
    std::fs::remove_file(&report_path).unwrap();
    assert!(html.contains("\"keys\":null") && html.contains("give a file instead of standard input"));
}

#[test]
fn keys_with_script_tags_cannot_end_the_data_block() {
    let report_path = temp_path("escape-report.html");
    let log = "1000000 </script><b>x\n1000000 </script><b>x\n";
    let output =
        replay(&["--policy", "one_per_second", "--format", "trace", "--report", report_path.to_str().unwrap()], log);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&report_path).unwrap();
    std::fs::remove_file(&report_path).unwrap();
    assert!(!html.contains("</script><b>") && html.contains("\\u003c/script>\\u003cb>x"));
}

#[test]
fn usage_errors_name_the_problem() {
    let error = |args: &[&str]| {
        let output = replay(args, "");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        stderr(&output)
    };
    assert!(error(&["--policy", "nope"]).contains("unknown policy `nope`"));
    assert!(error(&["--policy", "one_per_second", "--key", "cookie"]).contains("unknown key `cookie`"));
    assert!(error(&["--policy", "one_per_second", "--format", "json", "--key", "ip"]).contains("--key-field"));
    assert!(error(&["--policy", "one_per_second", "--format", "trace", "--key", "ip"]).contains("names its key"));
    assert!(
        error(&["--policy", "one_per_second", "/no/such/access.log"])
            .contains("cannot open the log /no/such/access.log")
    );
}

/// Runs `sluice replay ARGS…` from the repository's root, as the README does.
fn replay_from_root(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .arg("replay")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The sample log `examples/access.log` through the README's commands: the login policy
/// on login attempts alone, selected by path and method, with its report.
#[test]
fn filters_select_the_requests_a_policy_is_for() {
    let base = ["--config", "examples/policies.yaml", "--policy", "login", "--json", "examples/access.log"];
    let all = replay_from_root(&base);
    assert!(all.status.success(), "{}", stderr(&all));
    let all: Value = serde_json::from_slice(&all.stdout).unwrap();
    let logins = replay_from_root(&[&base[..], &["--path", "/login", "--method", "post"]].concat());
    assert!(logins.status.success(), "{}", stderr(&logins));
    let logins: Value = serde_json::from_slice(&logins.stdout).unwrap();
    assert_eq!(logins["filter"], "path starts with /login, method POST");
    let (every, selected) = (all["requests"].as_u64().unwrap(), logins["requests"].as_u64().unwrap());
    assert_eq!(selected + logins["filtered_out"].as_u64().unwrap(), every);
    assert!(selected > 240 && selected < every / 2, "{selected} of {every}");
    let top = &logins["policies"][0]["top_limited_keys"][0];
    assert_eq!(top["key"], "192.0.2.66", "the credential stuffer: {top}");
    // Statuses and a regex narrow further; both kinds must hold.
    let failed = replay_from_root(&[&base[..], &["--path-regex", "^/log", "--status", "4xx"]].concat());
    let failed: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert!(failed["requests"].as_u64().unwrap() < selected, "{failed}");
    assert_eq!(failed["filter"], "target matches /^/log/, status 4xx");
}

#[test]
fn a_report_of_selected_requests_keeps_its_key_timelines() {
    let report = temp_path("filtered-report.html");
    let output = replay_from_root(&[
        "--config",
        "examples/policies.yaml",
        "--policy",
        "login",
        "--path",
        "/login",
        "--report",
        report.to_str().unwrap(),
        "examples/access.log",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&report).unwrap();
    let _ = std::fs::remove_file(&report);
    assert!(html.contains("192.0.2.66"), "the top limited key's timeline is drawn");
}

#[test]
fn filters_that_cannot_apply_are_refused_with_the_reason() {
    let bad_regex = replay(&["--policy", "two_per_second", "--path-regex", "(unclosed"], "");
    assert!(!bad_regex.status.success());
    assert!(stderr(&bad_regex).contains("--path-regex `(unclosed`"), "{}", stderr(&bad_regex));
    let bad_status = replay(&["--policy", "two_per_second", "--status", "20"], "");
    assert!(stderr(&bad_status).contains("--status `20`"), "{}", stderr(&bad_status));
    let trace = replay(&["--policy", "two_per_second", "--format", "trace", "--method", "GET"], "1 a\n");
    assert!(stderr(&trace).contains("a trace line has none of these"), "{}", stderr(&trace));
}
