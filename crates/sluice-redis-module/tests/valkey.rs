//! Valkey 8.1+ lets a module replicate without the command look-up (its module option
//! `SKIP_COMMAND_VALIDATION`): the module sets it there, and only there, and replicas still
//! get the primary's bytes and expiry without the module.
//!
//! The Valkey binary is `SLUICE_VALKEY_SERVER` (`scripts/test.sh` installs Valkey 8.1 and
//! sets it). Without it these tests pass with a note, except under CI (`CI=true`), where
//! they fail: there, Valkey must be tested.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use sluice_core::{Alignment, FixedWindow, Limit};
use sluice_test_support::redis::RedisServer;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the module logs when it loads on a server that skips the look-up.
const UNVALIDATED: &str = "replicating without command validation";

/// The Valkey binary, or `None` (with a note) outside CI when none is given.
fn valkey() -> Option<PathBuf> {
    match std::env::var_os("SLUICE_VALKEY_SERVER").filter(|path| !path.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("SLUICE_VALKEY_SERVER is not set: under CI, Valkey must be tested (scripts/test.sh installs it)")
        }
        None => {
            eprintln!("SLUICE_VALKEY_SERVER is not set: Valkey not tested (scripts/test.sh installs it)");
            None
        }
    }
}

/// The server's `INFO server` field `name`.
fn info_field(con: &mut redis::Connection, name: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg("server").query(con).unwrap();
    let prefix = format!("{name}:");
    info.lines().find_map(|line| line.strip_prefix(&prefix)).map(str::to_owned)
}

/// `major.minor` of a version string.
fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|part| part.parse().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

#[test]
fn on_valkey_8_1_the_module_replicates_without_the_command_look_up() {
    let Some(valkey) = valkey() else { return };
    let primary = RedisServer::start_binary_with_modules(&valkey, &[&harness::module_path()]);
    let mut to_primary = harness::connect(&primary);
    let version = info_field(&mut to_primary, "valkey_version").expect("a Valkey (INFO server: valkey_version)");
    assert!(major_minor(&version) >= (8, 1), "Valkey {version}: 8.1 or later is tested");
    assert!(primary.log().contains(UNVALIDATED), "the option is set:\n{}", primary.log());

    let replica = RedisServer::start_binary_with_modules(&valkey, &[]);
    let mut to_replica = harness::connect(&replica);
    let () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port()).query(&mut to_replica).unwrap();
    let window = FixedWindow::new(5, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
    let packed = harness::packed(&[Limit::new("w", window)], None, 1, 0, 1);
    for _ in 0..3 {
        let _: Vec<u8> = redis::cmd("SLUICE.CHECK").arg("k").arg(&packed).query(&mut to_primary).unwrap();
    }
    // WAIT needs the replica's link up: until then it acknowledges nothing.
    let acknowledged = (0..1000)
        .map(|_| redis::cmd("WAIT").arg(1).arg(10).query::<i64>(&mut to_primary).unwrap())
        .find(|&acknowledged| acknowledged == 1);
    assert_eq!(acknowledged, Some(1), "the replica caught up");
    let state = |con: &mut redis::Connection| -> (Option<Vec<u8>>, i64) {
        redis::pipe().cmd("GET").arg("k").cmd("PEXPIRETIME").arg("k").query(con).unwrap()
    };
    assert_eq!(state(&mut to_replica), state(&mut to_primary));
}

#[test]
fn on_redis_the_module_keeps_the_command_look_up() {
    let server = RedisServer::start_binary_with_modules(Path::new("redis-server"), &[&harness::module_path()]);
    let mut con = harness::connect(&server);
    assert_eq!(info_field(&mut con, "valkey_version"), None, "Debian's redis-server is Redis");
    assert!(!server.log().contains(UNVALIDATED), "no Valkey option on Redis:\n{}", server.log());
    let window = FixedWindow::new(5, Duration::from_secs(60), Alignment::Aligned, Duration::ZERO).unwrap();
    let packed = harness::packed(&[Limit::new("w", window)], None, 1, 0, 1);
    let reply: Vec<u8> = redis::cmd("SLUICE.CHECK").arg("k").arg(&packed).query(&mut con).unwrap();
    assert_eq!(harness::numbers(&reply)[1], 1, "and checks as ever");
}
