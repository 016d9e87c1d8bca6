//! Starts the real `sluice serve` binary on free loopback ports, in a folder of its own,
//! and stops it when dropped.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `sluice serve`.
pub struct Server {
    child: Child,
    dir: TempDir,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    /// The RESP front's address, when started with `--resp`.
    pub resp: Option<SocketAddr>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    args: Vec<String>,
    /// What it printed on standard output until it listened.
    start_up: String,
}

static STARTED: AtomicUsize = AtomicUsize::new(0);

/// A folder of a test's own, removed with everything in it once the last clone is
/// dropped (a server keeps a clone of its folder, so the folder outlives a restart).
#[derive(Clone, Debug)]
pub struct TempDir(Arc<Removed>);

/// A folder removed when dropped.
#[derive(Debug)]
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0.0
    }
}

/// A fresh folder under the system's temporary folder, removed when dropped.
pub fn fresh_dir(name: &str) -> TempDir {
    let count = STARTED.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sluice-test-{name}-{}-{count}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(Arc::new(Removed(dir)))
}

impl Server {
    /// Starts a server on `config` (written to `config.yaml` in a fresh folder) with `args`.
    pub fn start(config: &str, args: &[&str]) -> Server {
        let dir = fresh_dir("serve");
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        Server::start_in(dir, args)
    }

    /// Starts a server in `dir` (holding `config.yaml`) with `args`.
    pub fn start_in(dir: TempDir, args: &[&str]) -> Server {
        Server::try_start_in(dir, args).unwrap_or_else(|error| panic!("{error}"))
    }

    /// Starts a server, or says why it stopped before listening.
    pub fn try_start_in(dir: TempDir, args: &[&str]) -> Result<Server, String> {
        Server::try_start_with_env(dir, args, &[])
    }

    /// Starts a server with environment variables set for it.
    pub fn try_start_with_env(dir: TempDir, args: &[&str], envs: &[(&str, &str)]) -> Result<Server, String> {
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        // Free ports, unless `args` name an address.
        let listen = [["--http", "127.0.0.1:0"], ["--grpc", "127.0.0.1:0"]]
            .into_iter()
            .filter(|[flag, _]| !args.iter().any(|arg| arg == flag))
            .flatten();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .envs(envs.iter().copied())
            .current_dir(&dir)
            .args(["serve", "--config", "config.yaml"])
            .args(listen)
            .args(&args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let (sender, receiver) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let (mut http, mut grpc, mut resp) = (None, None, None);
        let mut start_up = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.is_none() || grpc.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(line) => {
                    start_up.push_str(&line);
                    start_up.push('\n');
                    if let Some(address) = line.strip_prefix("HTTP listening on http://") {
                        http = Some(address.parse().unwrap());
                    }
                    if let Some(address) = line.strip_prefix("RESP listening on ") {
                        resp = Some(address.parse().unwrap());
                    }
                    if let Some(address) = line.strip_prefix("gRPC listening on ") {
                        grpc = Some(address.parse().unwrap());
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait().unwrap();
                    std::thread::sleep(Duration::from_millis(100));
                    let log = stderr.lock().unwrap().clone();
                    return Err(format!("sluice serve did not start ({status}): {log}"));
                }
            }
        }
        std::thread::spawn(move || while receiver.recv().is_ok() {});
        Ok(Server { child, dir, http: http.unwrap(), grpc: grpc.unwrap(), resp, stderr, args, start_up })
    }

    /// The lines it printed on standard output at start, up to its "listening" lines.
    pub fn start_up_lines(&self) -> &str {
        &self.start_up
    }

    /// The server's folder (its config and snapshot live there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replaces its `config.yaml` with `text`, atomically, as editors and config managers
    /// do (a reload, by signal or by the admin endpoint, then reads it).
    pub fn write_config(&self, text: &str) {
        let temporary = self.dir.join("config.yaml.new");
        std::fs::write(&temporary, text).unwrap();
        std::fs::rename(temporary, self.dir.join("config.yaml")).unwrap();
    }

    /// `http://host:port` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (at most `limit`) until the server's log has a line containing `text`.
    pub fn wait_for_log(&self, text: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.log().contains(text) {
            assert!(Instant::now() < deadline, "`{text}` not logged within {limit:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends `signal` (such as `HUP`, `TERM`, `KILL`) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the server to exit (at most `limit`); its exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit within {limit:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the same server again in the same folder, with the same arguments.
    pub fn restart(self) -> Server {
        let dir = self.dir.clone();
        let args = self.args.clone();
        drop(self);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start_in(dir, &args)
    }

    /// Stops the server (it is killed, as by a crash), and returns what restarts it on
    /// the same gRPC address, as a proxy configured with that address expects.
    pub fn stop(self) -> Stopped {
        let grpc = self.grpc.to_string();
        let mut args = self.args.clone();
        if !args.iter().any(|arg| arg == "--grpc") {
            args.extend(["--grpc".to_owned(), grpc]);
        }
        let dir = self.dir.clone();
        drop(self);
        Stopped { dir, args }
    }
}

/// A server stopped by [`Server::stop`].
#[derive(Debug)]
pub struct Stopped {
    dir: TempDir,
    args: Vec<String>,
}

impl Stopped {
    /// Starts the server again: same folder, same arguments, same gRPC address.
    pub fn start(self) -> Server {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Server::start_in(self.dir, &args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
