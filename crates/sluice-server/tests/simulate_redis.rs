//! `sluice simulate --store redis://…`: the same trace through Redis and Redis Cluster
//! prints exactly what the embedded store prints.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_test_support::redis::{ClosedPort, RedisCluster, RedisServer};
use std::io::Write;
use std::process::{Command, Stdio};

/// Every policy of the shipped example, each on a trace with bursts, peeks, too-large
/// costs, several keys and a clock that steps back.
fn trace() -> String {
    let mut lines = String::new();
    let base = 1_700_000_000_000_000u64;
    for i in 0..120u64 {
        let at = base + (i * 7_919 % 97) * 50_000 + i * 20_000;
        let cost = [1, 1, 0, 2, 1, 600, 1][(i % 7) as usize];
        lines.push_str(&format!("{at} user-{} {cost}\n", i % 3));
    }
    lines
}

fn simulate(store: &str, policy: &str, trace: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["simulate", "--config", "../../examples/policies.yaml", "--policy", policy, "--store", store])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(trace.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{store}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

const POLICIES: [&str; 11] =
    ["login", "burst2", "api", "github", "daily", "trial", "search", "search_fine", "scanner", "uploads", "shaped"];

#[test]
fn redis_prints_what_memory_prints() {
    let server = RedisServer::start();
    let trace = trace();
    for policy in POLICIES {
        let memory = simulate("memory", policy, &trace);
        assert_eq!(memory.lines().count(), 120);
        assert_eq!(simulate(&server.url(), policy, &trace), memory, "{policy}");
    }
}

#[test]
fn redis_cluster_prints_what_memory_prints() {
    let cluster = RedisCluster::start();
    let nodes: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
    let store = format!("redis+cluster://{}", nodes.join(","));
    let trace = trace();
    for policy in ["login", "api", "search_fine", "scanner", "shaped"] {
        assert_eq!(simulate(&store, policy, &trace), simulate("memory", policy, &trace), "{policy}");
    }
}

#[test]
fn an_unreachable_redis_is_a_clear_error() {
    let closed = ClosedPort::bind();
    let port = closed.port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["simulate", "--config", "../../examples/policies.yaml", "--policy", "api"])
        .args(["--store", &format!("redis://127.0.0.1:{port}/")])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains(&format!("cannot connect to the store redis://127.0.0.1:{port}/")), "{stderr}");
}

/// A Redis that cannot decide (here out of memory, so it refuses the script's writes) stops
/// the simulation with an error: the store's failure mode (open: allow) is for a service,
/// and its verdicts are not the store's decisions. Before, the line printed `allowed`.
#[test]
fn a_redis_that_cannot_decide_stops_the_simulation_instead_of_allowing() {
    use std::io::{BufRead, BufReader};
    let server = RedisServer::start();
    let mut admin = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    admin.write_all(b"*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$9\r\nmaxmemory\r\n$1\r\n1\r\n").unwrap();
    let mut reply = String::new();
    BufReader::new(&admin).read_line(&mut reply).unwrap();
    assert_eq!(reply, "+OK\r\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["simulate", "--config", "../../examples/policies.yaml", "--policy", "api", "--store", &server.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"1700000000000000 alice\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "", "no decision printed");
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("trace line 1") && stderr.contains("the store did not decide"), "{stderr}");
}
