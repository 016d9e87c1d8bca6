//! The check scripts and their arguments, which the module's command shares: one
//! `EVALSHA` (or, where Redis has the module loaded, one `SLUICE.CHECK`) per check,
//! whatever the limits; and the give-back script.

mod reply;

use crate::settings::RedisSettings;
pub(crate) use reply::{Granted, Reply, decode};
use sluice_core::{EXACT_LIMIT, Limit};

/// `head`, then every algorithm (each file the twin of its Rust module, with what they
/// share), then `driver`: the scripts that may meet any algorithm.
macro_rules! every_algorithm {
    ($head:literal, $driver:literal) => {
        concat!(
            include_str!(concat!("../lua/", $head)),
            include_str!("../lua/ttl.lua"),
            include_str!("../lua/idiv.lua"),
            include_str!("../lua/holds.lua"),
            include_str!("../lua/sliding_log.lua"),
            include_str!("../lua/sliding_log_holding.lua"),
            include_str!("../lua/fixed_window.lua"),
            include_str!("../lua/sliding_window.lua"),
            include_str!("../lua/token_bucket.lua"),
            include_str!("../lua/leaky_bucket.lua"),
            include_str!(concat!("../lua/", $driver)),
        )
    };
}

/// The script for several limits at once, all or nothing: the common start, every
/// algorithm, then the generic driver.
const MULTI: &str = every_algorithm!("common.lua", "check.lua");

/// The give-back script: its arguments, every algorithm (whose `*_give_back` it calls),
/// then its driver. Rare (a key gone quiet, a shutdown), so it holds them all.
pub(crate) const GIVE_BACK: &str = every_algorithm!("give_back_args.lua", "give_back.lua");

/// The script for one limit of one algorithm, the hot path: the common start, only the
/// files that algorithm needs (Redis runs a script's whole body, every function definition,
/// on each call), then a line naming its `decide` and `record` for the lean driver, which
/// builds no tables.
macro_rules! single {
    ($prefix:literal, $($file:literal),+) => {
        concat!(
            include_str!("../lua/common.lua"),
            include_str!("../lua/ttl.lua"),
            $(include_str!(concat!("../lua/", $file)),)+
            "local decide, record = ",
            $prefix,
            "_decide, ",
            $prefix,
            "_record\n",
            include_str!("../lua/single.lua")
        )
    };
}

/// Each algorithm's Lua prefix (`sl_decide`…), by wire number less one: the initials of
/// its configuration word (`Policy::WIRE_ALGORITHMS`).
#[cfg(test)]
fn lua_prefix(word: &str) -> String {
    word.split('_').filter_map(|part| part.chars().next()).collect()
}

/// The scripts, loaded into Redis on first use (`EVALSHA`, reloaded on `NOSCRIPT`).
#[derive(Debug)]
pub(crate) struct Scripts {
    multi: redis::Script,
    single: [redis::Script; 5],
    give_back: redis::Script,
}

/// The lean scripts for one limit, by wire number less one.
const SINGLE: [&str; 5] = [
    single!("sl", "holds.lua", "sliding_log.lua", "sliding_log_holding.lua"),
    single!("fw", "idiv.lua", "fixed_window.lua"),
    single!("sw", "idiv.lua", "sliding_window.lua"),
    single!("tb", "idiv.lua", "holds.lua", "token_bucket.lua"),
    single!("lb", "idiv.lua", "holds.lua", "leaky_bucket.lua"),
];

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            multi: redis::Script::new(MULTI),
            single: SINGLE.map(redis::Script::new),
            give_back: redis::Script::new(GIVE_BACK),
        }
    }
}

impl Scripts {
    /// The invocation of `call`: the lean script for one limit, the generic one for several.
    pub(crate) fn invocation(&self, call: &ScriptCall<'_>, settings: &RedisSettings) -> redis::ScriptInvocation<'_> {
        let script = match call.limits {
            [limit] => &self.single[usize::from(limit.policy().wire().algorithm - 1)],
            _ => &self.multi,
        };
        let mut invocation = script.prepare_invoke();
        for key in call.keys {
            invocation.key(key);
        }
        for arg in call.packed_args(settings) {
            invocation.arg(arg);
        }
        invocation
    }

    /// The invocation of the give-back script on `keys` with its packed argument.
    pub(crate) fn give_back<'a>(&'a self, keys: &[Vec<u8>], packed: &[u8]) -> redis::ScriptInvocation<'a> {
        let mut invocation = self.give_back.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        invocation.arg(packed);
        invocation
    }
}

/// One check as the scripts and the module's command receive it.
#[derive(Debug)]
pub(crate) struct ScriptCall<'a> {
    /// The state keys, one per limit.
    pub(crate) keys: &'a [Vec<u8>],
    /// The limits checked together (not empty).
    pub(crate) limits: &'a [Limit],
    /// The time of the check (µs), or -1 for Redis `TIME`.
    pub(crate) now: i64,
    /// The cost debited when every limit allows it.
    pub(crate) cost: u64,
    /// The lease asked with it, when one is: units beyond `cost`, and the period (µs) they
    /// may be spent for after the decision.
    pub(crate) lease: Option<(u64, u64)>,
    /// Redis `TIME` (µs) past which Redis writes nothing; `None`: whenever it arrives.
    pub(crate) deadline: Option<u64>,
}

impl ScriptCall<'_> {
    /// The module's command for the same check as [`Scripts::invocation`]: `SLUICE.CHECK`,
    /// the keys, then the scripts' packed argument and deadline (the module reads them alike).
    pub(crate) fn module_command(&self, settings: &RedisSettings) -> redis::Cmd {
        let mut command = redis::cmd("SLUICE.CHECK");
        command.arg(self.keys).arg(self.packed_args(settings));
        command
    }

    /// What follows the keys, for the scripts and the module alike: the packed argument,
    /// then the deadline if there is one (a little-endian double; below 2^53 for any time
    /// before the year 2255, so exact).
    fn packed_args(&self, settings: &RedisSettings) -> Vec<Vec<u8>> {
        let deadline = self.deadline.map(|deadline| (deadline as f64).to_le_bytes().to_vec());
        std::iter::once(self.arguments(settings)).chain(deadline).collect()
    }

    /// The one argument of every script (lua/common.lua): little-endian doubles `now` (-1:
    /// Redis `TIME`), `cost`, the TTL settings, the lease and its period when one is asked,
    /// then each limit's algorithm id and parameters. Every value is an integer below 2^53
    /// (times, costs and parameters are bounded by `EXACT_LIMIT`, and the store asks a lease
    /// only when its deadline is too), so each double holds it exactly.
    fn arguments(&self, settings: &RedisSettings) -> Vec<u8> {
        let mut packed = Vec::with_capacity(8 * (6 + 5 * self.limits.len()));
        packed.extend_from_slice(&(self.now as f64).to_le_bytes());
        let mut push = |value: u64| packed.extend_from_slice(&double(value));
        push(self.cost);
        push(settings.extra_ttl_ms());
        push(settings.min_ttl_ms());
        if let Some((units, period)) = self.lease {
            push(units);
            push(period);
        }
        push_limits(&mut push, self.limits);
        packed
    }
}

/// Pushes each limit's wire form, as the scripts and the module read it: its algorithm id
/// and parameters (the core's `Policy::wire`: check.lua's algorithm number, then p1..p4).
pub(crate) fn push_limits(push: &mut impl FnMut(u64), limits: &[Limit]) {
    for limit in limits {
        let wire = limit.policy().wire();
        push(u64::from(wire.algorithm));
        for param in wire.params {
            push(param);
        }
    }
}

/// `value` as a little-endian double: exact, for a value below 2^53 (larger ones are held
/// at 2^53, which the scripts and the module refuse).
pub(crate) fn double(value: u64) -> [u8; 8] {
    (value.min(EXACT_LIMIT) as f64).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Policy;

    /// check.lua's `ALGORITHMS` and `Scripts::single` list the algorithms in the order of
    /// the core's wire numbers, so a number always reaches its own algorithm's Lua.
    #[test]
    fn the_scripts_follow_the_wire_numbers() {
        let table = MULTI.split("local ALGORITHMS = {").nth(1).and_then(|rest| rest.split("\n}").next());
        let listed: Vec<String> = table
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().strip_prefix('{'))
            .filter_map(|entry| entry.trim().split("_decide").next().map(str::to_owned))
            .collect();
        let expected: Vec<String> = Policy::WIRE_ALGORITHMS.iter().map(|word| lua_prefix(word)).collect();
        assert_eq!(listed, expected);
        for (script, prefix) in SINGLE.iter().zip(&expected) {
            assert!(script.contains(&format!("local decide, record = {prefix}_decide, {prefix}_record")), "{prefix}");
        }
    }
}
