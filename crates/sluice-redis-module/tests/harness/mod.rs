//! What the module's tests share: the built module, a server that loads it, the Lua scripts
//! it must match, and the packed argument both take (`lua/common.lua`), encoded here from its
//! documentation rather than by `sluice-redis` (whose encoder is private), so the layout is
//! checked twice.
#![allow(dead_code, unreachable_pub)]

use sluice_core::{Decision, Limit, Policy, Quota, RetryAfter};
use sluice_test_support::redis::RedisServer;
use std::path::PathBuf;
use std::time::Duration;

/// The module Cargo built beside this test (`cargo test` builds the library, cdylib
/// included, before its tests).
pub fn module_path() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the test's directory");
    let candidates = [deps.join("libsluice_redis_module.so"), deps.join("../libsluice_redis_module.so")];
    candidates.iter().find(|path| path.exists()).cloned().unwrap_or_else(|| {
        panic!("libsluice_redis_module.so not found beside {}: build the crate first", exe.display())
    })
}

/// A standalone redis-server with the module loaded.
pub fn start() -> RedisServer {
    RedisServer::start_with_module(&module_path())
}

/// A plain (synchronous) connection.
pub fn connect(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().unwrap()
}

/// The scripts' sources, assembled as `sluice-redis/src/script.rs` assembles them.
macro_rules! lua {
    ($($file:literal),+) => { concat!($(include_str!(concat!("../../../sluice-redis/lua/", $file)),)+) };
}
macro_rules! single {
    ($prefix:literal, $($file:literal),+) => {
        concat!(
            lua!("common.lua", "ttl.lua", $($file),+),
            "local decide, record = ", $prefix, "_decide, ", $prefix, "_record\n",
            lua!("single.lua")
        )
    };
}

/// The script `sluice-redis` runs for `limits`: the lean one of the algorithm for one limit,
/// the generic one for several.
pub fn script(limits: &[Limit]) -> &'static str {
    let [limit] = limits else {
        return lua!(
            "common.lua",
            "ttl.lua",
            "idiv.lua",
            "holds.lua",
            "sliding_log.lua",
            "sliding_log_holding.lua",
            "fixed_window.lua",
            "sliding_window.lua",
            "token_bucket.lua",
            "leaky_bucket.lua",
            "check.lua"
        );
    };
    match script_args(limit.policy()).0 {
        1 => single!("sl", "holds.lua", "sliding_log.lua", "sliding_log_holding.lua"),
        2 => single!("fw", "idiv.lua", "fixed_window.lua"),
        3 => single!("sw", "idiv.lua", "sliding_window.lua"),
        4 => single!("tb", "idiv.lua", "holds.lua", "token_bucket.lua"),
        _ => single!("lb", "idiv.lua", "holds.lua", "leaky_bucket.lua"),
    }
}

/// The give-back script `sluice-redis` runs.
pub const GIVE_BACK: &str = lua!(
    "give_back_args.lua",
    "ttl.lua",
    "idiv.lua",
    "holds.lua",
    "sliding_log.lua",
    "sliding_log_holding.lua",
    "fixed_window.lua",
    "sliding_window.lua",
    "token_bucket.lua",
    "leaky_bucket.lua",
    "give_back.lua"
);

/// The algorithm id and `p1..p4` of `policy` (the core's wire form, as the store sends it).
pub fn script_args(policy: &Policy) -> (u64, [u64; 4]) {
    let wire = policy.wire();
    (u64::from(wire.algorithm), wire.params)
}

/// The packed argument: `now` (`None`: Redis `TIME`), `cost`, `extra_ms`, `min_ttl_ms`,
/// then each limit's id and parameters, as little-endian doubles.
pub fn packed(limits: &[Limit], now: Option<u64>, cost: u64, extra_ms: u64, min_ttl_ms: u64) -> Vec<u8> {
    packed_leasing(limits, now, cost, None, (extra_ms, min_ttl_ms))
}

/// [`packed`], asking `lease` (units, period µs) when it is `Some`: the lease's units and
/// period then follow the TTL settings.
pub fn packed_leasing(
    limits: &[Limit],
    now: Option<u64>,
    cost: u64,
    lease: Option<(u64, u64)>,
    (extra_ms, min_ttl_ms): (u64, u64),
) -> Vec<u8> {
    let now = now.map_or(-1.0, |now| now as f64);
    let mut numbers = vec![now, cost as f64, extra_ms as f64, min_ttl_ms as f64];
    if let Some((units, period)) = lease {
        numbers.extend([units as f64, period as f64]);
    }
    for limit in limits {
        let (id, params) = script_args(limit.policy());
        numbers.push(id as f64);
        numbers.extend(params.map(|p| p as f64));
    }
    numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
}

/// The give-back's packed argument: `now` (`None`: Redis `TIME`), the units leased and
/// given back, `extra_ms`, `min_ttl_ms`, then per limit its receipt (`debited_in`, `stamp`),
/// id and parameters, as little-endian doubles.
pub fn packed_give_back(
    limits: &[(Limit, [u64; 2])],
    now: Option<u64>,
    (leased, unspent): (u64, u64),
    (extra_ms, min_ttl_ms): (u64, u64),
) -> Vec<u8> {
    let now = now.map_or(-1.0, |now| now as f64);
    let mut numbers = vec![now, leased as f64, unspent as f64, extra_ms as f64, min_ttl_ms as f64];
    for (limit, receipt) in limits {
        let (id, params) = script_args(limit.policy());
        numbers.extend(receipt.map(|n| n as f64));
        numbers.push(id as f64);
        numbers.extend(params.map(|p| p as f64));
    }
    numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
}

/// A reply's numbers: `now`, seven per limit, (after a lease request) whether it was granted
/// and one stamp per limit, Redis `TIME`.
pub fn numbers(reply: &[u8]) -> Vec<i64> {
    assert_eq!(reply.len() % 8, 0, "a reply of {} bytes", reply.len());
    reply.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap()) as i64).collect()
}

/// One limit's seven fields as a decision (as `sluice-redis` decodes them).
pub fn decision(fields: &[i64]) -> Decision {
    let micros = |index: usize| Duration::from_micros(u64::try_from(fields[index]).unwrap());
    let quota = Quota { limit: fields[1] as u64, remaining: fields[2] as u64 };
    let decided = Decision::allowed(quota, micros(3));
    let decided = match fields[4] {
        -1 => decided,
        -2 => decided.rejected(RetryAfter::Never),
        _ => decided.rejected(RetryAfter::After(micros(4))),
    };
    decided.delayed(micros(5))
}
