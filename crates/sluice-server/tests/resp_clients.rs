//! The clients people use against the real `sluice serve --resp`: the `redis` crate,
//! `redis-cli` and redis-py, each pipelining 1 000 calls and speaking RESP3, and reading the
//! argument hints of `COMMAND DOCS`; inline commands split as a real redis-server splits them.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;
use support::resp::{command, redis_cli, redis_py, start};

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

#[test]
fn redis_cli_connects_speaks_resp3_and_pipes_a_thousand_calls() {
    let server = start(&[]);
    assert_eq!(redis_cli(&server, &["PING"], None).trim(), "PONG");
    let throttled = redis_cli(&server, &["-3", "CL.THROTTLE", "cli", "4", "1", "2"], None);
    // Not a terminal: redis-cli prints the raw values, one a line.
    assert_eq!(throttled.split_whitespace().collect::<Vec<_>>(), ["0", "5", "4", "-1", "2"]);
    let check = redis_cli(&server, &["-3", "SLUICE.CHECK", "ten_per_hour", "cli"], None);
    assert!(check.starts_with("allowed (true)\npolicy ten_per_hour\n"), "{check}");
    let calls: Vec<u8> = (0..1000).flat_map(|_| command(&["CL.THROTTLE", "cli-pipe", "1", "1", "60"])).collect();
    let piped = redis_cli(&server, &["--pipe"], Some(&calls));
    assert!(piped.contains("errors: 0, replies: 1000"), "{piped}");
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

/// The first line `server` answers to `request` on a fresh connection.
fn first_line(server: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request).unwrap();
    let mut line = Vec::new();
    BufReader::new(stream).read_until(b'\n', &mut line).unwrap();
    String::from_utf8_lossy(&line).into_owned()
}

/// Inline lines of quotes, escapes and spaces, from a fixed seed: an unknown command, whose
/// error names its arguments as they were split.
fn quote_soup(count: usize) -> Vec<Vec<u8>> {
    let pieces: [&[u8]; 21] = [
        b"\"",
        b"'",
        b"\\",
        b"x",
        b"4",
        b"1",
        b"n",
        b"a",
        b" ",
        b"  ",
        b"\t",
        b"\\x41",
        b"\\'",
        b"\x0b",
        b"\r",
        b" \"a b\" ",
        b" 'c d' ",
        b" \"\\x41\\t\\\"\" ",
        b" 'e\\'f' ",
        b" \"\" ",
        b"x\"y z\" ",
    ];
    let mut state: u64 = 0x5eed;
    let mut next = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let lines = (0..count).map(|_| {
        let length = next() % 16;
        let mut line = b"NOPE ".to_vec();
        (0..length).for_each(|_| line.extend_from_slice(pieces[next() % pieces.len()]));
        line
    });
    lines.collect()
}

/// Inline commands with quotes, as `redis-cli` users and `telnet` send them, are split as a
/// real redis-server splits them: the same arguments, or the same protocol error.
#[test]
fn inline_commands_are_split_as_redis_splits_them() {
    let redis = sluice_test_support::redis::RedisServer::start();
    let redis_address: SocketAddr = format!("127.0.0.1:{}", redis.port()).parse().unwrap();
    let server = start(&[]);
    let fixed: [&[u8]; 8] = [
        b"NOPE \"a b\" 'c d' e",
        b"NOPE \"\\x41\\n\\t\" 'it\\'s'",
        b"NOPE ab\"c d\"  x'y z'",
        b"NOPE \"open",
        b"NOPE \"a\"b",
        b"NOPE 'a\\\\'",
        b"NOPE \"\" ''",
        b"NOPE a\x0bb \"c\"\x0bd",
    ];
    let (mut errors, lines) = (0, quote_soup(300));
    for line in fixed.into_iter().chain(lines.iter().map(Vec::as_slice)) {
        let request = [line, b"\r\n"].concat();
        let theirs = first_line(redis_address, &request);
        assert_eq!(first_line(server.resp.unwrap(), &request), theirs, "for {}", String::from_utf8_lossy(line));
        errors += usize::from(theirs.contains("unbalanced quotes"));
    }
    // Both ways are tried: 168 of the 308 lines unbalance.
    assert!((60..250).contains(&errors), "{errors} of 308 lines unbalanced");
    let ping = first_line(server.resp.unwrap(), b"PING \"hello world\"\r\n");
    assert_eq!(ping, "$11\r\n");
}

/// What `redis-cli` reads at start to build its hints (`CL.THROTTLE key max_burst count
/// period [quantity]`) and `HELP`: Redis 7's `COMMAND DOCS`, a flat array in RESP2.
#[test]
fn command_docs_gives_redis_cli_each_command_s_arguments() {
    let server = start(&[]);
    let docs = redis_cli(&server, &["COMMAND", "DOCS", "CL.THROTTLE", "no-such-command"], None);
    let mut expected = vec!["cl.throttle", "summary", "GCRA rate limiting, as redis-cell's command", "since", "0.1.0"];
    expected.extend(["group", "module", "arguments", "name", "key", "type", "key"]);
    for name in ["max_burst", "count", "period", "quantity"] {
        expected.extend(["name", name, "type", "integer"]);
    }
    expected.extend(["flags", "optional"]);
    assert_eq!(docs.lines().collect::<Vec<_>>(), expected);
    let all = redis_cli(&server, &["COMMAND", "DOCS"], None);
    for name in ["sluice.check", "sluice.peek", "sluice.reset", "hello", "client|setinfo", "command|docs"] {
        assert!(all.lines().any(|line| line == name), "{name} in COMMAND DOCS: {all}");
    }
}

/// The same over RESP3, as maps: `SLUICE.RESET key [policy …]`.
#[test]
fn command_docs_are_maps_over_resp3() {
    let server = start(&[]);
    let url = format!("redis://{}/?protocol=resp3", server.resp.unwrap());
    let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
    let docs: redis::Value = redis::cmd("COMMAND").arg("DOCS").arg("sluice.reset").query(&mut connection).unwrap();
    let reset = field(&docs, "sluice.reset");
    assert_eq!(field(reset, "group"), &redis::Value::BulkString(b"module".to_vec()));
    let redis::Value::Array(arguments) = field(reset, "arguments") else { panic!("{reset:?}") };
    let names: Vec<&redis::Value> = arguments.iter().map(|argument| field(argument, "name")).collect();
    assert_eq!(names, [&redis::Value::BulkString(b"key".to_vec()), &redis::Value::BulkString(b"policy".to_vec())]);
    let flags = field(&arguments[1], "flags");
    let optional_multiple = ["optional", "multiple"].map(|flag| redis::Value::SimpleString(flag.into()));
    assert_eq!(flags, &redis::Value::Array(optional_multiple.to_vec()));
}

/// The value under `name` in a RESP3 map.
fn field<'a>(map: &'a redis::Value, name: &str) -> &'a redis::Value {
    let redis::Value::Map(entries) = map else { panic!("not a map: {map:?}") };
    let found = entries.iter().find(|(key, _)| *key == redis::Value::BulkString(name.as_bytes().to_vec()));
    &found.unwrap_or_else(|| panic!("no {name} in {map:?}")).1
}
