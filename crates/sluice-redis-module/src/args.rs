//! The commands' arguments: where their keys are, and the packed arguments the Lua scripts
//! take (`crates/sluice-redis/lua/common.lua`, `lua/give_back_args.lua`), validated before
//! anything is read or written.

use sluice_core::algorithm::Lease;
use sluice_core::{EXACT_LIMIT, Policy, Receipt, Timestamp, WirePolicy};
use smallvec::SmallVec;
use std::cell::RefCell;

/// Bytes of the packed argument before the first limit: `now`, `cost`, `extra_ms`, `min_ttl_ms`.
const HEAD: usize = 32;
/// The same with a lease: `lease` units and its `period_us` after them.
const LEASE_HEAD: usize = 48;
/// Bytes per limit: algorithm id and `p1..p4`.
const PER_LIMIT: usize = 40;
/// Bytes of the optional deadline.
const DEADLINE: usize = 8;
/// Bytes of the give-back's argument before the first limit: `now`, `leased`, `unspent`,
/// `extra_ms`, `min_ttl_ms`.
const GIVE_BACK_HEAD: usize = 40;
/// Bytes per limit of the give-back: `debited_in`, `stamp`, algorithm id and `p1..p4`.
const GIVE_BACK_PER_LIMIT: usize = 56;

/// Whether `packed` bytes are a check's packed argument for `keys` limits: `32 + 40 L`, or
/// `48 + 40 L` with a lease (`L ≥ 1`, so at least 72 bytes: never a deadline's 8).
fn packs(keys: usize, packed: usize) -> bool {
    keys >= 1 && (packed == HEAD + PER_LIMIT * keys || packed == LEASE_HEAD + PER_LIMIT * keys)
}

/// Where the keys are among a check's `args` arguments (the command name excluded), from
/// the lengths of the last two (`last`, and `before_last` when there are two): `Some(n)` for
/// the first `n`, `None` when the arguments have neither shape.
///
/// `<key> [<key> ...] <packed> [<deadline>]`: the packed argument's length, `32 + 40 L` (or
/// `48 + 40 L` with a lease), names its number of limits `L`, one per key, so the two shapes
/// cannot be confused (a deadline is 8 bytes, a packed argument at least 72). Redis asks for
/// the key positions (Cluster slot checks, ACL key patterns) with the same arguments, so
/// both use this one function.
pub(crate) fn key_count(args: usize, last: usize, before_last: usize) -> Option<usize> {
    if args >= 2 && packs(args - 1, last) {
        Some(args - 1)
    } else if args >= 3 && last == DEADLINE && packs(args - 2, before_last) {
        Some(args - 2)
    } else {
        None
    }
}

/// Where the keys are among a give-back's `args` arguments (the command name excluded), from
/// the last one's length: `<key> [<key> ...] <packed>`, `packed` being `40 + 56 L` bytes.
pub(crate) fn give_back_key_count(args: usize, last: usize) -> Option<usize> {
    let keys = args.checked_sub(1).filter(|&keys| keys >= 1)?;
    (last == GIVE_BACK_HEAD + GIVE_BACK_PER_LIMIT * keys).then_some(keys)
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
    /// The lease asked with the request, when one is: its units, and the period (µs) they
    /// may be spent for after the decision.
    pub(crate) lease: Option<(u64, u64)>,
    /// One policy per key, in the keys' order.
    pub(crate) policies: SmallVec<[Policy; 2]>,
    /// Redis `TIME` (µs) past which nothing is written and the reply is empty.
    pub(crate) deadline: Option<u64>,
}

impl Check {
    /// True when a lease is asked: the reply then says whether it was granted.
    pub(crate) fn lease_asked(&self) -> bool {
        self.lease.is_some_and(|(units, _)| units > 0)
    }

    /// The lease to decide with the request at `now` (the time it is decided at), when one
    /// is asked with a cost: its deadline is `now` plus the period.
    pub(crate) fn lease_at(&self, now: u64) -> Option<Lease> {
        let (units, period) = self.lease.filter(|_| self.lease_asked() && self.cost > 0)?;
        Some(Lease { units, deadline: Timestamp::from_micros(now.saturating_add(period)) })
    }
}

/// A give-back, as its packed argument describes it (`lua/give_back_args.lua`).
#[derive(Debug)]
pub(crate) struct GiveBack {
    /// The caller's time (µs), or `None` for Redis `TIME` (`now = -1`).
    pub(crate) now: Option<u64>,
    /// The units the lease granted.
    pub(crate) leased: u64,
    /// The units given back.
    pub(crate) unspent: u64,
    pub(crate) extra_ms: u64,
    pub(crate) min_ttl_ms: u64,
    /// One receipt and policy per key, in the keys' order.
    pub(crate) limits: SmallVec<[(Receipt, Policy); 2]>,
}

/// Parses and validates the packed argument and the optional deadline: every number must be
/// an exact integer in its range and every limit a policy the configuration could have built,
/// so that what follows can neither divide by zero nor leave the range where doubles are exact.
///
/// # Errors
///
/// A message for the error reply, naming the first problem.
pub(crate) fn parse(packed: &[u8], deadline: Option<&[u8]>) -> Result<Check, String> {
    let head = if packed.len() % PER_LIMIT == LEASE_HEAD % PER_LIMIT { LEASE_HEAD } else { HEAD };
    if !packs((packed.len().saturating_sub(head)) / PER_LIMIT, packed.len()) {
        return Err(format!("the packed argument has {} bytes, not 32 (48 with a lease) + 40 per limit", packed.len()));
    };
    let number = |index: usize| double(packed, index);
    let now = number(0)?;
    let now = if now == -1.0 { None } else { Some(integer(now, "now", 0, EXACT_LIMIT - 1)?) };
    let cost = integer(number(1)?, "cost", 0, EXACT_LIMIT)?;
    let extra_ms = integer(number(2)?, "extra_ms", 0, EXACT_LIMIT - 1)?;
    let min_ttl_ms = integer(number(3)?, "min_ttl_ms", 1, EXACT_LIMIT - 1)?;
    let lease = match head {
        LEASE_HEAD => {
            Some((integer(number(4)?, "lease", 0, EXACT_LIMIT)?, integer(number(5)?, "period", 0, EXACT_LIMIT)?))
        }
        _ => None,
    };
    let policies = policies(&packed[head..], PER_LIMIT, 0)?;
    if lease.is_some_and(|(units, _)| units > 0)
        && let Some((limit, reason)) =
            policies.iter().enumerate().find_map(|(i, p)| Some(i).zip(p.lease_terms().refusal()))
    {
        return Err(format!("limit {} cannot be leased: {reason}", limit + 1));
    }
    let deadline = match deadline {
        None => None,
        Some(bytes) if bytes.len() == DEADLINE => Some(integer(double(bytes, 0)?, "deadline", 0, EXACT_LIMIT - 1)?),
        Some(bytes) => return Err(format!("the deadline has {} bytes, not 8", bytes.len())),
    };
    Ok(Check { now, cost, extra_ms, min_ttl_ms, lease, policies, deadline })
}

/// The policies of `specs`, one per `stride` bytes, each read from byte `at` of its own.
fn policies(specs: &[u8], stride: usize, at: usize) -> Result<SmallVec<[Policy; 2]>, String> {
    let mut policies = SmallVec::new();
    for (limit, spec) in specs.chunks_exact(stride).enumerate() {
        policies.push(built(&spec[at..at + PER_LIMIT]).map_err(|problem| format!("limit {}: {problem}", limit + 1))?);
    }
    Ok(policies)
}

/// Parses and validates a give-back's packed argument (as [`parse`] a check's).
///
/// # Errors
///
/// A message for the error reply, naming the first problem.
pub(crate) fn parse_give_back(packed: &[u8]) -> Result<GiveBack, String> {
    let limits = packed.len().checked_sub(GIVE_BACK_HEAD).filter(|rest| rest % GIVE_BACK_PER_LIMIT == 0 && *rest > 0);
    if limits.is_none() {
        return Err(format!("the packed argument has {} bytes, not 40 + 56 per limit", packed.len()));
    }
    let number = |index: usize| double(packed, index);
    let now = number(0)?;
    let now = if now == -1.0 { None } else { Some(integer(now, "now", 0, EXACT_LIMIT - 1)?) };
    let leased = integer(number(1)?, "leased", 0, EXACT_LIMIT)?;
    let unspent = integer(number(2)?, "unspent", 0, EXACT_LIMIT)?;
    let extra_ms = integer(number(3)?, "extra_ms", 0, EXACT_LIMIT - 1)?;
    let min_ttl_ms = integer(number(4)?, "min_ttl_ms", 1, EXACT_LIMIT - 1)?;
    let specs = &packed[GIVE_BACK_HEAD..];
    let policies = policies(specs, GIVE_BACK_PER_LIMIT, 16)?;
    let mut limits = SmallVec::new();
    for (spec, policy) in specs.chunks_exact(GIVE_BACK_PER_LIMIT).zip(policies) {
        let debited_in = integer(double(spec, 0)?, "debited_in", 0, EXACT_LIMIT - 1)?;
        let stamp = integer(double(spec, 1)?, "stamp", 0, EXACT_LIMIT - 1)?;
        limits.push((Receipt { debited_in, stamp }, policy));
    }
    Ok(GiveBack { now, leased, unspent, extra_ms, min_ttl_ms, limits })
}

/// The policy of one limit's 40 bytes (algorithm id and `p1..p4`).
fn limit_policy(spec: &[u8]) -> Result<Policy, String> {
    let field = |k: usize| double(spec, k);
    let id = integer(field(0)?, "algorithm id", 1, 255)?;
    let params = [field(1)?, field(2)?, field(3)?, field(4)?];
    let params = params.map(|p| integer(p, "parameter", 0, EXACT_LIMIT - 1));
    let [p1, p2, p3, p4] = params;
    // The core's wire form, read back through the algorithms' own constructors: a parameter
    // the configuration would refuse is refused here too.
    let wire = WirePolicy { algorithm: u8::try_from(id).unwrap_or(0), params: [p1?, p2?, p3?, p4?] };
    Policy::from_wire(wire).map_err(|error| error.to_string())
}

/// How many policies [`built`] keeps (per thread: Redis runs commands on one).
const CACHED: usize = 64;

/// A policy built before, and the bytes it was built from.
type Built = Option<([u8; PER_LIMIT], Policy)>;

thread_local! {
    /// Policies built from limits' bytes, by a hash of the bytes.
    static BUILT: RefCell<[Built; CACHED]> = const { RefCell::new([const { None }; CACHED]) };
}

/// [`limit_policy`], remembered: a limit checked before is not validated again (the core's
/// constructors check every parameter, and format their messages as they go). Only valid
/// policies are kept, each under its exact bytes, so a hit is what building would give.
fn built(spec: &[u8]) -> Result<Policy, String> {
    let Ok(bytes) = <[u8; PER_LIMIT]>::try_from(spec) else { return limit_policy(spec) };
    let slot = slot(&bytes);
    let hit = BUILT.with_borrow(|built| match &built[slot] {
        Some((held, policy)) if *held == bytes => Some(policy.clone()),
        _ => None,
    });
    if let Some(policy) = hit {
        return Ok(policy);
    }
    let policy = limit_policy(spec)?;
    BUILT.with_borrow_mut(|built| built[slot] = Some((bytes, policy.clone())));
    Ok(policy)
}

/// Where `bytes` are kept in [`BUILT`].
fn slot(bytes: &[u8; PER_LIMIT]) -> usize {
    let mut hash = 0u64;
    for word in bytes.chunks_exact(8) {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(word).unwrap_or_default());
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    usize::try_from(hash >> 58).unwrap_or_default() % CACHED
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
    if value.fract() == 0.0 && value >= min as f64 && value <= max as f64 {
        return Ok(value as u64);
    }
    Err(format!("{name} {value} is not an integer in {min}..={max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(numbers: &[f64]) -> Vec<u8> {
        numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
    }

    /// [`key_count`] of arguments of these lengths.
    fn keys(lengths: &[usize]) -> Option<usize> {
        let at = |back: usize| lengths.len().checked_sub(back).map_or(0, |index| lengths[index]);
        key_count(lengths.len(), at(1), at(2))
    }

    #[test]
    fn the_packed_argument_s_length_says_where_the_keys_end() {
        assert_eq!(keys(&[5, 72]), Some(1));
        assert_eq!(keys(&[5, 72, 8]), Some(1));
        assert_eq!(keys(&[5, 5, 112]), Some(2));
        assert_eq!(keys(&[5, 5, 112, 8]), Some(2));
        assert_eq!(keys(&[72]), None);
        assert_eq!(keys(&[5, 72, 9]), None);
        assert_eq!(keys(&[5, 112]), None);
        assert_eq!(keys(&[]), None);
    }

    #[test]
    fn a_lease_head_is_told_apart_by_the_length() {
        assert_eq!(keys(&[5, 88]), Some(1));
        assert_eq!(keys(&[5, 5, 128, 8]), Some(2));
        assert_eq!(keys(&[5, 88, 88]), None);
        let check = parse(&packed(&[-1.0, 1.0, 0.0, 1.0, 3.0, 100.0, 2.0, 10.0, 1000.0, 0.0, 0.0]), None).unwrap();
        assert_eq!(check.lease, Some((3, 100)));
        assert_eq!(check.lease_at(7).map(|lease| (lease.units, lease.deadline.as_micros())), Some((3, 107)));
        let peek = parse(&packed(&[-1.0, 0.0, 0.0, 1.0, 3.0, 100.0, 2.0, 10.0, 1000.0, 0.0, 0.0]), None).unwrap();
        assert!(peek.lease_asked() && peek.lease_at(7).is_none(), "a peek takes no lease");
        // The attempts variant of the sliding log cannot be leased exactly.
        let attempts = packed(&[-1.0, 1.0, 0.0, 1.0, 3.0, 100.0, 1.0, 10.0, 1000.0, 1.0, 0.0]);
        assert!(parse(&attempts, None).unwrap_err().contains("cannot be leased"));
    }

    #[test]
    fn a_give_back_names_each_limits_receipt_and_policy() {
        assert_eq!(give_back_key_count(2, 96), Some(1));
        assert_eq!(give_back_key_count(3, 152), Some(2));
        assert_eq!(give_back_key_count(2, 72), None);
        assert_eq!(give_back_key_count(1, 96), None);
        let back = parse_give_back(&packed(&[-1.0, 5.0, 2.0, 0.0, 1.0, 900.0, 7.0, 2.0, 10.0, 1000.0, 0.0, 0.0]));
        let back = back.unwrap();
        assert_eq!((back.now, back.leased, back.unspent), (None, 5, 2));
        assert_eq!(back.limits[0].0, Receipt { debited_in: 900, stamp: 7 });
        assert!(parse_give_back(&packed(&[0.0, 5.0, 2.0, 0.0, 1.0, 0.5, 7.0, 2.0, 10.0, 1000.0, 0.0, 0.0])).is_err());
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
