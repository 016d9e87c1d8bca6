//! `CL.THROTTLE key max_burst count period [quantity]`, answered as redis-cell 0.5.0 answers
//! it: `[limited, limit, remaining, retry_after, reset_after]`.
//!
//! The decision is Sluice's leaky bucket (GCRA, the algorithm redis-cell implements) with
//! `interval = period / count` and `burst = max_burst`, run by the service's store like any
//! policy; the reply is written with redis-cell's own arithmetic, read from its source
//! (`src/cell/mod.rs`, `src/lib.rs`):
//!
//! - the emission interval `T` is `(period_ns as f64 / count as f64) as i64` nanoseconds, a
//!   zero one is refused (`Zero rates are not supported`), the tolerance is `T × (max_burst
//!   + 1)` and the limit `max_burst + 1`;
//! - `remaining` is `whole_µs(tolerance − ttl) as f64 / whole_µs(T) as f64`, truncated, and 0
//!   when `tolerance − ttl ≤ −T`;
//! - `retry_after` is −1 unless limited by a quantity that could ever pass; `retry_after`
//!   and `reset_after` are whole seconds, plus one when a millisecond or more remains.
//!
//! Sluice keeps time in microseconds: the decision's interval is `T` truncated to whole
//! microseconds (as redis-cell's `remaining` reads it), and must be at least 1 µs. When `T`
//! is not a whole number of microseconds, the state runs ahead of redis-cell's by less than
//! 1 µs per request admitted while the key stays busy (docs/resp.md). Where redis-cell's arithmetic goes where Sluice's
//! cannot (negative rates or quantities, sub-microsecond intervals, periods past 2^53 µs)
//! the command answers an error instead; docs/resp.md lists each case.

use crate::resp::reply::Reply;
use bytes::Bytes;
use sluice_core::{Decision, LeakMode, LeakyBucket, Limit, RetryAfter};
use std::time::Duration;

/// The name of every `CL.THROTTLE` limit: a `:` no configured policy name may hold, so its
/// states never meet a named policy's.
pub(crate) const LIMIT_NAME: &str = "cl.throttle:";

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// The arguments of one call, read as redis-cell reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Throttle {
    /// The key throttled.
    pub(crate) key: Bytes,
    /// `max_burst`.
    pub(crate) max_burst: i64,
    /// `count` per `period`.
    pub(crate) count: i64,
    /// `period`, in seconds.
    pub(crate) period: i64,
    /// `quantity`, 1 when not given.
    pub(crate) quantity: i64,
}

/// redis-cell's rate: its emission interval, tolerance and limit, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    /// `T`.
    pub(crate) interval: i64,
    /// `T × (max_burst + 1)`, wrapping as a release build of redis-cell does.
    pub(crate) tolerance: i64,
    /// `max_burst + 1`.
    pub(crate) limit: i64,
}

/// How a call is decided.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// By the store, with this limit; the quantity is the cost (0 only reads the state).
    Store(Limit),
    /// Without a state: a negative `max_burst` leaves no room for anything but a quantity of
    /// 0 at `max_burst` −1, and nothing is ever stored.
    Stateless,
}

impl Throttle {
    /// Reads `CL.THROTTLE`'s arguments (`args` without the command's name).
    ///
    /// # Errors
    ///
    /// redis-cell's own errors, word for word: a wrong count of arguments, a number that is
    /// no `i64`.
    pub(crate) fn parse(args: &[Bytes]) -> Result<Throttle, Reply> {
        if !(4..=5).contains(&args.len()) {
            return Err(cell_error("Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"));
        }
        let quantity = args.get(4).map_or(Ok(1), integer)?;
        Ok(Throttle {
            key: args[0].clone(),
            max_burst: integer(&args[1])?,
            count: integer(&args[2])?,
            period: integer(&args[3])?,
            quantity,
        })
    }

    /// redis-cell's rate for these arguments.
    ///
    /// # Errors
    ///
    /// `Zero rates are not supported` when the interval comes out as 0 ns.
    pub(crate) fn rate(&self) -> Result<Rate, Reply> {
        let period_ns = i128::from(self.period) * i128::from(NANOS_PER_SECOND);
        // `as` saturates, as in redis-cell (`Rate::per_period`).
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let interval =
            if self.count == 0 || period_ns == 0 { 0 } else { (period_ns as f64 / self.count as f64) as i64 };
        if interval == 0 {
            return Err(cell_error("Zero rates are not supported"));
        }
        let limit = self.max_burst.wrapping_add(1);
        Ok(Rate { interval, tolerance: interval.wrapping_mul(limit), limit })
    }

    /// How the call is decided with `rate`.
    ///
    /// # Errors
    ///
    /// The arguments leave what Sluice can decide exactly (see the module's documentation).
    pub(crate) fn plan(&self, rate: Rate) -> Result<Plan, Reply> {
        if rate.interval < 0 {
            return Err(Reply::error("CL.THROTTLE: count and period must have one sign (a negative rate)"));
        }
        if self.quantity < 0 {
            return Err(Reply::error("CL.THROTTLE: quantity must not be negative"));
        }
        if rate.interval < 1_000 {
            return Err(Reply::error("CL.THROTTLE: period / count is under 1 µs, Sluice's resolution"));
        }
        let Ok(burst) = u64::try_from(self.max_burst) else { return Ok(Plan::Stateless) };
        // Truncated, as redis-cell's `remaining` reads the interval (`whole_microseconds`).
        let micros = u64::try_from(rate.interval / 1_000).unwrap_or(u64::MAX);
        let bucket = LeakyBucket::new(Duration::from_micros(micros), burst, LeakMode::NoDelay)
            .map_err(|_| Reply::error("CL.THROTTLE: (max_burst + 1) × period / count must be below 2^53 µs"))?;
        Ok(Plan::Store(Limit::new(LIMIT_NAME, bucket)))
    }

    /// The reply, from the store's decision for [`Plan::Store`].
    pub(crate) fn reply(&self, rate: Rate, decision: &Decision) -> [i64; 5] {
        let nanos = |wait: Duration| i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX);
        let ttl = nanos(decision.reset_after);
        // A quantity of 0 is never limited in redis-cell: it only reads the state.
        if self.quantity == 0 || decision.allowed {
            return [0, rate.limit, remaining(rate, ttl), -1, seconds(ttl)];
        }
        let retry_after = match decision.retry_after {
            Some(RetryAfter::After(wait)) => seconds(nanos(wait)),
            Some(RetryAfter::Never) | None => -1,
        };
        [1, rate.limit, remaining(rate, ttl), retry_after, seconds(ttl)]
    }

    /// The reply for [`Plan::Stateless`]: redis-cell's arithmetic on a key never stored.
    pub(crate) fn stateless_reply(&self, rate: Rate) -> [i64; 5] {
        let increment = rate.interval.wrapping_mul(self.quantity);
        if rate.tolerance.wrapping_sub(increment) < 0 {
            // Limited; `increment > tolerance` there, so no wait makes it pass.
            return [1, rate.limit, remaining(rate, 0), -1, 0];
        }
        [0, rate.limit, remaining(rate, increment), -1, seconds(increment)]
    }
}

/// `remaining` for a state `ttl` ns ahead of now, as redis-cell computes it.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
pub(crate) fn remaining(rate: Rate, ttl: i64) -> i64 {
    let next = rate.tolerance.wrapping_sub(ttl);
    if next <= rate.interval.wrapping_neg() {
        return 0;
    }
    ((next / 1_000) as f64 / (rate.interval / 1_000) as f64) as i64
}

/// Whole seconds of `nanos`, plus one when a millisecond or more is left over (0.4.0 on).
pub(crate) fn seconds(nanos: i64) -> i64 {
    let whole = nanos / NANOS_PER_SECOND;
    if (nanos % NANOS_PER_SECOND) / 1_000_000 > 0 { whole + 1 } else { whole }
}

/// An argument read as `str::parse::<i64>` reads it (a leading `+` is taken).
fn integer(arg: &Bytes) -> Result<i64, Reply> {
    let text = String::from_utf8_lossy(arg);
    text.parse().map_err(|_| cell_error(&format!("Couldn't parse as integer: {text}")))
}

/// An error as redis-cell replies it: `-Cell error: <message>`.
fn cell_error(message: &str) -> Reply {
    Reply::Error(format!("Cell error: {message}"))
}

#[cfg(test)]
mod tests;
