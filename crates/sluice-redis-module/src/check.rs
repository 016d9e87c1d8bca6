//! One check of one or several limits, all or nothing: the twin of the scripts' drivers
//! (`lua/single.lua`, `lua/check.lua`), pure: states in, reply and writes out.

use crate::args::Check;
use crate::layout::{Bytes, Layout, Malformed, micros};
use crate::sliding_log::{self, Log};
use crate::write::{Write, Writes};
use sluice_core::{Decision, Policy, RetryAfter, Timestamp};
use smallvec::{SmallVec, smallvec};

/// What a check answers and writes. (Checks of one or two limits fit on the stack: they
/// allocate nothing of their own.)
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The packed reply: `now`, seven fields per limit, Redis `TIME`; empty past the deadline.
    pub(crate) reply: SmallVec<[u8; 128]>,
    pub(crate) writes: Writes,
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
/// no key) at Redis time `clock` (µs), into `outcome` (empty when called).
///
/// # Errors
///
/// When a key holds a value the scripts would not have written, or a sliding log would
/// outgrow a Redis string; nothing is written then.
pub(crate) fn run(
    check: &Check,
    states: &[(&[u8], Option<&[u8]>)],
    clock: u64,
    outcome: &mut Outcome,
) -> Result<(), Refusal> {
    if check.deadline.is_some_and(|deadline| clock > deadline) {
        return Ok(());
    }
    let now = check.now.unwrap_or(clock);
    let mut judged: SmallVec<[([i64; 7], Pending<'_>); 2]> = SmallVec::new();
    for (limit, (policy, (_, raw))) in check.policies.iter().zip(states).enumerate() {
        judged.push(decide(policy, *raw, now, check.cost).map_err(|Malformed| Refusal::BadState(limit))?);
    }
    let admitted = judged.iter().all(|(fields, _)| fields[0] == 1);
    let length = 16 + 56 * judged.len();
    if length <= 128 {
        outcome.reply.extend_from_slice(&[0; 128][..length]);
    } else {
        outcome.reply = smallvec![0; length];
    }
    let mut numbers = outcome.reply.chunks_exact_mut(8);
    let mut put = |bytes: [u8; 8]| numbers.next().map(|slot| slot.copy_from_slice(&bytes));
    put(double_of(now));
    for (index, (fields, pending)) in judged.into_iter().enumerate() {
        // A limit listed twice is one state: record the request once.
        let first = !states[..index].iter().any(|(name, _)| *name == states[index].0);
        if first {
            pending.record(admitted, check, index, &mut outcome.writes).map_err(|_| Refusal::TooLong(index))?;
        }
        for field in fields {
            put(double(field));
        }
    }
    put(double_of(clock));
    Ok(())
}

/// A judged limit, not yet recorded.
#[derive(Debug)]
enum Pending<'a> {
    /// The value to store if the request is admitted (`always`: recorded either way), and
    /// µs until it is fresh again.
    Replace {
        replacement: Option<(Bytes, u64)>,
        always: bool,
    },
    Log(sliding_log::Params, sliding_log::Plan<'a>),
}

impl Pending<'_> {
    /// Adds the writes of the judged request of limit `index` to `writes`, once every limit
    /// has answered.
    fn record(
        self,
        admitted: bool,
        check: &Check,
        index: usize,
        writes: &mut Writes,
    ) -> Result<(), sliding_log::TooLong> {
        match self {
            Pending::Replace { replacement: Some((value, expires_in)), always } if admitted || always => {
                let write = Write::Set { value, ttl_ms: ttl_ms(check, expires_in) };
                writes.push((index, write));
                Ok(())
            }
            Pending::Replace { .. } => Ok(()),
            Pending::Log(params, plan) => {
                let ttl_ms = ttl_ms(check, params.window);
                sliding_log::record(params, &plan, admitted, ttl_ms, &mut |write| writes.push((index, write)))
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

/// The core's own `decide` on a state whose layout is its core state. What a recorded
/// request stores is the core's `record` of it, fresh again after the decision's
/// `reset_after` (the scripts' TTL for these algorithms). A request is recorded when it is
/// admitted, or in any case where the algorithm records rejections (`attempts`).
fn decide_core<A: Layout>(
    algorithm: &A,
    raw: Option<&[u8]>,
    now: u64,
    cost: u64,
) -> Result<([i64; 7], Pending<'static>), Malformed> {
    let mut state = algorithm.read(raw)?;
    let at = algorithm.judged_at(&state, now);
    let (decision, plan) = algorithm.decide(&state, Timestamp::from_micros(now), cost);
    let always = algorithm.records_rejections();
    let replacement = (cost > 0 && (decision.allowed || always)).then(|| {
        algorithm.record(&mut state, plan, true);
        (algorithm.write(&state), micros(decision.reset_after))
    });
    Ok((fields(&decision, at), Pending::Replace { replacement, always }))
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
    (field as f64).to_le_bytes()
}

/// A time in the reply (below 2^53, so exact).
fn double_of(micros: u64) -> [u8; 8] {
    (micros as f64).to_le_bytes()
}
