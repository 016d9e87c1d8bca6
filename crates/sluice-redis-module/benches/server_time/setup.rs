//! The benchmark's server: redis-server (or the server `SLUICE_REDIS_SERVER` names) with the
//! Sluice module and redis-cell loaded, either as the tests start it or under callgrind, and
//! what each peer costs it.

use crate::{harness, send};
use sluice_core::Limit;
use sluice_test_support::redis::{RedisServer, free_port, query, server_binary};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Who answers a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    Module,
    Script,
    Pair,
    Cell,
    Floor,
    WriteFloor,
}

impl Peer {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Module => "SLUICE.CHECK",
            Peer::Script => "scripts (EVALSHA)",
            Peer::Pair => "INCR + PEXPIRE",
            Peer::Cell => "CL.THROTTLE",
            Peer::Floor => "floor (open, reply)",
            Peer::WriteFloor => "write floor (+ SET … PXAT)",
        }
    }

    /// The commands of `INFO commandstats` (and the functions callgrind counts) it runs.
    fn commands(self) -> &'static [&'static str] {
        match self {
            Peer::Module => &["sluice.check"],
            Peer::Script => &["evalsha"],
            Peer::Pair => &["incr", "pexpire"],
            Peer::Cell => &["cl.throttle"],
            Peer::Floor | Peer::WriteFloor => &["sluice.floor"],
        }
    }
}

/// A redis-server with the module (and redis-cell, when it could be built) loaded.
pub(crate) struct Server {
    /// The server as the tests start it, or `None` under callgrind.
    _plain: Option<RedisServer>,
    callgrind: Option<Callgrind>,
    con: redis::Connection,
    peers: Vec<Peer>,
}

impl Server {
    pub(crate) fn start(under_callgrind: bool) -> Server {
        let module = harness::module_path();
        let cell = redis_cell()
            .map_err(|why| println!("CL.THROTTLE: not measured: redis-cell 0.2.2 could not be built: {why}"));
        let modules: Vec<&Path> = std::iter::once(module.as_path()).chain(cell.as_deref().ok()).collect();
        let (plain, callgrind, url) = if under_callgrind {
            let callgrind = Callgrind::start(&modules);
            let url = format!("redis://127.0.0.1:{}/", callgrind.port);
            (None, Some(callgrind), url)
        } else {
            let server = RedisServer::start_with_modules(&modules);
            let url = server.url();
            (Some(server), None, url)
        };
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let mut peers = vec![Peer::Module, Peer::Script, Peer::Pair];
        if cell.is_ok() {
            peers.push(Peer::Cell);
        }
        let floor: redis::Value = redis::cmd("COMMAND").arg("INFO").arg("sluice.floor").query(&mut con).unwrap();
        if matches!(&floor, redis::Value::Array(items) if items.iter().all(|item| *item != redis::Value::Nil)) {
            peers.extend([Peer::WriteFloor, Peer::Floor]);
        } else {
            println!(
                "floors: not measured: the module was built without the `bench-floor` feature (--features bench-floor)"
            );
        }
        Server { _plain: plain, callgrind, con, peers }
    }

    /// The peers this server can measure, in the table's order.
    pub(crate) fn peers(&self) -> Vec<Peer> {
        self.peers.clone()
    }

    /// The server's name and version (`INFO server`: `valkey_version`, else `redis_version`).
    pub(crate) fn version(&mut self) -> String {
        let info: String = redis::cmd("INFO").arg("server").query(&mut self.con).expect("INFO server");
        let field = |name: &str| info.lines().find_map(|line| line.strip_prefix(name)).map(str::to_owned);
        field("valkey_version:")
            .map(|v| format!("Valkey {v}"))
            .or_else(|| field("redis_version:").map(|v| format!("Redis {v}")))
            .unwrap_or_default()
    }

    /// One round: `checks` checks through `peer`; returns Redis's µs per check and the
    /// server's CPU time (user + system, all threads) per check in µs, or under callgrind
    /// the instructions per check (and no CPU time).
    pub(crate) fn measure(&mut self, peer: Peer, limits: &[Limit], checks: u64) -> (f64, f64) {
        if let Some(callgrind) = &mut self.callgrind {
            callgrind.control(&["-z"]);
            send(&mut self.con, peer, limits, checks);
            return (callgrind.dump() as f64 / checks as f64, f64::NAN);
        }
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut self.con).expect("CONFIG RESETSTAT");
        let cpu = self.cpu_seconds();
        send(&mut self.con, peer, limits, checks);
        let cpu = (self.cpu_seconds() - cpu) * 1e6 / checks as f64;
        let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut self.con).expect("INFO commandstats");
        (peer.commands().iter().map(|command| usec_per_call(&stats, command)).sum(), cpu)
    }

    /// The server process's CPU time so far, s (`INFO cpu`: `used_cpu_user` + `used_cpu_sys`).
    fn cpu_seconds(&mut self) -> f64 {
        let info: String = redis::cmd("INFO").arg("cpu").query(&mut self.con).expect("INFO cpu");
        let field = |name: &str| {
            let value = info.lines().find_map(|line| line.strip_prefix(name));
            value.and_then(|value| value.trim().parse::<f64>().ok()).unwrap_or_else(|| panic!("no {name} in {info}"))
        };
        field("used_cpu_user:") + field("used_cpu_sys:")
    }

    pub(crate) fn flush(&mut self) {
        let () = redis::cmd("FLUSHALL").query(&mut self.con).expect("FLUSHALL");
    }
}

fn usec_per_call(stats: &str, command: &str) -> f64 {
    let line = stats.lines().find(|line| line.starts_with(&format!("cmdstat_{command}:")));
    let field = line.and_then(|line| line.split(',').find_map(|f| f.strip_prefix("usec_per_call=")));
    field.and_then(|value| value.parse::<f64>().ok()).unwrap_or_else(|| panic!("no {command} in {stats}"))
}

/// redis-server under callgrind, counting only inside the functions of the measured commands
/// (the module dispatcher, `INCR`, `PEXPIRE`, `EVALSHA`): what `usec_per_call` times.
struct Callgrind {
    child: Child,
    port: u16,
    dir: PathBuf,
    dumps: u32,
}

impl Callgrind {
    fn start(modules: &[&Path]) -> Callgrind {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sluice-callgrind-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let toggles = [
            "RedisModuleCommandDispatcher",
            "ValkeyModuleCommandDispatcher",
            "incrCommand",
            "pexpireCommand",
            "evalShaCommand",
        ];
        let mut command = Command::new("valgrind");
        command.args(["--tool=callgrind", "--collect-atstart=no"]);
        command.arg(format!("--callgrind-out-file={}/cg.out", dir.display()));
        command.args(toggles.map(|function| format!("--toggle-collect={function}")));
        command.arg(server_binary()).args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", ""]);
        command.args(["--appendonly", "no"]);
        for module in modules {
            command.arg("--loadmodule").arg(module);
        }
        let log = std::fs::File::create(dir.join("valgrind.log")).unwrap();
        let child = command.stdout(Stdio::null()).stderr(log).spawn().unwrap_or_else(|error| {
            panic!("valgrind: {error} (Debian: apt-get install valgrind)");
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while query(port, &["PING"]).is_err() {
            assert!(Instant::now() < deadline, "redis-server under callgrind did not answer within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Callgrind { child, port, dir, dumps: 0 }
    }

    fn control(&self, args: &[&str]) {
        let status = Command::new("callgrind_control").args(args).arg(self.child.id().to_string()).output();
        assert!(status.is_ok_and(|out| out.status.success()), "callgrind_control {args:?} failed");
    }

    /// Dumps the counts since the last zeroing; returns the instructions.
    fn dump(&mut self) -> u64 {
        self.dumps += 1;
        self.control(&["-d"]);
        let file = self.dir.join(format!("cg.out.{}", self.dumps));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let summary = text.lines().find_map(|line| line.strip_prefix("summary: "));
        summary
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no summary in {}", file.display()))
    }
}

impl Drop for Callgrind {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// redis-cell 0.2.2 as a loadable module: `SLUICE_BENCH_REDIS_CELL` (a path to it), or built
/// once from its crates.io source into the target directory (`redis-cell-0.2.2/`): cargo
/// fetches it through a throwaway package that depends on it, and builds a copy of it as a
/// `cdylib` (its manifest says `dylib`, which Redis cannot load).
fn redis_cell() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("SLUICE_BENCH_REDIS_CELL") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let target = exe.ancestors().nth(3).ok_or("no target directory above the benchmark")?;
    let dir = target.join("redis-cell-0.2.2");
    let built = dir.join("build/release/libredis_cell.so");
    if built.exists() {
        return Ok(built);
    }
    println!("building redis-cell 0.2.2 into {} (once)", dir.display());
    let fetch = dir.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).map_err(|e| e.to_string())?;
    let manifest = "[package]\nname = \"fetch-redis-cell\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
                    [dependencies]\nredis-cell = \"=0.2.2\"\n\n[workspace]\n";
    std::fs::write(fetch.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    std::fs::write(fetch.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let host = ["--target", "x86_64-unknown-linux-gnu"];
    cargo(&["fetch", "--manifest-path"], &fetch.join("Cargo.toml"), &host)?;
    let source = registry_source("redis-cell-0.2.2")?;
    let copy = dir.join("src");
    let _ = std::fs::remove_dir_all(&copy);
    let copied = Command::new("cp").arg("-r").arg(&source).arg(&copy).status().map_err(|e| e.to_string())?;
    if !copied.success() {
        return Err(format!("cp -r {} failed", source.display()));
    }
    // Its own workspace, even inside this one.
    let manifest = copy.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| e.to_string())?;
    std::fs::write(&manifest, text + "\n[workspace]\n").map_err(|e| e.to_string())?;
    let target_dir = dir.join("build");
    let out = ["--crate-type", "cdylib", "--target-dir", target_dir.to_str().ok_or("a non-UTF-8 path")?];
    cargo(&["rustc", "--release", "--manifest-path"], &manifest, &out)?;
    if built.exists() { Ok(built) } else { Err(format!("no {} after the build", built.display())) }
}

/// Runs cargo with `args`, `manifest`, `more`.
fn cargo(args: &[&str], manifest: &Path, more: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo).args(args).arg(manifest).args(more).env_remove("CARGO_TARGET_DIR").status();
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("cargo {} {} {}: {status}", args.join(" "), manifest.display(), more.join(" "))),
        Err(error) => Err(format!("cargo: {error}")),
    }
}

/// Where cargo unpacked the crates.io package `name` (`$CARGO_HOME/registry/src/*/name`).
fn registry_source(name: &str) -> Result<PathBuf, String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let registry = home.ok_or("neither CARGO_HOME nor HOME is set")?.join("registry/src");
    let indexes = std::fs::read_dir(&registry).map_err(|e| format!("{}: {e}", registry.display()))?;
    indexes
        .filter_map(Result::ok)
        .map(|index| index.path().join(name))
        .find(|path| path.join("Cargo.toml").exists())
        .ok_or_else(|| format!("{name} is not in {}", registry.display()))
}
