//! Each algorithm's state in a snapshot: its tag, its bytes, and what makes one impossible.

use super::SnapshotError;
use super::reader::Reader;
use super::version::{VERSION_WITHOUT_ANCHORS, VERSION_WITHOUT_HOLDS};
use crate::Policy;
use crate::algorithm::Algorithm;
use crate::algorithm::fixed_window::{FixedWindow, WindowCount};
use crate::algorithm::leaky_bucket::{LeakyBucket, Tat};
use crate::algorithm::sliding_log::{SlidingLog, SlidingLogState};
use crate::algorithm::sliding_window::{BucketCounts, SlidingWindow};
use crate::algorithm::token_bucket::{TokenBucket, Tokens};
use crate::algorithm::{Hold, Holds, MAX_HOLDS};
use crate::policy::with_algorithm;

/// A state of any algorithm, read from a snapshot, on its way into its limit's table.
#[derive(Debug)]
pub(crate) enum AnyState {
    SlidingLog(SlidingLogState),
    FixedWindow(WindowCount),
    SlidingWindow(BucketCounts),
    TokenBucket(Tokens),
    LeakyBucket(Tat),
}

/// What became of a state offered to a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Restored {
    /// Inserted, adding `bytes` to the table's memory.
    New { bytes: usize },
    /// The table already holds a state for the key: the live one is kept.
    Present,
    /// Fresh by the store's clock (or of another algorithm): nothing to keep.
    Fresh,
}

/// What a snapshot needs from an algorithm. Integers are little-endian and fixed-width.
pub(crate) trait Persist: Algorithm {
    /// The algorithm's tag (never 0, which ends the tables).
    const TAG: u8;

    /// Appends `state` to `out`.
    fn encode(state: &Self::State, out: &mut Vec<u8>);

    /// Reads a state written by `encode`, refusing what no parameters could produce.
    fn decode(input: &mut Reader<'_>) -> Result<Self::State, SnapshotError>;

    /// The state if it is this algorithm's (a state of another one is treated as fresh).
    fn of(state: &AnyState) -> Option<&Self::State>;
}

impl AnyState {
    /// Reads a state of the algorithm tagged `tag`.
    pub(crate) fn decode(tag: u8, input: &mut Reader<'_>) -> Result<AnyState, SnapshotError> {
        match tag {
            SlidingLog::TAG => SlidingLog::decode(input).map(AnyState::SlidingLog),
            FixedWindow::TAG => FixedWindow::decode(input).map(AnyState::FixedWindow),
            SlidingWindow::TAG => SlidingWindow::decode(input).map(AnyState::SlidingWindow),
            TokenBucket::TAG => TokenBucket::decode(input).map(AnyState::TokenBucket),
            LeakyBucket::TAG => LeakyBucket::decode(input).map(AnyState::LeakyBucket),
            other => Err(input.invalid(format!("unknown algorithm tag {other}"))),
        }
    }
}

/// The tag of `policy`'s algorithm.
pub(crate) fn tag_of(policy: &Policy) -> u8 {
    fn tag<A: Persist>(_: &A) -> u8 {
        A::TAG
    }
    with_algorithm!(policy, algorithm => tag(algorithm))
}

/// Why `state` cannot have been produced by `policy`, if it cannot.
pub(crate) fn impossible(policy: &Policy, state: &AnyState) -> Option<String> {
    fn check<A: Persist>(algorithm: &A, state: &AnyState) -> Option<String> {
        match A::of(state) {
            Some(state) => algorithm.impossible(state),
            None => Some(format!("a state of another algorithm than the limit's {}", algorithm.name())),
        }
    }
    with_algorithm!(policy, algorithm => check(algorithm, state))
}

fn put(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// `count: u8`, `ended: u8`, then each lease's `deadline` and `units`.
fn put_holds(out: &mut Vec<u8>, holds: &Holds) {
    out.push(holds.len() as u8);
    out.push(u8::from(holds.ended()));
    for hold in holds.iter() {
        put(out, hold.deadline);
        put(out, hold.units);
    }
}

/// Reads what [`put_holds`] wrote (nothing before version 5).
fn read_holds(input: &mut Reader<'_>) -> Result<Holds, SnapshotError> {
    if input.version() <= VERSION_WITHOUT_HOLDS {
        return Ok(Holds::default());
    }
    let count = usize::from(input.u8()?);
    let ended = input.u8()?;
    if count > MAX_HOLDS || ended > 1 {
        return Err(input.invalid(format!("{count} leases held, ended mark {ended}")));
    }
    let mut holds = Vec::with_capacity(count);
    for _ in 0..count {
        let hold = Hold { deadline: input.u64()?, units: input.u64()? };
        if hold.units == 0 || holds.last().is_some_and(|last: &Hold| last.deadline >= hold.deadline) {
            return Err(input.invalid("leases held are empty or out of order"));
        }
        holds.push(hold);
    }
    Ok(Holds::from_parts(holds, ended == 1))
}

impl Persist for SlidingLog {
    const TAG: u8 = 1;

    /// `len: u32`, then `len` timestamps (µs), oldest first, then the leases held.
    fn encode(state: &SlidingLogState, out: &mut Vec<u8>) {
        out.extend_from_slice(&(state.len() as u32).to_le_bytes());
        state.entries().for_each(|entry| put(out, entry));
        put_holds(out, state.holds());
    }

    fn decode(input: &mut Reader<'_>) -> Result<SlidingLogState, SnapshotError> {
        let len = input.u32()? as usize;
        // Checked before allocating: a forged length must not reserve gigabytes.
        input.ensure(len.saturating_mul(8))?;
        let mut entries = Vec::with_capacity(len);
        for _ in 0..len {
            let entry = input.u64()?;
            if entries.last().is_some_and(|&previous| previous > entry) {
                return Err(input.invalid("sliding log timestamps are not in order"));
            }
            entries.push(entry);
        }
        Ok(SlidingLogState::with_holds(&entries, read_holds(input)?))
    }

    fn of(state: &AnyState) -> Option<&SlidingLogState> {
        if let AnyState::SlidingLog(state) = state { Some(state) } else { None }
    }
}

impl Persist for FixedWindow {
    const TAG: u8 = 2;

    /// `start`, `used`.
    fn encode(state: &WindowCount, out: &mut Vec<u8>) {
        put(out, state.start);
        put(out, state.used);
    }

    fn decode(input: &mut Reader<'_>) -> Result<WindowCount, SnapshotError> {
        Ok(WindowCount { start: input.u64()?, used: input.u64()? })
    }

    fn of(state: &AnyState) -> Option<&WindowCount> {
        if let AnyState::FixedWindow(state) = state { Some(state) } else { None }
    }
}

impl Persist for SlidingWindow {
    const TAG: u8 = 3;

    /// The grid's `anchor` (from format version 4), the `newest` bucket, `slots: u32`, then
    /// the `slots` counters by `bucket % slots` (`B + 1` of them, none for a fresh key).
    fn encode(state: &BucketCounts, out: &mut Vec<u8>) {
        put(out, state.anchor);
        put(out, state.newest);
        out.extend_from_slice(&(state.counts.len() as u32).to_le_bytes());
        state.counts.iter().for_each(|&count| put(out, count));
    }

    fn decode(input: &mut Reader<'_>) -> Result<BucketCounts, SnapshotError> {
        let anchor = if input.version() > VERSION_WITHOUT_ANCHORS { input.u64()? } else { 0 };
        let newest = input.u64()?;
        let slots = input.u32()?;
        if u64::from(slots) > SlidingWindow::MAX_BUCKETS + 1 {
            return Err(input.invalid(format!("a sliding window of {slots} counters")));
        }
        let counts = (0..slots).map(|_| input.u64()).collect::<Result<Vec<_>, _>>()?;
        Ok(BucketCounts::from_parts(newest, &counts).with_anchor(anchor))
    }

    fn of(state: &AnyState) -> Option<&BucketCounts> {
        if let AnyState::SlidingWindow(state) = state { Some(state) } else { None }
    }
}

impl Persist for TokenBucket {
    const TAG: u8 = 4;

    /// `taken`, `last` refill, then the leases held.
    fn encode(state: &Tokens, out: &mut Vec<u8>) {
        put(out, state.taken);
        put(out, state.last);
        put_holds(out, &state.holds);
    }

    fn decode(input: &mut Reader<'_>) -> Result<Tokens, SnapshotError> {
        let (taken, last) = (input.u64()?, input.u64()?);
        Ok(Tokens { taken, last, holds: read_holds(input)? })
    }

    fn of(state: &AnyState) -> Option<&Tokens> {
        if let AnyState::TokenBucket(state) = state { Some(state) } else { None }
    }
}

impl Persist for LeakyBucket {
    const TAG: u8 = 5;

    /// `tat`, then the leases held.
    fn encode(state: &Tat, out: &mut Vec<u8>) {
        put(out, state.arrival);
        put_holds(out, &state.holds);
    }

    fn decode(input: &mut Reader<'_>) -> Result<Tat, SnapshotError> {
        let arrival = input.u64()?;
        Ok(Tat { arrival, holds: read_holds(input)? })
    }

    fn of(state: &AnyState) -> Option<&Tat> {
        if let AnyState::LeakyBucket(state) = state { Some(state) } else { None }
    }
}
