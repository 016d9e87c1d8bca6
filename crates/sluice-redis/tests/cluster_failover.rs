//! A Redis Cluster master killed under load: a real 3-master + 3-replica Cluster on loopback
//! (`cluster-node-timeout` 1 s, `cluster-require-full-coverage no`), checks running on keys
//! of every master through two connections, in each failure mode. An outage of one master
//! is an outage of its slots only:
//!
//! - keys of the healthy masters are decided by Redis throughout;
//! - the killed master's keys are answered by the failure mode, at once from the moment the
//!   store knows the master down (only the checks already under way may wait for the timeout);
//! - then by the promoted replica, within one probe interval (plus scheduling) of the
//!   promotion, with no second outage;
//! - one outage is counted, the killed master's.
//!
//! Nothing waits on luck: the test waits on what the nodes and the store report, each wait
//! bounded.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use sluice_core::{Check, Key, Limit, Source, Store, Timestamp, TokenBucket, TokenBucketSettings};
use sluice_redis::{Cause, FailureMode, RedisHealth, RedisSettings, RedisStore};
use sluice_test_support::failover_cluster::FailoverCluster;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The store's timeout: long, so that a check that waited for it is told at once from one
/// that did not, and no check of a live master reaches it on a busy machine (at 500 ms, a
/// live master's check timed out once in about 40 runs on this shared 2-core VM).
const TIMEOUT: Duration = Duration::from_secs(1);
/// A check answered without waiting for Redis takes less than this.
const FAST: Duration = Duration::from_millis(100);
/// Checking tasks (each one check at a time), spread over two connections.
const TASKS: usize = 4;
/// The most the store may take to send a slot's keys to the promoted replica, once the
/// live nodes agree on it: one probe interval (100 ms) and its topology read, plus
/// scheduling on a busy 2-core machine, plus this test's own polling of the nodes.
const FOLLOW_LIMIT: Duration = Duration::from_secs(1);
/// How long a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);
/// The store's timeout under `cluster-require-full-coverage yes`: long, so that a check
/// that waited for it cannot be mistaken for one Redis refused at once.
const LONG_TIMEOUT: Duration = Duration::from_secs(2);
/// The shortest wait of redis-rs's Cluster client, by default, before it sends a command
/// Redis refused for now (`CLUSTERDOWN`) again: a check that took this long waited.
const REDIS_RS_RETRY_WAIT: Duration = Duration::from_millis(1280);

/// The store's log lines (`sluice_redis` at `WARN`) from every test of this binary so far.
fn log_lines() -> Vec<String> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&log);
        tracing_subscriber::fmt()
            .with_env_filter("sluice_redis=warn")
            .with_ansi(false)
            .with_writer(move || Appender(Arc::clone(&writer)))
            .init();
        log
    });
    String::from_utf8_lossy(&log.lock().unwrap()).lines().map(str::to_owned).collect()
}

/// Appends what is written to a shared buffer.
struct Appender(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Appender {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One check: when it ended (since the kill, negative before), whether its key is the killed
/// master's, where its answer came from, how long it took.
#[derive(Clone, Copy, Debug)]
struct Sample {
    ended: Instant,
    victim: bool,
    source: Source,
    took: Duration,
}

/// A million an hour: every check Redis decides is allowed, in every mode.
fn generous() -> Limit {
    let bucket = TokenBucketSettings { capacity: 1_000_000, refill_amount: 1, refill_interval: Duration::from_secs(1) };
    Limit::new("generous", TokenBucket::new(bucket).unwrap())
}

/// Checks `keys` in turn on `store` until `stop`, recording each in `samples`.
async fn check_until(
    store: RedisStore,
    keys: Vec<(String, bool)>,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
) {
    let limit = generous();
    for (key, victim) in keys.iter().cycle() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let now = Timestamp::from_micros(0);
        let verdict = store
            .check(Check::new(Key::new(key.as_bytes()).unwrap(), std::slice::from_ref(&limit), now, 1))
            .await
            .unwrap();
        let sample = Sample { ended: Instant::now(), victim: *victim, source: verdict.source, took: started.elapsed() };
        samples.lock().unwrap().push(sample);
        // Paced, so that two cores serve six Redis nodes and the checks alike.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `condition` holds of the samples, polling every 10 ms.
async fn wait_for(what: &str, samples: &Mutex<Vec<Sample>>, condition: impl Fn(&[Sample]) -> bool) {
    let started = Instant::now();
    while !condition(&samples.lock().unwrap()) {
        assert!(started.elapsed() < PATIENCE, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a run saw: every check, when the master was killed, when the live nodes agreed on
/// its replica's promotion, the store's health at the end, the killed master's port, and
/// the store's log lines that name this Cluster's nodes.
struct Run {
    samples: Vec<Sample>,
    killed: Instant,
    promoted: Instant,
    health: RedisHealth,
    victim: u16,
    log: Vec<String>,
}

impl Run {
    /// The log lines that start an outage of the master on `port`.
    fn outage_lines(&self, port: u16) -> Vec<&String> {
        let node = format!("redis=node 127.0.0.1:{port} ");
        self.log.iter().filter(|line| line.contains("Redis unavailable") && line.contains(&node)).collect()
    }

    /// The ports of the masters other than the killed one whose outages were logged.
    fn healthy_masters_down(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self.log.iter().filter_map(|line| outage_port(line)).collect();
        ports.sort_unstable();
        ports.dedup();
        ports.retain(|port| *port != self.victim);
        ports
    }
}

/// The port of the master whose outage `line` starts.
fn outage_port(line: &str) -> Option<u16> {
    let (_, node) = line.split_once("Redis unavailable")?.1.split_once("redis=node 127.0.0.1:")?;
    node.split(' ').next()?.parse().ok()
}

/// How a run's Cluster and store are set up: the failure mode,
/// `cluster-require-full-coverage`, and the store's timeout.
#[derive(Clone, Copy)]
struct Setup {
    mode: FailureMode,
    full_coverage: bool,
    timeout: Duration,
}

impl Setup {
    /// `cluster-require-full-coverage no` and the store timeout [`TIMEOUT`].
    fn partial(mode: FailureMode) -> Setup {
        Setup { mode, full_coverage: false, timeout: TIMEOUT }
    }
}

/// Kills a master of a Cluster set up as `setup` says while [`TASKS`] tasks check keys of
/// every master, until the killed master's keys have been decided 20 times by its promoted
/// replica.
async fn kill_a_master_under_load(setup: Setup) -> Run {
    let Setup { mode, full_coverage, timeout } = setup;
    log_lines();
    let mut cluster = FailoverCluster::start(Duration::from_millis(1000), full_coverage);
    let keys: Vec<String> = (0..30).map(|i| format!("user-{i}")).collect();
    let slots: Vec<u16> = keys.iter().map(|key| cluster.slot_of(key)).collect();
    let victim = cluster.master_of(slots[0]).unwrap();
    let owned: Vec<(String, bool)> =
        keys.iter().zip(&slots).map(|(key, slot)| (key.clone(), cluster.master_of(*slot) == Some(victim))).collect();
    assert!(owned.iter().any(|(_, victim)| !victim), "every key on one master");

    let settings = RedisSettings { failure_mode: mode, timeout, blocked_cache: false, ..RedisSettings::default() };
    let store = RedisStore::connect_cluster(&cluster.urls(), settings).await.unwrap();
    let second = store.connect_again().await.unwrap();
    let (samples, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let connection = if task % 2 == 0 { store.clone() } else { second.clone() };
            let mut mine = owned.clone();
            mine.rotate_left(task * 7);
            tokio::spawn(check_until(connection, mine, Arc::clone(&samples), Arc::clone(&stop)))
        })
        .collect();
    wait_for("checks before the kill", &samples, |samples| samples.len() >= 100).await;

    let killed = Instant::now();
    cluster.kill(victim);
    let slot = slots[0];
    let (cluster, promoted) = tokio::task::spawn_blocking(move || {
        cluster.wait_until("a replica promoted", |cluster| cluster.master_of(slot).is_some_and(|port| port != victim));
        (cluster, Instant::now())
    })
    .await
    .unwrap();
    let back = |samples: &[Sample]| {
        samples.iter().filter(|s| s.victim && s.ended > promoted && s.source == Source::Store).count()
    };
    wait_for("the killed master's keys decided by the promoted replica", &samples, |samples| back(samples) >= 20).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let samples = samples.lock().unwrap().clone();
    let ports: Vec<String> =
        cluster.urls().iter().map(|url| url.replace("redis://", "node ").replace('/', " ")).collect();
    let mine = |line: &String| ports.iter().any(|port| line.contains(port.as_str()));
    let log = log_lines().into_iter().filter(mine).collect();
    drop(cluster);
    Run { samples, killed, promoted, health: store.health(), victim, log }
}

/// The promises with `cluster-require-full-coverage no` (see the module's docs).
fn assert_one_masters_outage(mode: FailureMode, run: &Run) {
    let Run { samples, killed, promoted, health, .. } = run;
    let (killed, promoted) = (*killed, *promoted);
    let healthy: Vec<&Sample> = samples.iter().filter(|s| !s.victim).collect();
    let not_by_redis: Vec<&&Sample> = healthy.iter().filter(|s| s.source != Source::Store).collect();
    assert!(not_by_redis.is_empty(), "{mode}: healthy masters' keys answered without Redis: {not_by_redis:?}");
    // From the first check of the killed master's keys that Redis did not decide (checks
    // in flight at the kill may still end with Redis's answer).
    let first_failed =
        samples.iter().find(|s| s.victim && s.ended > killed && s.source != Source::Store).unwrap().ended;
    let victim: Vec<&Sample> = samples.iter().filter(|s| s.victim && s.ended >= first_failed).collect();
    let first_back = victim.iter().find(|s| s.source == Source::Store).map(|s| s.ended).unwrap();
    let outage: Vec<&&Sample> = victim.iter().filter(|s| s.ended < first_back).collect();
    let expected = match mode {
        FailureMode::Open => Source::FailedOpen,
        FailureMode::Closed => Source::FailedClosed,
        FailureMode::Fallback => Source::Fallback,
    };
    assert!(outage.iter().all(|s| s.source == expected), "{mode}: {outage:?}");
    let waited = outage.iter().filter(|s| s.took >= FAST).count();
    assert!(waited <= TASKS, "{mode}: {waited} checks of the killed master's keys waited for Redis");
    let again: Vec<&&Sample> = victim.iter().filter(|s| s.ended >= first_back && s.source != Source::Store).collect();
    assert!(again.is_empty(), "{mode}: a second outage after the promoted replica answered: {again:?}");
    let late = first_back.saturating_duration_since(promoted);
    assert!(late <= FOLLOW_LIMIT, "{mode}: the promoted replica took its keys {late:?} after the nodes agreed on it");
    assert_eq!(health.outages, 1, "{mode}: only the killed master had an outage: {health:?}");
    assert_eq!(health.answered_without_redis, outage.len() as u64, "{mode}: {health:?}");
    assert!(health.is_available() && health.nodes.len() == 3, "{mode}: {health:?}");
    let mut fast: Vec<Duration> = outage.iter().map(|s| s.took).filter(|took| *took < FAST).collect();
    fast.sort();
    let percentile = |p: usize| fast.get(fast.len().saturating_sub(1) * p / 100).copied().unwrap_or_default();
    eprintln!(
        "{mode}: {} checks of healthy masters' keys, all by Redis; killed master's keys: {} answered by the failure \
         mode ({waited} waited ≥ {FAST:?}; the others p50 {:?}, p99 {:?}), back on the promoted replica {:?} after \
         the kill ({:?} after the nodes agreed on the promotion, {:?} after the kill)",
        healthy.len(),
        outage.len(),
        percentile(50),
        percentile(99),
        first_back - killed,
        first_back.checked_duration_since(promoted).unwrap_or_default(),
        promoted - killed,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_open_for_its_slots_only() {
    assert_one_masters_outage(FailureMode::Open, &kill_a_master_under_load(Setup::partial(FailureMode::Open)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_closed_for_its_slots_only() {
    assert_one_masters_outage(
        FailureMode::Closed,
        &kill_a_master_under_load(Setup::partial(FailureMode::Closed)).await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_falls_back_for_its_slots_only() {
    assert_one_masters_outage(
        FailureMode::Fallback,
        &kill_a_master_under_load(Setup::partial(FailureMode::Fallback)).await,
    );
}

/// Redis's default, `cluster-require-full-coverage yes`: once the killed master is flagged
/// failed, every node refuses every key (`CLUSTERDOWN`) until its replica is promoted. The
/// store answers each master's keys by the failure mode from its first refusal, and by Redis
/// again within [`FOLLOW_LIMIT`] of the promotion; before the kill and after that, every
/// check is decided by Redis.
///
/// Issue 46.2: a `CLUSTERDOWN` is answered by the failure mode at once (no check of a
/// healthy master's key waits for the store's timeout of 2 s), counted under its own cause
/// (`cluster_down`), and named on each healthy master's outage line; the killed master's
/// outage line names its refused connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_full_coverage_every_master_refuses_until_the_promotion() {
    let setup = Setup { mode: FailureMode::Open, full_coverage: true, timeout: LONG_TIMEOUT };
    let run = kill_a_master_under_load(setup).await;
    let by_redis = |s: &&Sample| s.source == Source::Store;
    let before = run.samples.iter().filter(|s| s.ended < run.killed);
    assert!(before.clone().all(|s| s.source == Source::Store));
    let caught_up = run.promoted + FOLLOW_LIMIT;
    let late: Vec<&Sample> = run.samples.iter().filter(|s| s.ended > caught_up && !by_redis(s)).collect();
    assert!(late.is_empty(), "answered without Redis after the promotion: {late:?}");
    let healthy = |s: &&Sample| !s.victim && !by_redis(s);
    let refused: Vec<&Sample> = run.samples.iter().filter(healthy).collect();
    let window = match (refused.first(), refused.last()) {
        (Some(first), Some(last)) => last.ended - first.ended,
        _ => Duration::ZERO,
    };
    let victim = run.samples.iter().filter(|s| s.victim && !by_redis(s)).count();
    let slowest = run.samples.iter().filter(|s| !s.victim).map(|s| s.took).max().unwrap_or_default();
    let cluster_down =
        Cause::ALL.iter().position(|cause| cause.name() == "cluster_down").map(|at| run.health.errors[at]);
    eprintln!(
        "full coverage: promoted {:?} after the kill; {} checks of healthy masters' keys answered by the failure \
         mode over {window:?} (the slowest check of a healthy master's key took {slowest:?}), {victim} of the killed \
         master's; {} outages; errors by cause {:?}; outage lines:\n{}",
        run.promoted - run.killed,
        refused.len(),
        run.health.outages,
        run.health.errors,
        run.log.iter().filter(|line| outage_port(line).is_some()).cloned().collect::<Vec<_>>().join("\n"),
    );
    assert!(
        slowest < REDIS_RS_RETRY_WAIT,
        "a check of a healthy master's key waited {slowest:?} (timeout {LONG_TIMEOUT:?})"
    );
    assert!(!refused.is_empty(), "no check of a healthy master's key was refused: the window was missed");
    assert!(cluster_down.is_some_and(|count| count >= 1), "CLUSTERDOWN not counted under its cause: {:?}", run.health);
    let down = run.healthy_masters_down();
    assert!(!down.is_empty(), "no healthy master's outage was logged: {:#?}", run.log);
    for port in down {
        let lines = run.outage_lines(port);
        let named = lines.iter().all(|line| line.contains("the Cluster refuses keys: CLUSTERDOWN"));
        assert!(named, "the outage of the healthy master on {port} does not name CLUSTERDOWN: {lines:#?}");
    }
    let lines = run.outage_lines(run.victim);
    let refused_connection = lines.first().is_some_and(|line| line.contains("connection refused"));
    assert!(refused_connection, "the killed master's outage does not name its refused connection: {lines:#?}");
}
