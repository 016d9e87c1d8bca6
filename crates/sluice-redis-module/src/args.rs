//! The command's arguments: where its keys are, and the packed argument the Lua scripts take
//! (`crates/sluice-redis/lua/common.lua`), validated before anything is read or written.

use sluice_core::{
    Alignment, EXACT_LIMIT, FixedWindow, LeakMode, LeakyBucket, Policy, SlidingLog, SlidingLogVariant, SlidingWindow,
    TokenBucket, TokenBucketSettings,
};
use std::time::Duration;

/// Bytes of the packed argument before the first limit: `now`, `cost`, `extra_ms`, `min_ttl_ms`.
const HEAD: usize = 32;
/// Bytes per limit: algorithm id and `p1..p4`.
const PER_LIMIT: usize = 40;
/// Bytes of the optional deadline.
const DEADLINE: usize = 8;

/// Where the keys are among a command's arguments (the command name excluded): `Some(n)` for
/// the first `n`, `None` when the arguments have neither shape.
///
/// `<key> [<key> ...] <packed> [<deadline>]`: the packed argument's length, `32 + 40 L`, names
/// its number of limits `L`, one per key, so the two shapes cannot be confused (a deadline is
/// 8 bytes, a packed argument at least 72). Redis asks for the key positions (Cluster slot
/// checks, ACL key patterns) with the same arguments, so both use this one function.
pub(crate) fn key_count(lengths: &[usize]) -> Option<usize> {
    let packs = |keys: usize, packed: usize| keys >= 1 && packed == HEAD + PER_LIMIT * keys;
    match *lengths {
        [.., packed] if packs(lengths.len() - 1, packed) => Some(lengths.len() - 1),
        [.., packed, DEADLINE] if packs(lengths.len() - 2, packed) => Some(lengths.len() - 2),
        _ => None,
    }
}

/// A check, as the packed argument and the deadline describe it.
#[derive(Debug)]
pub(crate) struct Check {
    /// The caller's time (µs), or `None` for Redis `TIME` (`now = -1`).
    pub(crate) now: Option<u64>,
    pub(crate) cost: u64,
    /// Added to every TTL (ms): the clock skew allowed between servers.
    pub(crate) extra_ms: u64,
    /// The smallest TTL (ms), at least 1.
    pub(crate) min_ttl_ms: u64,
    /// One policy per key, in the keys' order.
    pub(crate) policies: Vec<Policy>,
    /// Redis `TIME` (µs) past which nothing is written and the reply is empty.
    pub(crate) deadline: Option<u64>,
}

/// Parses and validates the packed argument and the optional deadline: every number must be
/// an exact integer in its range and every limit a policy the configuration could have built,
/// so that what follows can neither divide by zero nor leave the range where doubles are exact.
///
/// # Errors
///
/// A message for the error reply, naming the first problem.
pub(crate) fn parse(packed: &[u8], deadline: Option<&[u8]>) -> Result<Check, String> {
    let limits = packed.len().checked_sub(HEAD).filter(|rest| rest % PER_LIMIT == 0 && *rest > 0);
    let Some(limits) = limits.map(|rest| rest / PER_LIMIT) else {
        return Err(format!("the packed argument has {} bytes, not 32 + 40 per limit", packed.len()));
    };
    let number = |index: usize| double(packed, index);
    let now = number(0)?;
    let now = if now == -1.0 { None } else { Some(integer(now, "now", 0, EXACT_LIMIT - 1)?) };
    let cost = integer(number(1)?, "cost", 0, EXACT_LIMIT)?;
    let extra_ms = integer(number(2)?, "extra_ms", 0, EXACT_LIMIT - 1)?;
    let min_ttl_ms = integer(number(3)?, "min_ttl_ms", 1, EXACT_LIMIT - 1)?;
    let policies = (0..limits)
        .map(|limit| {
            let field = |k: usize| number(4 + 5 * limit + k);
            let id = integer(field(0)?, "algorithm id", 1, 5)?;
            let params = [field(1)?, field(2)?, field(3)?, field(4)?];
            let params = params.map(|p| integer(p, "parameter", 0, EXACT_LIMIT - 1));
            let [p1, p2, p3, p4] = params;
            policy(id, [p1?, p2?, p3?, p4?]).map_err(|problem| format!("limit {}: {problem}", limit + 1))
        })
        .collect::<Result<_, _>>()?;
    let deadline = match deadline {
        None => None,
        Some(bytes) if bytes.len() == DEADLINE => Some(integer(double(bytes, 0)?, "deadline", 0, EXACT_LIMIT - 1)?),
        Some(bytes) => return Err(format!("the deadline has {} bytes, not 8", bytes.len())),
    };
    Ok(Check { now, cost, extra_ms, min_ttl_ms, policies, deadline })
}

/// The `index`-th little-endian double of `bytes`.
fn double(bytes: &[u8], index: usize) -> Result<f64, String> {
    let field = bytes.get(8 * index..8 * index + 8).and_then(|field| <[u8; 8]>::try_from(field).ok());
    field.map(f64::from_le_bytes).ok_or_else(|| format!("no number {index}"))
}

/// `value` as an integer in `min..=max`, if it is exactly one.
fn integer(value: f64, name: &str, min: u64, max: u64) -> Result<u64, String> {
    // Both bounds are below 2^53, so they and every integer between are exact doubles, and
    // the cast of a value in range is exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    if value.fract() == 0.0 && value >= min as f64 && value <= max as f64 {
        return Ok(value as u64);
    }
    Err(format!("{name} {value} is not an integer in {min}..={max}"))
}

/// The policy that algorithm `id` with parameters `p` stands for (`script.rs`'s `script_args`
/// read backwards), through the core's constructors: a parameter the configuration would
/// refuse is refused here too. Unused parameters must be 0, and flags 0 or 1.
fn policy(id: u64, p: [u64; 4]) -> Result<Policy, String> {
    let us = Duration::from_micros;
    let flag = |value: u64| match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("a flag is {other}, not 0 or 1")),
    };
    let unused = |value: u64| if value == 0 { Ok(()) } else { Err(format!("an unused parameter is {value}, not 0")) };
    let policy = match id {
        1 => {
            let variant = if flag(p[2])? { SlidingLogVariant::Attempts } else { SlidingLogVariant::Accepted };
            unused(p[3])?;
            SlidingLog::new(p[0], us(p[1]), variant).map(Policy::from)
        }
        2 => {
            let alignment = if flag(p[2])? { Alignment::Anchored } else { Alignment::Aligned };
            FixedWindow::new(p[0], us(p[1]), alignment, us(p[3])).map(Policy::from)
        }
        3 => {
            unused(p[3])?;
            let window = p[1].checked_mul(p[2]).ok_or("the window (width × buckets) overflows")?;
            SlidingWindow::new(p[0], us(window), p[2]).map(Policy::from)
        }
        4 => {
            unused(p[3])?;
            let settings = TokenBucketSettings { capacity: p[0], refill_amount: p[1], refill_interval: us(p[2]) };
            TokenBucket::new(settings).map(Policy::from)
        }
        _ => {
            let mode = if flag(p[2])? { LeakMode::Delay } else { LeakMode::NoDelay };
            unused(p[3])?;
            LeakyBucket::new(us(p[0]), p[1], mode).map(Policy::from)
        }
    };
    policy.map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(numbers: &[f64]) -> Vec<u8> {
        numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
    }

    #[test]
    fn the_packed_argument_s_length_says_where_the_keys_end() {
        assert_eq!(key_count(&[5, 72]), Some(1));
        assert_eq!(key_count(&[5, 72, 8]), Some(1));
        assert_eq!(key_count(&[5, 5, 112]), Some(2));
        assert_eq!(key_count(&[5, 5, 112, 8]), Some(2));
        assert_eq!(key_count(&[72]), None);
        assert_eq!(key_count(&[5, 72, 9]), None);
        assert_eq!(key_count(&[5, 112]), None);
        assert_eq!(key_count(&[]), None);
    }

    #[test]
    fn a_valid_argument_names_its_policies() {
        let check = parse(&packed(&[-1.0, 1.0, 0.0, 1.0, 2.0, 10.0, 1000.0, 0.0, 0.0]), None).unwrap();
        assert_eq!(check.now, None);
        assert!(matches!(check.policies[..], [Policy::FixedWindow(_)]));
        let check = parse(&packed(&[5.0, 1.0, 0.0, 1.0, 5.0, 100.0, 2.0, 1.0, 0.0]), Some(&7.0f64.to_le_bytes()));
        assert_eq!(check.unwrap().deadline, Some(7));
    }

    #[test]
    fn malformed_numbers_and_policies_are_refused() {
        let refused = |numbers: &[f64]| parse(&packed(numbers), None).is_err();
        assert!(refused(&[0.5, 1.0, 0.0, 1.0, 2.0, 10.0, 1000.0, 0.0, 0.0])); // a fraction
        assert!(refused(&[-2.0, 1.0, 0.0, 1.0, 2.0, 10.0, 1000.0, 0.0, 0.0])); // negative time
        assert!(refused(&[0.0, f64::NAN, 0.0, 1.0, 2.0, 10.0, 1000.0, 0.0, 0.0]));
        assert!(refused(&[0.0, 1.0, 0.0, 0.0, 2.0, 10.0, 1000.0, 0.0, 0.0])); // PX 0
        assert!(refused(&[0.0, 1.0, 0.0, 1.0, 6.0, 10.0, 1000.0, 0.0, 0.0])); // unknown id
        assert!(refused(&[0.0, 1.0, 0.0, 1.0, 2.0, 10.0, 0.0, 0.0, 0.0])); // window 0
        assert!(refused(&[0.0, 1.0, 0.0, 1.0, 2.0, 10.0, 1000.0, 2.0, 0.0])); // flag 2
        assert!(refused(&[0.0, 1.0, 0.0, 1.0, 3.0, 10.0, 4e15, 10.0, 0.0])); // width × buckets
        assert!(refused(&[0.0, 1.0, 0.0, 1.0, 4.0, 10.0, 1.0, 1.0, 3.0])); // unused p4
        assert!(parse(&packed(&[0.0, 1.0, 0.0, 1.0]), None).is_err());
        assert!(parse(&packed(&[0.0, 1.0, 0.0, 1.0, 2.0, 10.0, 1000.0, 0.0, 0.0]), Some(b"x")).is_err());
    }
}
