//! The in-memory store survives restarts of the real binary through its snapshot file:
//! `kill -9` loses at most one interval, SIGTERM loses nothing, and a corrupt file is
//! refused with a clear message unless the operator says to start empty.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use support::server::{Server, fresh_dir};

/// `p` is anchored at its first request, not aligned to the clock: the turn of an hour
/// between a check and a restart does not empty the window that the test counts on.
const CONFIG: &str = "policies:\n  p: {algorithm: fixed_window, limit: 1, window: 1h, alignment: anchored}\n  log: {algorithm: sliding_log, limit: 3, window: 1h}\n";

async fn check(server: &Server, policy: &str) -> StatusCode {
    let body = json!({"key": "k", "policies": [policy]});
    reqwest::Client::new().post(server.url("/v1/check")).json(&body).send().await.unwrap().status()
}

/// Snapshots written so far (`sluice_snapshots_total{result="ok"}`, absent before the first).
async fn snapshots_written(server: &Server) -> u64 {
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let count = metrics.lines().find_map(|line| line.strip_prefix("sluice_snapshots_total{result=\"ok\"} "));
    count.map_or(0, |count| count.parse().unwrap())
}

/// Waits until a snapshot begun after this call is written. The one in progress now may
/// have read the store before the caller's last check, so it is two more than now.
async fn wait_for_a_later_snapshot(server: &Server) {
    let wanted = snapshots_written(server).await + 2;
    let deadline = Instant::now() + Duration::from_secs(10);
    while snapshots_written(server).await < wanted {
        assert!(Instant::now() < deadline, "no snapshot written; log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn state_survives_kill_9() {
    let server = Server::start(CONFIG, &["--snapshot-interval", "100ms"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    for _ in 0..2 {
        assert_eq!(check(&server, "log").await, StatusCode::OK);
    }
    wait_for_a_later_snapshot(&server).await;
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    let age = metrics.lines().find_map(|line| line.strip_prefix("sluice_snapshot_age_seconds{} "));
    assert!(age.is_some_and(|age| age.parse::<f64>().is_ok_and(f64::is_finite)), "a snapshot's age:\n{metrics}");
    server.signal("KILL");
    let server = server.restart();
    assert_eq!(check(&server, "p").await, StatusCode::TOO_MANY_REQUESTS, "the window's count survived");
    assert_eq!(check(&server, "log").await, StatusCode::OK, "the log kept 2 of its 3");
    assert_eq!(check(&server, "log").await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn sigterm_writes_a_last_snapshot() {
    let mut server = Server::start(CONFIG, &["--snapshot-interval", "1h"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(10)).success(), "log:\n{}", server.log());
    assert!(server.dir().join("sluice.snapshot").exists());
    let server = server.restart();
    assert_eq!(check(&server, "p").await, StatusCode::TOO_MANY_REQUESTS);
    // A readable line, naming the file by its absolute path.
    server.wait_for_log("snapshot loaded, taken", Duration::from_secs(5));
    let log = server.log();
    let line = log.lines().find(|line| line.contains("snapshot loaded")).unwrap_or_default();
    assert!(line.contains(": 1 states restored"), "{line}");
    let absolute = server.dir().join("sluice.snapshot").canonicalize().unwrap();
    assert!(line.contains(&format!("path={}", absolute.display())), "{line}");
}

#[tokio::test]
async fn a_changed_policy_starts_fresh_after_a_restart() {
    let mut server = Server::start(CONFIG, &["--snapshot-interval", "1h"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    server.signal("TERM");
    server.wait_exit(Duration::from_secs(10));
    std::fs::write(server.dir().join("config.yaml"), CONFIG.replace("limit: 1,", "limit: 2,")).unwrap();
    let server = server.restart();
    assert_eq!(check(&server, "p").await, StatusCode::OK, "a new definition has no saved state");
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    assert_eq!(check(&server, "p").await, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_corrupt_snapshot_is_refused_unless_told_to_start_empty() {
    let dir = fresh_dir("corrupt");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("sluice.snapshot"), b"definitely not a snapshot").unwrap();
    let error = Server::try_start_in(dir.clone(), &[]).err().unwrap();
    assert!(error.contains("sluice.snapshot cannot be loaded"), "{error}");
    assert!(error.contains("--discard-bad-snapshot"), "{error}");
    assert!(dir.join("sluice.snapshot").exists(), "the refused file is left alone");

    let server = Server::start_in(dir.clone(), &["--discard-bad-snapshot"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    assert_eq!(set_aside(&dir), [b"definitely not a snapshot".to_vec()], "kept aside");
}

/// The contents of the snapshots set aside in `dir` (`sluice.snapshot.bad-*`), sorted.
fn set_aside(dir: &Path) -> Vec<Vec<u8>> {
    let entries = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap());
    let aside = entries.filter(|entry| entry.file_name().to_str().unwrap().starts_with("sluice.snapshot.bad-"));
    let mut contents: Vec<Vec<u8>> = aside.map(|entry| std::fs::read(entry.path()).unwrap()).collect();
    contents.sort();
    contents
}

#[tokio::test]
async fn a_second_bad_snapshot_does_not_overwrite_the_first() {
    let dir = fresh_dir("corrupt-twice");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("sluice.snapshot"), b"first bad snapshot").unwrap();
    // Killed at once: no snapshot of its own replaces the one set aside.
    drop(Server::start_in(dir.clone(), &["--discard-bad-snapshot", "--snapshot-interval", "1h"]));
    std::fs::write(dir.join("sluice.snapshot"), b"second bad snapshot").unwrap();
    let server = Server::start_in(dir.clone(), &["--discard-bad-snapshot", "--snapshot-interval", "1h"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK, "started empty");
    assert_eq!(set_aside(&dir), [b"first bad snapshot".to_vec(), b"second bad snapshot".to_vec()]);
}

/// A save interrupted by `kill -9` leaves its temporary file (`<path>.tmp-<pid>`): the next
/// start removes it when its process is gone, and leaves a running process's file alone.
#[tokio::test]
async fn a_start_removes_temporary_snapshots_of_ended_processes() {
    let dir = fresh_dir("leftovers");
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let mut ended = std::process::Command::new("true").spawn().unwrap();
    ended.wait().unwrap();
    let ended = dir.join(format!("sluice.snapshot.tmp-{}", ended.id()));
    let running = dir.join(format!("sluice.snapshot.tmp-{}", std::process::id()));
    std::fs::write(&ended, b"half a snapshot").unwrap();
    std::fs::write(&running, b"a snapshot being written").unwrap();
    let server = Server::start_in(dir.clone(), &["--snapshot-interval", "1h"]);
    server.wait_for_log("removed a temporary snapshot", Duration::from_secs(5));
    assert!(!ended.exists(), "log:\n{}", server.log());
    assert!(running.exists(), "the file of a running process is left alone");
}

#[tokio::test]
async fn snapshots_can_be_turned_off() {
    let mut server = Server::start(CONFIG, &["--snapshot", "off"]);
    assert_eq!(check(&server, "p").await, StatusCode::OK);
    server.signal("TERM");
    server.wait_exit(Duration::from_secs(10));
    assert!(!server.dir().join("sluice.snapshot").exists());
}
