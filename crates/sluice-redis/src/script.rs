//! The check script and its arguments: one `EVALSHA` per check, whatever the limits.

use crate::settings::RedisSettings;
use sluice::{Decision, EXACT_LIMIT, LeakMode, Limit, Policy, RetryAfter, StoreError};
use std::time::Duration;

/// The script for several limits at once, assembled from one Lua file per algorithm (each
/// the twin of its Rust module) and the generic driver.
const MULTI: &str = concat!(
    include_str!("../lua/idiv.lua"),
    include_str!("../lua/prelude.lua"),
    include_str!("../lua/sliding_log.lua"),
    include_str!("../lua/fixed_window.lua"),
    include_str!("../lua/sliding_window.lua"),
    include_str!("../lua/token_bucket.lua"),
    include_str!("../lua/leaky_bucket.lua"),
    include_str!("../lua/check.lua"),
);

/// The script for one limit of one algorithm: only that algorithm's code and a lean driver,
/// since Redis runs a script's whole body (every function definition) on each call.
macro_rules! single {
    ($file:literal) => {
        concat!(
            include_str!("../lua/idiv.lua"),
            include_str!("../lua/prelude.lua"),
            include_str!(concat!("../lua/", $file)),
            include_str!("../lua/single.lua")
        )
    };
}

/// A lean script for one limit: the helpers it uses, the check's time (`now.lua`), then
/// the decision, with no prelude and no tables.
macro_rules! lean {
    ($helpers:literal, $file:literal) => {
        concat!(
            include_str!(concat!("../lua/", $helpers)),
            include_str!("../lua/now.lua"),
            include_str!(concat!("../lua/", $file))
        )
    };
}

/// The script for one sliding log, the hot path: the algorithm's functions and a driver
/// that builds no tables (no prelude).
const SLIDING_LOG: &str = lean!("sliding_log.lua", "sliding_log_single.lua");

/// The script for one fixed window (limitador's and envoyproxy/ratelimit's algorithm, so a
/// hot path too): exact division and the decision, no prelude, no tables.
const FIXED_WINDOW: &str = lean!("idiv.lua", "fixed_window_single.lua");

/// The script for one token bucket, the most common policy: exact division and the
/// decision, no prelude, no tables.
const TOKEN_BUCKET: &str = lean!("idiv.lua", "token_bucket_single.lua");

/// The script for one leaky bucket (GCRA, governor's algorithm): exact division and the
/// decision, no prelude, no tables.
const LEAKY_BUCKET: &str = lean!("idiv.lua", "leaky_bucket_single.lua");

/// The check scripts, loaded into Redis on first use (`EVALSHA`, reloaded on `NOSCRIPT`).
#[derive(Debug)]
pub(crate) struct Scripts {
    multi: redis::Script,
    single: [redis::Script; 5],
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            multi: redis::Script::new(MULTI),
            single: [
                redis::Script::new(SLIDING_LOG),
                redis::Script::new(FIXED_WINDOW),
                redis::Script::new(single!("sliding_window.lua")),
                redis::Script::new(TOKEN_BUCKET),
                redis::Script::new(LEAKY_BUCKET),
            ],
        }
    }
}

impl Scripts {
    /// The invocation of a check of `limits` (not empty) on the state `keys` (one per limit)
    /// at `now` (-1: Redis `TIME`): the lean script for one limit, the generic one for several.
    pub(crate) fn invocation(
        &self,
        keys: Vec<Vec<u8>>,
        limits: &[Limit],
        now: i64,
        cost: u64,
        settings: &RedisSettings,
    ) -> redis::ScriptInvocation<'_> {
        let script = match limits {
            [limit] => &self.single[algorithm_index(limit.policy())],
            _ => &self.multi,
        };
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        invocation.arg(now).arg(cost.min(EXACT_LIMIT));
        match limits {
            [limit] if matches!(limit.policy(), Policy::SlidingLog(_)) => {
                // The log's TTL depends only on its window: computed here, the script
                // passes it to Redis as it is (a number turned into a string costs Lua).
                let (_, [n, window, attempts, _]) = policy_args(limit.policy());
                invocation.arg(ttl_ms(window, settings)).arg(n).arg(window).arg(attempts);
            }
            [limit] => {
                invocation.arg(settings.extra_ttl_ms()).arg(settings.min_ttl_ms());
                invocation.arg(&policy_args(limit.policy()).1[..]);
            }
            _ => {
                invocation.arg(settings.extra_ttl_ms()).arg(settings.min_ttl_ms()).arg(limits.len());
                for limit in limits {
                    let (algorithm, params) = policy_args(limit.policy());
                    invocation.arg(algorithm).arg(&params[..]);
                }
            }
        }
        invocation
    }
}

/// The TTL (ms) of a state that lives `expires_in` µs, as prelude.lua's `ttl_ms` computes
/// it: rounded up to whole ms, plus the clock skew allowed, at least the floor.
fn ttl_ms(expires_in: u64, settings: &RedisSettings) -> u64 {
    expires_in.div_ceil(1000).saturating_add(settings.extra_ttl_ms()).max(settings.min_ttl_ms()).max(1)
}

fn algorithm_index(policy: &Policy) -> usize {
    match policy {
        Policy::SlidingLog(_) => 0,
        Policy::FixedWindow(_) => 1,
        Policy::SlidingWindow(_) => 2,
        Policy::TokenBucket(_) => 3,
        Policy::LeakyBucket(_) => 4,
    }
}

/// The script's name for `policy`'s algorithm and its four numeric parameters.
pub(crate) fn policy_args(policy: &Policy) -> (&'static str, [u64; 4]) {
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let flag = |on: bool| u64::from(on);
    let params = match policy {
        Policy::SlidingLog(p) => {
            [p.limit(), micros(p.window()), flag(p.variant() == sluice::SlidingLogVariant::Attempts), 0]
        }
        Policy::FixedWindow(p) => {
            let anchored = flag(p.alignment() == sluice::Alignment::Anchored);
            [p.limit(), micros(p.window()), anchored, micros(p.offset())]
        }
        Policy::SlidingWindow(p) => [p.limit(), micros(p.window()) / p.buckets(), p.buckets(), 0],
        Policy::TokenBucket(p) => [p.capacity(), p.refill_amount(), micros(p.refill_interval()), 0],
        Policy::LeakyBucket(p) => [micros(p.interval()), p.burst(), flag(p.mode() == LeakMode::Delay), 0],
    };
    (policy.algorithm_name(), params)
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
}

/// Decodes the script's reply, little-endian doubles holding integers: the time, then
/// seven per limit.
pub(crate) fn decode(reply: &[u8], limits: usize) -> Result<Reply, StoreError> {
    let reply = integers(reply)?;
    let reply = reply.as_slice();
    if reply.len() != 1 + 7 * limits {
        let message = format!("expected {} integers for {limits} limits, got {}", 1 + 7 * limits, reply.len());
        return Err(StoreError::Malformed(message));
    }
    let now = u64::try_from(reply[0]).map_err(|_| StoreError::Malformed(format!("bad time {}", reply[0])))?;
    let decisions = reply[1..].chunks_exact(7).map(decode_one).collect::<Result<_, _>>()?;
    let unclamped = reply[1..].chunks_exact(7).all(|fields| fields[6] == reply[0]);
    Ok(Reply { now, decisions, unclamped })
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
            #[allow(clippy::cast_possible_truncation)]
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
    Ok(Decision {
        allowed: fields[0] == 1,
        limit: unsigned(1)?,
        remaining: unsigned(2)?,
        reset_after: Duration::from_micros(unsigned(3)?),
        retry_after,
        delay: Duration::from_micros(unsigned(5)?),
    })
}
