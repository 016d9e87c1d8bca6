//! The Redis-protocol front of the real `sluice serve --resp`, on free loopback ports: the
//! wire byte for byte, RESP3, malformed frames, the admin token, idle and shutdown closes,
//! metrics, the clients people use (the `redis` crate, `redis-cli` and redis-py, each
//! pipelining 1 000 calls), and the shared stores behind it (a Cluster, leases on Redis).
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use support::server::Server;

const CONFIG: &str = r#"
policies:
  two_per_hour: {algorithm: fixed_window, limit: 2, window: 1h, alignment: anchored}
  ten_per_hour: {algorithm: fixed_window, limit: 10, window: 1h, alignment: anchored}
"#;

fn start(args: &[&str]) -> Server {
    let mut all = vec!["--resp", "127.0.0.1:0", "--snapshot", "off"];
    all.extend_from_slice(args);
    Server::start(CONFIG, &all)
}

/// A raw connection to the RESP port.
fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(server.resp.expect("started with --resp")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Sends `request` and reads exactly as many bytes as `expected` has; they must be it.
fn exchange(stream: &mut TcpStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).unwrap();
    let mut got = vec![0; expected.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected),
        "for {}",
        String::from_utf8_lossy(request)
    );
}

/// A command as client libraries write it.
fn command(words: &[&str]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        bytes.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
    bytes
}

/// Whether the peer closed `stream` (end of file, or reset) within 10 s.
fn closed(stream: &mut TcpStream) -> bool {
    matches!(stream.read(&mut [0; 64]), Ok(0) | Err(_))
}

#[test]
fn the_wire_answers_as_redis_and_redis_cell_do() {
    let server = start(&[]);
    let mut stream = connect(&server);
    exchange(&mut stream, &command(&["PING"]), b"+PONG\r\n");
    exchange(&mut stream, b"PING inline\r\n", b"$6\r\ninline\r\n");
    exchange(&mut stream, &command(&["ECHO", "hi"]), b"$2\r\nhi\r\n");
    exchange(&mut stream, &command(&["SELECT", "0"]), b"+OK\r\n");
    exchange(&mut stream, &command(&["SELECT", "1"]), b"-ERR DB index is out of range\r\n");
    exchange(&mut stream, &command(&["ping", "a", "b"]), b"-ERR wrong number of arguments for 'ping' command\r\n");
    exchange(
        &mut stream,
        &command(&["GET", "k", "v"]),
        b"-ERR unknown command 'GET', with args beginning with: 'k' 'v' \r\n",
    );
    exchange(&mut stream, &command(&["CL.THROTTLE", "k", "0", "1", "60"]), b"*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n");
    exchange(&mut stream, &command(&["cl.throttle", "k", "0", "1", "60"]), b"*5\r\n:1\r\n:1\r\n:0\r\n:60\r\n:60\r\n");
    exchange(
        &mut stream,
        &command(&["CL.THROTTLE", "k", "x", "1", "60"]),
        b"-Cell error: Couldn't parse as integer: x\r\n",
    );
    exchange(
        &mut stream,
        &command(&["CL.THROTTLE", "k", "0", "0", "60"]),
        b"-Cell error: Zero rates are not supported\r\n",
    );
    exchange(
        &mut stream,
        &command(&["CL.THROTTLE", "k"]),
        b"-Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n",
    );
    exchange(&mut stream, &command(&["CLIENT", "SETNAME", "tester"]), b"+OK\r\n");
    exchange(&mut stream, &command(&["CLIENT", "GETNAME"]), b"$6\r\ntester\r\n");
    exchange(&mut stream, &command(&["QUIT"]), b"+OK\r\n");
    assert!(closed(&mut stream), "QUIT closes the connection");
}

#[test]
fn a_pipelined_thousand_commands_are_answered_in_order() {
    let server = start(&[]);
    let mut stream = connect(&server);
    let request: Vec<u8> = (0..1000).flat_map(|_| command(&["CL.THROTTLE", "pipelined", "999", "1", "3600"])).collect();
    // One interval of 3 600 s per call: the state is (index + 1) intervals ahead, less the
    // few milliseconds the batch takes, which the reply rounds back up.
    let expected: Vec<u8> = (0..1000_u64)
        .flat_map(|index| {
            format!("*5\r\n:0\r\n:1000\r\n:{}\r\n:-1\r\n:{}\r\n", 999 - index, (index + 1) * 3600).into_bytes()
        })
        .collect();
    exchange(&mut stream, &request, &expected);
}

#[test]
fn hello_3_switches_the_connection_to_resp3_maps() {
    let server = start(&[]);
    let mut stream = connect(&server);
    let check = command(&["SLUICE.CHECK", "two_per_hour,ten_per_hour", "user-1"]);
    stream.write_all(&check).unwrap();
    let mut resp2 = [0; 4];
    stream.read_exact(&mut resp2).unwrap();
    assert_eq!(&resp2, b"*20\r", "RESP2: a flat array of 10 names and values");
    drop(stream);
    let mut stream = connect(&server);
    stream.write_all(&command(&["HELLO", "3"])).unwrap();
    let mut hello = [0; 4];
    stream.read_exact(&mut hello).unwrap();
    assert_eq!(&hello, b"%8\r\n");
    drain(&mut stream);
    exchange(
        &mut stream,
        &check,
        b"%10\r\n$7\r\nallowed\r\n#t\r\n$6\r\npolicy\r\n$12\r\ntwo_per_hour\r\n$5\r\nlimit\r\n:2\r\n\
          $9\r\nremaining\r\n:0\r\n",
    );
    drain(&mut stream);
    exchange(&mut stream, &command(&["SLUICE.CHECK", "nope", "user-1"]), b"-ERR unknown policy `nope`");
    drain(&mut stream);
    exchange(&mut stream, &command(&["HELLO", "4"]), b"-NOPROTO unsupported protocol version\r\n");
}

/// Reads what is left of the replies so far (the server has written them all by the time
/// the first bytes came: one write per batch).
fn drain(stream: &mut TcpStream) {
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = stream.read(&mut [0; 4096]);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
}

#[test]
fn malformed_frames_are_answered_and_closed_and_huge_lengths_are_refused_unread() {
    let server = start(&[]);
    for (request, error) in [
        (&b"*1\r\n$536870912\r\n"[..], &b"-ERR Protocol error: invalid bulk length\r\n"[..]),
        (b"*2000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
    ] {
        let mut stream = connect(&server);
        exchange(&mut stream, request, error);
        assert!(closed(&mut stream), "closed after {}", String::from_utf8_lossy(request));
    }
    let mut stream = connect(&server);
    exchange(&mut stream, &command(&["PING"]), b"+PONG\r\n");
}

#[test]
fn sluice_reset_takes_the_admin_token_as_the_auth_password() {
    let server = start(&["--admin-token", "s3cret"]);
    let mut stream = connect(&server);
    for _ in 0..2 {
        stream.write_all(&command(&["SLUICE.CHECK", "two_per_hour", "u"])).unwrap();
    }
    drain(&mut stream);
    exchange(&mut stream, &command(&["SLUICE.RESET", "u"]), b"-NOAUTH SLUICE.RESET needs the admin token");
    drain(&mut stream);
    exchange(
        &mut stream,
        &command(&["AUTH", "guess"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(&mut stream, &command(&["AUTH", "default", "s3cret"]), b"+OK\r\n");
    // HELLO takes the token too, as client libraries send it with `password=`.
    let mut hello = connect(&server);
    exchange(&mut hello, &command(&["HELLO", "3", "AUTH", "default", "nope"]), b"-WRONGPASS");
    drain(&mut hello);
    exchange(&mut hello, &command(&["HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "me"]), b"*16\r\n");
    drain(&mut hello);
    exchange(&mut hello, &command(&["CLIENT", "GETNAME"]), b"$2\r\nme\r\n");
    exchange(&mut stream, &command(&["SLUICE.RESET", "u", "two_per_hour"]), b"+OK\r\n");
    exchange(
        &mut stream,
        &command(&["SLUICE.PEEK", "two_per_hour", "u"]),
        b"*20\r\n$7\r\nallowed\r\n:1\r\n$6\r\npolicy\r\n$12\r\ntwo_per_hour\r\n$5\r\nlimit\r\n:2\r\n$9\r\nremaining\r\n:2\r\n",
    );
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout_and_shutdown_closes_the_rest() {
    let mut server = start(&["--idle-timeout", "300ms", "--shutdown-grace", "1s"]);
    let mut idle = connect(&server);
    exchange(&mut idle, &command(&["PING"]), b"+PONG\r\n");
    let started = Instant::now();
    assert!(closed(&mut idle), "closed once idle");
    assert!(started.elapsed() < Duration::from_secs(5), "within the idle timeout and its watchdog's look");
    let mut open = connect(&server);
    exchange(&mut open, &command(&["PING"]), b"+PONG\r\n");
    server.signal("TERM");
    assert!(closed(&mut open), "closed at shutdown");
    let status = server.wait_exit(Duration::from_secs(6));
    assert!(status.success(), "{status}; log:\n{}", server.log());
}

#[test]
fn cl_throttle_counts_under_its_parameters_in_the_metrics() {
    let server = start(&[]);
    let mut stream = connect(&server);
    exchange(&mut stream, &command(&["CL.THROTTLE", "m", "0", "1", "60"]), b"*5\r\n:0\r\n");
    drain(&mut stream);
    exchange(&mut stream, &command(&["CL.THROTTLE", "m", "0", "1", "60"]), b"*5\r\n:1\r\n");
    drain(&mut stream);
    let metrics = blocking_get(&server.url("/metrics"));
    assert!(metrics.contains(r#"sluice_checks_total{policy="cl.throttle:0:1:60",outcome="allowed"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"sluice_checks_total{policy="cl.throttle:0:1:60",outcome="rejected"} 1"#), "{metrics}");
}

/// A blocking GET, for the one HTTP read here.
fn blocking_get(url: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async { reqwest::get(url).await.unwrap().text().await.unwrap() })
}

#[test]
fn the_redis_crate_pipelines_a_thousand_calls_over_resp3() {
    let server = start(&[]);
    let url = format!("redis://{}/?protocol=resp3", server.resp.unwrap());
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_connection().unwrap();
    let first: Vec<i64> = redis::cmd("CL.THROTTLE").arg("rs").arg(2).arg(1).arg(10).query(&mut connection).unwrap();
    assert_eq!(first, [0, 3, 2, -1, 10]);
    let mut pipe = redis::pipe();
    for _ in 0..1000 {
        pipe.cmd("CL.THROTTLE").arg("rs-pipe").arg(999).arg(1000).arg(1);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut connection).unwrap();
    assert_eq!(replies.len(), 1000);
    assert!(replies.iter().all(|reply| reply[0] == 0), "1 000 fit the burst of 1 000");
    let check: redis::Value = redis::cmd("SLUICE.CHECK").arg("ten_per_hour").arg("rs").query(&mut connection).unwrap();
    assert!(matches!(check, redis::Value::Map(_)), "RESP3: a map, {check:?}");
    let info: String = redis::cmd("INFO").query(&mut connection).unwrap();
    let port = server.resp.unwrap().port();
    assert!(info.starts_with("# Server\r\n") && info.contains(&format!("tcp_port:{port}\r\n")), "{info}");
}

/// `redis-cli`, which `scripts/test.sh` installs with redis-server.
fn redis_cli(server: &Server, args: &[&str], input: Option<&[u8]>) -> String {
    let port = server.resp.unwrap().port().to_string();
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli is installed (scripts/test.sh installs it)");
    child.stdin.take().unwrap().write_all(input.unwrap_or_default()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn redis_cli_connects_speaks_resp3_and_pipes_a_thousand_calls() {
    let server = start(&[]);
    assert_eq!(redis_cli(&server, &["PING"], None).trim(), "PONG");
    let throttled = redis_cli(&server, &["-3", "CL.THROTTLE", "cli", "4", "1", "2"], None);
    // Not a terminal: redis-cli prints the raw values, one a line.
    assert_eq!(throttled.split_whitespace().collect::<Vec<_>>(), ["0", "5", "4", "-1", "2"]);
    let check = redis_cli(&server, &["-3", "SLUICE.CHECK", "ten_per_hour", "cli"], None);
    assert!(check.starts_with("allowed (true)\npolicy ten_per_hour\n"), "{check}");
    // What redis-cli reads at start for its hints.
    let docs = redis_cli(&server, &["COMMAND", "DOCS", "CL.THROTTLE"], None);
    assert!(docs.starts_with("cl.throttle\nsummary\nGCRA rate limiting"), "{docs}");
    let calls: Vec<u8> = (0..1000).flat_map(|_| command(&["CL.THROTTLE", "cli-pipe", "1", "1", "60"])).collect();
    let piped = redis_cli(&server, &["--pipe"], Some(&calls));
    assert!(piped.contains("errors: 0, replies: 1000"), "{piped}");
}

/// The Python of the venv `scripts/test.sh` installs redis-py into (`SLUICE_REDIS_PY`).
fn redis_py() -> PathBuf {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/redis-py-venv/bin/python");
    let python = std::env::var_os("SLUICE_REDIS_PY").map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(python.exists(), "{} is missing: scripts/test.sh installs redis-py into it", python.display());
    python
}

#[test]
fn redis_py_connects_over_resp3_and_pipelines_a_thousand_calls() {
    let server = start(&[]);
    let script = r#"
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), protocol=3, client_name="py")
assert r.ping()
assert r.execute_command("CL.THROTTLE", "py", 9, 1, 1) == [0, 10, 9, -1, 1], "first call"
pipe = r.pipeline(transaction=False)
for _ in range(1000):
    pipe.execute_command("CL.THROTTLE", "py-pipe", 1, 1, 60)
replies = pipe.execute()
assert len(replies) == 1000 and [reply[0] for reply in replies[:3]] == [0, 0, 1], replies[:3]
check = r.execute_command("SLUICE.CHECK", "ten_per_hour", "py")
assert isinstance(check, dict) and check[b"allowed"] is True, check
assert r.client_getname() == "py" or r.client_getname() == b"py"
print("ok")
"#;
    let port = server.resp.unwrap().port().to_string();
    let out = Command::new(redis_py()).args(["-c", script, &port]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim() == "ok", "{said}");
}

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

#[test]
fn with_leases_on_redis_a_burst_still_passes_whole_and_no_more() {
    let store = sluice_test_support::redis::RedisServer::start();
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

#[test]
fn the_connection_cap_holds_on_the_resp_port_an_idle_connection_making_room() {
    let server = start(&["--max-connections", "1"]);
    let mut first = connect(&server);
    exchange(&mut first, &command(&["PING"]), b"+PONG\r\n");
    let mut second = connect(&server);
    exchange(&mut second, &command(&["PING"]), b"+PONG\r\n");
    assert!(closed(&mut first), "the idle connection was closed to make room");
    exchange(&mut second, &command(&["PING"]), b"+PONG\r\n");
}

/// A pipeline's calls on distinct keys wait for Redis together; each key's calls are still
/// decided in the order they came.
#[test]
fn a_pipeline_on_redis_decides_each_key_s_calls_in_order() {
    let store = sluice_test_support::redis::RedisServer::start();
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
