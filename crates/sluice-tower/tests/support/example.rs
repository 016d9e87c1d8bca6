//! An example of this crate, started as a process on a free port (`ADDR=127.0.0.1:0`) and
//! killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long an example may take to start listening.
const STARTUP: Duration = Duration::from_secs(30);

/// An example's process, killed when dropped.
pub struct Example {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/<profile>/examples/<name>`, next to this test's `deps/` directory.
fn example_path(name: &str) -> PathBuf {
    let test = std::env::current_exe().expect("test path");
    let profile_dir = test.parent().and_then(|deps| deps.parent()).expect("target/<profile>");
    let path = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p sluice-tower --all-features`, which builds the examples",
        path.display()
    );
    path
}

impl Example {
    /// Starts the example `name` on port 0 with `env` set, and waits until its port accepts
    /// connections.
    pub fn start(name: &str, env: &[(&str, &str)]) -> Example {
        let mut child = Command::new(example_path(name))
            .env("ADDR", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the example");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, listening) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut example = Example { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let line = listening.recv_timeout(STARTUP).expect("the example prints `listening on http://ADDR`");
        example.addr = line.trim_start_matches("listening on http://").parse().expect("an address");
        wait_for_port(example.addr);
        example
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn wait_for_port(addr: SocketAddr) {
    let deadline = Instant::now() + STARTUP;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < deadline, "{addr} did not accept connections within {STARTUP:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
