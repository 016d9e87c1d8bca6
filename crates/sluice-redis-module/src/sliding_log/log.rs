//! A sliding log as stored by `lua/sliding_log.lua`, read in place: its slots, and the
//! leases it holds beside them.

use crate::layout::{Malformed, holds, number};
use sluice_core::algorithm::Holds;

/// Logs of at most this many entries are stored whole.
pub(super) const WHOLE: u64 = 32;
/// Bytes of a ring's header.
pub(super) const HEADER: usize = 32;

/// A log as read: borrowed from the key's value.
#[derive(Debug, Clone)]
pub(crate) struct Log<'a> {
    /// The slots: the whole log's, the ring's after the header.
    pub(super) slots: &'a [u8],
    pub(super) ring: bool,
    pub(super) len: usize,
    pub(super) head: usize,
    pub(super) cap: usize,
    pub(super) newest: u64,
    pub(super) oldest: u64,
    /// The leases held, logged at their deadlines.
    pub(super) holds: Holds,
}

impl<'a> Log<'a> {
    /// The log of a limit of `n` stored as `raw` (`None`: no key).
    pub(crate) fn read(raw: Option<&'a [u8]>, n: u64) -> Result<Self, Malformed> {
        let raw = raw.unwrap_or_default();
        let empty =
            Log { slots: &[], ring: n > WHOLE, len: 0, head: 0, cap: 0, newest: 0, oldest: 0, holds: Holds::default() };
        if n <= WHOLE {
            let (slots, holds) = whole_parts(raw)?;
            let len = slots.len() / 8;
            if len as u64 > n {
                return Err(Malformed);
            }
            let log = Log { slots, len, cap: len, holds, ..empty };
            return Ok(if len == 0 { log } else { Log { oldest: log.at(0), newest: log.at(len - 1), ..log } });
        }
        // As the script: a value shorter than a header is an empty log (rewritten by the next write).
        let Some((header, rest)) = raw.split_first_chunk::<HEADER>() else { return Ok(empty) };
        let word =
            |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]) as usize;
        let (len, head, cap, held) = (word(16), word(20), word(24), word(28));
        let fits = len <= cap && (head < cap || cap == 0) && cap as u64 <= n && rest.len() >= 8 * cap;
        if !fits {
            return Err(Malformed);
        }
        let (slots, pairs) = rest.split_at(8 * cap);
        // Room for more pairs may be left from an earlier list: only the first `held` count.
        if !pairs.len().is_multiple_of(16) || pairs.len() < 16 * held {
            return Err(Malformed);
        }
        let holds = holds::read(&pairs[..16 * held], false)?;
        let (newest, oldest) = (number(&header[..8])?, number(&header[8..16])?);
        Ok(Log { slots, len, head, cap, newest, oldest, holds, ..empty })
    }

    /// The slot at physical index `p`. A slot that is not an exact integer reads as the
    /// nearest one in range: garbage in, garbage out, but never a panic.
    fn slot(&self, p: usize) -> u64 {
        let bytes = self.slots.get(8 * p..8 * p + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()).unwrap_or_default();
        // Saturating cast: NaN is 0, and no value leaves u64.
        f64::from_le_bytes(bytes) as u64
    }

    /// The logical `index`-th entry, 0 being the oldest.
    pub(super) fn at(&self, index: usize) -> u64 {
        let p = self.head + index;
        self.slot(if p >= self.cap { p - self.cap } else { p })
    }

    /// Logical index of the oldest entry still in the window at `now` (`len` if none) and
    /// its value: gallop from the oldest, then binary search.
    pub(super) fn first_live(&self, window: u64, now: u64) -> (usize, Option<u64>) {
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
    pub(super) fn wait_for_rank(&self, rank: u64, window: u64, now: u64) -> u64 {
        let index = self.len - usize::try_from(rank).unwrap_or(usize::MAX).min(self.len);
        let entry = match index {
            _ if self.len > 0 && index == self.len - 1 => self.newest,
            0 => self.oldest,
            _ => self.at(index),
        };
        entry.saturating_add(window).saturating_sub(now)
    }
}

/// A whole log's slots and leases: the leases' pairs, then `−k`, end the value when it holds
/// `k` of them (no slot is negative).
fn whole_parts(raw: &[u8]) -> Result<(&[u8], Holds), Malformed> {
    if !raw.len().is_multiple_of(8) {
        return Err(Malformed);
    }
    let Some((rest, last)) = raw.split_last_chunk::<8>() else { return Ok((raw, Holds::default())) };
    let last = f64::from_le_bytes(*last);
    if last >= 0.0 {
        return Ok((raw, Holds::default()));
    }
    let fits = |k: usize| last.fract() == 0.0 && k >= 1 && k.checked_mul(16).is_some_and(|bytes| bytes <= rest.len());
    let pairs = usize::try_from(-last as u64).ok().filter(|&k| fits(k));
    let Some(pairs) = pairs else { return Err(Malformed) };
    let (slots, held) = rest.split_at(rest.len() - 16 * pairs);
    Ok((slots, holds::read(held, false)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::pack;

    fn pairs(log: &Log<'_>) -> Vec<(u64, u64)> {
        log.holds.iter().map(|hold| (hold.deadline, hold.units)).collect()
    }

    #[test]
    fn a_whole_log_ends_with_its_leases_and_their_count() {
        let plain = pack(&[5, 6]);
        let log = Log::read(Some(&plain), 8).unwrap();
        assert_eq!((log.len, log.newest, log.holds.is_clear()), (2, 6, true));
        let mut leased = pack(&[5, 6, 90, 2, 95, 1]).to_vec();
        leased.extend_from_slice(&(-2.0f64).to_le_bytes());
        let log = Log::read(Some(&leased), 8).unwrap();
        assert_eq!((log.len, log.newest, pairs(&log)), (2, 6, vec![(90, 2), (95, 1)]));
        let mut too_many = pack(&[5]).to_vec();
        too_many.extend_from_slice(&(-1.0f64).to_le_bytes());
        assert!(Log::read(Some(&too_many), 8).is_err());
    }

    #[test]
    fn a_ring_counts_its_leases_in_its_header_and_keeps_them_after_its_slots() {
        let header = |held: u32| {
            let mut bytes = pack(&[6, 5]).to_vec();
            for word in [2u32, 0, 4, held] {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
            bytes
        };
        let slots = pack(&[5, 6, 0, 0]);
        let old = [header(0), slots.to_vec()].concat();
        assert!(Log::read(Some(&old), 100).unwrap().holds.is_clear(), "a ring written before leases");
        let room = [header(1), slots.to_vec(), pack(&[90, 2, 80, 1]).to_vec()].concat();
        assert_eq!(pairs(&Log::read(Some(&room), 100).unwrap()), vec![(90, 2)], "room left from a longer list");
        let short = [header(2), slots.to_vec(), pack(&[90, 2]).to_vec()].concat();
        assert!(Log::read(Some(&short), 100).is_err());
    }
}
