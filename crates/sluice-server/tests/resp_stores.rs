//! The shared stores behind the real `sluice serve --resp`: a Cluster (keys on every
//! master), Sentinel, and Redis with leases and with pipelines.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use sluice_test_support::redis::RedisServer;
use support::resp::start;

#[test]
fn a_cluster_backed_front_serves_keys_on_every_master() {
    let cluster = sluice_test_support::redis::RedisCluster::start();
    let nodes: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
    let store = format!("redis+cluster://{}", nodes.join(","));
    let server = start(&["--store", &store, "--redis-timeout", "2s"]);
    let client = redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap();
    let mut connection = client.get_connection().unwrap();
    let mut pipe = redis::pipe();
    for key in 0..300 {
        // Each key twice: the second call is limited only if the first one's state was stored.
        pipe.cmd("CL.THROTTLE").arg(format!("cluster-{key}")).arg(0).arg(1).arg(60);
        pipe.cmd("CL.THROTTLE").arg(format!("cluster-{key}")).arg(0).arg(1).arg(60);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut connection).unwrap();
    for (index, pair) in replies.chunks(2).enumerate() {
        assert_eq!((pair[0][0], pair[1][0]), (0, 1), "cluster-{index}: allowed, then limited: {pair:?}");
    }
    for node in cluster.nodes() {
        let mut master = redis::Client::open(node.url()).unwrap().get_connection().unwrap();
        let keys: i64 = redis::cmd("DBSIZE").query(&mut master).unwrap();
        assert!(keys > 0, "the master on port {} holds none of the 300 keys", node.port());
    }
}

/// The front finds its primary through Sentinel, as the HTTP API does: each call's state is
/// stored on the primary Sentinel names.
#[test]
fn a_sentinel_backed_front_serves_cl_throttle_from_the_primary() {
    let primary = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(primary.port(), "resp-primary");
    let store = format!("redis+sentinel://127.0.0.1:{}/resp-primary", sentinel.port());
    let server = start(&["--store", &store, "--redis-timeout", "2s"]);
    let mut connection =
        redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap().get_connection().unwrap();
    let mut pipe = redis::pipe();
    for key in 0..50 {
        // Each key twice: the second call is limited only if the first one's state was stored.
        pipe.cmd("CL.THROTTLE").arg(format!("sentinel-{key}")).arg(0).arg(1).arg(60);
        pipe.cmd("CL.THROTTLE").arg(format!("sentinel-{key}")).arg(0).arg(1).arg(60);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut connection).unwrap();
    for (index, pair) in replies.chunks(2).enumerate() {
        assert_eq!(pair[0], [0, 1, 0, -1, 60], "sentinel-{index}: allowed");
        assert_eq!(pair[1][..2], [1, 1], "sentinel-{index}: then limited, {pair:?}");
    }
    let mut direct = redis::Client::open(primary.url()).unwrap().get_connection().unwrap();
    let keys: i64 = redis::cmd("DBSIZE").query(&mut direct).unwrap();
    assert!(keys >= 50, "the primary holds {keys} keys, not the 50 called");
}

#[test]
fn with_leases_on_redis_a_burst_still_passes_whole_and_no_more() {
    let store = RedisServer::start();
    let server = start(&["--store", &store.url(), "--lease-period", "100ms", "--redis-timeout", "2s"]);
    let client = redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap();
    let mut connection = client.get_connection().unwrap();
    let mut limited = Vec::new();
    for _ in 0..12 {
        let reply: Vec<i64> =
            redis::cmd("CL.THROTTLE").arg("leased").arg(9).arg(1).arg(3600).query(&mut connection).unwrap();
        assert_eq!(reply[1], 10, "{reply:?}");
        limited.push(reply[0]);
    }
    assert_eq!(limited, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1], "a burst of 10 in an hour, then limited");
}

/// A pipeline's calls on distinct keys wait for Redis together; each key's calls are still
/// decided in the order they came.
#[test]
fn a_pipeline_on_redis_decides_each_key_s_calls_in_order() {
    let store = RedisServer::start();
    let server = start(&["--store", &store.url(), "--redis-timeout", "2s"]);
    let mut connection =
        redis::Client::open(format!("redis://{}", server.resp.unwrap())).unwrap().get_connection().unwrap();
    let keys = ["a", "b", "a", "c", "a", "b", "a", "d", "c", "b", "b", "c", "d", "c", "d", "d"];
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("CL.THROTTLE").arg(format!("ordered-{key}")).arg(2).arg(1).arg(3600);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut connection).unwrap();
    for key in ["a", "b", "c", "d"] {
        let seen: Vec<(i64, i64)> =
            keys.iter().zip(&replies).filter(|(k, _)| **k == key).map(|(_, reply)| (reply[0], reply[2])).collect();
        assert_eq!(seen, [(0, 2), (0, 1), (0, 0), (1, 0)], "{key}: [limited, remaining] in order");
    }
}
