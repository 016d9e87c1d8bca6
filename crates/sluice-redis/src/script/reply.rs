//! What a check script (or the module's `SLUICE.CHECK`) answers, decoded.

use sluice_core::{Decision, EXACT_LIMIT, Quota, RetryAfter, StoreError};
use std::time::Duration;

/// What the script answered.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The time of the check (µs): the caller's, or Redis `TIME`.
    pub(crate) now: u64,
    /// One decision per limit: for the cost and the lease when the lease was granted, for
    /// the cost alone otherwise.
    pub(crate) decisions: Vec<Decision>,
    /// True when every limit decided at `now` itself (no state's time was later) and its
    /// answer ages with the clock: what the blocked-key cache may keep.
    pub(crate) unclamped: bool,
    /// When a lease was asked: whether it was granted, and per limit the stamp of the
    /// state that debited it (0 where the state holds leases apart).
    pub(crate) lease: Option<Granted>,
    /// Redis `TIME` (µs) when the script ran, whatever `now` was.
    pub(crate) clock: u64,
}

/// The part of a reply that answers a lease.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Granted {
    /// True when the lease was debited with the request.
    pub(crate) granted: bool,
    /// Per limit, the stamp of the state that debited it (all 0 when it was not granted).
    pub(crate) stamps: Vec<u64>,
}

/// Decodes the script's reply to a check of `limits` limits that asked a lease or not
/// (`leased`): little-endian doubles holding integers: the time, seven per limit, then
/// (after a lease request) whether it was granted and one stamp per limit, then Redis's
/// clock.
pub(crate) fn decode(reply: &[u8], limits: usize, leased: bool) -> Result<Reply, StoreError> {
    let reply = integers(reply)?;
    let extra = if leased { 1 + limits } else { 0 };
    let expected = 2 + 7 * limits + extra;
    if reply.len() != expected {
        let message = format!("expected {expected} integers for {limits} limits, got {}", reply.len());
        return Err(StoreError::Malformed(message));
    }
    let (time, clock) = (reply[0], reply[expected - 1]);
    let (fields, lease) = reply[1..expected - 1].split_at(7 * limits);
    let time_of = |value: i64| u64::try_from(value).map_err(|_| StoreError::Malformed(format!("bad time {value}")));
    let decisions = fields.chunks_exact(7).map(decode_one).collect::<Result<_, _>>()?;
    let unclamped = fields.chunks_exact(7).all(|fields| fields[6] == time);
    let lease = match lease {
        [] => None,
        [granted, stamps @ ..] => Some(Granted {
            granted: *granted == 1,
            stamps: stamps.iter().map(|&stamp| time_of(stamp)).collect::<Result<_, _>>()?,
        }),
    };
    Ok(Reply { now: time_of(time)?, decisions, unclamped, lease, clock: time_of(clock)? })
}

/// The integers a packed reply holds.
fn integers(reply: &[u8]) -> Result<Vec<i64>, StoreError> {
    if !reply.len().is_multiple_of(8) {
        return Err(StoreError::Malformed(format!("a reply of {} bytes is not packed doubles", reply.len())));
    }
    let exact = EXACT_LIMIT as f64;
    reply
        .chunks_exact(8)
        .map(|bytes| {
            let value = f64::from_le_bytes(bytes.try_into().unwrap_or_default());
            // Exact integers only: both bounds and the cast are exact below 2^53.
            let integer = value as i64;
            (value.fract() == 0.0 && value.abs() < exact)
                .then_some(integer)
                .ok_or_else(|| StoreError::Malformed(format!("{value} is not an exact integer")))
        })
        .collect()
}

fn decode_one(fields: &[i64]) -> Result<Decision, StoreError> {
    let unsigned = |index: usize| {
        u64::try_from(fields[index]).map_err(|_| StoreError::Malformed(format!("negative field {index}: {fields:?}")))
    };
    let retry_after = match fields[4] {
        -1 => None,
        -2 => Some(RetryAfter::Never),
        wait => Some(RetryAfter::After(Duration::from_micros(
            unsigned(4).map_err(|_| StoreError::Malformed(format!("bad retry_after {wait}")))?,
        ))),
    };
    let quota = Quota { limit: unsigned(1)?, remaining: unsigned(2)? };
    let decided = Decision::allowed(quota, Duration::from_micros(unsigned(3)?));
    let decided = match (fields[0] == 1, retry_after) {
        (true, None) => decided,
        (false, Some(retry_after)) => decided.rejected(retry_after),
        _ => return Err(StoreError::Malformed(format!("allowed and retry_after disagree: {fields:?}"))),
    };
    Ok(decided.delayed(Duration::from_micros(unsigned(5)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(numbers: &[f64]) -> Vec<u8> {
        numbers.iter().flat_map(|n| n.to_le_bytes()).collect()
    }

    #[test]
    fn a_lease_reply_says_whether_it_was_granted_and_each_limits_stamp() {
        let decision = [1.0, 5.0, 2.0, 10.0, -1.0, 0.0, 7.0];
        let numbers: Vec<f64> = [&[7.0][..], &decision, &decision, &[1.0, 8.0, 0.0], &[9.0]].concat();
        let reply = decode(&packed(&numbers), 2, true).unwrap();
        assert_eq!(reply.lease, Some(Granted { granted: true, stamps: vec![8, 0] }));
        assert!(reply.unclamped);
        assert_eq!((reply.now, reply.clock), (7, 9));
        assert!(decode(&packed(&numbers), 2, false).is_err(), "a lease part where none was asked");
    }

    #[test]
    fn an_answer_that_does_not_age_with_the_clock_is_not_unclamped() {
        let numbers = [7.0, 0.0, 5.0, 0.0, 10.0, 3.0, 0.0, -1.0, 9.0];
        let reply = decode(&packed(&numbers), 1, false).unwrap();
        assert!(!reply.unclamped);
    }
}
