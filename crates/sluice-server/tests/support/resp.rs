//! The RESP front's test harness: `sluice serve --resp` on a free loopback port, raw
//! connections that compare replies byte for byte, and the clients people use.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test file uses a part

use super::server::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Two policies for `SLUICE.CHECK`; `CL.THROTTLE` needs none.
pub const CONFIG: &str = r#"
policies:
  two_per_hour: {algorithm: fixed_window, limit: 2, window: 1h, alignment: anchored}
  ten_per_hour: {algorithm: fixed_window, limit: 10, window: 1h, alignment: anchored}
"#;

/// `sluice serve --resp` on a free port, with `args` more.
pub fn start(args: &[&str]) -> Server {
    let mut all = vec!["--resp", "127.0.0.1:0", "--snapshot", "off"];
    all.extend_from_slice(args);
    Server::start(CONFIG, &all)
}

/// A raw connection to the RESP port.
pub fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(server.resp.expect("started with --resp")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Sends `request` and reads exactly as many bytes as `expected` has; they must be it.
pub fn exchange(stream: &mut TcpStream, request: &[u8], expected: &[u8]) {
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
pub fn command(words: &[&str]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        bytes.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
    bytes
}

/// Whether the peer closed `stream` (end of file, or reset) within 10 s.
pub fn closed(stream: &mut TcpStream) -> bool {
    matches!(stream.read(&mut [0; 64]), Ok(0) | Err(_))
}

/// Reads what is left of the replies so far (the server has written them all by the time
/// the first bytes came: one write per batch).
pub fn drain(stream: &mut TcpStream) {
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = stream.read(&mut [0; 4096]);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
}

/// `redis-cli`, which `scripts/test.sh` installs with redis-server.
pub fn redis_cli(server: &Server, args: &[&str], input: Option<&[u8]>) -> String {
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

/// The Python of the venv `scripts/test.sh` installs redis-py into (`SLUICE_REDIS_PY`).
pub fn redis_py() -> PathBuf {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/redis-py-venv/bin/python");
    let python = std::env::var_os("SLUICE_REDIS_PY").map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(python.exists(), "{} is missing: scripts/test.sh installs redis-py into it", python.display());
    python
}
