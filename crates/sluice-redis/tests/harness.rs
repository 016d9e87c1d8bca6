//! The test harness itself: real Redis servers and clusters start, answer through the `redis`
//! crate, survive kill and restart on their port, and never outlive their tests.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use sluice_test_support::redis::{RedisCluster, RedisServer, query};
use std::collections::HashSet;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a copy of this test binary started by a test below; see [`child_process`].
const CHILD_ENV: &str = "SLUICE_REDIS_HARNESS_CHILD";

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

/// Whether the process is gone (or a zombie, whose sockets are closed).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn port_closed(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_err()
}

/// Polls `done` for up to `limit`.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn standalone_server_answers_ping_set_and_get() {
    let started = Instant::now();
    let server = RedisServer::start();
    eprintln!("RedisServer::start took {:?}", started.elapsed());
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}/", server.port()));
    assert!(server.is_running());

    let mut conn = connect(&server.url()).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    let () = redis::cmd("SET").arg("sluice:harness").arg("42").query_async(&mut conn).await.unwrap();
    let value: String = redis::cmd("GET").arg("sluice:harness").query_async(&mut conn).await.unwrap();
    assert_eq!(value, "42");

    // Started as asked: nothing saved, loopback only.
    let save: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("save").query_async(&mut conn).await.unwrap();
    assert_eq!(save, ["save", ""]);
    let bind: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("bind").query_async(&mut conn).await.unwrap();
    assert_eq!(bind, ["bind", "127.0.0.1"]);
}

#[tokio::test]
async fn cluster_is_ok_and_spreads_keys_over_its_three_masters() {
    let started = Instant::now();
    let cluster = RedisCluster::start();
    eprintln!("RedisCluster::start took {:?}", started.elapsed());
    let urls = cluster.urls();
    assert_eq!(urls.len(), 3);
    for (url, port) in urls.iter().zip(cluster.ports()) {
        assert_eq!(*url, format!("redis://127.0.0.1:{port}/"));
        let info: String = redis::cmd("CLUSTER").arg("INFO").query_async(&mut connect(url).await).await.unwrap();
        assert!(info.contains("cluster_state:ok"), "{url}:\n{info}");
        assert!(info.contains("cluster_size:3"), "{url}:\n{info}");
    }

    let client = ClusterClient::new(urls.clone()).unwrap();
    let mut conn = client.get_async_connection().await.unwrap();
    let keys: Vec<String> = (0..30).map(|i| format!("sluice:harness:{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let () = redis::cmd("SET").arg(key).arg(i).query_async(&mut conn).await.unwrap();
    }
    let mut slots = HashSet::new();
    for (i, key) in keys.iter().enumerate() {
        let value: usize = redis::cmd("GET").arg(key).query_async(&mut conn).await.unwrap();
        assert_eq!(value, i);
        let slot: u16 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(&mut conn).await.unwrap();
        slots.insert(slot);
    }
    assert!(slots.len() > 20, "slots: {slots:?}");

    // Every master got some of the keys.
    let mut total = 0;
    for url in &urls {
        let size: usize = redis::cmd("DBSIZE").query_async(&mut connect(url).await).await.unwrap();
        assert!(size > 0, "{url} holds none of the keys");
        total += size;
    }
    assert_eq!(total, keys.len());
}

#[test]
fn dropping_a_server_ends_its_process_closes_its_port_and_removes_its_dir() {
    let server = RedisServer::start();
    let (pid, port, dir) = (server.pid().unwrap(), server.port(), server.dir().to_path_buf());
    assert!(!process_gone(pid));
    assert!(!port_closed(port));
    assert!(dir.is_dir());
    drop(server);
    assert!(process_gone(pid), "redis-server {pid} still runs");
    assert!(port_closed(port), "port {port} still open");
    assert!(!dir.exists(), "{} still there", dir.display());
}

#[test]
fn dropping_a_cluster_ends_every_node() {
    let cluster = RedisCluster::start();
    let nodes: Vec<(u32, u16, PathBuf)> =
        cluster.nodes().iter().map(|n| (n.pid().unwrap(), n.port(), n.dir().to_path_buf())).collect();
    assert_eq!(nodes.len(), 3);
    drop(cluster);
    for (pid, port, dir) in nodes {
        assert!(process_gone(pid), "redis-server {pid} still runs");
        assert!(port_closed(port), "port {port} still open");
        assert!(!dir.exists(), "{} still there", dir.display());
    }
}

#[tokio::test]
async fn a_killed_server_restarts_on_the_same_port() {
    let mut server = RedisServer::start();
    let (port, url, first_pid) = (server.port(), server.url(), server.pid().unwrap());
    let mut conn = connect(&url).await;
    let () = redis::cmd("SET").arg("k").arg("v").query_async(&mut conn).await.unwrap();

    server.kill();
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    assert!(process_gone(first_pid));
    assert!(port_closed(port));
    assert!(server.dir().is_dir(), "kill keeps the directory");
    let failed: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut conn).await;
    assert!(failed.is_err(), "PING to a killed server: {failed:?}");
    server.kill(); // killing twice is fine

    let started = Instant::now();
    server.restart();
    eprintln!("RedisServer::restart took {:?}", started.elapsed());
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    assert_eq!(server.url(), url);
    assert_ne!(server.pid(), Some(first_pid));
    let mut conn = connect(&url).await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
    // Nothing is persisted: a restarted server is empty.
    let value: Option<String> = redis::cmd("GET").arg("k").query_async(&mut conn).await.unwrap();
    assert_eq!(value, None);

    // Restarting a running server restarts it, on the same port again.
    let second_pid = server.pid().unwrap();
    server.restart();
    assert!(process_gone(second_pid));
    assert_eq!(server.port(), port);
    let pong: String = redis::cmd("PING").query_async(&mut connect(&url).await).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn a_killed_cluster_node_restarts_and_rejoins_with_its_slots() {
    let mut cluster = RedisCluster::start();
    let port = cluster.nodes()[1].port();
    cluster.nodes_mut()[1].kill();
    assert!(port_closed(port));
    let started = Instant::now();
    cluster.nodes_mut()[1].restart();
    cluster.wait_ok();
    eprintln!("cluster node restart until cluster_state:ok took {:?}", started.elapsed());
    assert_eq!(cluster.nodes()[1].port(), port);

    let client = ClusterClient::new(cluster.urls()).unwrap();
    let mut conn = client.get_async_connection().await.unwrap();
    for i in 0..30 {
        let key = format!("after-restart:{i}");
        let () = redis::cmd("SET").arg(&key).arg(i).query_async(&mut conn).await.unwrap();
        let value: i32 = redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
        assert_eq!(value, i);
    }
    let size: usize = redis::cmd("DBSIZE").query_async(&mut connect(&cluster.urls()[1]).await).await.unwrap();
    assert!(size > 0, "the restarted node serves its slots again");
}

#[test]
fn servers_started_in_parallel_get_their_own_ports() {
    let servers: Vec<RedisServer> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8).map(|_| scope.spawn(RedisServer::start)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ports: HashSet<u16> = servers.iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), servers.len());
    let dirs: HashSet<&Path> = servers.iter().map(RedisServer::dir).collect();
    assert_eq!(dirs.len(), servers.len());
    for server in &servers {
        let replies = query(server.port(), &["PING"]).unwrap();
        assert_eq!(replies, ["+PONG"]);
    }
}

/// Runs [`child_process`] in a new copy of this test binary, with `mode` and `env`.
fn run_child(mode: &str, env: &[(&str, &str)]) -> (std::process::ExitStatus, String, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    (status, stdout, stderr.join().unwrap())
}

/// Not a test of its own: what a copy of this binary does when a test below starts it.
/// Without the environment variable it does nothing.
#[test]
fn child_process() {
    match std::env::var(CHILD_ENV).as_deref() {
        Ok("orphan") => {
            // Servers this process never drops: one running, one killed.
            let running = RedisServer::start();
            let mut killed = RedisServer::start();
            killed.kill();
            for server in [&running, &killed] {
                println!("ORPHAN {} {} {}", server.pid().unwrap_or(0), server.port(), server.dir().display());
            }
            std::mem::forget(running);
            std::mem::forget(killed);
            // Die as a test binary killed by a timeout does: no destructors, no exit handlers.
            let _ = Command::new("sh").args(["-c", "kill -KILL \"$PPID\""]).status();
            std::thread::sleep(Duration::from_secs(10));
            panic!("still alive after SIGKILL");
        }
        Ok("missing") => {
            let _ = RedisServer::start();
        }
        _ => {}
    }
}

#[test]
fn servers_die_with_the_test_process_that_leaked_them() {
    let (status, stdout, stderr) = run_child("orphan", &[]);
    assert_eq!(status.signal(), Some(9), "{status}\n{stdout}\n{stderr}");
    let orphans: Vec<(u32, u16, PathBuf)> = stdout
        .lines()
        // The test harness may print its own text before ours on the same line.
        .filter_map(|line| line.split_once("ORPHAN ").map(|(_, fields)| fields))
        .map(|line| {
            let mut fields = line.splitn(3, ' ');
            let pid = fields.next().unwrap().parse().unwrap();
            let port = fields.next().unwrap().parse().unwrap();
            (pid, port, PathBuf::from(fields.next().unwrap()))
        })
        .collect();
    assert_eq!(orphans.len(), 2, "{stdout}\n{stderr}");
    for (pid, port, dir) in orphans {
        assert!(
            eventually(Duration::from_secs(5), || (pid == 0 || process_gone(pid))
                && port_closed(port)
                && !dir.exists()),
            "redis-server {pid} on port {port} (dir {}) outlived its test process",
            dir.display()
        );
    }
}

#[test]
fn without_redis_server_start_says_how_to_install_it() {
    let (status, stdout, stderr) = run_child("missing", &[("PATH", "/nonexistent")]);
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains(
            "redis-server not found: run scripts/test.sh (it installs redis-server and \
             redis-tools with apt) or install them yourself"
        ),
        "{stdout}\n{stderr}"
    );
}
