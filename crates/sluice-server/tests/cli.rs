//! `sluice check-config` and the precedence of settings (flag > environment > file).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_test_support::certificates::Certificates;
use std::process::Command;
use support::server::{Server, TempDir, fresh_dir};

fn check_config(text: &str) -> (i32, String, String) {
    let dir = fresh_dir("check-config");
    std::fs::write(dir.join("c.yaml"), text).unwrap();
    let output =
        Command::new(env!("CARGO_BIN_EXE_sluice")).current_dir(&dir).args(["check-config", "c.yaml"]).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code().unwrap(), text(output.stdout), text(output.stderr))
}

#[test]
fn check_config_lists_a_valid_file() {
    let (code, out, _) = check_config(include_str!("../service.yaml"));
    assert_eq!(code, 0);
    assert!(out.contains("valid, 5 policies") && out.contains("burst2 (sliding_log): 2 / 1 s\n"), "{out}");
}

/// An envoyproxy/ratelimit file: every domain and rule read is listed.
#[test]
fn check_config_lists_envoy_domains_and_rules() {
    let (code, out, err) = check_config(include_str!("fixtures/envoy/messaging.yaml"));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Envoy rules in 1 domains") && out.contains("  domain messaging\n"), "{out}");
    assert!(out.contains("    messaging.message_type_marketing.to_number: 5 per day\n"), "{out}");
}

#[test]
fn check_config_prints_every_problem() {
    let text = "server: {http: nowhere, failure_mode: maybe}\npolicies:\n  a: {algorithm: token_bucket, capacity: 0, refill_interval: 1s}\n  b: {algorithm: leaky, limit: 1}\n";
    let (code, _, err) = check_config(text);
    assert_eq!(code, 2);
    assert!(err.contains("policies.a.capacity") && err.contains("policies.b.algorithm"), "{err}");
    // The `server:` section's values are checked in the same pass, with their paths.
    assert!(err.contains("server.http: `nowhere`") && err.contains("server.failure_mode:"), "{err}");
    let (code, _, err) = check_config(
        "server: {http: nowhere, failure_mode: maybe}\npolicies:\n  a: {algorithm: fixed_window, limit: 1, window: 1s}\n",
    );
    assert_eq!(code, 2);
    assert!(err.contains("http: `nowhere`") && err.contains("failure_mode: unknown failure mode"), "{err}");
    let (code, _, err) = check_config(
        "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    );
    assert_eq!(code, 2);
    assert!(err.contains("descriptors[0].rate_limit.unit"), "{err}");
}

/// A misspelt field or algorithm gets the name it probably meant, as `server:` settings do.
#[test]
fn check_config_suggests_the_name_meant() {
    let text = "server: {stor: memory}\npolicies:\n  a: {algorithm: fixd_window, limit: 1, window: 1s}\n  b: {algorithm: sliding_log, limt: 1, window: 1s}\n";
    let (code, _, err) = check_config(text);
    assert_eq!(code, 2);
    assert!(err.contains("server.stor: unknown setting (did you mean `store`?)"), "{err}");
    assert!(
        err.contains("policies.a.algorithm: must be one of") && err.contains("(did you mean `fixed_window`?)"),
        "{err}"
    );
    assert!(err.contains("policies.b.limt: unknown field") && err.contains("(did you mean `limit`?)"), "{err}");
}

#[test]
fn a_missing_file_is_named() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_sluice")).args(["check-config", "/nonexistent/sluice.yaml"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/sluice.yaml"));
}

#[test]
fn the_environment_beats_the_file_and_flags_beat_the_environment() {
    let config = "server: {snapshot: from-file.snapshot, snapshot_interval: 1h}\npolicies:\n  p: {algorithm: fixed_window, limit: 1, window: 1h}\n";
    let dir = fresh_dir("precedence");
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    // The environment names the snapshot file; the file's choice loses.
    let mut server = with_env(&dir, &[("SLUICE_SNAPSHOT", "from-env.snapshot")], &[]);
    server.signal("TERM");
    server.wait_exit(std::time::Duration::from_secs(10));
    assert!(dir.join("from-env.snapshot").exists() && !dir.join("from-file.snapshot").exists());
    // A flag beats the environment.
    let mut server = with_env(&dir, &[("SLUICE_SNAPSHOT", "from-env.snapshot")], &["--snapshot", "from-flag.snapshot"]);
    server.signal("TERM");
    server.wait_exit(std::time::Duration::from_secs(10));
    assert!(dir.join("from-flag.snapshot").exists());
}

fn with_env(dir: &TempDir, vars: &[(&str, &str)], args: &[&str]) -> Server {
    Server::try_start_with_env(dir.clone(), args, vars).unwrap()
}

/// `sluice serve` with `args` on the built-in configuration: its exit status and standard error.
fn serve_refused(args: &[&str]) -> (Option<i32>, String) {
    let dir = fresh_dir("serve-refused");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(&dir)
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--snapshot", "off"])
        .args(args)
        .output()
        .unwrap();
    (output.status.code(), String::from_utf8(output.stderr).unwrap())
}

#[test]
fn a_worker_count_out_of_range_is_refused_at_start_by_name() {
    for count in ["0", "100000"] {
        let (code, err) = serve_refused(&["--workers", count]);
        assert_eq!(code, Some(2), "--workers {count}: {err}");
        // Named as typed (issue 36.7), not as the file's field.
        assert!(err.contains("--workers: must be between 1 and 256"), "--workers {count}: {err}");
    }
    let (code, err) = serve_refused(&["--max-connections", "0", "--max-request-head", "10"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--max-connections: must be between") && err.contains("--max-request-head:"), "{err}");
}

/// Issue 36.7: a bad value is named where it was given: its variable, when no flag gave it.
#[test]
fn a_bad_environment_variable_is_named_as_such() {
    let dir = fresh_dir("serve-refused-env");
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(&dir)
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--snapshot", "off"])
        .env("SLUICE_WORKERS", "0")
        .output()
        .unwrap();
    let err = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("SLUICE_WORKERS: must be between 1 and 256"), "{err}");
    assert!(!err.contains("--workers"), "{err}");
}

#[test]
fn the_bounds_can_be_set_in_the_server_section_and_are_checked_there() {
    let policy = "policies:\n  a: {algorithm: fixed_window, limit: 1, window: 1s}\n";
    let valid = "server: {max_connections: 100, max_request_head: 8192, header_timeout: 2s, max_descriptors: 8, max_descriptor_entries: 4, max_grpc_message: 4096, workers: 2}\n";
    let (code, _, err) = check_config(&format!("{valid}{policy}"));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = check_config(&format!("server: {{max_descriptors: 0, workers: 257}}\n{policy}"));
    assert_eq!(code, 2);
    assert!(err.contains("server.max_descriptors: must be between 1"), "{err}");
    assert!(err.contains("server.workers: must be between 1 and 256"), "{err}");
}

/// Issue 36.3: `check-config` and `serve` read a file with one validation: what `serve`
/// refuses, `check-config` refuses in the same words (the field named), both with exit 2.
#[test]
fn check_config_and_serve_refuse_the_same_store_settings_in_the_same_words() {
    let policy = "policies:\n  a: {algorithm: fixed_window, limit: 1, window: 1s}\n";
    let certs = Certificates::make();
    let ca = certs.path("ca.pem").display().to_string();
    let plain_with_ca = format!("server: {{store: 'redis://h:1', redis_ca_file: '{ca}'}}");
    for (server, problem) in [
        (plain_with_ca.as_str(), "server.redis_ca_file: TLS files are for rediss:// stores"),
        (
            "server: {store: 'redis://sluice:s3cret@h:port'}",
            "server.store: `redis://sluice:***@h:port` is not a Redis URL",
        ),
        (
            "server: {store: 'rediss://h:1', redis_ca_file: missing.pem}",
            "server.redis_ca_file: missing.pem: cannot be read",
        ),
        (
            "server: {store: 'rediss://h:1', redis_ca_file: c.yaml}",
            "server.redis_ca_file: c.yaml: holds no certificate",
        ),
    ] {
        let text = format!("{server}\n{policy}");
        let (code, _, checked) = check_config(&text);
        assert_eq!(code, 2, "{checked}");
        assert!(checked.contains(problem), "check-config: {checked}");
        let dir = fresh_dir("same-validation");
        std::fs::write(dir.join("c.yaml"), &text).unwrap();
        let served = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .current_dir(&dir)
            .args(["serve", "--config", "c.yaml", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
            .output()
            .unwrap();
        let served_err = String::from_utf8(served.stderr).unwrap();
        assert_eq!(served.status.code(), Some(2), "{served_err}");
        assert!(served_err.contains(problem), "serve: {served_err}");
        assert!(!served_err.contains("InvalidClientConfig") && !served_err.contains("s3cret"), "{served_err}");
    }
}

/// Runs `sluice` with `args`, its standard output a pipe whose reader has already closed (as
/// `| head -1` leaves it): every write fails with a broken pipe, whatever the timing.
fn into_a_closed_pipe(args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // The child may exit before reading it all: a write error here is its business.
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    child.wait_with_output().unwrap()
}

#[test]
fn every_subcommand_exits_quietly_into_a_closed_pipe() {
    let trace = include_str!("../../../examples/trace.txt").repeat(50);
    let policies = "../../examples/policies.yaml";
    let runs: [(&[&str], &str); 3] = [
        (&["check-config", "service.yaml"], ""),
        (&["simulate", "--config", policies, "--policy", "burst2"], trace.as_str()),
        (&["replay", "--config", policies, "--policy", "burst2", "../../examples/access.log"], ""),
    ];
    for (args, stdin) in runs {
        let output = into_a_closed_pipe(args, stdin);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success() && stderr.is_empty(), "{args:?}: {:?}, stderr: {stderr}", output.status);
    }
}

/// The RESP front is off by default; `SLUICE_RESP` or `server.resp` turns it on, and a bad
/// address is named where it was given.
#[test]
fn the_resp_port_opens_from_the_variable_or_the_file_and_a_bad_address_is_named() {
    let config = "policies:\n  p: {algorithm: fixed_window, limit: 1, window: 1h}\n";
    let dir = fresh_dir("resp-setting");
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let off = with_env(&dir, &[], &["--snapshot", "off"]);
    assert!(off.resp.is_none() && !off.start_up_lines().contains("RESP"), "{}", off.start_up_lines());
    drop(off);
    let on = with_env(&dir, &[("SLUICE_RESP", "127.0.0.1:0")], &["--snapshot", "off"]);
    let mut stream = std::net::TcpStream::connect(on.resp.expect("RESP listening")).unwrap();
    std::io::Write::write_all(&mut stream, b"PING\r\n").unwrap();
    let mut pong = [0; 7];
    std::io::Read::read_exact(&mut stream, &mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    drop(on);
    std::fs::write(dir.join("config.yaml"), format!("server: {{resp: '127.0.0.1:0'}}\n{config}")).unwrap();
    assert!(with_env(&dir, &[], &["--snapshot", "off"]).resp.is_some(), "server.resp opens it");
    let (code, err) = serve_refused(&["--resp", "nowhere"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--resp: `nowhere` is not an address"), "{err}");
}
