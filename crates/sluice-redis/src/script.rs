//! The check script and its arguments: one `EVALSHA` per check, whatever the limits.

use sluice::{Decision, LeakMode, Limit, Policy, RetryAfter, StoreError};
use std::time::Duration;

/// The script for several limits at once, assembled from one Lua file per algorithm (each
/// the twin of its Rust module) and the generic driver.
const MULTI: &str = concat!(
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
            include_str!("../lua/prelude.lua"),
            include_str!(concat!("../lua/", $file)),
            include_str!("../lua/single.lua")
        )
    };
}

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
                redis::Script::new(single!("sliding_log.lua")),
                redis::Script::new(single!("fixed_window.lua")),
                redis::Script::new(single!("sliding_window.lua")),
                redis::Script::new(single!("token_bucket.lua")),
                redis::Script::new(single!("leaky_bucket.lua")),
            ],
        }
    }
}

impl Scripts {
    /// The invocation of a check of `limits` (not empty): the lean script for one limit,
    /// the generic one for several. Keys and the common arguments are added by the caller.
    pub(crate) fn invocation(&self, limits: &[Limit]) -> redis::ScriptInvocation<'_> {
        match limits {
            [limit] => self.single[algorithm_index(limit.policy())].prepare_invoke(),
            _ => self.multi.prepare_invoke(),
        }
    }
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

/// Decodes the script's reply: the time, then seven integers per limit.
pub(crate) fn decode(reply: &[i64], limits: usize) -> Result<Reply, StoreError> {
    if reply.len() != 1 + 7 * limits {
        let message = format!("expected {} integers for {limits} limits, got {}", 1 + 7 * limits, reply.len());
        return Err(StoreError::Malformed(message));
    }
    let now = u64::try_from(reply[0]).map_err(|_| StoreError::Malformed(format!("bad time {}", reply[0])))?;
    let decisions = reply[1..].chunks_exact(7).map(decode_one).collect::<Result<_, _>>()?;
    let unclamped = reply[1..].chunks_exact(7).all(|fields| fields[6] == reply[0]);
    Ok(Reply { now, decisions, unclamped })
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
