//! The states of the algorithms whose Lua layout is their core state, field for field:
//! little-endian doubles ('<d'), each an integer below 2^53, plus what only Redis keeps (a
//! window's stamp). These run the core's own `decide`; only the sliding log has a layout of
//! its own (`sliding_log.rs`).

mod buckets;
pub(crate) mod holds;
mod windows;

use sluice_core::{Algorithm, EXACT_LIMIT};
use smallvec::SmallVec;

/// A value or part of one, as written: on the stack up to 64 bytes (every state but a
/// sliding window of more than six buckets, a whole sliding log of more than eight, or a
/// state holding leases).
pub(crate) type Bytes = SmallVec<[u8; 64]>;

/// A state the scripts would not have written: the wrong length, a number that is not an
/// exact non-negative integer, or numbers the algorithm never stores (more used than the
/// limit allows): the core's arithmetic relies on what it stores itself.
#[derive(Debug)]
pub(crate) struct Malformed;

/// A state as stored in Redis: the core's state, and the stamp of a window's state (1 + the
/// store's time of the first lease granted on it; 0 before one was, and for the algorithms
/// that hold leases, which find a lease by its deadline).
#[derive(Debug, Clone, Default)]
pub(crate) struct Stored<S> {
    pub(crate) state: S,
    pub(crate) stamp: u64,
}

/// How an algorithm's state sits in its Redis string, and the time its Lua twin judges at.
pub(crate) trait Layout: Algorithm {
    /// The state stored as `raw` (`None`: no key, a fresh state).
    fn read(&self, raw: Option<&[u8]>) -> Result<Stored<Self::State>, Malformed>;

    /// The bytes of `stored`.
    fn write(&self, stored: &Stored<Self::State>) -> Bytes;

    /// The time a request at `now` is judged at (`now`, or later when the state's time is),
    /// and whether its answer ages with the clock (not while a bucket holds leases): what
    /// the reply says, so that no cache keeps an answer that does not.
    fn judged_at(&self, state: &Self::State, now: u64) -> JudgedAt;

    /// µs from the decision judged at `at` (whose answer's `reset_after`, µs, is given)
    /// until `state`, as recorded, is fresh again: its TTL, as the Lua twin computes it.
    fn expires_in(&self, state: &Self::State, reset_after: u64, at: u64) -> u64;
}

/// The time a decision was judged at, and whether its answer ages with the clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JudgedAt {
    pub(crate) at: u64,
    pub(crate) ages: bool,
}

impl JudgedAt {
    /// JudgedAt at `at`, an answer that ages with the clock.
    pub(crate) fn at(at: u64) -> Self {
        JudgedAt { at, ages: true }
    }

    /// The reply's field: the time, or -1 when the answer does not age.
    pub(crate) fn field(self) -> i64 {
        if self.ages { i64::try_from(self.at).unwrap_or(i64::MAX) } else { -1 }
    }
}

/// `state`, unless the core says `algorithm` never writes it (`Algorithm::impossible`).
fn possible<A: Algorithm>(algorithm: &A, state: A::State) -> Result<A::State, Malformed> {
    if algorithm.impossible(&state).is_some() { Err(Malformed) } else { Ok(state) }
}

/// Whole microseconds of a duration the core built (below 2^53).
pub(crate) fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Exactly `N` numbers.
fn doubles<const N: usize>(raw: &[u8]) -> Result<[u64; N], Malformed> {
    if raw.len() != 8 * N {
        return Err(Malformed);
    }
    let mut numbers = [0; N];
    for (slot, bytes) in numbers.iter_mut().zip(raw.chunks_exact(8)) {
        *slot = number(bytes)?;
    }
    Ok(numbers)
}

/// One stored number: an exact integer in `0..2^53`.
pub(crate) fn number(bytes: &[u8]) -> Result<u64, Malformed> {
    let value = f64::from_le_bytes(bytes.try_into().map_err(|_| Malformed)?);
    // The bound is exact, and so is the cast of an integer below it.
    if value.fract() == 0.0 && (0.0..EXACT_LIMIT as f64).contains(&value) {
        return Ok(value as u64);
    }
    Err(Malformed)
}

/// `numbers` as little-endian doubles (each below 2^53, so exact).
pub(crate) fn pack(numbers: &[u64]) -> Bytes {
    let mut buffer = [0; 64];
    if numbers.len() > buffer.len() / 8 {
        return Bytes::from_vec(numbers.iter().flat_map(|&number| double(number)).collect());
    }
    for (slot, &number) in buffer.chunks_exact_mut(8).zip(numbers) {
        slot.copy_from_slice(&double(number));
    }
    Bytes::from_buf_and_len(buffer, 8 * numbers.len())
}

/// `number` as a little-endian double (below 2^53, so exact).
pub(crate) fn double(number: u64) -> [u8; 8] {
    (number as f64).to_le_bytes()
}
