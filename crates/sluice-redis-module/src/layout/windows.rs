//! The windows' layouts: their core state, then, once a lease was granted on the state, its
//! stamp (`lua/fixed_window.lua`, `lua/sliding_window.lua`).

use super::{Bytes, JudgedAt, Layout, Malformed, Stored, doubles, number, pack, possible};
use sluice_core::algorithm::fixed_window::WindowCount;
use sluice_core::algorithm::sliding_window::BucketCounts;
use sluice_core::{Alignment, EXACT_LIMIT, FixedWindow, SlidingWindow, Timestamp};
use smallvec::SmallVec;

/// `raw` cut into the state's `length` bytes and the stamp after them, if any.
fn stamped(raw: &[u8], length: usize) -> Result<(&[u8], u64), Malformed> {
    match raw.len() {
        len if len == length => Ok((raw, 0)),
        len if len == length + 8 => Ok((&raw[..length], number(&raw[length..])?)),
        _ => Err(Malformed),
    }
}

/// `numbers`, then the stamp when there is one.
fn pack_stamped(numbers: &mut SmallVec<[u64; 8]>, stamp: u64) -> Bytes {
    if stamp > 0 {
        numbers.push(stamp);
    }
    pack(numbers)
}

/// Window start, used, then the stamp: `lua/fixed_window.lua`'s layout.
impl Layout for FixedWindow {
    fn read(&self, raw: Option<&[u8]>) -> Result<Stored<WindowCount>, Malformed> {
        let Some(raw) = raw else { return Ok(Stored::default()) };
        let (raw, stamp) = stamped(raw, 16)?;
        let [start, used] = doubles(raw)?;
        Ok(Stored { state: possible(self, WindowCount { start, used })?, stamp })
    }

    fn write(&self, stored: &Stored<WindowCount>) -> Bytes {
        pack_stamped(&mut SmallVec::from_slice(&[stored.state.start, stored.state.used]), stored.stamp)
    }

    fn judged_at(&self, state: &WindowCount, now: u64) -> JudgedAt {
        JudgedAt::at(if state.used > 0 { now.max(state.start) } else { now })
    }

    fn expires_in(&self, _: &WindowCount, reset_after: u64, _: u64) -> u64 {
        reset_after
    }
}

/// The newest bucket's index, then `B + 1` counters by `bucket % (B + 1)`, then (anchored
/// grids only) the grid's anchor (µs), then the stamp: `lua/sliding_window.lua`'s layout.
impl Layout for SlidingWindow {
    fn read(&self, raw: Option<&[u8]>) -> Result<Stored<BucketCounts>, Malformed> {
        let Some(raw) = raw else { return Ok(Stored::default()) };
        let slots = usize::try_from(self.buckets() + 1).map_err(|_| Malformed)?;
        let anchored = usize::from(self.alignment() == Alignment::Anchored);
        let (raw, stamp) = stamped(raw, 8 * (slots + 1 + anchored))?;
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
        Ok(Stored { state: possible(self, state)?, stamp })
    }

    fn write(&self, stored: &Stored<BucketCounts>) -> Bytes {
        let state = &stored.state;
        let mut numbers: SmallVec<[u64; 8]> = SmallVec::with_capacity(state.counts().len() + 3);
        numbers.push(state.newest());
        numbers.extend_from_slice(state.counts());
        if self.alignment() == Alignment::Anchored {
            numbers.push(state.anchor());
        }
        pack_stamped(&mut numbers, stored.stamp)
    }

    fn judged_at(&self, state: &BucketCounts, now: u64) -> JudgedAt {
        JudgedAt::at(self.judged_at(state, Timestamp::from_micros(now)).as_micros())
    }

    fn expires_in(&self, _: &BucketCounts, reset_after: u64, _: u64) -> u64 {
        reset_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn states_the_algorithm_never_stores_are_malformed() {
        let window = FixedWindow::new(3, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap();
        assert!(window.read(Some(&pack(&[0, 3]))).is_ok());
        assert!(window.read(Some(&pack(&[0, 4]))).is_err());
        assert!(window.read(Some(&pack(&[0]))).is_err());
        let sliding = SlidingWindow::new(5, Duration::from_micros(20), 2).unwrap();
        assert!(sliding.read(Some(&pack(&[7, 1, 2, 0]))).is_ok());
        assert!(sliding.read(Some(&pack(&[EXACT_LIMIT / 5, 1, 2, 0]))).is_err());
        assert!(sliding.read(Some(&pack(&[7, 1, 2]))).is_err());
    }

    #[test]
    fn a_stamp_follows_the_state_once_a_lease_was_granted() {
        let window = FixedWindow::new(3, Duration::from_secs(1), Alignment::Aligned, Duration::ZERO).unwrap();
        let stamped = window.read(Some(&pack(&[0, 3, 42]))).unwrap();
        assert_eq!(stamped.stamp, 42);
        assert_eq!(window.write(&stamped), pack(&[0, 3, 42]));
        assert_eq!(window.write(&Stored { stamp: 0, ..stamped }), pack(&[0, 3]), "no stamp: the old layout");
        let sliding = SlidingWindow::new(5, Duration::from_micros(20), 2).unwrap();
        assert_eq!(sliding.read(Some(&pack(&[7, 1, 2, 0, 9]))).unwrap().stamp, 9);
        assert!(sliding.read(Some(&pack(&[7, 1, 2, 0, 9, 9]))).is_err());
    }
}
