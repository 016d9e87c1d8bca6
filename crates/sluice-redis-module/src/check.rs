//! One check of one or several limits, all or nothing: the twin of the scripts' drivers
//! (`lua/single.lua`, `lua/check.lua`), pure: states in, reply and writes out. A lease asked
//! with it is decided with the request under every limit, and when it does not fit them
//! all, the request alone, in this one command (`MemoryStore::check_and_lease_now`).

pub(crate) mod judge;

use crate::args::Check;
use crate::write::Writes;
use judge::Judged;
use sluice_core::EXACT_LIMIT;
use sluice_core::algorithm::Lease;
use smallvec::{SmallVec, smallvec};

/// What a check answers and writes. (Checks of one or two limits fit on the stack: they
/// allocate nothing of their own.)
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The packed reply: `now`, seven fields per limit, (after a lease request) whether it
    /// was granted and each limit's stamp, Redis `TIME`; empty past the deadline.
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
    /// The lease's deadline is not below 2^53 µs, the most the scripts compute exactly.
    LeaseTooLate,
}

/// Runs `check` on `states` (one per limit: the key's name and its value, `None` when it has
/// no key) at Redis time `clock` (µs), into `outcome` (empty when called).
///
/// # Errors
///
/// When a key holds a value the scripts would not have written, a sliding log would
/// outgrow a Redis string, or a lease would end past 2^53 µs; nothing is written then.
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
    let lease = check.lease_at(now);
    if lease.is_some_and(|lease| lease.deadline.as_micros() >= EXACT_LIMIT) {
        return Err(Refusal::LeaseTooLate);
    }
    let leased = lease.map(|lease| judge_all(check, states, now, Some(lease))).transpose()?;
    let granted = leased.as_ref().is_some_and(|judged| judged.iter().all(Judged::allowed));
    let judged = match leased {
        Some(judged) if granted => judged,
        _ => judge_all(check, states, now, None)?,
    };
    let admitted = judged.iter().all(Judged::allowed);
    reply(&mut outcome.reply, now, &judged, check.lease_asked().then_some(granted), clock);
    for (index, judged) in judged.into_iter().enumerate() {
        // A limit listed twice is one state: record the request once.
        let first = !states[..index].iter().any(|(name, _)| *name == states[index].0);
        if first {
            judged.pending.record(admitted, check, index, &mut outcome.writes).map_err(|_| Refusal::TooLong(index))?;
        }
    }
    Ok(())
}

/// Every limit judged for the check's cost (and `lease`) at `now`, changing nothing.
fn judge_all<'a>(
    check: &Check,
    states: &[(&[u8], Option<&'a [u8]>)],
    now: u64,
    lease: Option<Lease>,
) -> Result<SmallVec<[Judged<'a>; 2]>, Refusal> {
    let mut judged = SmallVec::new();
    for (limit, (policy, (_, raw))) in check.policies.iter().zip(states).enumerate() {
        judged.push(judge::judge(policy, *raw, now, check.cost, lease).map_err(|_| Refusal::BadState(limit))?);
    }
    Ok(judged)
}

/// The packed reply into `reply` (empty): `now`, each limit's seven fields, whether a lease
/// asked was `granted` and each limit's stamp (0 unless granted), then `clock`.
fn reply(reply: &mut SmallVec<[u8; 128]>, now: u64, judged: &[Judged<'_>], granted: Option<bool>, clock: u64) {
    let lease = granted.map_or(0, |_| 8 + 8 * judged.len());
    let length = 16 + 56 * judged.len() + lease;
    if length <= 128 {
        reply.extend_from_slice(&[0; 128][..length]);
    } else {
        *reply = smallvec![0; length];
    }
    let mut numbers = reply.chunks_exact_mut(8);
    let mut put = |field: i64| numbers.next().map(|slot| slot.copy_from_slice(&(field as f64).to_le_bytes()));
    let signed = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    put(signed(now));
    judged.iter().flat_map(|judged| judged.fields).for_each(|field| _ = put(field));
    if let Some(granted) = granted {
        put(i64::from(granted));
        judged.iter().for_each(|judged| _ = put(if granted { signed(judged.stamp) } else { 0 }));
    }
    put(signed(clock));
}
