//! One division round of a bucket: ask the limit what it has left, plan each needy
//! holder's part, pay for each part, and only then assign it; refuse the needy holders
//! it could not serve.

use super::payer::QuotaPayer;
use super::shares::{Assignment, BucketShares, StreamId};
use sluice_core::{Key, Limit, StoreError, Timestamp};

/// Divides what `limit` has left at `key` among the holders of `shares` that need tokens
/// at `now`; the assignments to send, each paid for before it is made. A part the limit
/// can no longer pay in full (another server or an RLS check took quota meanwhile) is
/// assigned as what could be paid, or not at all. When the store cannot answer, the
/// round stops there with its error: what was paid already is assigned, nothing more.
/// Every holder in need that got nothing is refused (`DENY_ALL`) in the same round.
pub(crate) async fn divide<P: QuotaPayer>(
    shares: &mut BucketShares,
    payer: &P,
    key: Key<'_>,
    limit: &Limit,
    now: Timestamp,
) -> (Vec<(StreamId, Assignment)>, Option<StoreError>) {
    let mut assigned = Vec::new();
    if !shares.wants_round(now) {
        return (assigned, None);
    }
    let remaining = match payer.remaining(key, limit).await {
        Ok(remaining) => remaining,
        Err(error) => return (assigned, Some(error)),
    };
    for (stream, tokens) in shares.plan(now, remaining) {
        let paid = match payer.take(key, limit, tokens).await {
            Ok(paid) => paid,
            Err(error) => return (assigned, Some(error)),
        };
        if paid == 0 {
            break;
        }
        if let Some(assignment) = shares.grant(stream, paid, now) {
            assigned.push((stream, assignment));
        }
    }
    assigned.extend(shares.refuse_unserved(now));
    (assigned, None)
}

#[cfg(test)]
mod tests;
