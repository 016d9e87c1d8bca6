//! What recording a sliding log writes, as `lua/sliding_log.lua`'s calls write it (and as
//! they are replicated): a whole log's `SET`, a ring's `SETRANGE`s and `PEXPIRE`, or the
//! ring rewritten when its capacity changes.

use super::log::HEADER;
use super::{Log, Params, Plan, holds_tail};
use crate::layout::{Bytes, double, number};
use crate::write::Write;
use sluice_core::algorithm::Holds;

/// The smallest capacity of a ring.
const MIN_SLOTS: usize = 4;
/// The longest string Redis stores (its default `proto-max-bulk-len`): a log that would
/// need more (a limit above 67 108 860) cannot be written, by the scripts either.
const MAX_VALUE: usize = 512 << 20;

/// A log too long for a Redis string.
#[derive(Debug)]
pub(crate) struct TooLong;

/// Writes the `fresh` entries (oldest first, the request's last) and `holds` (written in
/// place only when they `changed`), with a TTL of `ttl_ms`.
///
/// # Errors
///
/// When the log would outgrow a Redis string; nothing is written then.
pub(super) fn record(
    p: Params,
    plan: &Plan<'_>,
    fresh: &[u64],
    (holds, changed): (&Holds, bool),
    ttl_ms: u64,
    writes: &mut dyn FnMut(Write),
) -> Result<(), TooLong> {
    let log = &plan.log;
    let n = usize::try_from(p.n).unwrap_or(usize::MAX);
    if !log.ring {
        let mut body = Bytes::from_slice(&log.slots[8 * plan.first..]);
        fresh.iter().for_each(|&entry| body.extend_from_slice(&double(entry)));
        let held = body.len() / 8;
        if held > n {
            body.drain(..8 * (held - n));
        }
        body.extend_from_slice(&holds_tail(holds, true));
        writes(Write::Set { value: body, ttl_ms });
        return Ok(());
    }
    let needed = log.len - plan.first + fresh.len();
    let capacity = if needed > log.cap && log.cap < n {
        needed.max(log.cap * 2).max(MIN_SLOTS).min(n)
    } else if needed * 4 <= log.cap && log.cap > MIN_SLOTS {
        (needed * 2).max(MIN_SLOTS)
    } else {
        write_in_place(plan, &fresh[fresh.len().saturating_sub(log.cap)..], (holds, changed), ttl_ms, writes);
        return Ok(());
    };
    if capacity > (MAX_VALUE - HEADER) / 8 {
        return Err(TooLong);
    }
    writes(rewrite(plan, fresh, capacity, holds, ttl_ms));
    Ok(())
}

/// Writes `holds` in place of the log's (the log given back a lease), with a TTL of `ttl_ms`.
pub(super) fn holds_only(log: &Log<'_>, holds: &Holds, ttl_ms: u64, writes: &mut dyn FnMut(Write)) {
    if !log.ring {
        let mut value = Bytes::from_slice(&log.slots[..8 * log.len]);
        value.extend_from_slice(&holds_tail(holds, true));
        writes(Write::Set { value, ttl_ms });
        return;
    }
    if !holds.is_empty() {
        writes(Write::SetRange { offset: HEADER + 8 * log.cap, bytes: holds_tail(holds, false) });
    }
    let header = header([log.newest, log.oldest], [log.len, log.head, log.cap, holds.len()]);
    writes(Write::SetRange { offset: 0, bytes: Bytes::from_slice(&header) });
    writes(Write::Expire { ttl_ms });
}

/// The header of a ring: newest and oldest entries, then len, head, capacity and the
/// number of leases held.
fn header([newest, oldest]: [u64; 2], words: [usize; 4]) -> [u8; HEADER] {
    let mut bytes = [0; HEADER];
    bytes[..8].copy_from_slice(&double(newest));
    bytes[8..16].copy_from_slice(&double(oldest));
    for (at, word) in [16, 20, 24, 28].into_iter().zip(words) {
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

/// The ring rewritten straightened with `capacity` slots: the live entries, then the
/// `fresh` ones, keeping the newest `capacity`; then `holds`.
fn rewrite(plan: &Plan<'_>, fresh: &[u64], capacity: usize, holds: &Holds, ttl_ms: u64) -> Write {
    let mut body = live_slots(&plan.log, plan.first);
    body.extend(fresh.iter().flat_map(|&entry| double(entry)));
    let mut held = body.len() / 8;
    if held > capacity {
        body.drain(..8 * (held - capacity));
        held = capacity;
    }
    let oldest = number(&body[..8]).unwrap_or(plan.now);
    let mut value = Vec::with_capacity(HEADER + 8 * capacity + 16 * holds.len());
    value.extend_from_slice(&header([plan.now, oldest], [held, 0, capacity, holds.len()]));
    value.extend_from_slice(&body);
    value.resize(HEADER + 8 * capacity, 0);
    value.extend_from_slice(&holds_tail(holds, false));
    Write::Set { value: Bytes::from_vec(value), ttl_ms }
}

/// Writes the `fresh` entries (at most the ring's capacity; the newest `plan.now`) after
/// the newest, in place; in a full ring they replace the oldest. The leases are written
/// after the slots when they changed.
fn write_in_place(
    plan: &Plan<'_>,
    fresh: &[u64],
    (holds, changed): (&Holds, bool),
    ttl_ms: u64,
    writes: &mut dyn FnMut(Write),
) {
    let log = &plan.log;
    let mut live = log.len - plan.first;
    let overwritten = (live + fresh.len()).saturating_sub(log.cap);
    let kept = if live == 0 || overwritten >= live {
        fresh[overwritten - live]
    } else if overwritten > 0 {
        log.at(plan.first + overwritten)
    } else {
        plan.kept
    };
    let mut head = (log.head + plan.first) % log.cap;
    let mut written = 0;
    while written < fresh.len() {
        let tail = (head + live) % log.cap;
        let run = (fresh.len() - written).min(log.cap - tail);
        let mut bytes = Bytes::new();
        fresh[written..written + run].iter().for_each(|&entry| bytes.extend_from_slice(&double(entry)));
        writes(Write::SetRange { offset: HEADER + 8 * tail, bytes });
        let grown = run.min(log.cap - live);
        live += grown;
        head = (head + run - grown) % log.cap;
        written += run;
    }
    if changed && !holds.is_empty() {
        writes(Write::SetRange { offset: HEADER + 8 * log.cap, bytes: holds_tail(holds, false) });
    }
    let header = header([plan.now, kept], [live, head, log.cap, holds.len()]);
    writes(Write::SetRange { offset: 0, bytes: Bytes::from_slice(&header) });
    writes(Write::Expire { ttl_ms });
}
