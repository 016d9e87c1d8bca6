//! `sluice serve --lease-period` end to end: four servers on one real Redis (scripts,
//! module, and a 3-master Cluster; scripts/test.sh runs them again on Valkey and Redis 8),
//! clients hammering one key through all four. No fixed window admits more than the limit,
//! and a whole window admits less only by units left unspent at its end (none while every
//! server keeps seeing demand: exactly the limit); a token bucket of 2 000 admits 2 000 but
//! for units that ended unspent, counted; a GCRA never admits more than its definition over
//! the run; a sliding log never surely holds `N + 1` admitted requests in one window; most
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
  tokens: {algorithm: token_bucket, capacity: 2000, refill_amount: 1, refill_interval: 1h}
  gcra: {algorithm: leaky_bucket, interval: 1ms, burst: 1000}
  log: {algorithm: sliding_log, limit: 100, window: 1s}
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

/// One answer: when its request was sent and its answer received, and when its window
/// ends, as seen from the client (µs after the start); whether it was admitted, and whether
/// a lease answered it.
#[derive(Clone, Copy, Debug)]
struct Answer {
    sent: i64,
    received: i64,
    end: i64,
    allowed: bool,
    leased: bool,
}

/// When a client stops hammering.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// Once this long has passed since the start.
    After(Duration),
    /// Once its server has rejected this many checks in a row (within a minute at most).
    RejectedInARow(usize),
}

impl Stop {
    fn reached(self, elapsed: Duration, answers: &[Answer]) -> bool {
        match self {
            Stop::After(run) => elapsed >= run,
            Stop::RejectedInARow(count) => {
                assert!(elapsed < Duration::from_secs(60), "still admitting after a minute");
                answers.len() >= count && answers[answers.len() - count..].iter().all(|answer| !answer.allowed)
            }
        }
    }
}

/// µs since `origin`.
fn micros_since(origin: Instant) -> i64 {
    i64::try_from(origin.elapsed().as_micros()).unwrap()
}

/// Two clients per server check `policy` on one key until `stop`; every answer, in the
/// order of their window's end.
async fn hammer(servers: &[Server], policy: &str, stop: Stop) -> Vec<Answer> {
    let origin = Instant::now();
    let mut tasks = Vec::new();
    for server in servers.iter().chain(servers) {
        let url = server.url("/v1/check");
        let body = json!({"key": "tenant", "policies": [policy]});
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut answers = Vec::new();
            while !stop.reached(origin.elapsed(), &answers) {
                let sent = micros_since(origin);
                let response = client.post(&url).json(&body).send().await.unwrap();
                let allowed = response.status().is_success();
                let answer: Value = response.json().await.unwrap();
                let received = micros_since(origin);
                assert!(matches!(answer["source"].as_str(), Some("store" | "lease" | "cache")), "{answer}");
                let end = received + answer["reset_after_us"].as_i64().unwrap();
                answers.push(Answer { sent, received, end, allowed, leased: answer["source"] == "lease" });
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

/// A fixed window of 100 per second hammered through the four servers for 3.6 s.
async fn exactly_the_limit(servers: &[Server]) {
    let run = Duration::from_millis(3_600);
    let answers = hammer(servers, "per_second", Stop::After(run)).await;
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
    for server in servers {
        unspent += metric(server, EXPIRED).await;
    }
    let short: u64 = hammered.iter().map(|window| LIMIT - window.admitted).sum();
    assert!(short <= unspent, "hammered windows {short} short of the limit, {unspent} units expired: {windows:?}");
    let leased = answers.iter().filter(|answer| answer.leased).count();
    assert!(leased > 0, "no check was answered from a lease");
    assert!(metric(&servers[0], "sluice_lease_checks_total").await > 0);
    // The dashboard shows the same counts as /metrics (no check runs any more).
    let live: Value = reqwest::get(servers[0].url("/v1/live")).await.unwrap().json().await.unwrap();
    let leases = &live["leases"];
    assert_eq!(leases["leased_checks"], metric(&servers[0], "sluice_lease_checks_total").await, "{live}");
    assert_eq!(leases["units_leased"], metric(&servers[0], "sluice_lease_units_total{kind=\"leased\"}").await);
}

/// Units that ended unspent in a server's lease.
const EXPIRED: &str = "sluice_lease_units_total{kind=\"expired\"}";

/// Admitted answers among `answers`.
fn admitted(answers: &[Answer]) -> u64 {
    answers.iter().filter(|answer| answer.allowed).count() as u64
}

/// A token bucket of 2 000 (one more per hour) hammered until each server has turned its
/// clients away 20 times in a row: 2 000 admitted, less exactly the units that ended unspent
/// in a server's lease (`kind="expired"`: the bucket never has them back). Runs first on its
/// servers, so that every expired unit counted is the bucket's.
async fn exactly_the_bucket(servers: &[Server]) {
    let answers = hammer(servers, "tokens", Stop::RejectedInARow(20)).await;
    let mut expired = 0;
    for server in servers {
        expired += metric(server, EXPIRED).await;
    }
    let admitted = admitted(&answers);
    assert_eq!(admitted + expired, 2_000, "{admitted} admitted, {expired} expired unspent");
    let leased = answers.iter().filter(|answer| answer.leased).count() as u64;
    eprintln!("token bucket: {admitted} admitted ({leased} from leases), {expired} expired unspent");
    assert!(4 * leased >= admitted, "only {leased} of {admitted} admissions answered from leases");
}

/// A GCRA of one per ms with a burst of 1 000 hammered for 2 s: never more than its
/// definition allows over the run (1 001, and one per ms from the first request sent to
/// the last answer received), and at least the burst (or every check, if fewer).
async fn never_beyond_the_gcra(servers: &[Server]) {
    let answers = hammer(servers, "gcra", Stop::After(Duration::from_secs(2))).await;
    let first = answers.iter().map(|answer| answer.sent).min().unwrap();
    let last = answers.iter().map(|answer| answer.received).max().unwrap();
    let most = 1_001 + u64::try_from(last - first).unwrap() / 1_000;
    let admitted = admitted(&answers);
    eprintln!("GCRA: {admitted} admitted of {} checks, at most {most}", answers.len());
    assert!(admitted <= most, "{admitted} admitted in {} µs: at most {most}", last - first);
    // The burst is there from the start: the first 1 001 checks (or all, if fewer) pass.
    let least = answers.len().min(1_001) as u64;
    assert!(admitted >= least, "{admitted} admitted of {} checks: not even the burst", answers.len());
    assert!(answers.iter().any(|answer| answer.leased), "no check was answered from a lease");
}

/// The admitted requests' sent and received times (µs), in the order they were sent.
fn admitted_spans(answers: &[Answer]) -> Vec<(i64, i64)> {
    let mut spans: Vec<_> =
        answers.iter().filter(|answer| answer.allowed).map(|answer| (answer.sent, answer.received)).collect();
    spans.sort_unstable();
    spans
}

/// The first of `limit + 1` admitted requests all surely decided within one `window`: each
/// was decided between its sending and its answer, so a set whose latest answer came less
/// than `window` after its earliest sending was. None when no such set exists.
fn surely_over(spans: &[(i64, i64)], limit: usize, window: i64) -> Option<i64> {
    // Sweeping from the latest sent: the `limit + 1` earliest answers of the requests sent
    // at or after each one.
    let mut earliest = std::collections::BinaryHeap::new();
    for &(sent, received) in spans.iter().rev() {
        earliest.push(received);
        if earliest.len() > limit + 1 {
            earliest.pop();
        }
        if earliest.len() == limit + 1 && earliest.peek().is_some_and(|&latest| latest - sent < window) {
            return Some(sent);
        }
    }
    None
}

/// A sliding log of 100 per second hammered for 3.6 s: no `N + 1` admitted requests were
/// surely decided within one window, and the hammered log admitted more than one window's.
async fn never_beyond_the_log(servers: &[Server]) {
    let answers = hammer(servers, "log", Stop::After(Duration::from_millis(3_600))).await;
    let spans = admitted_spans(&answers);
    eprintln!("sliding log: {} admitted of {} checks in 3.6 s", spans.len(), answers.len());
    assert_eq!(surely_over(&spans, 100, 1_000_000), None, "101 admitted within one window: {spans:?}");
    assert!(spans.len() > 100 && answers.iter().any(|answer| !answer.allowed), "{} admitted", spans.len());
    assert!(answers.iter().any(|answer| answer.leased), "no check was answered from a lease");
}

/// Each algorithm's promise through the same four servers, one after the other.
async fn every_limit_holds(servers: Vec<Server>) {
    wait_for_the_store(&servers).await;
    exactly_the_bucket(&servers).await;
    exactly_the_limit(&servers).await;
    never_beyond_the_gcra(&servers).await;
    never_beyond_the_log(&servers).await;
    each_policys_figures_add_up(&servers).await;
}

/// The value of `series` in the `/metrics` text `metrics`.
fn value_in(metrics: &str, series: &str) -> u64 {
    let line = metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' '));
    line.unwrap_or_else(|| panic!("no {series} in {metrics}")).parse().unwrap()
}

/// Once a server holds no unit any more (its keys went quiet and gave theirs
/// back), each policy's lease series add up to the server's (every check here is of one
/// policy), and the dashboard shows each policy's as `/metrics` does.
async fn each_policys_figures_add_up(servers: &[Server]) {
    let policies = ["per_second", "tokens", "gcra", "log"];
    for server in servers {
        let deadline = Instant::now() + Duration::from_secs(20);
        while metric(server, "sluice_lease_units_held").await > 0 {
            assert!(Instant::now() < deadline, "units still held long after the run");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
        let of = |name: &str, labels: &str| -> u64 {
            policies.iter().map(|policy| value_in(&metrics, &format!("{name}{{policy=\"{policy}\"{labels}}}"))).sum()
        };
        assert_eq!(of("sluice_lease_policy_checks_total", ""), value_in(&metrics, "sluice_lease_checks_total"));
        for kind in ["leased", "returned", "expired"] {
            let whole = value_in(&metrics, &format!("sluice_lease_units_total{{kind=\"{kind}\"}}"));
            assert_eq!(of("sluice_lease_policy_units_total", &format!(",kind=\"{kind}\"")), whole, "{kind}");
        }
        assert_eq!(of("sluice_lease_policy_units_held", ""), 0u64);
        assert!(of("sluice_lease_policy_checks_total", "") > 0, "{metrics}");
        // A leased answer's `remaining` is this server's units, not the key's: such checks
        // are left out of the fill ratio, which counts every other one.
        for policy in policies {
            let checks: u64 = metrics
                .lines()
                .filter(|line| line.starts_with(&format!("sluice_checks_total{{policy=\"{policy}\",")))
                .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                .sum();
            let leased = value_in(&metrics, &format!("sluice_lease_policy_checks_total{{policy=\"{policy}\"}}"));
            let filled = value_in(&metrics, &format!("sluice_fill_ratio_count{{policy=\"{policy}\"}}"));
            assert_eq!(filled + leased, checks, "{policy}: {metrics}");
        }
        let live: Value = reqwest::get(server.url("/v1/live")).await.unwrap().json().await.unwrap();
        for policy in live["policies"].as_array().unwrap() {
            let series = format!("sluice_lease_policy_checks_total{{policy={}}}", policy["name"]);
            assert_eq!(policy["leases"]["leased_checks"], value_in(&metrics, &series), "{policy}");
            assert!(policy["states"].is_null(), "no exact count on Redis: {policy}");
        }
    }
}

#[test]
fn surely_over_finds_only_sets_decided_within_one_window() {
    // Three requests, limit 2, window 10: sent 0, 1, 2 and answered 3, 4, 9 (9 < 0 + 10).
    assert_eq!(surely_over(&[(0, 3), (1, 4), (2, 9)], 2, 10), Some(0));
    // The third answered at 10: maybe decided a window after the first.
    assert_eq!(surely_over(&[(0, 3), (1, 4), (2, 10)], 2, 10), None);
    // Sent later, answered early: the set (1, 2, 3) is within one window.
    assert_eq!(surely_over(&[(0, 30), (1, 4), (2, 5), (3, 6)], 2, 10), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_the_scripts_hold_every_limit() {
    let redis = RedisServer::start();
    every_limit_holds(four(&redis.url(), "never")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_the_module_hold_every_limit() {
    let redis = RedisServer::start_with_module(&module_path());
    every_limit_holds(four(&redis.url(), "always")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_servers_on_a_cluster_hold_every_limit() {
    let cluster = RedisCluster::start_with_module(&module_path());
    let store = format!(
        "redis+cluster://{}",
        cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect::<Vec<_>>().join(",")
    );
    every_limit_holds(four(&store, "detect")).await;
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
