//! `sluice serve --lease-period` end to end: four servers on one real Redis (scripts,
//! module, and a 3-master Cluster), clients hammering one key through all four. No window
//! admits more than the limit, and a whole window admits less only by units left unspent
//! at its end (none while every server keeps seeing demand: exactly the limit); most
//! admissions are answered from leases; a stopping server gives its units back; and
//! configurations leases cannot serve exactly are refused at start.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use serde_json::{Value, json};
use sluice_test_support::redis::{RedisCluster, RedisServer};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::server::Server;

const LIMIT: u64 = 100;

const CONFIG: &str = r#"
policies:
  per_second: {algorithm: fixed_window, limit: 100, window: 1s}
"#;

/// The module Cargo built for the workspace's tests, beside this test's directory.
fn module_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [deps.join("libsluice_redis_module.so"), deps.join("../libsluice_redis_module.so")];
    candidates.iter().find(|path| path.exists()).cloned().unwrap_or_else(|| {
        panic!("libsluice_redis_module.so not found beside {}: build the workspace first", exe.display())
    })
}

fn four(store: &str, module: &str) -> Vec<Server> {
    let args = [
        "--store",
        store,
        "--lease-period",
        "100ms",
        "--redis-timeout",
        "2s",
        "--workers",
        "2",
        "--redis-module",
        module,
    ];
    (0..4).map(|_| Server::start(CONFIG, &args)).collect()
}

/// One answer: when its window ends as seen from the client (µs after the start), whether
/// it was admitted, and whether a lease answered it.
#[derive(Clone, Copy, Debug)]
struct Answer {
    end: i64,
    allowed: bool,
    leased: bool,
}

/// Two clients per server hammer the key for `for_how_long`; every answer.
async fn hammer(servers: &[Server], for_how_long: Duration) -> Vec<Answer> {
    let origin = Instant::now();
    let mut tasks = Vec::new();
    for server in servers.iter().chain(servers) {
        let url = server.url("/v1/check");
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut answers = Vec::new();
            let body = json!({"key": "tenant", "policies": ["per_second"]});
            while origin.elapsed() < for_how_long {
                let response = client.post(&url).json(&body).send().await.unwrap();
                let allowed = response.status().is_success();
                let answer: Value = response.json().await.unwrap();
                let received = i64::try_from(origin.elapsed().as_micros()).unwrap();
                assert!(matches!(answer["source"].as_str(), Some("store" | "lease" | "cache")), "{answer}");
                let end = received + answer["reset_after_us"].as_i64().unwrap();
                answers.push(Answer { end, allowed, leased: answer["source"] == "lease" });
            }
            answers
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.extend(task.await.unwrap());
    }
    answers.sort_unstable_by_key(|answer| answer.end);
    answers
}

/// One window, as the answers saw it: its end (µs), the requests it admitted and rejected.
#[derive(Clone, Copy, Debug)]
struct Window {
    end: i64,
    admitted: u64,
    rejected: u64,
}

/// Groups answers whose window ends are the same window: ends a second apart, each seen
/// within a few ms of the truth.
fn windows(answers: &[Answer]) -> Vec<Window> {
    let mut windows: Vec<Window> = Vec::new();
    for answer in answers {
        let window = match windows.last_mut() {
            Some(window) if answer.end - window.end < 500_000 => window,
            _ => {
                windows.push(Window { end: answer.end, admitted: 0, rejected: 0 });
                windows.last_mut().unwrap()
            }
        };
        if answer.allowed {
            window.admitted += 1;
        } else {
            window.rejected += 1;
        }
    }
    windows
}

/// The value of the metric series `series` on `server`.
async fn metric(server: &Server, series: &str) -> u64 {
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let line = metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' '));
    line.unwrap_or_else(|| panic!("no {series} in {metrics}")).parse().unwrap()
}

/// Waits until each server decides through its store (a Cluster's connections are made in
/// the background after start).
async fn wait_for_the_store(servers: &[Server]) {
    let client = reqwest::Client::new();
    for server in servers {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let body = json!({"key": "warm-up", "policies": ["per_second"], "cost": 0});
            let answer: Value =
                client.post(server.url("/v1/check")).json(&body).send().await.unwrap().json().await.unwrap();
            if answer["source"] == "store" {
                break;
            }
            assert!(Instant::now() < deadline, "the store never answered: {answer}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn exactly_the_limit(servers: Vec<Server>) {
    wait_for_the_store(&servers).await;
    let run = Duration::from_millis(3_600);
    let answers = hammer(&servers, run).await;
    let windows = windows(&answers);
    assert!(windows.iter().all(|window| window.admitted <= LIMIT), "a window over the limit: {windows:?}");
    // Windows wholly inside the run (they start after it began, end before it ended) in
    // which the store turned requests away: the clients asked for more than the limit.
    let run = i64::try_from(run.as_micros()).unwrap();
    let hammered: Vec<_> = windows
        .iter()
        .filter(|window| window.end - 1_000_000 > 50_000 && window.end < run - 50_000 && window.rejected > 0)
        .collect();
    assert!(!hammered.is_empty(), "no whole window was asked for more than its limit: {windows:?}");
    // Such a window admits less than the limit only by leased units left unspent when it
    // ended (a server whose clients stalled): none while every server keeps seeing demand.
    let mut unspent = 0;
    for server in &servers {
        unspent += metric(server, "sluice_lease_units_total{kind=\"expired\"}").await;
    }
    let short: u64 = hammered.iter().map(|window| LIMIT - window.admitted).sum();
    assert!(short <= unspent, "hammered windows {short} short of the limit, {unspent} units expired: {windows:?}");
    let leased = answers.iter().filter(|answer| answer.leased).count();
    assert!(leased > 0, "no check was answered from a lease");
    assert!(metric(&servers[0], "sluice_lease_checks_total").await > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_the_scripts_admit_exactly_the_limit() {
    let redis = RedisServer::start();
    exactly_the_limit(four(&redis.url(), "never")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_the_module_admit_exactly_the_limit() {
    let redis = RedisServer::start_with_module(&module_path());
    exactly_the_limit(four(&redis.url(), "always")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_a_cluster_admit_exactly_the_limit() {
    let cluster = RedisCluster::start_with_module(&module_path());
    let store = format!(
        "redis+cluster://{}",
        cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect::<Vec<_>>().join(",")
    );
    exactly_the_limit(four(&store, "detect")).await;
}

#[test]
fn leases_are_refused_where_they_cannot_be_exact() {
    let redis = RedisServer::start();
    let log = "policies:\n  login: {algorithm: sliding_log, limit: 5, window: 15m, variant: attempts}\n";
    let dir = support::server::fresh_dir("lease-refused");
    std::fs::write(dir.join("config.yaml"), log).unwrap();
    let error = Server::try_start_in(dir, &["--store", &redis.url(), "--lease-period", "100ms"]).err().unwrap();
    assert!(error.contains("limit `login` (sliding_log) cannot be leased exactly"), "{error}");
    assert!(error.contains("exit status: 2"), "{error}");
    let dir = support::server::fresh_dir("lease-memory");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let error = Server::try_start_in(dir, &["--lease-period", "100ms"]).err().unwrap();
    assert!(error.contains("needs a shared store"), "{error}");
}

/// A server stopped while it holds leased units gives them back: another server then
/// admits exactly what the first did not use of the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_gives_its_units_back() {
    let redis = RedisServer::start();
    let config = "policies:\n  per_hour: {algorithm: fixed_window, limit: 100, window: 1h, alignment: anchored}\n";
    let args = ["--store", &redis.url(), "--lease-period", "100ms", "--redis-timeout", "2s", "--workers", "1"];
    let (mut first, second) = (Server::start(config, &args), Server::start(config, &args));
    let client = reqwest::Client::new();
    let check = |server: &Server| {
        let request = client.post(server.url("/v1/check")).json(&json!({"key": "tenant", "policies": ["per_hour"]}));
        async move { request.send().await.unwrap().status().is_success() }
    };
    for _ in 0..40 {
        assert!(check(&first).await);
    }
    let held = metric(&first, "sluice_lease_units_held").await;
    assert!(held > 0, "the first server holds leased units");
    first.signal("TERM");
    assert!(first.wait_exit(Duration::from_secs(10)).success());
    let mut admitted = 0;
    for _ in 0..100 {
        admitted += u64::from(check(&second).await);
    }
    assert_eq!(admitted, 60, "the first server used 40 of 100 and gave back the {held} it held");
}

/// `check-config` refuses what `serve` refuses: leases a file's `server:` section turns on
/// for a policy that cannot be leased exactly, or on the embedded store.
#[test]
fn check_config_refuses_leases_that_cannot_be_exact() {
    let dir = support::server::fresh_dir("lease-check-config");
    let cases = [
        (
            "server: {store: \"redis://127.0.0.1:6379\", lease_period: 100ms}\npolicies:\n  login: {algorithm: sliding_log, limit: 5, window: 15m, variant: attempts}\n".to_owned(),
            "limit `login` (sliding_log) cannot be leased exactly",
        ),
        ("server: {lease_period: 100ms}\n".to_owned() + CONFIG, "needs a shared store"),
        (
            "server: {store: \"redis://127.0.0.1:6379\", lease_period: 100ms}\npolicies:\n  login: {algorithm: sliding_log, limit: 5, window: 15m, variant: attempts}\n  api: {algorithm: fixed_window, limit: 9, window: 1m}\n  bucket: {algorithm: sliding_window, limit: 5, window: 1m, variant: attempts}\n".to_owned(),
            "2 limits cannot be leased exactly:\n  limit `login` (sliding_log) cannot be leased exactly",
        ),
    ];
    for (index, (config, expected)) in cases.iter().enumerate() {
        let path = dir.join(format!("config-{index}.yaml"));
        std::fs::write(&path, config).unwrap();
        let output =
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice")).arg("check-config").arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("server.lease_period") && stderr.contains(expected), "{stderr}");
    }
    // Every refused limit is named at once, as every other configuration problem is.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    let output = command.arg("check-config").arg(dir.join("config-2.yaml")).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("limit `bucket` (sliding_window) cannot be leased exactly"), "{stderr}");
    assert!(!stderr.contains("`api`"), "a leasable limit is not named: {stderr}");
}
