//! The sliding log on its Lua layout (`crates/sluice-redis/lua/sliding_log.lua`), step for
//! step: the core keeps its log in memory in a layout of its own, so this file is the
//! script's twin, not the core's. Change all three together.
//!
//! A log of `N <= 32` entries is a string of 8-byte timestamps ('<d', µs), oldest first,
//! rewritten whole. Above, it is a ring: a 32-byte header '<ddI4I4I4I4' (newest µs, oldest
//! held µs, len, head, capacity, 0), then `capacity` slots, written in place (`SETRANGE`)
//! and rewritten straightened when its capacity doubles or halves. Reads cost nothing here
//! (the state is borrowed from Redis's own buffer), so only the writes follow the script's
//! calls, which is also what is replicated.

use crate::layout::{Bytes, Malformed, double, number};
use crate::write::Write;
use sluice_core::SlidingLogVariant;

/// Logs of at most this many entries are stored whole.
const WHOLE: u64 = 32;
/// Bytes of a ring's header.
const HEADER: usize = 32;
/// The smallest capacity of a ring.
const MIN_SLOTS: usize = 4;
/// The longest string Redis stores (its default `proto-max-bulk-len`): a log that would
/// need more (a limit above 67 108 860) cannot be written, by the scripts either.
const MAX_VALUE: usize = 512 << 20;

/// A log too long for a Redis string.
#[derive(Debug)]
pub(crate) struct TooLong;

/// A log as read: borrowed from the key's value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Log<'a> {
    /// The slots: the whole value of a small log, the part after the header of a ring.
    slots: &'a [u8],
    ring: bool,
    len: usize,
    head: usize,
    cap: usize,
    newest: u64,
    oldest: u64,
}

impl<'a> Log<'a> {
    /// The log of a limit of `n` stored as `raw` (`None`: no key).
    pub(crate) fn read(raw: Option<&'a [u8]>, n: u64) -> Result<Self, Malformed> {
        let raw = raw.unwrap_or_default();
        let empty = Log { slots: &[], ring: n > WHOLE, len: 0, head: 0, cap: 0, newest: 0, oldest: 0 };
        if n <= WHOLE {
            let len = raw.len() / 8;
            if !raw.len().is_multiple_of(8) || len as u64 > n {
                return Err(Malformed);
            }
            let log = Log { slots: raw, len, cap: len, ..empty };
            return Ok(if len == 0 { log } else { Log { oldest: log.at(0), newest: log.at(len - 1), ..log } });
        }
        // As the script: a value shorter than a header is an empty log (rewritten by the next write).
        let Some((header, slots)) = raw.split_first_chunk::<HEADER>() else { return Ok(empty) };
        let word = |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        let (len, head, cap) = (word(16) as usize, word(20) as usize, word(24) as usize);
        let fits = len <= cap && (head < cap || cap == 0) && cap as u64 <= n && slots.len() == 8 * cap;
        if !fits {
            return Err(Malformed);
        }
        let (newest, oldest) = (number(&header[..8])?, number(&header[8..16])?);
        Ok(Log { slots, len, head, cap, newest, oldest, ..empty })
    }

    /// The slot at physical index `p`. A slot that is not an exact integer reads as the
    /// nearest one in range: garbage in, garbage out, but never a panic.
    fn slot(&self, p: usize) -> u64 {
        let bytes = self.slots.get(8 * p..8 * p + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()).unwrap_or_default();
        // Saturating cast: NaN is 0, and no value leaves u64.
        f64::from_le_bytes(bytes) as u64
    }

    /// The logical `index`-th entry, 0 being the oldest.
    fn at(&self, index: usize) -> u64 {
        let p = self.head + index;
        self.slot(if p >= self.cap { p - self.cap } else { p })
    }

    /// Logical index of the oldest entry still in the window at `now` (`len` if none) and
    /// its value: gallop from the oldest, then binary search.
    fn first_live(&self, window: u64, now: u64) -> (usize, Option<u64>) {
        let live = |entry: u64| entry.saturating_add(window) > now;
        if self.len == 0 || live(self.oldest) {
            return (0, Some(self.oldest));
        }
        let (mut lo, mut step, mut hi) = (0, 1, 1);
        let mut value = None;
        while hi < self.len {
            let entry = self.at(hi);
            if live(entry) {
                value = Some(entry);
                break;
            }
            lo = hi;
            step *= 2;
            hi = lo + step;
        }
        hi = hi.min(self.len);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let entry = self.at(mid);
            if live(entry) {
                (hi, value) = (mid, Some(entry));
            } else {
                lo = mid;
            }
        }
        (hi, value)
    }

    /// `t + window − now` for the `rank`-th newest entry (1 = newest), at least 0.
    fn wait_for_rank(&self, rank: u64, window: u64, now: u64) -> u64 {
        let index = self.len - usize::try_from(rank).unwrap_or(usize::MAX).min(self.len);
        let entry = match index {
            _ if self.len > 0 && index == self.len - 1 => self.newest,
            0 => self.oldest,
            _ => self.at(index),
        };
        entry.saturating_add(window).saturating_sub(now)
    }
}

/// The sliding log policy as the script reads it: `p1 = N`, `p2 = window µs`, `p3 = attempts`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) n: u64,
    pub(crate) window: u64,
    pub(crate) variant: SlidingLogVariant,
}

/// What `record` needs: the time judged at, the cost, and the live part of the log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan<'a> {
    now: u64,
    cost: u64,
    first: usize,
    kept: u64,
    log: Log<'a>,
}

/// The decision's seven fields (allowed, limit, remaining, reset_after, retry_after with
/// −1 none and −2 never, delay, judged_at) and the plan.
pub(crate) fn decide<'a>(p: Params, log: Log<'a>, now: u64, cost: u64) -> ([i64; 7], Plan<'a>) {
    let (n, window) = (p.n, p.window);
    // Time never runs backwards inside a state.
    let now = if log.len > 0 { now.max(log.newest) } else { now };
    let (first, kept) = log.first_live(window, now);
    let live = (log.len - first) as u64;
    let reset_now = if live > 0 { log.newest.saturating_add(window).saturating_sub(now) } else { 0 };
    let (mut allowed, mut remaining, mut reset_after, mut retry_after) = (1, 0, window, -1);
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    if cost == 0 {
        reset_after = reset_now;
        if live < n {
            remaining = n - live;
        } else {
            allowed = 0;
            retry_after = signed(log.wait_for_rank(n, window, now));
        }
    } else if cost <= n && live + cost <= n {
        remaining = n - live - cost;
    } else if p.variant == SlidingLogVariant::Accepted {
        (allowed, remaining, reset_after, retry_after) = (0, n - live, reset_now, -2);
        if cost <= n {
            retry_after = signed(log.wait_for_rank(n - cost + 1, window, now));
        }
    } else {
        // The attempt itself is logged: the newest `cost` entries become `now`.
        (allowed, retry_after) = (0, -2);
        if cost <= n {
            let rank = n - cost + 1;
            let wait = if rank > cost { log.wait_for_rank(rank - cost, window, now) } else { window };
            retry_after = signed(wait);
        }
    }
    let fields = [allowed, signed(n), signed(remaining), signed(reset_after), retry_after, 0, signed(now)];
    (fields, Plan { now, cost, first, kept: kept.unwrap_or_default(), log })
}

/// Logs the request planned by [`decide`] when it is `admitted` (or always, for `attempts`),
/// with a TTL covering the window: the script's `sl_record`.
///
/// # Errors
///
/// When the log would outgrow a Redis string; nothing is written then.
pub(crate) fn record(
    p: Params,
    plan: &Plan<'_>,
    admitted: bool,
    ttl_ms: u64,
    writes: &mut dyn FnMut(Write),
) -> Result<(), TooLong> {
    if plan.cost == 0 || !(admitted || p.variant == SlidingLogVariant::Attempts) {
        return Ok(());
    }
    let log = &plan.log;
    let count = usize::try_from(plan.cost.min(p.n)).unwrap_or(usize::MAX);
    if !log.ring {
        let n = usize::try_from(p.n).unwrap_or(usize::MAX);
        let mut body = Bytes::from_slice(&log.slots[8 * plan.first..]);
        for _ in 0..count {
            body.extend_from_slice(&stamp(plan.now));
        }
        let held = body.len() / 8;
        if held > n {
            body.drain(..8 * (held - n));
        }
        writes(Write::Set { value: body, ttl_ms });
        return Ok(());
    }
    let n = usize::try_from(p.n).unwrap_or(usize::MAX);
    let needed = log.len - plan.first + count;
    let capacity = if needed > log.cap && log.cap < n {
        needed.max(log.cap * 2).max(MIN_SLOTS).min(n)
    } else if needed * 4 <= log.cap && log.cap > MIN_SLOTS {
        (needed * 2).max(MIN_SLOTS)
    } else {
        write_in_place(plan, count.min(log.cap), ttl_ms, writes);
        return Ok(());
    };
    if capacity > (MAX_VALUE - HEADER) / 8 {
        return Err(TooLong);
    }
    writes(rewrite(plan, count, capacity, ttl_ms));
    Ok(())
}

/// `now` as a slot.
fn stamp(now: u64) -> [u8; 8] {
    double(now)
}

/// The header of a ring.
fn header(newest: u64, oldest: u64, len: usize, head: usize, cap: usize) -> [u8; HEADER] {
    let mut bytes = [0; HEADER];
    bytes[..8].copy_from_slice(&stamp(newest));
    bytes[8..16].copy_from_slice(&stamp(oldest));
    for (at, word) in [(16, len), (20, head), (24, cap)] {
        bytes[at..at + 4].copy_from_slice(&u32::try_from(word).unwrap_or(u32::MAX).to_le_bytes());
    }
    bytes
}

/// The slots of logical entries `from ..< len`, oldest first.
fn live_slots(log: &Log<'_>, from: usize) -> Vec<u8> {
    let (mut p, mut finish) = (log.head + from, log.head + log.len);
    if from >= log.len {
        return Vec::new();
    } else if p >= log.cap {
        (p, finish) = (p - log.cap, finish - log.cap);
    } else if finish > log.cap {
        return [&log.slots[8 * p..8 * log.cap], &log.slots[..8 * (finish - log.cap)]].concat();
    }
    log.slots[8 * p..8 * finish].to_vec()
}

/// The ring rewritten straightened with `capacity` slots: the live entries, then `count`
/// new ones, keeping the newest `capacity`.
fn rewrite(plan: &Plan<'_>, count: usize, capacity: usize, ttl_ms: u64) -> Write {
    let mut body = live_slots(&plan.log, plan.first);
    body.extend(std::iter::repeat_n(stamp(plan.now), count).flatten());
    let mut held = body.len() / 8;
    if held > capacity {
        body.drain(..8 * (held - capacity));
        held = capacity;
    }
    let oldest = number(&body[..8]).unwrap_or(plan.now);
    let mut value = Vec::with_capacity(HEADER + 8 * capacity);
    value.extend_from_slice(&header(plan.now, oldest, held, 0, capacity));
    value.extend_from_slice(&body);
    value.resize(HEADER + 8 * capacity, 0);
    Write::Set { value: Bytes::from_vec(value), ttl_ms }
}

/// Writes `count` entries stamped `now` after the newest, in place; in a full ring they
/// replace the oldest.
fn write_in_place(plan: &Plan<'_>, count: usize, ttl_ms: u64, writes: &mut dyn FnMut(Write)) {
    let log = &plan.log;
    let mut live = log.len - plan.first;
    let overwritten = (live + count).saturating_sub(log.cap);
    let kept = if live == 0 || overwritten >= live {
        plan.now
    } else if overwritten > 0 {
        log.at(plan.first + overwritten)
    } else {
        plan.kept
    };
    let mut head = (log.head + plan.first) % log.cap;
    let mut left = count;
    while left > 0 {
        let tail = (head + live) % log.cap;
        let run = left.min(log.cap - tail);
        let mut bytes = Bytes::new();
        for _ in 0..run {
            bytes.extend_from_slice(&stamp(plan.now));
        }
        writes(Write::SetRange { offset: HEADER + 8 * tail, bytes });
        let grown = run.min(log.cap - live);
        live += grown;
        head = (head + run - grown) % log.cap;
        left -= run;
    }
    writes(Write::SetRange { offset: 0, bytes: Bytes::from_slice(&header(plan.now, kept, live, head, log.cap)) });
    writes(Write::Expire { ttl_ms });
}
