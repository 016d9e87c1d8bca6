//! The states of the algorithms whose Lua layout is their core state, field for field:
//! little-endian doubles ('<d'), each an integer below 2^53. These run the core's own
//! `decide`; only the sliding log has a layout of its own (`sliding_log.rs`).

use sluice_core::algorithm::fixed_window::WindowCount;
use sluice_core::algorithm::leaky_bucket::Tat;
use sluice_core::algorithm::sliding_window::BucketCounts;
use sluice_core::algorithm::token_bucket::Tokens;
use sluice_core::{Algorithm, Alignment, EXACT_LIMIT, FixedWindow, LeakyBucket, SlidingWindow, Timestamp, TokenBucket};
use smallvec::SmallVec;

/// A value or part of one, as written: on the stack up to 64 bytes (every state but a
/// sliding window of more than six buckets or a whole sliding log of more than eight).
pub(crate) type Bytes = SmallVec<[u8; 64]>;

/// A state the scripts would not have written: the wrong length, a number that is not an
/// exact non-negative integer, or numbers the algorithm never stores (more used than the
/// limit allows): the core's arithmetic relies on what it stores itself.
#[derive(Debug)]
pub(crate) struct Malformed;

/// How an algorithm's state sits in its Redis string, and the time its Lua twin judges at.
pub(crate) trait Layout: Algorithm {
    /// The state stored as `raw` (`None`: no key, a fresh state).
    fn read(&self, raw: Option<&[u8]>) -> Result<Self::State, Malformed>;

    /// The bytes of `state`.
    fn write(&self, state: &Self::State) -> Bytes;

    /// The time a request at `now` is judged at: `now`, or later when the state's time is.
    fn judged_at(&self, state: &Self::State, now: u64) -> u64;
}

impl Layout for FixedWindow {
    fn read(&self, raw: Option<&[u8]>) -> Result<WindowCount, Malformed> {
        let Some(raw) = raw else { return Ok(WindowCount::default()) };
        let [start, used] = doubles(raw)?;
        possible(self, WindowCount { start, used })
    }

    fn write(&self, state: &WindowCount) -> Bytes {
        pack(&[state.start, state.used])
    }

    fn judged_at(&self, state: &WindowCount, now: u64) -> u64 {
        if state.used > 0 { now.max(state.start) } else { now }
    }
}

impl Layout for TokenBucket {
    fn read(&self, raw: Option<&[u8]>) -> Result<Tokens, Malformed> {
        let Some(raw) = raw else { return Ok(Tokens::default()) };
        let [taken, last] = doubles(raw)?;
        possible(self, Tokens::new(taken, last))
    }

    fn write(&self, state: &Tokens) -> Bytes {
        pack(&[state.taken, state.last])
    }

    fn judged_at(&self, state: &Tokens, now: u64) -> u64 {
        // A full bucket has no refill phase: it starts at the request that empties it.
        if state.taken == 0 { now } else { now.max(state.last) }
    }
}

impl Layout for LeakyBucket {
    fn read(&self, raw: Option<&[u8]>) -> Result<Tat, Malformed> {
        let Some(raw) = raw else { return Ok(Tat::default()) };
        let [tat] = doubles(raw)?;
        Ok(Tat::at(tat))
    }

    fn write(&self, state: &Tat) -> Bytes {
        pack(&[state.arrival])
    }

    fn judged_at(&self, _: &Tat, now: u64) -> u64 {
        now
    }
}

/// The newest bucket's index, then `B + 1` counters by `bucket % (B + 1)`, then (anchored
/// grids only) the grid's anchor (µs): `lua/sliding_window.lua`'s layout.
impl Layout for SlidingWindow {
    fn read(&self, raw: Option<&[u8]>) -> Result<BucketCounts, Malformed> {
        let Some(raw) = raw else { return Ok(BucketCounts::default()) };
        let slots = usize::try_from(self.buckets() + 1).map_err(|_| Malformed)?;
        let anchored = usize::from(self.alignment() == Alignment::Anchored);
        if raw.len() != 8 * (slots + 1 + anchored) {
            return Err(Malformed);
        }
        let newest = number(&raw[..8])?;
        let counted = &raw[8..8 * (slots + 1)];
        let counts = counted.chunks_exact(8).map(number).collect::<Result<SmallVec<[u64; 8]>, _>>()?;
        let anchor = if anchored == 1 { number(&raw[8 * (slots + 1)..])? } else { 0 };
        let state = BucketCounts::from_parts(newest, &counts).with_anchor(anchor);
        // The newest bucket starts before 2^53 µs, as every time the scripts handle.
        let start = u128::from(anchor) + u128::from(newest) * u128::from(self.width());
        if start >= u128::from(EXACT_LIMIT) {
            return Err(Malformed);
        }
        possible(self, state)
    }

    fn write(&self, state: &BucketCounts) -> Bytes {
        let mut numbers: SmallVec<[u64; 8]> = SmallVec::with_capacity(state.counts().len() + 2);
        numbers.push(state.newest());
        numbers.extend_from_slice(state.counts());
        if self.alignment() == Alignment::Anchored {
            numbers.push(state.anchor());
        }
        pack(&numbers)
    }

    fn judged_at(&self, state: &BucketCounts, now: u64) -> u64 {
        self.judged_at(state, Timestamp::from_micros(now)).as_micros()
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

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::TokenBucketSettings;
    use std::time::Duration;

    #[test]
    fn states_the_algorithm_never_stores_are_malformed() {
        let window = FixedWindow::new(3, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap();
        assert!(window.read(Some(&pack(&[0, 3]))).is_ok());
        assert!(window.read(Some(&pack(&[0, 4]))).is_err());
        assert!(window.read(Some(&pack(&[0]))).is_err());
        let settings = TokenBucketSettings { capacity: 2, refill_amount: 1, refill_interval: Duration::from_secs(1) };
        let bucket = TokenBucket::new(settings).unwrap();
        assert!(bucket.read(Some(&pack(&[2, 7]))).is_ok());
        assert!(bucket.read(Some(&pack(&[3, 7]))).is_err());
        let sliding = SlidingWindow::new(5, Duration::from_micros(20), 2).unwrap();
        assert!(sliding.read(Some(&pack(&[7, 1, 2, 0]))).is_ok());
        assert!(sliding.read(Some(&pack(&[EXACT_LIMIT / 5, 1, 2, 0]))).is_err());
        assert!(sliding.read(Some(&pack(&[7, 1, 2]))).is_err());
        assert!(
            LeakyBucket::new(Duration::from_micros(5), 1, sluice_core::LeakMode::Delay)
                .unwrap()
                .read(Some(&[0xff; 8]))
                .is_err()
        );
    }
}
