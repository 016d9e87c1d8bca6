//! The Redis-protocol front of the real `sluice serve --resp`, on free loopback ports: the
//! wire byte for byte, RESP3, malformed frames, the admin token, idle and shutdown closes,
//! the connection cap and metrics. The clients people use are in `resp_clients.rs`, the
//! shared stores behind the front in `resp_stores.rs`.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};
use support::resp::{closed, command, connect, drain, exchange, start};

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
fn the_connection_cap_holds_on_the_resp_port_an_idle_connection_making_room() {
    let server = start(&["--max-connections", "1"]);
    let mut first = connect(&server);
    exchange(&mut first, &command(&["PING"]), b"+PONG\r\n");
    let mut second = connect(&server);
    exchange(&mut second, &command(&["PING"]), b"+PONG\r\n");
    assert!(closed(&mut first), "the idle connection was closed to make room");
    exchange(&mut second, &command(&["PING"]), b"+PONG\r\n");
}
