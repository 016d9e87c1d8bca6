//! Real Redis servers for integration tests: one `redis-server` ([`RedisServer`]) or a
//! three-master Redis Cluster ([`RedisCluster`]), each on free loopback ports, each in its
//! own temporary directory, all gone when the value is dropped.
//!
//! Every server also gets a watchdog (`sh`, blocked reading a pipe from this process): if the
//! test process dies without dropping the server (a panic with `panic = "abort"`,
//! `std::process::exit`, SIGKILL from a timeout, a server kept in a `static`), the pipe closes,
//! and the watchdog SIGKILLs the server and removes its directory. So no `redis-server`
//! outlives the tests that started it.
//!
//! The server binary is `redis-server` from the `PATH`, or the one `SLUICE_REDIS_SERVER`
//! names ([`server_binary`]): `scripts/test.sh` runs the suites again on Valkey
//! (`valkey-server`) and on a newer Redis that way.
//!
//! Nothing here is global except the ports the kernel hands out; tests may start servers from
//! parallel threads. Every wait is bounded, and every failure panics with the server's log.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SERVER_NOT_FOUND: &str = "not found: run scripts/test.sh (it installs redis-server and redis-tools with apt) or install them yourself (or set SLUICE_REDIS_SERVER to a server binary)";
const CLI_NOT_FOUND: &str = "redis-cli not found: run scripts/test.sh (it installs redis-server and redis-tools with apt) or install them yourself";

/// How long a server may take to answer PING after it is spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `redis-cli --cluster create`, and then the cluster reaching `cluster_state:ok`, may
/// take (each).
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(20);
/// How many fresh ports [`RedisServer::start`] tries before giving up on port collisions.
const START_ATTEMPTS: usize = 20;
/// How long one connection attempt or one reply may take.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(10);
/// Lines of a log shown when something fails.
const LOG_TAIL_LINES: usize = 40;

const WATCHDOG_SCRIPT: &str = r#"read -r _line; if [ -n "$1" ]; then kill -KILL "$1" 2>/dev/null; fi; rm -rf -- "$2""#;

/// One `redis-server` process on `127.0.0.1`, without persistence (`--save "" --appendonly no`),
/// in its own temporary directory (`redis.log` there has its stdout and stderr).
///
/// [`kill`](Self::kill) and [`restart`](Self::restart) keep the port and the directory, so fault
/// tests can take the server away and bring it back where clients expect it. A restarted
/// standalone server is empty; a restarted cluster node keeps its identity and slots
/// (`nodes.conf` is in the directory) but not its keys.
#[derive(Debug)]
pub struct RedisServer {
    /// The server binary ([`server_binary`] unless started with another).
    binary: PathBuf,
    port: u16,
    /// Arguments before the common ones: a sentinel's configuration file and `--sentinel`.
    leading_args: Vec<String>,
    /// Arguments after the common ones (cluster mode), the same on every restart.
    extra_args: Vec<String>,
    dir: PathBuf,
    /// `None` while killed.
    child: Option<Child>,
    watchdog: Option<Child>,
}

/// How one attempt to run a server ended.
enum Launch {
    Ready,
    /// Somebody else holds the port (or the cluster bus port): try again.
    PortInUse(String),
    Failed(String),
}

impl RedisServer {
    /// Starts a standalone server on a free port and waits until it answers PING.
    ///
    /// # Panics
    /// If `redis-server` is not installed, or the server does not come up within 10 s (the
    /// panic shows the end of its log).
    pub fn start() -> RedisServer {
        Self::start_with(|_| (Vec::new(), Vec::new()))
    }

    /// Starts a standalone server of `binary` (rather than [`server_binary`]) with each
    /// module of `paths` loaded.
    pub fn start_binary_with_modules(binary: &Path, paths: &[&Path]) -> RedisServer {
        let args: Vec<String> =
            paths.iter().flat_map(|path| ["--loadmodule".into(), path.display().to_string()]).collect();
        Self::start_binary(binary, |_| (Vec::new(), args.clone()))
    }

    /// Starts a standalone server with the module at `path` loaded (`--loadmodule`): the
    /// Redis module's tests (crates/sluice-redis-module) share these helpers.
    pub fn start_with_module(path: &Path) -> RedisServer {
        Self::start_with_modules(&[path])
    }

    /// Starts a standalone server with each module of `paths` loaded (the module's benchmark
    /// loads redis-cell beside it), and `MODULE LOAD`/`UNLOAD` allowed from loopback.
    pub fn start_with_modules(paths: &[&Path]) -> RedisServer {
        let mut args: Vec<String> =
            paths.iter().flat_map(|path| ["--loadmodule".into(), path.display().to_string()]).collect();
        args.extend(["--enable-module-command".into(), "local".into()]);
        Self::start_with(|_| (Vec::new(), args.clone()))
    }

    /// Starts a standalone server that also accepts TLS on a second free port
    /// ([`tls_port`](Self::tls_port)), with `cert.pem` and `key.pem` as its certificate and
    /// `ca.pem` as the CA its clients' certificates must chain to, all in `certs`;
    /// `verify_clients` is Redis's `tls-auth-clients` (`yes`, `no`, `optional`).
    pub fn start_tls(certs: &Path, verify_clients: &str) -> RedisServer {
        let file = |name: &str| certs.join(name).display().to_string();
        Self::start_with(|_| {
            let args = vec![
                "--tls-port".into(),
                free_port().to_string(),
                "--tls-cert-file".into(),
                file("cert.pem"),
                "--tls-key-file".into(),
                file("key.pem"),
                "--tls-ca-cert-file".into(),
                file("ca.pem"),
                "--tls-auth-clients".into(),
                verify_clients.into(),
            ];
            (Vec::new(), args)
        })
    }

    /// The TLS port of a server started with [`start_tls`](Self::start_tls).
    pub fn tls_port(&self) -> Option<u16> {
        let at = self.extra_args.iter().position(|arg| arg == "--tls-port")?;
        self.extra_args.get(at + 1)?.parse().ok()
    }

    /// Starts a server that will be a node of a cluster: its cluster bus is on a second free
    /// port, its cluster state in `nodes.conf` in its directory; `module`, if any, is loaded.
    fn start_cluster_node(module: Option<&Path>) -> RedisServer {
        Self::start_cluster_node_with(module, &[])
    }

    /// A Redis Cluster node (not yet joined to a cluster) on a free port, its cluster bus on
    /// another, its cluster state in `nodes.conf` in its directory; `module`, if any, is
    /// loaded; `settings` (pairs of `--name value` arguments) follow the common arguments,
    /// kept on every restart.
    pub fn start_cluster_node_with(module: Option<&Path>, settings: &[&str]) -> RedisServer {
        Self::start_with(|dir| {
            let bus_port = free_port();
            let mut args = vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                dir.join("nodes.conf").display().to_string(),
                "--cluster-port".into(),
                bus_port.to_string(),
            ];
            if let Some(module) = module {
                args.extend(["--loadmodule".into(), module.display().to_string()]);
            }
            args.extend(settings.iter().map(|setting| (*setting).to_owned()));
            (Vec::new(), args)
        })
    }

    /// Starts a Redis Sentinel (the same binary, `--sentinel`) that watches the primary on
    /// `primary_port` under `name`, with a quorum of one, taking a primary as down after
    /// 500 ms of silence and retrying a failover after 2 s.
    pub fn start_sentinel(primary_port: u16, name: &str) -> RedisServer {
        Self::start_with(|dir| {
            let config = dir.join("sentinel.conf");
            let text = format!(
                "sentinel monitor {name} 127.0.0.1 {primary_port} 1\n\
                 sentinel down-after-milliseconds {name} 500\n\
                 sentinel failover-timeout {name} 2000\n"
            );
            fs::write(&config, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));
            (vec![config.display().to_string(), "--sentinel".into()], Vec::new())
        })
    }

    /// Tries fresh ports (and a fresh directory) until a server comes up; `extra_args` gets the
    /// directory and returns the arguments before the common ones and those after.
    fn start_with(extra_args: impl FnMut(&Path) -> (Vec<String>, Vec<String>)) -> RedisServer {
        Self::start_binary(&server_binary(), extra_args)
    }

    /// As [`start_with`](Self::start_with), for a server of `binary`.
    fn start_binary(binary: &Path, mut extra_args: impl FnMut(&Path) -> (Vec<String>, Vec<String>)) -> RedisServer {
        let mut collisions = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = make_dir(port);
            let (leading_args, extra_args) = extra_args(&dir);
            let binary = binary.to_owned();
            let mut server = RedisServer { binary, port, leading_args, extra_args, dir, child: None, watchdog: None };
            match server.launch(Instant::now() + READY_TIMEOUT) {
                Launch::Ready => return server,
                // Dropping `server` removes its directory.
                Launch::PortInUse(log) => collisions.push(format!("port {port}:\n{log}")),
                Launch::Failed(why) => panic!("{why}"),
            }
        }
        panic!(
            "redis-server: {START_ATTEMPTS} attempts, every port was taken; the last logs:\n{}",
            collisions.join("\n")
        );
    }

    /// `redis://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port it listens on, the same across [`restart`](Self::restart)s.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, `None` while killed.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it has been started (or restarted) and not killed. (A server that crashed on
    /// its own still counts as running.)
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Its temporary directory (log, `nodes.conf`), removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its stdout and stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// SIGKILLs the server and waits until it is gone: connections to its port are refused
    /// from then on. The port stays this server's, for [`restart`](Self::restart). Killing a
    /// killed server does nothing.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Fails only if it has already exited; it is reaped either way.
            let _ = child.kill();
            let _ = child.wait();
        }
        // No process to guard any more, but still the directory to remove.
        self.replace_watchdog();
    }

    /// Starts the server again on the same port (killing it first if it runs) and waits until
    /// it answers PING. Waits (up to 10 s) for the port if something else holds it for a while.
    ///
    /// # Panics
    /// If the server does not come up within 10 s.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.launch(deadline) {
                Launch::Ready => return,
                Launch::PortInUse(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Launch::PortInUse(log) => panic!(
                    "redis-server on port {}: the port stayed taken for {READY_TIMEOUT:?} after a \
                     restart; the log:\n{log}",
                    self.port
                ),
                Launch::Failed(why) => panic!("{why}"),
            }
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    /// Spawns the server and waits until it answers; on anything but [`Launch::Ready`] the
    /// process is gone again.
    fn launch(&mut self, deadline: Instant) -> Launch {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log_path().display()));
        let stderr = log.try_clone().expect("cannot duplicate the log's handle");
        let spawned = Command::new(&self.binary)
            .args(&self.leading_args)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--daemonize", "no", "--protected-mode", "yes"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!("{} {SERVER_NOT_FOUND}", self.binary.display()),
            Err(e) => panic!("cannot run {}: {e}", self.binary.display()),
        };
        self.child = Some(child);
        self.replace_watchdog();

        let outcome = self.wait_ready(deadline);
        if !matches!(outcome, Launch::Ready) {
            self.kill();
        }
        outcome
    }

    /// Polls until our process (not some other server that got the port) answers PING.
    fn wait_ready(&mut self, deadline: Instant) -> Launch {
        let Some(pid) = self.pid() else {
            return Launch::Failed("redis-server: no process to wait for".into());
        };
        let own_process = format!("process_id:{pid}\r\n");
        loop {
            if let Some(status) = self.try_wait() {
                let log = self.log_tail();
                return if log.contains("Address already in use") {
                    Launch::PortInUse(log)
                } else {
                    Launch::Failed(format!(
                        "redis-server on port {} exited at once ({status}); its log ({}):\n{log}",
                        self.port,
                        self.log_path().display()
                    ))
                };
            }
            let last = match query(self.port, &["PING", "INFO server"]) {
                Ok(replies) if replies[0] == "+PONG" && replies[1].contains(&own_process) => {
                    return Launch::Ready;
                }
                // Another server that got the port: ours exits soon, "Address already in use".
                Ok(replies) => format!("{replies:?}"),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Launch::Failed(format!(
                    "redis-server on port {} did not answer PING within {READY_TIMEOUT:?} (last \
                     attempt: {last}); its log ({}):\n{}",
                    self.port,
                    self.log_path().display(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    fn log_tail(&self) -> String {
        tail(&self.log())
    }

    /// Stops the current watchdog and starts one for the current process (or for none).
    fn replace_watchdog(&mut self) {
        stop_watchdog(self.watchdog.take());
        let pid = self.pid().map(|p| p.to_string()).unwrap_or_default();
        // Without `sh` there is no watchdog, only Drop.
        self.watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("sluice-redis-watchdog")
            .arg(pid)
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        stop_watchdog(self.watchdog.take());
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The server binary the tests run: `SLUICE_REDIS_SERVER` if set (a path, or a name looked
/// up in the `PATH`), else `redis-server`.
pub fn server_binary() -> PathBuf {
    std::env::var_os("SLUICE_REDIS_SERVER")
        .filter(|value| !value.is_empty())
        .map_or("redis-server".into(), PathBuf::from)
}

/// SIGKILLs a watchdog before its pipe closes, so it never acts.
fn stop_watchdog(watchdog: Option<Child>) {
    if let Some(mut watchdog) = watchdog {
        // `Child::wait` closes stdin first; keep the pipe open until the watchdog is dead.
        let pipe: Option<ChildStdin> = watchdog.stdin.take();
        let _ = watchdog.kill();
        let _ = watchdog.wait();
        drop(pipe);
    }
}

/// A Redis Cluster of three masters without replicas, each a [`RedisServer`] on its own port
/// (and its own cluster bus port), all of `127.0.0.1`. Slots as `redis-cli --cluster create`
/// assigns them: 0–5460, 5461–10922, 10923–16383. Redis's default cluster settings (node
/// timeout 15 s, full coverage required).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three nodes, joins them with `redis-cli --cluster create`, and waits until every
    /// node reports `cluster_state:ok`.
    ///
    /// # Panics
    /// If `redis-server` or `redis-cli` is not installed, or the cluster is not ready within
    /// 20 s (the panic shows redis-cli's output or the last `CLUSTER INFO`s).
    pub fn start() -> RedisCluster {
        Self::start_nodes(None)
    }

    /// As [`start`](Self::start), with the module at `path` loaded on every node.
    pub fn start_with_module(path: &Path) -> RedisCluster {
        Self::start_nodes(Some(path))
    }

    fn start_nodes(module: Option<&Path>) -> RedisCluster {
        let cluster = RedisCluster { nodes: (0..3).map(|_| RedisServer::start_cluster_node(module)).collect() };
        cluster.create();
        cluster.wait_ok();
        cluster
    }

    /// `redis://127.0.0.1:P/` for each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes' ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// The nodes, in the order of [`urls`](Self::urls).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes, to [`kill`](RedisServer::kill) and [`restart`](RedisServer::restart) them.
    /// A restarted node rejoins with its slots (it keeps `nodes.conf`) but without its keys;
    /// [`wait_ok`](Self::wait_ok) waits until it has.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// Waits (up to 20 s) until every node reports `cluster_state:ok`, knows all three nodes
    /// and sees all 16384 slots assigned to three masters.
    ///
    /// # Panics
    /// If that does not happen within 20 s, with the last `CLUSTER INFO` of every node.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        loop {
            let infos: Vec<(u16, Result<String, String>)> =
                self.nodes.iter().map(|node| (node.port(), cluster_info(node.port()))).collect();
            if infos.iter().all(|(_, info)| info.as_deref().is_ok_and(is_ok)) {
                return;
            }
            if Instant::now() >= deadline {
                let report: Vec<String> = infos
                    .iter()
                    .map(|(port, info)| match info {
                        Ok(info) => format!("127.0.0.1:{port}:\n{}", info.trim_end()),
                        Err(e) => format!("127.0.0.1:{port}: {e}"),
                    })
                    .collect();
                panic!(
                    "Redis Cluster not ok within {CLUSTER_TIMEOUT:?}; the last CLUSTER INFO of \
                     each node:\n{}",
                    report.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`, bounded in time.
    fn create(&self) {
        let log_path = self.nodes[0].dir().join("cluster-create.log");
        let log = File::create(&log_path).unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
        let stderr = log.try_clone().expect("cannot duplicate the log's handle");
        let spawned = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(self.ports().iter().map(|port| format!("127.0.0.1:{port}")))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn();
        let mut cli = match spawned {
            Ok(cli) => cli,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!("{CLI_NOT_FOUND}"),
            Err(e) => panic!("cannot run redis-cli: {e}"),
        };
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        let status = loop {
            if let Some(status) = cli.try_wait().expect("cannot wait for redis-cli") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = cli.kill();
                let _ = cli.wait();
                panic!(
                    "redis-cli --cluster create did not finish within {CLUSTER_TIMEOUT:?}; its \
                     output:\n{}",
                    tail(&fs::read_to_string(&log_path).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !status.success() {
            panic!(
                "redis-cli --cluster create failed ({status}); its output:\n{}",
                tail(&fs::read_to_string(&log_path).unwrap_or_default())
            );
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // All processes first, then (dropping the nodes) the directories.
        for node in &mut self.nodes {
            node.kill();
        }
    }
}

fn is_ok(info: &str) -> bool {
    ["cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:3", "cluster_size:3"]
        .iter()
        .all(|field| info.lines().any(|line| line.trim_end() == *field))
}

/// `CLUSTER INFO` of the node on `port`: its text, or the error reply (or I/O error) as text.
pub fn cluster_info(port: u16) -> Result<String, String> {
    let mut replies = query(port, &["CLUSTER INFO"]).map_err(|e| e.to_string())?;
    let info = replies.swap_remove(0);
    if info.starts_with('-') { Err(info) } else { Ok(info) }
}

/// A loopback port where nothing answers, for as long as the value lives: a socket bound to
/// it that never listens, so a connection is refused at once, and no server started by a
/// test running in parallel can take the port (its bind fails) and answer in its place, as
/// it could with a port that was merely free a moment ago.
#[derive(Debug)]
pub struct ClosedPort {
    /// Held, never read: the port stays taken until this is dropped.
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl ClosedPort {
    /// Binds a fresh port on `127.0.0.1` without listening.
    ///
    /// # Panics
    ///
    /// If no socket can be bound on `127.0.0.1`.
    pub fn bind() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("cannot create a TCP socket");
        socket.bind((Ipv4Addr::LOCALHOST, 0).into()).expect("cannot bind a TCP socket on 127.0.0.1");
        let port = socket.local_addr().expect("a bound socket has an address").port();
        ClosedPort { _socket: socket, port }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A port that was free a moment ago: what the kernel gives a listener on `127.0.0.1:0`.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot bind a TCP listener on 127.0.0.1")
}

/// A new directory under the system's temporary directory.
fn make_dir(port: u16) -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let base = std::env::temp_dir();
    for attempt in 0..100 {
        let dir = base.join(format!("sluice-redis-{}-{port}-{nanos}-{attempt}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("cannot create {}: {e}", dir.display()),
        }
    }
    panic!("cannot create a fresh directory in {}", base.display());
}

/// Sends inline commands over one new connection and returns their replies: simple strings and
/// errors with their `+`/`-`, integers with their `:`, bulk strings as their contents.
pub fn query(port: u16, commands: &[&str]) -> io::Result<Vec<String>> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&address, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut request = String::new();
    for command in commands {
        request.push_str(command);
        request.push_str("\r\n");
    }
    (&stream).write_all(request.as_bytes())?;
    let mut reader = BufReader::new(stream);
    commands.iter().map(|_| read_reply(&mut reader)).collect()
}

fn read_reply(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    match line.as_bytes().first() {
        Some(b'+' | b'-' | b':') => Ok(line.to_owned()),
        Some(b'$') => {
            let len: i64 =
                line[1..].parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, line.to_owned()))?;
            let Ok(len) = usize::try_from(len) else {
                return Ok(String::new()); // $-1: nil
            };
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body)?;
            body.truncate(len);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply: {line:?}"))),
    }
}

/// The last lines of `text` (a server's log), for a failure's message.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}
