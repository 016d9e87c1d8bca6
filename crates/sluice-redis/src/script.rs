//! The check scripts and their arguments, which the module's command shares: one
//! `EVALSHA` (or, where Redis has the module loaded, one `SLUICE.CHECK`) per check,
//! whatever the limits.

use crate::settings::RedisSettings;
use sluice_core::{Decision, EXACT_LIMIT, Limit, Quota, RetryAfter, StoreError};
use std::time::Duration;

/// The script for several limits at once, all or nothing: the common start, every
/// algorithm (each file the twin of its Rust module), then the generic driver.
const MULTI: &str = concat!(
    include_str!("../lua/common.lua"),
    include_str!("../lua/idiv.lua"),
    include_str!("../lua/sliding_log.lua"),
    include_str!("../lua/fixed_window.lua"),
    include_str!("../lua/sliding_window.lua"),
    include_str!("../lua/token_bucket.lua"),
    include_str!("../lua/leaky_bucket.lua"),
    include_str!("../lua/check.lua"),
);

/// The script for one limit of one algorithm, the hot path: the common start, only the
/// files that algorithm needs (Redis runs a script's whole body, every function definition,
/// on each call), then a line naming its `decide` and `record` for the lean driver, which
/// builds no tables.
macro_rules! single {
    ($prefix:literal, $($file:literal),+) => {
        concat!(
            include_str!("../lua/common.lua"),
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

/// The check scripts, loaded into Redis on first use (`EVALSHA`, reloaded on `NOSCRIPT`).
#[derive(Debug)]
pub(crate) struct Scripts {
    multi: redis::Script,
    single: [redis::Script; 5],
}

/// The lean scripts for one limit, by wire number less one.
const SINGLE: [&str; 5] = [
    single!("sl", "sliding_log.lua"),
    single!("fw", "idiv.lua", "fixed_window.lua"),
    single!("sw", "idiv.lua", "sliding_window.lua"),
    single!("tb", "idiv.lua", "token_bucket.lua"),
    single!("lb", "idiv.lua", "leaky_bucket.lua"),
];

impl Default for Scripts {
    fn default() -> Self {
        Scripts { multi: redis::Script::new(MULTI), single: SINGLE.map(redis::Script::new) }
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
        std::iter::once(arguments(self.limits, self.now, self.cost, settings)).chain(deadline).collect()
    }
}

/// The one argument of every script (lua/common.lua): little-endian doubles `now` (-1:
/// Redis `TIME`), `cost`, the TTL settings, then each limit's algorithm id and parameters.
/// Every value is an integer below 2^53 (times, costs and parameters are bounded by
/// `EXACT_LIMIT`), so each double holds it exactly.
fn arguments(limits: &[Limit], now: i64, cost: u64, settings: &RedisSettings) -> Vec<u8> {
    let mut packed = Vec::with_capacity(8 * (4 + 5 * limits.len()));
    let mut push = |value: f64| packed.extend_from_slice(&value.to_le_bytes());
    push(now as f64);
    push(cost.min(EXACT_LIMIT) as f64);
    push(settings.extra_ttl_ms() as f64);
    push(settings.min_ttl_ms() as f64);
    for limit in limits {
        // The core's wire form (`Policy::wire`): check.lua's algorithm number, then p1..p4.
        let wire = limit.policy().wire();
        push(f64::from(wire.algorithm));
        for param in wire.params {
            push(param as f64);
        }
    }
    packed
}

/// What the script answered.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The time of the check (µs): the caller's, or Redis `TIME`.
    pub(crate) now: u64,
    /// One decision per limit.
    pub(crate) decisions: Vec<Decision>,
    /// True when every limit decided at `now` itself: no state's time was later.
    pub(crate) unclamped: bool,
    /// Redis `TIME` (µs) when the script ran, whatever `now` was.
    pub(crate) clock: u64,
}

/// Decodes the script's reply, little-endian doubles holding integers: the time, seven
/// per limit, then Redis's clock.
pub(crate) fn decode(reply: &[u8], limits: usize) -> Result<Reply, StoreError> {
    let reply = integers(reply)?;
    let expected = 2 + 7 * limits;
    let [time, fields @ .., clock] = reply.as_slice() else {
        return Err(StoreError::Malformed(format!("expected {expected} integers for {limits} limits, got none")));
    };
    if reply.len() != expected {
        let message = format!("expected {expected} integers for {limits} limits, got {}", reply.len());
        return Err(StoreError::Malformed(message));
    }
    let time_of = |value: i64| u64::try_from(value).map_err(|_| StoreError::Malformed(format!("bad time {value}")));
    let decisions = fields.chunks_exact(7).map(decode_one).collect::<Result<_, _>>()?;
    let unclamped = fields.chunks_exact(7).all(|fields| fields[6] == *time);
    Ok(Reply { now: time_of(*time)?, decisions, unclamped, clock: time_of(*clock)? })
}

/// The integers a packed reply holds.
fn integers(reply: &[u8]) -> Result<Vec<i64>, StoreError> {
    if !reply.len().is_multiple_of(8) {
        return Err(StoreError::Malformed(format!("a reply of {} bytes is not packed doubles", reply.len())));
    }
    let exact = EXACT_LIMIT as f64;
    reply
        .chunks_exact(8)
        .map(|bytes| {
            let value = f64::from_le_bytes(bytes.try_into().unwrap_or_default());
            // Exact integers only: both bounds and the cast are exact below 2^53.
            let integer = value as i64;
            (value.fract() == 0.0 && value.abs() < exact)
                .then_some(integer)
                .ok_or_else(|| StoreError::Malformed(format!("{value} is not an exact integer")))
        })
        .collect()
}

fn decode_one(fields: &[i64]) -> Result<Decision, StoreError> {
    let unsigned = |index: usize| {
        u64::try_from(fields[index]).map_err(|_| StoreError::Malformed(format!("negative field {index}: {fields:?}")))
    };
    let retry_after = match fields[4] {
        -1 => None,
        -2 => Some(RetryAfter::Never),
        wait => Some(RetryAfter::After(Duration::from_micros(
            unsigned(4).map_err(|_| StoreError::Malformed(format!("bad retry_after {wait}")))?,
        ))),
    };
    let quota = Quota { limit: unsigned(1)?, remaining: unsigned(2)? };
    let decided = Decision::allowed(quota, Duration::from_micros(unsigned(3)?));
    let decided = match (fields[0] == 1, retry_after) {
        (true, None) => decided,
        (false, Some(retry_after)) => decided.rejected(retry_after),
        _ => return Err(StoreError::Malformed(format!("allowed and retry_after disagree: {fields:?}"))),
    };
    Ok(decided.delayed(Duration::from_micros(unsigned(5)?)))
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
