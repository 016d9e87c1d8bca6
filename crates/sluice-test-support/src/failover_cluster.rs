//! A Redis Cluster that fails over: three masters, each with one replica, on loopback ports,
//! with a short `cluster-node-timeout`, so that a killed master's replica is promoted within
//! seconds. Every wait is bounded and waits on what the nodes report.

use crate::redis::{RedisServer, cluster_info, query, tail};
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long creating the cluster, or its replicas' first sync, may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// Six nodes: three masters and their replicas, as `redis-cli --cluster create
/// --cluster-replicas 1` pairs them.
#[derive(Debug)]
pub struct FailoverCluster {
    nodes: Vec<RedisServer>,
}

impl FailoverCluster {
    /// Starts six nodes with `cluster-node-timeout` of `node_timeout` and
    /// `cluster-require-full-coverage` as `full_coverage` says, joins them, and waits until
    /// every node is `ok` and every master has an online replica.
    pub fn start(node_timeout: Duration, full_coverage: bool) -> FailoverCluster {
        let timeout = node_timeout.as_millis().to_string();
        let coverage = if full_coverage { "yes" } else { "no" };
        let settings = ["--cluster-node-timeout", &timeout, "--cluster-require-full-coverage", coverage];
        let nodes = (0..6).map(|_| RedisServer::start_cluster_node_with(None, &settings)).collect();
        let cluster = FailoverCluster { nodes };
        cluster.create();
        cluster.wait_until("every node ok, every master with an online replica", FailoverCluster::is_ready);
        cluster
    }

    /// `redis://127.0.0.1:P/` for each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The port of the master that serves `slot` now, as the live nodes agree (`None` while
    /// they do not, or while that master is flagged failed).
    pub fn master_of(&self, slot: u16) -> Option<u16> {
        let views: Vec<Option<u16>> = self.live().map(|node| master_in_view(node.port(), slot)).collect();
        let first = *views.first()?;
        views.iter().all(|view| *view == first).then_some(first).flatten()
    }

    /// The slot of `key`, as a live node computes it.
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a live node");
        let reply = query(node.port(), &[&format!("CLUSTER KEYSLOT {key}")]).expect("CLUSTER KEYSLOT answered");
        reply[0].trim_start_matches(':').parse().expect("a slot number")
    }

    /// Kills (SIGKILL) the node on `port`.
    pub fn kill(&mut self, port: u16) {
        self.nodes.iter_mut().find(|node| node.port() == port).expect("a node on that port").kill();
    }

    /// Waits (up to 30 s) until `condition` holds, polling every 20 ms.
    pub fn wait_until(&self, what: &str, condition: impl Fn(&FailoverCluster) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !condition(self) {
            assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}; CLUSTER NODES: {}", self.nodes_view());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.is_running())
    }

    fn is_ready(&self) -> bool {
        let ok = |node: &RedisServer| {
            cluster_info(node.port())
                .is_ok_and(|info| info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:6"))
        };
        let replicated = |node: &RedisServer| {
            let info = query(node.port(), &["INFO replication"]).unwrap_or_default().concat();
            !info.contains("role:master") || (info.contains("connected_slaves:1") && info.contains("state=online"))
        };
        self.live().all(|node| ok(node) && replicated(node))
    }

    fn nodes_view(&self) -> String {
        let node = self.live().next().map(RedisServer::port);
        node.and_then(|port| query(port, &["CLUSTER NODES"]).ok()).unwrap_or_default().concat()
    }

    /// `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`, bounded in time.
    fn create(&self) {
        let log = self.nodes[0].dir().join("cluster-create.log");
        let output = fs::File::create(&log).expect("the cluster-create log");
        let mut cli = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(self.nodes.iter().map(|node| format!("127.0.0.1:{}", node.port())))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("the log, twice"))
            .stderr(output)
            .spawn()
            .expect("redis-cli not found: run scripts/test.sh or install redis-tools");
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = cli.try_wait().expect("redis-cli's status") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = cli.kill();
                let _ = cli.wait();
                panic!(
                    "redis-cli --cluster create did not finish: {}",
                    tail(&fs::read_to_string(&log).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "redis-cli --cluster create failed: {}",
            tail(&fs::read_to_string(&log).unwrap_or_default())
        );
    }
}

/// The master of `slot` in the `CLUSTER NODES` of the node on `port`: flagged `master`, not
/// `fail`, and serving the slot.
fn master_in_view(port: u16, slot: u16) -> Option<u16> {
    let view = query(port, &["CLUSTER NODES"]).ok()?.concat();
    view.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let flags: Vec<&str> = fields.get(2)?.split(',').collect();
        if !flags.contains(&"master") || flags.contains(&"fail") {
            return None;
        }
        let serves = fields.iter().skip(8).any(|range| serves(range, slot));
        let address = fields.get(1)?.split('@').next()?;
        serves.then(|| address.rsplit_once(':')?.1.parse().ok()).flatten()
    })
}

/// Whether a `CLUSTER NODES` slot field (`5461-10922`, `0`) holds `slot`.
fn serves(range: &str, slot: u16) -> bool {
    let (start, end) = range.split_once('-').unwrap_or((range, range));
    match (start.parse::<u16>(), end.parse::<u16>()) {
        (Ok(start), Ok(end)) => (start..=end).contains(&slot),
        _ => false,
    }
}
