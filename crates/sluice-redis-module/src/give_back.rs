//! A lease's unspent units taken back, under every limit it was debited under: the twin of
//! `lua/give_back.lua`, pure (states in, writes out), running each algorithm's own
//! `give_back` from the core on its decoded state. A window takes units back only into the
//! state of the lease's stamp; a limit listed twice is one state, given back once.

use crate::args::GiveBack;
use crate::check::judge::ttl;
use crate::layout::{Layout, Malformed, Stored, micros};
use crate::sliding_log;
use crate::write::{Write, Writes};
use sluice_core::algorithm::Returned;
use sluice_core::{Policy, Receipt, Timestamp};

/// Takes `back` into `states` (one per limit: the key's name and its value, `None` when it
/// has no key) at Redis time `clock` (µs), adding the writes to `writes`.
///
/// # Errors
///
/// The 0-based limit whose key holds a value the scripts would not have written; nothing
/// is written then.
pub(crate) fn run(
    back: &GiveBack,
    states: &[(&[u8], Option<&[u8]>)],
    clock: u64,
    writes: &mut Writes,
) -> Result<(), usize> {
    let now = back.now.unwrap_or(clock);
    let ttl_ms = |expires_in: u64| ttl(back.extra_ms, back.min_ttl_ms, expires_in);
    for (index, ((receipt, policy), (name, raw))) in back.limits.iter().zip(states).enumerate() {
        if states[..index].iter().any(|(earlier, _)| earlier == name) {
            continue;
        }
        let returned = returned(back, receipt, now);
        let mut push = |write| writes.push((index, write));
        let taken = match policy {
            Policy::SlidingLog(log) => {
                let params =
                    sliding_log::Params { n: log.limit(), window: micros(log.window()), variant: log.variant() };
                sliding_log::give_back(params, *raw, returned, &ttl_ms, &mut push)
            }
            Policy::FixedWindow(algorithm) => window(algorithm, *raw, returned, &mut push),
            Policy::SlidingWindow(algorithm) => window(algorithm, *raw, returned, &mut push),
            Policy::TokenBucket(algorithm) => bucket(algorithm, *raw, returned, &ttl_ms, &mut push),
            Policy::LeakyBucket(algorithm) => bucket(algorithm, *raw, returned, &ttl_ms, &mut push),
        };
        taken.map_err(|Malformed| index)?;
    }
    Ok(())
}

/// What the core's `give_back` is told of one limit's share.
fn returned(back: &GiveBack, receipt: &Receipt, now: u64) -> Returned {
    let Receipt { debited_in, stamp } = *receipt;
    Returned { debited_in, stamp, leased: back.leased, unspent: back.unspent, now: Timestamp::from_micros(now) }
}

/// A window's give-back: into the state of the lease's stamp only, in place (the TTL stays).
fn window<A: Layout>(
    algorithm: &A,
    raw: Option<&[u8]>,
    back: Returned,
    writes: &mut dyn FnMut(Write),
) -> Result<(), Malformed>
where
    A::State: PartialEq,
{
    let Some(raw) = raw else { return Ok(()) };
    let Stored { mut state, stamp } = algorithm.read(Some(raw))?;
    let before = state.clone();
    if stamp == back.stamp {
        algorithm.give_back(&mut state, back);
    }
    if state != before {
        writes(Write::SetRange { offset: 0, bytes: algorithm.write(&Stored { state, stamp }) });
    }
    Ok(())
}

/// A bucket's give-back: the core's on its state, written back with its TTL.
fn bucket<A: Layout>(
    algorithm: &A,
    raw: Option<&[u8]>,
    back: Returned,
    ttl_ms: &dyn Fn(u64) -> u64,
    writes: &mut dyn FnMut(Write),
) -> Result<(), Malformed> {
    let Some(raw) = raw else { return Ok(()) };
    let Stored { mut state, stamp } = algorithm.read(Some(raw))?;
    let at = algorithm.judged_at(&state, back.now.as_micros()).at;
    algorithm.give_back(&mut state, back);
    let expires_in = algorithm.expires_in(&state, 0, at);
    writes(Write::Set { value: algorithm.write(&Stored { state, stamp }), ttl_ms: ttl_ms(expires_in) });
    Ok(())
}
