//! On a 3-master Redis Cluster: the command reaches the node that owns its keys (a cluster
//! client routes it by its first key, as it routes a script), and Redis checks that a
//! check's keys share one slot and that the node owns it, through the key positions the
//! module reports.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::{Alignment, FixedWindow, LeakMode, LeakyBucket, Limit};
use sluice_test_support::redis::RedisCluster;
use std::time::Duration;

fn limits() -> Vec<Limit> {
    let window = FixedWindow::new(3, Duration::from_secs(60), Alignment::Anchored, Duration::ZERO).unwrap();
    let bucket = LeakyBucket::new(Duration::from_secs(1), 5, LeakMode::NoDelay).unwrap();
    vec![Limit::new("window", window), Limit::new("bucket", bucket)]
}

#[test]
fn the_cluster_routes_checks_by_their_keys_and_checks_their_slot() {
    let cluster = RedisCluster::start_with_module(&harness::module_path());
    let mut con = redis::cluster::ClusterClient::new(cluster.urls()).unwrap().get_connection().unwrap();
    let (limits, callers) = (limits(), 60);
    let packed = harness::packed(&limits, None, 1, 0, 1);
    for caller in 0..callers {
        let keys = [format!("{{{caller}}}:window"), format!("{{{caller}}}:bucket")];
        for remaining in [2, 1] {
            let reply: Vec<u8> = redis::cmd("SLUICE.CHECK").arg(&keys).arg(&packed).query(&mut con).unwrap();
            let numbers = harness::numbers(&reply);
            assert_eq!((numbers[1], numbers[3]), (1, remaining), "{caller}: {numbers:?}");
        }
    }
    // Every node holds the keys of the slots it owns, and only those.
    let mut held = 0;
    for node in cluster.nodes() {
        let mut direct = harness::connect(node);
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut direct).unwrap();
        assert!(!keys.is_empty(), "node {} holds no state", node.port());
        for key in &keys {
            // A query (cost 0) of the key's own limit: a node that does not own it says MOVED.
            let limit = if key.ends_with(":window") { &limits[..1] } else { &limits[1..] };
            let reply: redis::RedisResult<Vec<u8>> =
                redis::cmd("SLUICE.CHECK").arg(key).arg(harness::packed(limit, None, 0, 0, 1)).query(&mut direct);
            assert!(reply.is_ok(), "{key} on node {}: {reply:?}", node.port());
        }
        held += keys.len();
    }
    assert_eq!(held, 2 * callers);
    // Keys of two slots in one check: Redis refuses it before the module runs.
    let mut direct = harness::connect(&cluster.nodes()[0]);
    let crossed: redis::RedisResult<Vec<u8>> =
        redis::cmd("SLUICE.CHECK").arg("{a}:window").arg("{b}:bucket").arg(&packed).query(&mut direct);
    assert_eq!(crossed.unwrap_err().code(), Some("CROSSSLOT"));
}
