//! The one place that calls Redis's module API, and so the one module of the crate allowed
//! `unsafe` (`lib.rs` denies it everywhere else): commands registered and their arguments
//! read (`command.rs`), keys opened for a check, each once, their values read in place and
//! the check's writes applied (`keys.rs`) and replicated (`replicate.rs`), the module
//! loaded (`load.rs`). Everything here is safe to call; each `unsafe` block relies only on
//! the module API's documented contract and says which part.
//!
//! It is also where a check's cost is decided, so it calls the C API directly rather than
//! through the `redis-module` crate's wrappers: arguments are read where Redis keeps them
//! (no vector of retained strings), replication names the key by its argument and numbers
//! as integers (no formatted or copied strings), and a value is written in place when its
//! length stays (no new string object, no key deleted and added again).

mod command;
mod keys;
mod load;
mod replicate;

pub(crate) use command::{Call, Command};
pub(crate) use keys::{Keys, WrongType};
pub(crate) use load::{Replication, prepare, register};

use std::time::{SystemTime, UNIX_EPOCH};

/// Redis `TIME` in µs: the module API's clock where Redis has it (7.2+), else the same
/// clock read directly (Redis's `TIME`, like the `mstime` its TTLs count from, is
/// `gettimeofday`, the system's real-time clock).
pub(crate) fn redis_time_us() -> u64 {
    // SAFETY: reading a function pointer Redis filled in when the module loaded (or left
    // empty when it has no such function), never written afterwards.
    if let Some(microseconds) = unsafe { redis_module::raw::RedisModule_Microseconds } {
        // SAFETY: takes no arguments and only reads the clock.
        return u64::try_from(unsafe { microseconds() }).unwrap_or_default();
    }
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_micros()).unwrap_or_default()
}

/// The time, in ms, Redis counts a command's TTLs from (`PX`, `PEXPIRE`: its command time,
/// taken once before the command runs, or once for a whole `MULTI`), where the module API
/// shows it (Redis 7.2+, Valkey: the cached time, set at the same moment); `None` on older
/// Redis, whose scripts count from their own start.
pub(crate) fn command_time_ms() -> Option<u64> {
    // SAFETY: reading a function pointer Redis filled in when the module loaded (or left
    // empty when it has no such function), never written afterwards.
    let cached = unsafe { redis_module::raw::RedisModule_CachedMicroseconds }?;
    // SAFETY: takes no arguments and only reads a cached time.
    u64::try_from(unsafe { cached() }).ok().map(|micros| micros / 1000)
}

/// A module API function every Redis that loads modules provides (its pointer, a
/// `static mut` Redis fills in once when the module loads, before any command runs, is read
/// by the caller). A missing one is a broken invariant, not an input: the panic becomes an
/// error reply (`command.rs`).
fn api<F>(function: Option<F>) -> F {
    function.expect("a module API function every supported Redis provides")
}
