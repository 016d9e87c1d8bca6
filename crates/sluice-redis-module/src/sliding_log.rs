//! The sliding log on its Lua layout (`crates/sluice-redis/lua/sliding_log.lua`), step for
//! step: the core keeps its log in memory in a layout of its own, so this module is the
//! script's twin, not the core's. Change all three together.
//!
//! A log of `N <= 32` entries is a string of 8-byte timestamps ('<d', µs), oldest first,
//! rewritten whole. Above, it is a ring: a 32-byte header '<ddI4I4I4I4' (newest µs, oldest
//! held µs, len, head, capacity, leases held), then `capacity` slots, written in place
//! (`SETRANGE`) and rewritten straightened when its capacity doubles or halves. Leases are
//! kept beside the slots (`holding.rs` decides with them): '<dd' pairs (deadline, units)
//! after the slots, then, in a whole log, −k. Reads cost nothing here (the state is borrowed
//! from Redis's own buffer), so only the writes follow the script's calls, which is also
//! what is replicated.

mod holding;
mod log;
mod write;

pub(crate) use log::Log;
pub(crate) use write::TooLong;

use crate::layout::Bytes;
use crate::write::Write;
use holding::Answer;
use sluice_core::SlidingLogVariant;
use sluice_core::algorithm::{Hold, Holds, Lease, Returned};
use smallvec::SmallVec;

/// The sliding log policy as the script reads it: `p1 = N`, `p2 = window µs`, `p3 = attempts`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) n: u64,
    pub(crate) window: u64,
    pub(crate) variant: SlidingLogVariant,
}

/// What `record` needs: the time judged at, the cost, the live part of the log, and the
/// lease judged with the request.
#[derive(Debug, Clone)]
pub(crate) struct Plan<'a> {
    now: u64,
    cost: u64,
    first: usize,
    kept: u64,
    log: Log<'a>,
    lease: Option<Lease>,
}

/// The decision's seven fields (allowed, limit, remaining, reset_after, retry_after with
/// −1 none and −2 never, delay, judged_at) for `cost` (and `lease`) at `now`, and the plan.
pub(crate) fn decide(p: Params, log: Log<'_>, now: u64, cost: u64, lease: Option<Lease>) -> ([i64; 7], Plan<'_>) {
    // Time never runs backwards inside a state.
    let now = if log.len > 0 { now.max(log.newest) } else { now };
    let (first, kept) = log.first_live(p.window, now);
    let live = (log.len - first) as u64;
    let (allowed, remaining, reset_after, retry_after) = if log.holds.is_clear() && lease.is_none() {
        judge(&log, live, p, now, cost)
    } else {
        holding::judge(&log, live, p, now, cost, lease)
    };
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let fields = [i64::from(allowed), signed(p.n), signed(remaining), signed(reset_after), retry_after, 0, signed(now)];
    (fields, Plan { now, cost, first, kept: kept.unwrap_or_default(), log, lease })
}

/// The decision for `cost` at `now` on a log holding no lease, asking none, whose ring
/// holds `live` live entries.
fn judge(log: &Log<'_>, live: u64, p: Params, now: u64, cost: u64) -> Answer {
    let (n, window) = (p.n, p.window);
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let reset_now = if live > 0 { log.newest.saturating_add(window).saturating_sub(now) } else { 0 };
    if cost == 0 {
        return match live < n {
            true => (true, n - live, reset_now, -1),
            false => (false, 0, reset_now, signed(log.wait_for_rank(n, window, now))),
        };
    }
    if cost <= n && live + cost <= n {
        return (true, n - live - cost, window, -1);
    }
    match p.variant {
        SlidingLogVariant::Accepted if cost > n => (false, n - live, reset_now, -2),
        SlidingLogVariant::Accepted => {
            (false, n - live, reset_now, signed(log.wait_for_rank(n - cost + 1, window, now)))
        }
        SlidingLogVariant::Attempts if cost > n => (false, 0, window, -2),
        SlidingLogVariant::Attempts => {
            // The attempt itself is logged: the newest `cost` entries become `now`.
            let rank = n - cost + 1;
            let wait = if rank > cost { log.wait_for_rank(rank - cost, window, now) } else { window };
            (false, 0, window, signed(wait))
        }
    }
}

/// Logs the request planned by [`decide`] when it is `admitted` (or always, for `attempts`),
/// with the units of the leases whose deadline has passed (as entries at `now`), the leases
/// not yet out of the window and the one granted (at most 16: the two oldest
/// merge at the later deadline), and a TTL covering the
/// window and every lease's (`ttl` turns µs until fresh into ms): the script's `sl_record`.
///
/// # Errors
///
/// When the log would outgrow a Redis string; nothing is written then.
pub(crate) fn record(
    p: Params,
    plan: &Plan<'_>,
    admitted: bool,
    ttl: &dyn Fn(u64) -> u64,
    writes: &mut dyn FnMut(Write),
) -> Result<(), TooLong> {
    if plan.cost == 0 || !(admitted || p.variant == SlidingLogVariant::Attempts) {
        return Ok(());
    }
    let mut holds = plan.log.holds.clone();
    let held = holds.len();
    holds.drop_where(|hold| hold.deadline.saturating_add(p.window) <= plan.now);
    let ended = holds.take_until(plan.now);
    let mut changed = holds.len() != held;
    if let (true, Some(lease)) = (admitted, plan.lease) {
        holds.add_merging_oldest(Hold { deadline: lease.deadline.as_micros(), units: lease.units });
        changed = true;
    }
    let latest = holds.last_deadline().unwrap_or(plan.now).max(plan.now);
    let ttl_ms = ttl(latest + p.window - plan.now);
    write::record(p, plan, &fresh_entries(p, plan, &ended), (&holds, changed), ttl_ms, writes)
}

/// The entries the record logs, oldest first: the units of the `ended` leases, each at its
/// deadline or at the newest entry if later (a lease's deadline passed since the last
/// admission, which logged those before it; the log stays in time order), then the
/// request's at `plan.now`; the newest `n` of them (the script's `sl_ended_entries`).
fn fresh_entries(p: Params, plan: &Plan<'_>, ended: &[Hold]) -> SmallVec<[u64; 4]> {
    let log = &plan.log;
    let mut newest = if log.len > 0 { log.at(log.len - 1) } else { 0 };
    // On the stack for a request of up to four units and no lease ended: no allocation.
    let mut fresh = SmallVec::new();
    for hold in ended {
        newest = newest.max(hold.deadline);
        fresh.extend(std::iter::repeat_n(newest, usize::try_from(hold.units).unwrap_or(usize::MAX)));
    }
    fresh.extend(std::iter::repeat_n(plan.now, usize::try_from(plan.cost.min(p.n)).unwrap_or(usize::MAX)));
    let n = usize::try_from(p.n).unwrap_or(usize::MAX);
    fresh.drain(..fresh.len().saturating_sub(n));
    fresh
}

/// Takes a lease's unspent units out of the lease it names (`back.debited_in`, its
/// deadline) on the log stored as `raw`, at `back.now` (`SlidingLog::give_back`): the
/// spent ones stay logged there. Writes nothing when the log does not hold the lease.
///
/// # Errors
///
/// When the log is not one the scripts write.
pub(crate) fn give_back(
    p: Params,
    raw: Option<&[u8]>,
    back: Returned,
    ttl: &dyn Fn(u64) -> u64,
    writes: &mut dyn FnMut(Write),
) -> Result<(), crate::layout::Malformed> {
    let log = Log::read(raw, p.n)?;
    let mut holds = log.holds.clone();
    if !holds.take(back.debited_in, back.leased, back.unspent) {
        return Ok(());
    }
    holds.clear_ended();
    let newest = (log.len > 0).then_some(log.newest);
    let latest = newest.into_iter().chain(holds.last_deadline()).max();
    let expires_in = latest.map_or(0, |latest| (latest + p.window).saturating_sub(back.now.as_micros()));
    write::holds_only(&log, &holds, ttl(expires_in), writes);
    Ok(())
}

/// `holds` as stored after the slots: the pairs, then, in a whole log, −k.
fn holds_tail(holds: &Holds, whole: bool) -> Bytes {
    let mut bytes = Bytes::new();
    if holds.is_empty() {
        return bytes;
    }
    crate::layout::holds::write(holds, &mut bytes);
    if whole {
        bytes.extend_from_slice(&(-(holds.len() as f64)).to_le_bytes());
    }
    bytes
}
