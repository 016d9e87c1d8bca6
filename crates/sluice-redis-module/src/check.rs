//! One check of one or several limits, all or nothing: the twin of the scripts' drivers
//! (`lua/single.lua`, `lua/check.lua`), pure: states in, reply and writes out.

use crate::args::Check;
use crate::layout::{Layout, Malformed, micros, pack};
use crate::sliding_log::{self, Log};
use crate::write::{Write, Writes};
use sluice_core::{Decision, Policy, RetryAfter, Timestamp};

/// What a check answers and writes.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The packed reply: `now`, seven fields per limit, Redis `TIME`; empty past the deadline.
    pub(crate) reply: Vec<u8>,
    /// Per key index (the first of a key listed twice), its writes.
    pub(crate) writes: Vec<(usize, Writes)>,
}

/// Why a check answers with an error, writing nothing.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The key of this limit (0-based) holds a value the scripts would not have written.
    BadState(usize),
    /// This limit's sliding log would outgrow a Redis string.
    TooLong(usize),
}

/// Runs `check` on `states` (one per limit: the key's name and its value, `None` when it has
/// no key) at Redis time `clock` (µs).
///
/// # Errors
///
/// When a key holds a value the scripts would not have written, or a sliding log would
/// outgrow a Redis string; nothing is written then.
pub(crate) fn run(check: &Check, states: &[(&[u8], Option<&[u8]>)], clock: u64) -> Result<Outcome, Refusal> {
    if check.deadline.is_some_and(|deadline| clock > deadline) {
        return Ok(Outcome { reply: Vec::new(), writes: Vec::new() });
    }
    let now = check.now.unwrap_or(clock);
    let judged = check
        .policies
        .iter()
        .zip(states)
        .enumerate()
        .map(|(limit, (policy, (_, raw)))| {
            decide(policy, *raw, now, check.cost).map_err(|Malformed| Refusal::BadState(limit))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let admitted = judged.iter().all(|(fields, _)| fields[0] == 1);
    let mut reply = pack(&[now]);
    let mut writes = Vec::new();
    for (index, (fields, pending)) in judged.iter().enumerate() {
        // A limit listed twice is one state: record the request once.
        let first = !states[..index].iter().any(|(name, _)| *name == states[index].0);
        if first {
            let key_writes = pending.record(admitted, check).map_err(|_| Refusal::TooLong(index))?;
            if !key_writes.is_empty() {
                writes.push((index, key_writes));
            }
        }
        reply.extend(fields.iter().flat_map(|&field| double(field)));
    }
    reply.extend(pack(&[clock]));
    Ok(Outcome { reply, writes })
}

/// A judged limit, not yet recorded.
#[derive(Debug)]
enum Pending<'a> {
    /// The value to store if the request is admitted, and µs until it is fresh again.
    Replace(Option<(Vec<u8>, u64)>),
    Log(sliding_log::Params, sliding_log::Plan<'a>),
}

impl Pending<'_> {
    /// The writes of the judged request, once every limit has answered.
    fn record(&self, admitted: bool, check: &Check) -> Result<Writes, sliding_log::TooLong> {
        match self {
            Pending::Replace(Some((value, expires_in))) if admitted => {
                Ok(vec![Write::Set { value: value.clone(), ttl_ms: ttl_ms(check, *expires_in) }])
            }
            Pending::Replace(_) => Ok(Vec::new()),
            Pending::Log(params, plan) => {
                let mut writes = Vec::new();
                sliding_log::record(*params, plan, admitted, ttl_ms(check, params.window), &mut writes)?;
                Ok(writes)
            }
        }
    }
}

/// The decision of `policy` on the state `raw` at `now`: the seven reply fields and what
/// `record` will need. The one `match` over the algorithms.
fn decide<'a>(
    policy: &Policy,
    raw: Option<&'a [u8]>,
    now: u64,
    cost: u64,
) -> Result<([i64; 7], Pending<'a>), Malformed> {
    match policy {
        Policy::SlidingLog(log) => {
            let params = sliding_log::Params { n: log.limit(), window: micros(log.window()), variant: log.variant() };
            let (fields, plan) = sliding_log::decide(params, Log::read(raw, params.n)?, now, cost);
            Ok((fields, Pending::Log(params, plan)))
        }
        Policy::FixedWindow(algorithm) => decide_core(algorithm, raw, now, cost),
        Policy::SlidingWindow(algorithm) => decide_core(algorithm, raw, now, cost),
        Policy::TokenBucket(algorithm) => decide_core(algorithm, raw, now, cost),
        Policy::LeakyBucket(algorithm) => decide_core(algorithm, raw, now, cost),
    }
}

/// The core's own `decide` on a state whose layout is its core state. What an admitted
/// request stores is the core's `record` of it, fresh again after the decision's
/// `reset_after` (the scripts' TTL for these algorithms).
fn decide_core<A: Layout>(
    algorithm: &A,
    raw: Option<&[u8]>,
    now: u64,
    cost: u64,
) -> Result<([i64; 7], Pending<'static>), Malformed> {
    let state = algorithm.read(raw)?;
    let at = algorithm.judged_at(&state, now);
    let (decision, plan) = algorithm.decide(&state, Timestamp::from_micros(now), cost);
    let replacement = (decision.allowed && cost > 0).then(|| {
        let mut next = state.clone();
        algorithm.record(&mut next, plan, true);
        (algorithm.write(&next), micros(decision.reset_after))
    });
    Ok((fields(&decision, at), Pending::Replace(replacement)))
}

/// A decision as the scripts reply it.
fn fields(decision: &Decision, at: u64) -> [i64; 7] {
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let retry_after = match decision.retry_after {
        None => -1,
        Some(RetryAfter::Never) => -2,
        Some(RetryAfter::After(wait)) => signed(micros(wait)),
    };
    [
        i64::from(decision.allowed),
        signed(decision.limit),
        signed(decision.remaining),
        signed(micros(decision.reset_after)),
        retry_after,
        signed(micros(decision.delay)),
        signed(at),
    ]
}

/// The TTL (ms) of a state fresh again in `expires_in` µs (common.lua's `ttl_ms`): rounded
/// up to whole ms, plus the clock skew allowed, at least the floor.
fn ttl_ms(check: &Check, expires_in: u64) -> u64 {
    (check.extra_ms + expires_in.div_ceil(1000)).max(check.min_ttl_ms)
}

/// One reply field (an integer below 2^53 in magnitude, so exact).
fn double(field: i64) -> [u8; 8] {
    #[allow(clippy::cast_precision_loss)]
    (field as f64).to_le_bytes()
}
