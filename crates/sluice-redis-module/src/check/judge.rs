//! One limit judged: its decision, as the scripts reply it, and what recording it writes.
//! The one `match` over the algorithms.

use crate::args::Check;
use crate::layout::{Bytes, Layout, Malformed, Stored, micros};
use crate::sliding_log::{self, Log};
use crate::write::{Write, Writes};
use sluice_core::algorithm::{Lease, LeaseTerms};
use sluice_core::{Decision, Policy, RetryAfter, Timestamp};

/// A judged limit: its reply fields, the stamp of its state, and what recording it writes.
#[derive(Debug)]
pub(super) struct Judged<'a> {
    /// Allowed (0|1), limit, remaining, reset_after, retry_after (−1 none, −2 never), delay,
    /// judged_at (−1 when the answer does not age with the clock).
    pub(super) fields: [i64; 7],
    /// The state's stamp once a lease is recorded (windows), else 0.
    pub(super) stamp: u64,
    pub(super) pending: Pending<'a>,
}

impl Judged<'_> {
    /// True when this limit allows the request.
    pub(super) fn allowed(&self) -> bool {
        self.fields[0] == 1
    }
}

/// A judged limit, not yet recorded.
#[derive(Debug)]
pub(super) enum Pending<'a> {
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
    pub(super) fn record(
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
                let ttl = |expires_in| ttl_ms(check, expires_in);
                sliding_log::record(params, &plan, admitted, &ttl, &mut |write| writes.push((index, write)))
            }
        }
    }
}

/// The decision of `policy` on the state `raw` at `now`, for `cost` and `lease`.
pub(super) fn judge<'a>(
    policy: &Policy,
    raw: Option<&'a [u8]>,
    now: u64,
    cost: u64,
    lease: Option<Lease>,
) -> Result<Judged<'a>, Malformed> {
    match policy {
        Policy::SlidingLog(log) => {
            let params = sliding_log::Params { n: log.limit(), window: micros(log.window()), variant: log.variant() };
            let (fields, plan) = sliding_log::decide(params, Log::read(raw, params.n)?, now, cost, lease);
            Ok(Judged { fields, stamp: 0, pending: Pending::Log(params, plan) })
        }
        Policy::FixedWindow(algorithm) => judge_core(algorithm, raw, now, cost, lease),
        Policy::SlidingWindow(algorithm) => judge_core(algorithm, raw, now, cost, lease),
        Policy::TokenBucket(algorithm) => judge_core(algorithm, raw, now, cost, lease),
        Policy::LeakyBucket(algorithm) => judge_core(algorithm, raw, now, cost, lease),
    }
}

/// The core's own `decide` (or `decide_leased`) on a state whose layout is its core state.
/// What a recorded request stores is the core's `record` of it, fresh again when its layout
/// says (the scripts' TTL). A request is recorded when it is admitted, or in any case where
/// the algorithm records rejections (`attempts`). A window's state granting a lease is
/// stamped, unless it was already.
fn judge_core<A: Layout>(
    algorithm: &A,
    raw: Option<&[u8]>,
    now: u64,
    cost: u64,
    lease: Option<Lease>,
) -> Result<Judged<'static>, Malformed> {
    let Stored { mut state, mut stamp } = algorithm.read(raw)?;
    let judged = algorithm.judged_at(&state, now);
    let at = Timestamp::from_micros(now);
    let (decision, plan) = match lease {
        Some(lease) => algorithm.decide_leased(&state, at, cost, lease),
        None => algorithm.decide(&state, at, cost),
    };
    if lease.is_some() && stamp == 0 && matches!(algorithm.lease_terms(), LeaseTerms::Debited { .. }) {
        stamp = now + 1;
    }
    let always = algorithm.records_rejections();
    let replacement = (cost > 0 && (decision.allowed || always)).then(|| {
        algorithm.record(&mut state, plan, true);
        let expires_in = algorithm.expires_in(&state, micros(decision.reset_after), judged.at);
        (algorithm.write(&Stored { state, stamp }), expires_in)
    });
    Ok(Judged { fields: fields(&decision, judged.field()), stamp, pending: Pending::Replace { replacement, always } })
}

/// A decision as the scripts reply it, judged at `at` (−1: its answer does not age).
fn fields(decision: &Decision, at: i64) -> [i64; 7] {
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
        at,
    ]
}

/// The TTL (ms) of a state of `check` fresh again in `expires_in` µs.
fn ttl_ms(check: &Check, expires_in: u64) -> u64 {
    ttl(check.extra_ms, check.min_ttl_ms, expires_in)
}

/// The TTL (ms) of a state fresh again in `expires_in` µs (ttl.lua's `ttl_ms`): rounded
/// up to whole ms, plus the clock skew allowed (`extra_ms`), at least the floor.
pub(crate) fn ttl(extra_ms: u64, min_ttl_ms: u64, expires_in: u64) -> u64 {
    (extra_ms + expires_in.div_ceil(1000)).max(min_ttl_ms)
}
